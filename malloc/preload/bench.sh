#!/usr/bin/env bash
# Speed and memory of a drop-in malloc on real programs, against glibc's malloc,
# mimalloc, jemalloc and tcmalloc (Debian's libraries, each put in with LD_PRELOAD):
# wall time and peak RSS of each program under each allocator, ROUNDS rounds, then a
# markdown table (malloc/preload/bench-summary.py): per program and allocator the
# median wall time (min-max) and median peak RSS, the ratios magazine/mimalloc, and
# the geometric mean of the time ratio over the programs.
#
#   bash malloc/preload/bench.sh [ROUNDS] [LIB]
#     ROUNDS  default 3
#     LIB     the library under test, named "magazine" in the table; default
#             target/release/libmagazine_preload.so (built with cargo first)
#
# Environment:
#   BENCH_PROGRAMS="..."    subset of: python lua sqlite z3 redis (default: all)
#   BENCH_ALLOCATORS="..."  subset of: glibc mimalloc jemalloc tcmalloc magazine
#   BENCH_TIMEOUT=S         seconds before a run is killed (default 120)
#
# Programs (each run about 1-5 s with glibc on 2 cores):
#   python  PYTHONMALLOC=malloc /usr/bin/python3 programs/objects.py 1 (object graphs,
#           json, pickle, regex, strings, 4 threads): PYTHONMALLOC=malloc sends every
#           object to malloc, where CPython's default sends the small ones to pymalloc
#   lua     lua5.4 programs/alloc.lua 1.5 (binary trees, strings, tables, coroutines)
#   sqlite  sqlite3 on programs/workload.sql, 100000 orders, in-memory database
#   z3      z3 -smt2 programs/z3/jobshop-10x5.smt2 (integer optimisation)
#   redis   redis-server under the allocator; timed: redis-benchmark -n 200000 -P 16
#           -r 100000 -t set,get,lpush,lpop,sadd,hset (on glibc, the client); peak RSS:
#           the server's VmHWM just before SHUTDOWN NOSAVE
# Peak RSS of the other programs: GNU time's %M (maximum resident set size).
#
# Within a round, each program runs under every allocator in turn (the allocators'
# order turns by one each round), so a change of the host's speed falls on all of
# them alike; each round waits for the load average to fall below 0.3 (benches/quiet.sh)
# and prints it. Each run has a timeout; a crash, a timeout or an output
# different from glibc's (python, lua, sqlite, z3 print checksums) is reported in the
# table, and the run left out of the medians. Lines go to
# target/preload-bench/results.txt, each run's output and stderr to
# target/preload-bench/runs/. Summarize again with
#   /usr/bin/python3 malloc/preload/bench-summary.py target/preload-bench/results.txt
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

repo=$(cd "$preload_dir/../.." && pwd)
rounds=${1:-3}
lib=${2:-}
if [ -z "$lib" ]; then
  lib=$repo/target/release/libmagazine_preload.so
  echo "::: building $lib"
  (cd "$repo" && cargo build --release -p magazine-malloc-preload)
fi
lib=$(abs_lib "$lib")
read -r -a programs <<<"${BENCH_PROGRAMS:-python lua sqlite z3 redis}"
read -r -a allocators <<<"${BENCH_ALLOCATORS:-glibc mimalloc jemalloc tcmalloc magazine}"
limit=${BENCH_TIMEOUT:-120}

ensure_packages python3.11 lua5.4 sqlite3 redis-server redis-tools z3 time \
  libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4

libdir=/usr/lib/x86_64-linux-gnu
declare -A libs=(
  [glibc]=""
  [mimalloc]=$libdir/libmimalloc.so.2
  [jemalloc]=$libdir/libjemalloc.so.2
  [tcmalloc]=$libdir/libtcmalloc_minimal.so.4
  [magazine]=$lib
)
for a in "${allocators[@]}"; do
  [ -v "libs[$a]" ] || { echo "error: unknown allocator $a" >&2; exit 2; }
  [ -z "${libs[$a]}" ] || [ -f "${libs[$a]}" ] || { echo "error: missing ${libs[$a]}" >&2; exit 2; }
done

out=$repo/target/preload-bench
rm -rf "$out"
mkdir -p "$out/runs"
results=$out/results.txt
: >"$results"

