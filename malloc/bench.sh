#!/usr/bin/env bash
# Compares MagazineMalloc with mimalloc, jemalloc and glibc's malloc on the workloads of
# malloc/benches/compare/workloads.rs (ports of mimalloc-bench's patterns plus a
# string-keyed map) and of malloc/benches/compare/real.rs (real libraries' code: serde_json,
# syn, regex, crossbeam-channel, rayon, large Vec<u8> buffers), then prints one markdown
# table per workload (malloc/benches/compare/summarize.py). Run on a quiet machine: nothing else running; each round waits for the load average to fall below 0.3 (benches/quiet.sh).
#
#   bash malloc/bench.sh [rounds] [workload...]   (default: 3 rounds of xmalloc larson
#                                                 cache-thrash cache-scratch mstress pair64
#                                                 stringmap serde-json syn regex channel
#                                                 rayon-sort bigvec programs)
#
# `programs` is the C library (malloc/preload/) under real programs (Python, Lua, SQLite,
# Z3, Redis) against glibc, mimalloc, jemalloc and tcmalloc: malloc/preload/bench.sh, run
# after the others with the same number of rounds, its own table.
#
# Environment:
#   MALLOC_BENCH_SCALE=S          work per run times S (default 1: about 1-3 s per run with
#                                 glibc on 2 cores); e.g. 0.01 to check the pipeline
#   MALLOC_BENCH_THREADS=N        threads for every workload (default: each workload's own,
#                                 2x the cores where the pattern wants more threads than
#                                 cores, 1x for false sharing and rayon-sort, 1 for
#                                 pair64, stringmap and the sequential libraries)
#   MALLOC_BENCH_TRIM_INTERVAL=T  seconds between the two RSS readings after a workload
#                                 (default 1; MagazineMalloc: trim(), sleep T, trim())
#   MALLOC_BENCH_ALLOCATORS="..." subset of: magazine mimalloc jemalloc glibc
#
# The four binaries are built once (release, feature `compare`: mimalloc and jemalloc are
# compiled from source). Each run is one process: one allocator, one workload. Within a
# round every allocator runs every workload; the allocators' order turns by one each round.
# Lines go to target/malloc-bench/results.txt (`round=N RESULT ...`), each run's stderr to
# target/malloc-bench/log.txt. Summarize again later with
#   python3 malloc/benches/compare/summarize.py target/malloc-bench/results.txt
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] ||
  workloads=(xmalloc larson cache-thrash cache-scratch mstress pair64 stringmap
    serde-json syn regex channel rayon-sort bigvec programs)
programs=0
rust=()
for w in "${workloads[@]}"; do
  if [ "$w" = programs ]; then programs=1; else rust+=("$w"); fi
done
workloads=("${rust[@]}")
if [ ${#workloads[@]} -eq 0 ]; then
  exec bash malloc/preload/bench.sh "$rounds"
fi
read -r -a allocators <<<"${MALLOC_BENCH_ALLOCATORS:-magazine mimalloc jemalloc glibc}"
scale=${MALLOC_BENCH_SCALE:-1}
interval=${MALLOC_BENCH_TRIM_INTERVAL:-1}
extra=(--scale "$scale" --trim-interval "$interval")
[ -z "${MALLOC_BENCH_THREADS:-}" ] || extra+=(--threads "$MALLOC_BENCH_THREADS")

out=target/malloc-bench
mkdir -p "$out"
results=$out/results.txt
log=$out/log.txt
: >"$results"
: >"$log"

# Build once; read the binaries' paths from cargo's JSON messages.
build_args=()
for a in "${allocators[@]}"; do build_args+=(--bench "cmp_$a"); done
echo "::: building ${allocators[*]} ($(date -u +%H:%M:%S) UTC)"
cargo build --release -p magazine-malloc --features compare "${build_args[@]}" \
  --message-format=json-render-diagnostics >"$out/build.json"
declare -A binary
while read -r name path; do
  binary[$name]=$path
done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and \
            m["target"]["name"].startswith("cmp_"):
        print(m["target"]["name"][4:], m["executable"])
' "$out/build.json")
for a in "${allocators[@]}"; do
  [ -n "${binary[$a]:-}" ] || { echo "no binary for $a" >&2; exit 1; }
done

source benches/quiet.sh
failed=0
for round in $(seq 1 "$rounds"); do
  wait_for_quiet
  echo "::: round $round ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
  n=${#allocators[@]}
  for w in "${workloads[@]}"; do
    for i in $(seq 0 $((n - 1))); do
      a=${allocators[$(((i + round - 1) % n))]}
      echo "--- round $round $w $a" >>"$log"
      if line=$("${binary[$a]}" "$w" "${extra[@]}" 2>>"$log" | grep '^RESULT '); then
        echo "round=$round $line" >>"$results"
        echo "    $w $a: $(sed -E 's/.*seconds=([0-9.]+).*ops_per_s=([0-9.]+).*/\1 s, \2 ops\/s/' <<<"$line")"
      else
        echo "    $w $a: FAILED (see $log)"
        failed=$((failed + 1))
      fi
    done
  done
done
echo "::: done $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg)"
echo
python3 malloc/benches/compare/summarize.py "$results"
[ "$failed" -eq 0 ] || { echo "$failed runs failed" >&2; exit 1; }
if [ "$programs" -eq 1 ]; then
  echo
  bash malloc/preload/bench.sh "$rounds"
fi
