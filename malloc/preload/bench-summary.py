"""Markdown table of malloc/preload/bench.sh's results.

    /usr/bin/python3 malloc/preload/bench-summary.py target/preload-bench/results.txt

Reads lines `round=R program=P allocator=A status=S seconds=T rss_kb=K`. Per program
and allocator: median wall time (min-max) over the runs with status ok, median peak
RSS; runs that were not ok are counted in the cell (e.g. `signal-11 x1`). Then the
ratios magazine/mimalloc of the median time and RSS per program, and the geometric
mean of the time ratio over the programs where both have ok runs.
"""
import math
import statistics
import sys
from collections import defaultdict

ORDER = ["glibc", "mimalloc", "jemalloc", "tcmalloc", "magazine"]


def main(path):
    runs = defaultdict(list)  # (program, allocator) -> [(status, seconds, rss_kb)]
    programs, allocators = [], []
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split())
            p, a = fields["program"], fields["allocator"]
            if p not in programs:
                programs.append(p)
            if a not in allocators:
                allocators.append(a)
            runs[p, a].append((fields["status"], fields["seconds"], fields["rss_kb"]))
    allocators.sort(key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER))

    def stats(p, a):
        ok = [(float(s), int(k)) for st, s, k in runs[p, a] if st == "ok" and s != "-" and k != "-"]
        bad = defaultdict(int)
        for st, _, _ in runs[p, a]:
            if st != "ok":
                bad[st] += 1
        if not ok:
            return None, None, None, None, bad
        t = [s for s, _ in ok]
        r = [k for _, k in ok]
        return statistics.median(t), min(t), max(t), statistics.median(r), bad

    header = ["program"] + allocators
    ratio = "magazine" in allocators and "mimalloc" in allocators
    if ratio:
        header += ["time magazine/mimalloc", "RSS magazine/mimalloc"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] + ["--:"] * (len(header) - 1)) + "|")
    logs = []
    for p in programs:
        row = [p]
        med = {}
        for a in allocators:
            t, lo, hi, rss, bad = stats(p, a)
            med[a] = (t, rss)
            cell = "" if t is None else "%.2f s (%.2f-%.2f), %.1f MB" % (t, lo, hi, rss / 1024)
            notes = ", ".join("%s x%d" % kv for kv in sorted(bad.items()))
            if notes:
                cell = (cell + "; " if cell else "") + "**" + notes + "**"
            row.append(cell or "-")
        if ratio:
            (tm, rm), (tg, rg) = med["magazine"], med["mimalloc"]
            if tm is not None and tg is not None:
                row += ["%.3f" % (tm / tg), "%.3f" % (rm / rg)]
                logs.append(math.log(tm / tg))
            else:
                row += ["-", "-"]
        print("| " + " | ".join(row) + " |")
    if ratio:
        gm = "%.3f" % math.exp(sum(logs) / len(logs)) if logs else "-"
        print()
        print("Geometric mean of the time ratio magazine/mimalloc over %d programs: %s"
              % (len(logs), gm))
    rounds = {len(v) for v in runs.values()}
    print()
    print("Cells: median wall time (min-max) over the ok runs, median peak RSS "
          "(MB = 1024 KiB); %s runs per cell." % "/".join(str(r) for r in sorted(rounds)))


if __name__ == "__main__":
    main(sys.argv[1])
