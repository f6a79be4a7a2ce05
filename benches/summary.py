#!/usr/bin/env python3
"""Prints BENCHMARKS.md's current-results tables from criterion's results.

    python3 benches/summary.py [target/criterion]                  # one run
    python3 benches/summary.py target/bench-round-{1,2,3}/criterion   # medians of runs

Every benchmark of every group gets a row (a contender the runs lack prints "missing").
Each figure is the median over the runs of criterion's per-run median, with the lowest
and highest per-run medians as its spread; each ratio is taken inside one run, where both
rows saw the same machine, and its median over the runs is printed with the per-run
spread in brackets. Time rows: ratio =
time / baseline time (below 1: faster). Throughput rows (items per second): ratio = row
throughput / baseline throughput (above 1: faster).
"""
import pathlib
import re
import statistics
import sys

from criterion_results import load

roots = sys.argv[1:] or ["target/criterion"]
runs = [load(root) for root in roots]


def values(key):
    return [run[key] for run in runs if key in run]


def ratio(key, base, throughput):
    """The per-run ratio's median over the runs that have both rows, with its spread."""
    per_run = [
        (run[base] / run[key]) if throughput else (run[key] / run[base])
        for run in runs
        if key in run and base in run
    ]
    if not per_run:
        return ""
    shown = f"{statistics.median(per_run):.2f}x"
    if len(per_run) > 1:
        shown += f" ({min(per_run):.2f}-{max(per_run):.2f})"
    return shown


def spread(xs, fmt):
    if len(xs) < 2:
        return "-"
    return f"{fmt(min(xs))}-{fmt(max(xs))}"


