#!/usr/bin/env python3
"""The odds of the spread target: "on every workload, the spread of MagazineMalloc's
rounds, (max - min) / median, no wider than mimalloc's".

With three rounds per allocator, the range of three samples is a noisy statistic. This
simulates rounds whose throughputs are normally distributed around the same median with
relative standard deviations s_magazine and s_mimalloc, and prints, for several ratios
s_magazine / s_mimalloc, the probability that the range of three magazine rounds is no
wider than the range of three mimalloc rounds on one workload, and on all of the bench's
thirteen workloads at once (independent workloads).

    python3 malloc/benches/compare/spread_odds.py [rounds] [workloads] [trials]
"""
import random
import sys


def spread(samples):
    ordered = sorted(samples)
    return (ordered[-1] - ordered[0]) / ordered[len(ordered) // 2]


def no_wider(rounds, ratio, trials, rng):
    hits = 0
    for _ in range(trials):
        ours = [rng.gauss(1.0, 0.03 * ratio) for _ in range(rounds)]
        theirs = [rng.gauss(1.0, 0.03) for _ in range(rounds)]
        hits += spread(ours) <= spread(theirs)
    return hits / trials


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    workloads = int(sys.argv[2]) if len(sys.argv) > 2 else 13
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    rng = random.Random(1)
    print(f"{rounds} rounds per allocator, {workloads} workloads, {trials} trials per row")
    print("| s_magazine / s_mimalloc | P(no wider), one workload | P(no wider), all |")
    print("|---|---|---|")
    for ratio in (1.0, 0.75, 0.5, 0.33, 0.25):
        p = no_wider(rounds, ratio, trials, rng)
        print(f"| {ratio:.2f} | {p:.3f} | {p ** workloads:.2g} |")


if __name__ == "__main__":
    main()
