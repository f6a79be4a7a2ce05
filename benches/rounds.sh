#!/usr/bin/env bash
# Runs criterion benches several times and prints the medians of the runs with their
# spread (benches/rounds.py). Run on a quiet machine: nothing else running; each round waits for the load average to fall below 0.3 (benches/quiet.sh).
#
#   bash benches/rounds.sh [rounds] [bench...]     (default: 3 rounds of
#                                                  fast_path handoff depot io_loop iova policies
#                                                  refill)
#   FILTER='handoff/1->1/(magazine Cache|crossbeam ArrayQueue)' bash benches/rounds.sh 5 handoff
#                                                  (only the benchmarks the regex matches)
#
# Round i writes target/bench-round-i/criterion and its log target/bench-round-i.log (the
# io_loop bench prints its source-call shares there, the refill bench its source calls per
# item, which summary.py reads). Binaries are built before round 1.
# Ratios inside each run: python3 benches/rounds.py target/bench-round-*/criterion \
#   --ratio <id A> <id B> ...
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(fast_path handoff depot io_loop iova policies refill)
args=()
for bench in "${benches[@]}"; do args+=(--bench "$bench"); done
cargo bench --no-run "${args[@]}" >/dev/null 2>&1
source benches/quiet.sh
dirs=()
for i in $(seq 1 "$rounds"); do
  wait_for_quiet
  dir=target/bench-round-$i
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "::: round $i ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
  CRITERION_HOME=$PWD/$dir/criterion cargo bench "${args[@]}" -- ${FILTER:+"$FILTER"} >"$dir.log" 2>&1
  dirs+=("$dir/criterion")
done
echo "::: done $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg)"
python3 benches/rounds.py "${dirs[@]}"