# set_command PROGRAM : sets cmd (the command line) and input (its stdin) of a program
# other than redis, which has its own runner.
set_command() {
  input=/dev/null
  case $1 in
  python) cmd=(env -u PYTHONPATH -u PYTHONHOME PYTHONMALLOC=malloc "$py" "$programs_dir/objects.py" 1) ;;
  lua) cmd=(lua5.4 "$programs_dir/alloc.lua" 1.5) ;;
  sqlite)
    cmd=(sqlite3 -bail -cmd '.parameter set @n 100000' :memory:)
    input=$programs_dir/workload.sql
    ;;
  z3) cmd=(z3 -smt2 "$programs_dir/z3/jobshop-10x5.smt2") ;;
  *) return 1 ;;
  esac
}

# result ROUND PROGRAM ALLOCATOR STATUS SECONDS RSS_KB
result() { echo "round=$1 program=$2 allocator=$3 status=$4 seconds=$5 rss_kb=$6" | tee -a "$results"; }

# status_of RC : ok, timeout, signal-N or exit-N.
status_of() {
  local rc=$1
  if [ "$rc" = 0 ]; then echo ok
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout
  elif [ "$rc" -gt 128 ]; then echo "signal-$((rc - 128))"
  else echo "exit-$rc"; fi
}

run_program() {
  local round=$1 prog=$2 alloc=$3 l=${libs[$3]}
  local base=$out/runs/$prog.$alloc.$round
  local cmd input rc=0
  set_command "$prog"
  local pre=()
  [ -z "$l" ] || pre=("LD_PRELOAD=$l")
  (cd "$out/runs" && timeout -k 5 "$limit" /usr/bin/time -f '%e %M' -o "$base.time" \
    env "${pre[@]}" "${cmd[@]}" <"$input" >"$base.out" 2>"$base.err") || rc=$?
  local st secs=- rss=-
  st=$(status_of "$rc")
  if [ -s "$base.time" ]; then
    read -r secs rss < <(tail -1 "$base.time")
  fi
  # The program's output must be glibc's (its first run with glibc: glibc comes first
  # in round 1's order).
  if [ "$st" = ok ]; then
    local ref=$out/runs/$prog.reference.out
    if [ ! -f "$ref" ] && [ "$alloc" = glibc ]; then cp "$base.out" "$ref"; fi
    if [ -f "$ref" ] && ! cmp -s "$ref" "$base.out"; then st=wrong-output; fi
  fi
  result "$round" "$prog" "$alloc" "$st" "$secs" "$rss"
}

run_redis() {
  local round=$1 alloc=$2 l=${libs[$2]}
  local dir=$out/runs/redis.$alloc.$round
  mkdir -p "$dir"
  if ! redis_start "$l" "$dir" 2>"$dir/start.err"; then
    result "$round" redis "$alloc" no-start - -
    return 0
  fi
  local t0 rc=0 secs st rss=-
  t0=$(now)
  timeout -k 5 "$limit" redis-benchmark -p "$redis_port" -n 200000 -P 16 -r 100000 \
    -t set,get,lpush,lpop,sadd,hset -q >"$dir/benchmark.out" 2>&1 || rc=$?
  secs=$(since "$t0" 2)
  st=$(status_of "$rc")
  [ "$st" = ok ] || st=benchmark-$st
  if [ -r "/proc/$redis_pid/status" ]; then
    rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$redis_pid/status")
  fi
  rc=0
  redis_stop || rc=$?
  # A server that died explains a failed benchmark: its status comes first.
  [ "$rc" = 0 ] || st=server-$(status_of "$rc")
  result "$round" redis "$alloc" "$st" "$secs" "$rss"
}

echo "::: magazine = $lib"
echo "::: programs: ${programs[*]}; allocators: ${allocators[*]}; $rounds rounds; $(nproc) cores"
for prog in "${programs[@]}"; do
  [ "$prog" = redis ] || set_command "$prog" ||
    { echo "error: unknown program $prog" >&2; exit 2; }
done
start=$(now)
n=${#allocators[@]}
# shellcheck disable=SC1091 # benches/quiet.sh, from the repository root
source "$repo/benches/quiet.sh"
for round in $(seq "$rounds"); do
  wait_for_quiet
  echo "::: round $round/$rounds, load average $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)"
  for prog in "${programs[@]}"; do
    for i in $(seq 0 $((n - 1))); do
      alloc=${allocators[$(((i + round - 1) % n))]}
      if [ "$prog" = redis ]; then
        run_redis "$round" "$alloc"
      else
        run_program "$round" "$prog" "$alloc"
      fi
    done
  done
done
echo "::: $(since "$start") s; results in $results"
echo
"$py" -I "$preload_dir/bench-summary.py" "$results"