def table(title, rows, baselines=(), throughput=False):
    """rows, baselines: [(label, key)]; a baseline also gets a row of its own."""
    unit = "M items/s" if throughput else "ns"
    print(f"\n### {title}\n")
    heads = [f"{unit} (median)", "spread"] + [f"vs {label}" for label, _ in baselines]
    print("| | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    seen = set()
    for label, key in list(rows) + list(baselines):
        if key in seen:
            continue
        seen.add(key)
        xs = values(key)
        if not xs:
            print(f"| {label} | missing |" + " |" * (len(heads) - 1))
            continue
        if throughput:
            xs = [1e3 / v for v in xs]  # ns per item -> M items/s
            fmt = lambda v: f"{v:.1f}"
        else:
            fmt = lambda v: f"{v:.2f}"
        cells = [fmt(statistics.median(xs)), spread(xs, fmt)]
        for _, base in baselines:
            cells.append("" if base == key else ratio(key, base, throughput))
        print(f"| {label} | " + " | ".join(cells) + " |")


print(f"Runs: {len(runs)} ({', '.join(roots)})")

fp = "fast_path/"
table(
    "fast_path: one alloc + free pair on one thread (ns per pair)",
    [
        ("magazine `Cache` per-CPU, default (restartable sequences)", fp + "magazine Cache (per-CPU, rseq)"),
        ("magazine `Cache` per-CPU, slot protocol (sequences off)", fp + "magazine Cache (per-CPU)"),
        ("magazine `Cache` `alloc_on(0)`/`free_on(0)`, slot protocol", fp + "magazine Cache alloc_on/free_on(0)"),
        ("magazine `LocalCache`", fp + "magazine LocalCache"),
        ("`thread_local!` `RefCell<Vec>`", fp + "thread_local RefCell<Vec>"),
        ("`Mutex<Vec>`", fp + "Mutex<Vec>"),
        ("crossbeam `SegQueue`", fp + "crossbeam SegQueue"),
        ("lockfree-object-pool `LinearObjectPool`", fp + "lockfree-object-pool LinearObjectPool"),
        ("sharded-slab `Pool`", fp + "sharded-slab Pool"),
        ("reference: 2x slot take + give back (CAS + Release store)",
         fp + "reference: 2x slot take+give back (CAS + Release store)"),
        ("reference: 2x `magazine::cpu::current()`", fp + "reference: 2x magazine::cpu::current()"),
    ],
    [("owned `Vec` (floor)", fp + "vec_owned (floor)"), ("crossbeam `ArrayQueue`", fp + "crossbeam ArrayQueue")],
)

for pairs in (1, 2, 4):
    g = f"handoff/{pairs}->{pairs}/"
    table(
        f"handoff {pairs} -> {pairs} ({2 * pairs} threads on the machine's cores): items per second",
        [
            ("magazine `Cache` per-CPU, default (restartable sequences)", g + "magazine Cache (per-CPU, rseq)"),
            ("magazine `Cache` per-CPU, slot protocol", g + "magazine Cache (per-CPU)"),
            ("magazine `LocalCache`", g + "magazine LocalCache"),
            ("crossbeam `SegQueue`", g + "crossbeam SegQueue"),
            ("`Mutex<Vec>`", g + "Mutex<Vec>"),
            ("lockfree-object-pool `LinearObjectPool` (no hand-off, see below)",
             g + "lockfree-object-pool LinearObjectPool"),
            ("sharded-slab `Pool` (no hand-off, see below)", g + "sharded-slab Pool"),
        ],
        [("crossbeam `ArrayQueue`", g + "crossbeam ArrayQueue")],
        throughput=True,
    )

for loop in ("io_loop", "io_loop_spsc", "io_loop_batched"):
    for threads in ("1+1", "2+2"):
        g = f"{loop}/{threads}/"
        table(
            f"{loop} {threads} (submitters + completers, closed pool of 4096): items per second",
            [
                ("magazine `Cache` per-CPU, default (restartable sequences)", g + "magazine Cache (per-CPU, rseq)"),
                ("magazine `Cache` per-CPU, slot protocol", g + "magazine Cache (per-CPU)"),
                ("magazine `LocalCache`", g + "magazine LocalCache"),
                ("reference: the ring alone", g + "reference: the ring alone"),
            ],
            [("crossbeam `ArrayQueue` pool", g + "crossbeam ArrayQueue")],
            throughput=True,
        )
g = "pairs/8/"
table(
    "pairs/8: 8 threads of alloc + free pairs on the machine's cores: items per second",
    [
        ("magazine `Cache` per-CPU, default (restartable sequences)", g + "magazine Cache (per-CPU, rseq)"),
        ("magazine `Cache` per-CPU, slot protocol", g + "magazine Cache (per-CPU)"),
    ],
    [("crossbeam `ArrayQueue` pool", g + "crossbeam ArrayQueue")],
    throughput=True,
)

d = "depot/exchange/"
table(
    "depot: one item moved from one handle to another (ns per item)",
    [(f"through the depot, magazine size {m}", f"{d}LocalCache -> depot -> LocalCache/{m}") for m in (1, 16, 127)]
    + [(f"hits only, size {m}", f"{d}hits only/{m}") for m in (1, 16)]
    + [
        ("per-CPU slots (`free_on(0)`/`alloc_on(1)`), size 127", d + "slot 0 -> depot -> slot 1/127"),
        ("reference: 2x epoch pin (per exchange, ns)", d + "reference: 2x epoch pin (per exchange)"),
        ("reference: 2x (node alloc + epoch-deferred free), pinned (per exchange, ns)",
         d + "reference: 2x (node alloc + epoch-deferred free), pinned"),
    ],
    [("hits only, size 127", d + "hits only/127")],
)
print("\nExchange cost per item (through the depot minus hits only, per run, median):")
for m in (1, 16, 127):
    a, b = f"{d}LocalCache -> depot -> LocalCache/{m}", f"{d}hits only/{m}"
    diffs = [run[a] - run[b] for run in runs if a in run and b in run]
    shown = f"{statistics.median(diffs):.2f} ns" if diffs else "missing"
    print(f"- magazine size {m}: {shown}")
table(
    "depot/threads: each thread moves items between its own two handles (items per second, all threads)",
    [(f"{t} threads", f"depot/threads/{t}") for t in (2, 4)],
    [("1 thread", "depot/threads/1")],
    throughput=True,
)
table(
    "depot/trim_cycle: grow by 32 magazines of 127, trim back to target 2 (ns per item)",
    [("`OnePerTick`", "depot/trim_cycle/OnePerTick")],
    [("`WorkingSet`", "depot/trim_cycle/WorkingSet")],
)

table(
    "policies: one I/O of the seed pattern at 16 vCPUs, one thread (ns per I/O)",
    [
        (f"`{name}`", f"policies/{name}")
        for name in (
            "Fixed{2} (Linux <= 6.6, scaled)",
            "Fixed{16} (seed patch, scaled)",
            "Dynamic{16, OnePerTick} /100ms",
            "Dynamic{16, WorkingSet} /1s",
        )
    ],
)

for p in (1, 4):
    table(
        f"iova: one alloc + free pair of {p} page{'s' if p > 1 else ''} on an `IovaDomain` "
        "holding 4096 ranges, one thread (ns per pair)",
        [
            ("`alloc_fast`+`free_fast` (checked)", f"iova/alloc_fast+free_fast/{p}"),
            ("`alloc_fast`+`free_fast` (unchecked)", f"iova/alloc_fast+free_fast (unchecked)/{p}"),
        ],
        [("`alloc`+`free` (tree only)", f"iova/alloc+free (tree only)/{p}")],
    )
i2 = "iova/2 threads/"
table(
    "iova, two threads at once, 1 page (ns per pair, both threads together)",
    [
        (f"`{name}`", f"{i2}{name}/1")
        for name in (
            "alloc_fast+free_fast",
            "alloc_fast+free_fast (unchecked)",
            "reference: Cache alloc+free (per-CPU)",
        )
    ],
    [("`alloc`+`free` (tree only)", i2 + "alloc+free (tree only)/1")],
)

# refill: batch refills (`Options::source_batch: None`) against one item per source call
# (`Some(1)`), in the same run. The source's calls per item come from the bench's stderr,
# which rounds.sh keeps beside each run's criterion directory (target/bench-round-i.log).
refill_calls = {}
for root in roots:
    log = pathlib.Path(root).parent.with_suffix(".log")
    if not log.is_file():
        continue
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"\s*source calls per item, (.*): ([0-9.]+) alloc calls \(([0-9.]+) of them empty.*?\), ([0-9.]+) free calls", line)
        if m:
            refill_calls.setdefault(m.group(1), []).append(tuple(float(x) for x in m.group(2, 3, 4)))
