#!/usr/bin/env python3
"""Medians of several criterion runs, with their spread.

    python3 benches/rounds.py target/bench-round-{1,2,3}/criterion
    python3 benches/rounds.py DIR... --ratio ID_A ID_B [--ratio ID_C ID_D ...]
    python3 benches/rounds.py DIR... --diff ID_A ID_B [--diff ...]

For every benchmark id found in all the given criterion directories: the median over the
runs of criterion's per-run median, and the lowest and highest of those per-run medians.
Prints ns per element and, for throughput benchmarks, M elements per second.

`--ratio A B` prints, for each run, time(A) / time(B) (below 1: A is faster), then the
median of those per-run ratios and their spread: a ratio is taken inside one run, where
both rows saw the same machine, never across runs. `--diff A B` prints time(A) - time(B)
in ns per element the same way (e.g. what a pool adds to the ring alone in `io_loop`).
"""
import statistics
import sys

from criterion_results import load


args = sys.argv[1:]
pairs = []  # (kind, A, B) in the order given
while "--ratio" in args or "--diff" in args:
    at = min(args.index(flag) for flag in ("--ratio", "--diff") if flag in args)
    pairs.append((args[at], args[at + 1], args[at + 2]))
    del args[at : at + 3]
runs = [load(root) for root in args]
ids = sorted(set.intersection(*(set(run) for run in runs)))
print("| benchmark | ns/item (median of runs) | spread | M items/s |")
print("|---|---|---|---|")
for key in ids:
    values = [run[key] for run in runs]
    mid = statistics.median(values)
    print(f"| {key} | {mid:.3f} | {min(values):.3f}-{max(values):.3f} | {1e3 / mid:.1f} |")
for kind, title, combine in (
    ("--ratio", "time(A) / time(B)", lambda a, b: a / b),
    ("--diff", "time(A) - time(B), ns per element", lambda a, b: a - b),
):
    chosen = [(a, b) for k, a, b in pairs if k == kind]
    if not chosen:
        continue
    print()
    print(f"| {title} | per run | median | spread |")
    print("|---|---|---|---|")
    for a, b in chosen:
        per_run = [combine(run[a], run[b]) for run in runs if a in run and b in run]
        name = f"{a} {'/' if kind == '--ratio' else '-'} {b}"
        if not per_run:
            print(f"| {name} | missing | | |")
            continue
        shown = ", ".join(f"{r:.2f}" for r in per_run)
        print(
            f"| {name} | {shown} | {statistics.median(per_run):.2f} "
            f"| {min(per_run):.2f}-{max(per_run):.2f} |"
        )
