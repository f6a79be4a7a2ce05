#!/usr/bin/env bash
# The two speeds of the producer/consumer workloads (xmalloc, channel) and thread
# placement (BENCHMARKS.md): per unpinned run, the throughput of MagazineMalloc with its
# depot's pops and busy misses, and mimalloc's; then runs with the four threads pinned
# (`taskset -p` on their ids, in creation order, which both workloads share: main,
# consumer 1, consumer 2, producer 1, producer 2), both producers on CPU 0 and both
# consumers on CPU 1 ("split"), or a producer and a consumer on each CPU ("mixed").
# Needs 2 CPUs and the binaries `bash malloc/bench.sh` builds; run on a quiet machine.
#
#   bash malloc/benches/compare/placement.sh [runs] [workload]
#     runs      default 3
#     workload  xmalloc (default) or channel
set -euo pipefail
cd "$(dirname "$0")/../../.."
runs=${1:-3}
workload=${2:-xmalloc}
case $workload in xmalloc | channel) ;; *) echo "error: workload $workload" >&2; exit 2 ;; esac
cargo build --release -p magazine-malloc --features compare \
  --bench cmp_magazine --bench cmp_mimalloc --message-format=json-render-diagnostics \
  >target/placement-build.json
binary() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[2] \
            and m.get("executable"):
        print(m["executable"])
' target/placement-build.json "$1"
}
magazine=$(binary cmp_magazine)
mimalloc=$(binary cmp_mimalloc)
ops() { grep -o 'ops_per_s=[0-9.]*' | cut -d= -f2; }
source benches/quiet.sh

# pinned <split|mixed> <binary>: one run with its threads pinned; prints ops/s.
pinned() {
  local cpus out
  if [ "$1" = split ]; then cpus=(0 1 1 0 0); else cpus=(0 0 1 0 1); fi
  out=$(mktemp)
  "$2" "$workload" --trim-interval 0 >"$out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 400); do
    [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -ge 5 ] && break
    sleep 0.005
  done
  mapfile -t tids < <(ls "/proc/$pid/task" | sort -n)
  for i in 1 2 3 4; do taskset -p -c "${cpus[$i]}" "${tids[$i]}" >/dev/null 2>&1 || true; done
  wait "$pid"
  ops <"$out"
  rm -f "$out"
}

wait_for_quiet
echo "$workload unpinned: MagazineMalloc ops/s, depot pops, busy misses; mimalloc ops/s"
for run in $(seq 1 "$runs"); do
  stats=$(MALLOC_BENCH_STATS=1 "$magazine" "$workload" --trim-interval 0 2>&1)
  pops=$(grep -o '[0-9]* pops' <<<"$stats" | awk '{s += $1} END {print s}')
  busy=$(grep -o '[0-9]* busy misses' <<<"$stats" | awk '{s += $1} END {print s}')
  echo "  run $run: $(ops <<<"$stats") $pops $busy; $("$mimalloc" "$workload" --trim-interval 0 2>&1 | ops)"
done
for layout in split mixed; do
  echo "$layout: MagazineMalloc ops/s; mimalloc ops/s"
  for run in $(seq 1 "$runs"); do
    echo "  run $run: $(pinned "$layout" "$magazine"); $(pinned "$layout" "$mimalloc")"
  done
done
