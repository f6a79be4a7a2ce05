#!/usr/bin/env python3
"""Medians of several criterion runs, with their spread.

    python3 benches/rounds.py target/bench-round-1 target/bench-round-2 target/bench-round-3

For every benchmark id found in all the given criterion directories: the median over the
runs of criterion's per-run median, and the lowest and highest of those per-run medians.
Prints ns per element and, for throughput benchmarks, M elements per second.
"""
import json
import pathlib
import statistics
import sys


def load(root):
    results = {}
    for bench in pathlib.Path(root).glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        ns = estimates["median"]["point_estimate"]
        elements = (meta.get("throughput") or {}).get("Elements") or 1
        results[meta["full_id"]] = ns / elements
    return results


runs = [load(root) for root in sys.argv[1:]]
ids = sorted(set.intersection(*(set(run) for run in runs)))
print("| benchmark | ns/item (median of runs) | spread | M items/s |")
print("|---|---|---|---|")
for key in ids:
    values = [run[key] for run in runs]
    mid = statistics.median(values)
    print(f"| {key} | {mid:.3f} | {min(values):.3f}-{max(values):.3f} | {1e3 / mid:.1f} |")
