#!/usr/bin/env python3
"""Summarizes the allocator comparison (malloc/bench.sh) as one markdown table per workload.

Input: files of `RESULT key=value ...` lines that the cmp_* binaries print, each prefixed
by bench.sh with `round=N`. Per allocator the table gives the median over the rounds with
the min-max spread, ratios to mimalloc and to glibc taken inside each round (then the
median of those ratios, with their spread), and the memory figures' medians:
peak RSS (VmHWM), RSS after the workload freed everything, and RSS after one more trim
interval (MagazineMalloc: trim, sleep, trim; the others: sleep).

    python3 malloc/benches/compare/summarize.py target/malloc-bench/results.txt
"""

import statistics
import sys
from collections import defaultdict

ALLOCATORS = ["magazine", "mimalloc", "jemalloc", "glibc"]
NAMES = {
    "magazine": "MagazineMalloc",
    "mimalloc": "mimalloc",
    "jemalloc": "jemalloc",
    "glibc": "glibc malloc",
}
# What one operation of each workload is (the unit of its throughput).
UNITS = {
    "xmalloc": "blocks allocated and freed",
    "larson": "blocks replaced",
    "cache-thrash": "one-byte writes",
    "cache-scratch": "one-byte writes",
    "mstress": "allocator calls",
    "pair64": "64-byte alloc + free pairs",
    "stringmap": "map operations",
    "serde-json": "1 MB JSON documents parsed and printed",
    "syn": "source bytes parsed and printed",
    "regex": "rounds of 50 patterns compiled and run over 100 KB",
    "channel": "records sent, read and dropped",
    "rayon-sort": "strings collected, sorted and dropped, 10^6 a round",
    "bigvec": "64 KiB-4 MiB buffers written",
}
ORDER = list(UNITS)
# Workloads with few, large operations: throughput in operations per second, not millions.
PER_SECOND = {"serde-json", "regex", "bigvec"}
NOTE = (
    "Throughput: median over the rounds (min-max). Ratios are taken inside each round "
    "(this allocator's throughput / the other's; for pair64 time / time, so below 1 is "
    "faster there and above 1 faster elsewhere), then the median (min-max) of those. "
    "RSS columns: medians over the rounds of peak RSS (VmHWM), RSS once the workload "
    "freed everything, and RSS after one more trim interval (MagazineMalloc: trim(), "
    "sleep, trim(); the others: the same sleep)."
)


def parse(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                fields = dict(
                    part.split("=", 1) for part in line.split() if "=" in part
                )
                if "workload" not in fields or "ops_per_s" not in fields:
                    continue
                rows.append(fields)
    return rows


def median_spread(values, fmt, spread_fmt=None):
    """`median (min-max)`, or the median alone for one value."""
    if not values:
        return "-"
    spread_fmt = spread_fmt or fmt
    med = fmt(statistics.median(values))
    if len(values) == 1 or min(values) == max(values):
        return med
    return f"{med} ({spread_fmt(min(values))}-{spread_fmt(max(values))})"


def sig(x):
    """Three significant digits, no exponent."""
    if x == 0:
        return "0"
    for digits, limit in ((2, 10), (1, 100)):
        if abs(x) < limit:
            return f"{x:.{digits}f}"
    return f"{x:.0f}"


def ratio(x):
    return f"{x:.2f}x"


def mib(kb):
    return f"{kb / 1024:.1f}"


def table(workload, rows):
    by_alloc = defaultdict(dict)  # allocator -> round -> row
    for row in rows:
        by_alloc[row["allocator"]][row.get("round", "1")] = row
    allocators = [a for a in ALLOCATORS if a in by_alloc] + sorted(
        a for a in by_alloc if a not in ALLOCATORS
    )
    pair = workload == "pair64"
    threads = sorted({int(r["threads"]) for r in rows})
    scales = sorted({r.get("scale", "1") for r in rows})
    intervals = sorted({r.get("trim_interval_s", "?") for r in rows})
    rounds = sorted({r.get("round", "1") for r in rows}, key=int)
    out = []
    thread_text = "/".join(map(str, threads)) + (" thread" if threads == [1] else " threads")
    out.append(
        f"### {workload}: {UNITS.get(workload, 'operations')} "
        f"({thread_text}, scale {'/'.join(scales)}, {len(rounds)} round"
        f"{'s' if len(rounds) != 1 else ''}, trim interval {'/'.join(intervals)} s)"
    )
    out.append("")
    per_second = workload in PER_SECOND
    if pair:
        metric = "ns per pair"
        head = f"| allocator | {metric} | vs mimalloc (time) | vs glibc (time) |"
    else:
        metric = "ops/s" if per_second else "M ops/s"
        head = f"| allocator | {metric} | vs mimalloc | vs glibc |"
    head += " peak RSS MiB | RSS after MiB | RSS after trim interval MiB |"
    out.append(head)
    out.append("|---" + "|---:" * (head.count("|") - 2) + "|")

    def value(row):
        if pair:
            return float(row["ns_per_op"])
        return float(row["ops_per_s"]) / (1 if per_second else 1e6)

    for alloc in allocators:
        per_round = by_alloc[alloc]
        values = [value(r) for r in per_round.values()]
        cells = [NAMES.get(alloc, alloc), median_spread(values, sig)]
        for base in ("mimalloc", "glibc"):
            ratios = [
                value(r) / value(by_alloc[base][rnd])
                for rnd, r in per_round.items()
                if rnd in by_alloc.get(base, {}) and value(by_alloc[base][rnd]) > 0
            ]
            cells.append(median_spread(ratios, ratio, "{:.2f}".format) if ratios else "-")
        for key in ("peak_rss_kb", "rss_after_kb", "rss_trim_kb"):
            kbs = [float(r[key]) for r in per_round.values() if key in r]
            cells.append(mib(statistics.median(kbs)) if kbs else "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows = parse(argv[1:])
    if not rows:
        print("no RESULT lines found", file=sys.stderr)
        return 1
    by_workload = defaultdict(list)
    for row in rows:
        by_workload[row["workload"]].append(row)
    workloads = [w for w in ORDER if w in by_workload] + sorted(
        w for w in by_workload if w not in ORDER
    )
    print(NOTE)
    print()
    print("\n\n".join(table(w, by_workload[w]) for w in workloads))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