refill_rows = [
    ("handoff 1->1 (closed pool of 4096, the consumer outruns its producer), `Dynamic` depot (default)",
     "refill/handoff 1->1 Dynamic (default)/", "handoff 1->1 Dynamic (default), "),
    ("handoff 1->1 (closed pool of 4096, the consumer outruns its producer), `Fixed{2}` depot",
     "refill/handoff 1->1 Fixed{2}/", "handoff 1->1 Fixed{2}, "),
    ("cold start (an empty cache serves 10^6 allocations), per-CPU `Cache::alloc`",
     "refill/cold start/magazine Cache (per-CPU)/", "cold start magazine Cache (per-CPU), "),
    ("cold start (an empty cache serves 10^6 allocations), `LocalCache`",
     "refill/cold start/magazine LocalCache/", "cold start magazine LocalCache, "),
]
for title, g, log_id in refill_rows:
    table(
        f"refill, {title}: items per second",
        [("batches (`source_batch: None`, default)", g + "batches")],
        [("one at a time (`source_batch: Some(1)`)", g + "one at a time")],
        throughput=True,
    )
    calls = {mode: refill_calls.get(log_id + mode, []) for mode in ("batches", "one at a time")}
    if not any(calls.values()):
        print("\nSource calls per item: missing (no bench log beside the criterion directories)")
        continue
    print("\nSource calls per item (median over the logged runs: alloc calls, of them empty, free calls):")
    for mode, xs in calls.items():
        if xs:
            med = [statistics.median(x[i] for x in xs) for i in range(3)]
            print(f"- {mode}: {med[0]:.5f} alloc ({med[1]:.5f} empty), {med[2]:.5f} free ({len(xs)} runs)")
    if calls["batches"] and calls["one at a time"]:
        a = statistics.median(x[0] for x in calls["batches"])
        b = statistics.median(x[0] for x in calls["one at a time"])
        print(f"- alloc calls per item, batches / one at a time: {a / b:.4f}" if b else "- one at a time made no calls")
