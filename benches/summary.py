#!/usr/bin/env python3
"""Prints the BENCHMARKS.md tables from criterion's results of one `cargo bench` run.

    python3 benches/summary.py [target/criterion]

Medians (criterion's `median.point_estimate` of each benchmark's latest run), with the
ratio of each crate row to each baseline of its group.
"""
import sys

from criterion_results import load

r = load(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")


def get(key):
    return r.get(key)


def table(title, unit, rows, baselines):
    """rows, baselines: [(label, key)]; ratio = time / baseline time."""
    print(f"\n### {title}\n")
    head = f"| | median ({unit}) |" + "".join(f" vs {b} |" for b, _ in baselines)
    print(head)
    print("|" + "---|" * (2 + len(baselines)))
    for label, key in rows + baselines:
        v = get(key)
        if v is None:
            continue
        cells = []
        for _, bkey in baselines:
            b = get(bkey)
            if b is None or bkey == key:
                cells.append(" |")
                continue
            ratio = v / b
            cells.append(f" {ratio:.2f}x |")
        print(f"| {label} | {v:.2f} |" + "".join(cells))


fp = "fast_path/"
table(
    "fast_path: one alloc+free pair, one thread (ns per pair; ratio = time / baseline time)",
    "ns",
    [
        ("magazine `LocalCache`", fp + "magazine LocalCache"),
        ("magazine `Cache` per-CPU (`alloc`/`free`)", fp + "magazine Cache (per-CPU)"),
        ("magazine `Cache` `alloc_on(0)`/`free_on(0)`", fp + "magazine Cache alloc_on/free_on(0)"),
    ],
    [
        ("owned `Vec` (floor)", fp + "vec_owned (floor)"),
        ("`thread_local!` `RefCell<Vec>`", fp + "thread_local RefCell<Vec>"),
        ("`Mutex<Vec>`", fp + "Mutex<Vec>"),
        ("`ArrayQueue`", fp + "crossbeam ArrayQueue"),
        ("`SegQueue`", fp + "crossbeam SegQueue"),
    ],
)
for label, key in [
    ("reference: 2x slot take + give back (uncontended CAS + Release store)",
     fp + "reference: 2x slot take+give back (CAS + Release store)"),
    ("reference: 2x `magazine::cpu::current()` (`sched_getcpu`)", fp + "reference: 2x magazine::cpu::current()"),
]:
    if get(key) is not None:
        print(f"| {label} | {get(key):.2f} |" + " |" * 5)

for pairs in (1, 2, 4):
    g = f"handoff/{pairs}->{pairs}/"
    print(f"\n### handoff {pairs} -> {pairs} ({2 * pairs} threads): million items per second; "
          "ratio = crate throughput / baseline throughput\n")
    base = [("`ArrayQueue`", g + "crossbeam ArrayQueue"), ("`SegQueue`", g + "crossbeam SegQueue"),
            ("`Mutex<Vec>`", g + "Mutex<Vec>")]
    print("| | Mitems/s |" + "".join(f" vs {b} |" for b, _ in base))
    print("|" + "---|" * (2 + len(base)))
    for label, key in [("magazine `LocalCache`", g + "magazine LocalCache"),
                       ("magazine `Cache` per-CPU", g + "magazine Cache (per-CPU)")] + base:
        v = get(key)
        if v is None:
            continue
        cells = "".join(" |" if k == key or get(k) is None else f" {get(k) / v:.2f}x |" for _, k in base)
        print(f"| {label} | {1000 / v:.1f} |" + cells)

print("\n### depot: ns per item moved (one free on one handle + one alloc on another)\n")
print("| magazine size | hits only (no exchange) | through the depot | exchange cost per item | per magazine exchange |")
print("|---|---|---|---|---|")
for m in (1, 16, 127):
    h = get(f"depot/exchange/hits only/{m}")
    x = get(f"depot/exchange/LocalCache -> depot -> LocalCache/{m}")
    if h is None or x is None:
        continue
    print(f"| {m} | {h:.2f} | {x:.2f} | {x - h:.2f} | {(x - h) * m:.0f} ns |")
for label, key in [
    ("reference: 2x epoch pin, per exchange", "depot/exchange/reference: 2x epoch pin (per exchange)"),
    ("reference: 2x (node alloc + epoch-deferred free), per exchange",
     "depot/exchange/reference: 2x (node alloc + epoch-deferred free), pinned"),
]:
    if get(key) is not None:
        print(f"| {label} | | | | {get(key):.0f} ns |")
x = get("depot/exchange/slot 0 -> depot -> slot 1/127")
if x is not None:
    print(f"| 127, per-CPU slots (`free_on(0)`/`alloc_on(1)`) | | {x:.2f} | | |")
print("\n| threads (each moving items between its own two handles) | ns per item | Mitems/s total |")
print("|---|---|---|")
for t in (1, 2, 4):
    v = get(f"depot/threads/{t}")
    if v is not None:
        print(f"| {t} | {v:.2f} | {1000 / v:.1f} |")
print("\n| grow by 32 magazines, trim back to target 2 | ns per cycle | ns per item |")
print("|---|---|---|")
for name in ("WorkingSet", "OnePerTick"):
    v = get(f"depot/trim_cycle/{name}")
    if v is not None:
        print(f"| {name} | {v * 32 * 127:.0f} | {v:.2f} |")

print("\n### policies: ns per I/O (seed pattern, 16 vCPUs, one thread)\n")
print("| policy | ns per I/O |")
print("|---|---|")
for key in sorted(k for k in r if k.startswith("policies/")):
    print(f"| {key.split('/', 1)[1]} | {get(key):.1f} |")

print("\n### iova: one alloc+free pair, one thread (ns)\n")
print("| pages | `alloc`+`free` (tree only) | `alloc_fast`+`free_fast` | speed-up |")
print("|---|---|---|---|")
for pages in (1, 4):
    s, f = get(f"iova/alloc+free (tree only)/{pages}"), get(f"iova/alloc_fast+free_fast/{pages}")
    if s is not None and f is not None:
        print(f"| {pages} | {s:.1f} | {f:.1f} | {s / f:.2f}x |")

print("\n| 2 threads at once, 1 page | ns per pair (both threads together) |")
print("|---|---|")
for name in ("alloc+free (tree only)", "alloc_fast+free_fast", "reference: Cache alloc+free (per-CPU)"):
    v = get(f"iova/2 threads/{name}/1")
    if v is not None:
        print(f"| {name} | {v:.1f} |")

print("\n### targets\n")
print("| target | measured | met |")
print("|---|---|---|")


def target(name, value, ok, fmt):
    if value is not None:
        print(f"| {name} | {fmt.format(value)} | {'yes' if ok(value) else '**no**'} |")


def ratio(a, b):
    a, b = get(a), get(b)
    return None if a is None or b is None else a / b


target("`LocalCache` pair within 1.5x of the owned `Vec` floor",
       ratio(fp + "magazine LocalCache", fp + "vec_owned (floor)"), lambda x: x <= 1.5, "{:.2f}x")
target("`Cache` (per-CPU) pair within 6x of the floor",
       ratio(fp + "magazine Cache (per-CPU)", fp + "vec_owned (floor)"), lambda x: x <= 6, "{:.2f}x")
target("`Cache` (per-CPU) pair under half an `ArrayQueue` pair",
       ratio(fp + "magazine Cache (per-CPU)", fp + "crossbeam ArrayQueue"), lambda x: x < 0.5, "{:.2f}x")
g = "handoff/1->1/"
target("handoff 1->1 (`LocalCache`) at least 3x `ArrayQueue` items/s",
       ratio(g + "crossbeam ArrayQueue", g + "magazine LocalCache"), lambda x: x >= 3, "{:.2f}x")
target("handoff 1->1 (`LocalCache`) at least 6x `Mutex<Vec>` items/s",
       ratio(g + "Mutex<Vec>", g + "magazine LocalCache"), lambda x: x >= 6, "{:.2f}x")
h, x = get("depot/exchange/hits only/127"), get("depot/exchange/LocalCache -> depot -> LocalCache/127")
target("depot exchange under 2 ns per item moved (magazine size 127)",
       None if h is None or x is None else x - h, lambda v: v < 2, "{:.2f} ns")
target("IOVA fast path at least 10x the slow path (1 page, one thread)",
       ratio("iova/alloc+free (tree only)/1", "iova/alloc_fast+free_fast/1"), lambda v: v >= 10, "{:.2f}x")
