#!/usr/bin/env bash
# Correctness of a drop-in malloc on real programs: runs each program twice, once on
# glibc's malloc and once with LD_PRELOAD=LIB, and compares what it printed byte for
# byte (exit statuses are part of the compared output). One line per program:
# name, ok or DIFFERENT, seconds on glibc and under LIB; a diff for each mismatch;
# exit status 1 if any program differs.
#
#   bash malloc/preload/programs.sh LIB [PROGRAM...]
#   e.g. bash malloc/preload/programs.sh target/release/libmagazine_preload.so
#        bash malloc/preload/programs.sh /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 lua redis
#
# Programs (default: all, about 3 minutes for both runs on 2 idle cores):
#   python          Debian's /usr/bin/python3 with PYTHONMALLOC=malloc (every object
#                   from malloc, not only those over 512 bytes) running part of its own
#                   regression suite, 2 worker processes (-j2): containers, str, json,
#                   re, pickle, decimal, compression, ctypes..., and threads, fork,
#                   subprocess and os (processes forked from a process that has threads
#                   and that allocates in them). Compared: the sorted list of test cases
#                   with their outcome (from --junit-xml, durations dropped) and the
#                   suite's result lines; the order in which the 2 workers finish and
#                   all timings vary from run to run.
#   python-objects  programs/objects.py: object graphs, dicts, json, pickle, regex,
#                   strings and 4 threads allocating at once; prints checksums.
#   lua             lua5.4 programs/alloc.lua: binary trees, strings, table sorts, a
#                   hash map with deletions, coroutines; prints checksums.
#   sqlite          sqlite3 on programs/workload.sql with an in-memory database
#                   (100000 orders): inserts from recursive CTEs, indexes, joins, group
#                   by, window functions, updates, deletes, integrity_check.
#   redis           redis-server on a free loopback port, no persistence, loaded with
#                   510000 writes through redis-cli --pipe (programs/redis-load.awk),
#                   read back (values, DEBUG DIGEST of the whole data set), then a
#                   redis-benchmark load on db 1 (its timings are not compared: only that
#                   it succeeded and that db 0's digest did not change), a BGSAVE (the
#                   server forks; the child writes the dump with the allocator inherited
#                   across fork) reloaded with DEBUG RELOAD NOSAVE (digest again), deletes,
#                   FLUSHALL ASYNC (frees on a background thread), SHUTDOWN NOSAVE and the
#                   server's exit status. Only the server runs under LIB; redis-cli and
#                   redis-benchmark stay on glibc in both runs. Note that Debian's
#                   redis-server is linked with libjemalloc: under LIB its malloc, free,
#                   realloc, calloc and malloc_usable_size are LIB's (it relies on
#                   malloc_usable_size, writing up to the size it returns), while mallctl
#                   and the statistics still call into jemalloc.
#   z3              z3 on programs/z3/*.smt2 (bit-vector factoring, pigeonhole, sudoku,
#                   job-shop optimisation): problems with a single answer, so the
#                   models printed do not depend on the search path.
# Each run has a timeout (a hang shows up as exit 124 in the output, so as DIFFERENT).
# The packages are installed with apt-get when missing. Work files and logs go to
# target/preload-programs/{glibc,lib}/PROGRAM/ (log, out) and stay there for a look.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

if [ $# -lt 1 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
lib=$(abs_lib "$1")
shift
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(python python-objects lua sqlite redis z3)

ensure_packages python3.11 libpython3.11-testsuite lua5.4 sqlite3 redis-server redis-tools z3

repo=$(cd "$preload_dir/../.." && pwd)
work=$repo/target/preload-programs

# Test modules of the python case: threads, fork and subprocesses (first: the longest,
# test_subprocess, overlaps the others on the second worker), then allocation-heavy
# ones. All pass on glibc on Debian bookworm without a network.
python_tests=(
  test_subprocess test_threading test_os test_fork1 test_wait4 test_thread
  test_threading_local test_queue
  test_dict test_list test_set test_tuple test_unicode test_bytes test_long test_json
  test_re test_pickle test_collections test_sort test_deque test_ordered_dict
  test_decimal test_fractions test_array test_struct test_xml_etree test_pyexpat
  test_zlib test_hashlib test_copy test_functools test_weakref test_gc test_ctypes
)

case_python() {
  local lib=$1 dir=$2 st=0
  (cd "$dir" && with_lib "$lib" 600 env -u PYTHONPATH -u PYTHONHOME PYTHONMALLOC=malloc \
    "$py" -m test -j2 --timeout 300 --junit-xml "$dir/junit.xml" "${python_tests[@]}") \
    >"$dir/log" 2>&1 || st=$?
  echo "regrtest exit $st"
  # The suite's closing summary, without its timings.
  sed -n '/^== Tests result/,$p' "$dir/log" | grep -v -e '^Total duration' -e 'load avg'
  # Every test case and its outcome, sorted (the workers finish in any order).
  "$py" -I - "$dir/junit.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    print("junit xml unreadable:", type(e).__name__)
    sys.exit(0)
lines = []
for case in root.iter("testcase"):
    kinds = [c.tag for c in case if c.tag in ("skipped", "failure", "error")]
    lines.append("%s %s %s" % (case.get("name"), case.get("result"), " ".join(kinds) or "ok"))
print("test cases:", len(lines))
print("\n".join(sorted(lines)))
EOF
}

case_python_objects() {
  local lib=$1 dir=$2 st=0
  (cd "$dir" && with_lib "$lib" 300 env -u PYTHONPATH -u PYTHONHOME PYTHONMALLOC=malloc \
    "$py" "$programs_dir/objects.py" 0.5) 2>"$dir/log" || st=$?
  echo "exit $st"
}

case_lua() {
  local lib=$1 dir=$2 st=0
  (cd "$dir" && with_lib "$lib" 300 lua5.4 "$programs_dir/alloc.lua" 1) 2>"$dir/log" || st=$?
  echo "exit $st"
}

case_sqlite() {
  local lib=$1 dir=$2 st=0
  (cd "$dir" && with_lib "$lib" 300 sqlite3 -bail -cmd '.parameter set @n 100000' :memory: \
    <"$programs_dir/workload.sql") 2>"$dir/log" || st=$?
  echo "exit $st"
}

case_z3() {
  local lib=$1 dir=$2 f st
  for f in "$programs_dir"/z3/*.smt2; do
    echo "== $(basename "$f")"
    st=0
    (cd "$dir" && with_lib "$lib" 120 z3 -smt2 "$f") 2>>"$dir/log" || st=$?
    echo "exit $st"
  done
}

case_redis() {
  local lib=$1 dir=$2 st
  if ! redis_start "$lib" "$dir" 2>>"$dir/log"; then
    echo "server did not start"
    return 0
  fi
  local cli=(redis-cli -p "$redis_port")
  r() { echo "> $*"; "${cli[@]}" "$@" 2>&1 | tr -d '\r'; }
  # Field of INFO, without the trailing carriage return.
  same_digest() {
    if [ "$("${cli[@]}" debug digest 2>&1)" = "$digest" ]; then
      echo "digest unchanged by $1"
    else
      echo "digest CHANGED by $1"
    fi
  }
  # A server that died ends the case (no client left waiting on it): its status.
  alive() {
    kill -0 "$redis_pid" 2>/dev/null && return 0
    echo "server died"
    local st=0
    redis_stop || st=$?
    echo "server exit $st"
    return 1
  }
  info() { "${cli[@]}" info "$1" 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }
  # The load: 500000 writes of all the types, through the pipelined protocol.
  "${cli[@]}" --pipe <"$work/redis-load.resp" 2>&1
  alive || return 0
  r dbsize
  r debug digest
  info keyspace db0
  r get str:12345
  r strlen big:7
  r getrange big:7 5000 5040
  r lrange list:77 0 4
  r lrange list:77 -3 -1
  r llen list:999
  r hlen hash:1234
  r hmget hash:1234 f3233 f194 f0
  r hgetall hash:7
  r scard set:42
  r sort set:42 alpha limit 0 5
  r sunionstore union set:1 set:2 set:3 set:4
  r sintercard 2 union set:3
  r sort union alpha limit 10 5
  r zcard zset:9
  r zrange zset:9 0 4 withscores
  r zrangebyscore zset:9 5000 5100 withscores
  r zunionstore zu 3 zset:1 zset:2 zset:3 weights 1 2 3
  r zrevrange zu 0 2 withscores
  r object encoding list:77
  r object encoding hash:1234
  r object encoding set:42
  r object encoding zset:9
  r debug digest-value str:99 list:99 hash:99 set:99 zset:99 big:9
  r eval "local s = 0 for i = 0, 9999 do s = s + #redis.call('get', 'str:' .. i) end return s" 0
  local digest
  digest=$("${cli[@]}" debug digest 2>&1)
  echo "digest before the benchmark $digest"
  alive || return 0
  # Heavy traffic on db 1 (random keys: not compared), then db 0 must be unchanged.
  st=0
  timeout -k 5 120 redis-benchmark -p "$redis_port" --dbnum 1 -n 20000 -P 16 -r 10000 \
    -t set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset \
    -q >"$dir/benchmark.log" 2>&1 || st=$?
  echo "redis-benchmark exit $st"
  alive || return 0
  r ping
  r -n 1 flushdb
  r -n 1 dbsize
  same_digest "the benchmark"
  # Fork: BGSAVE's child writes the dump; then the server loads it back.
  r bgsave
  for _ in $(seq 600); do
    [ "$(info persistence rdb_bgsave_in_progress)" = 0 ] && break
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bgsave status $(info persistence rdb_last_bgsave_status)"
  alive || return 0
  r debug reload nosave
  r dbsize
  same_digest "the reload"
  # Deletes and trims, then everything freed on a background thread.
  r eval "local d = 0
    for i = 0, 99999, 3 do d = d + redis.call('del', 'str:' .. i) end
    for i = 0, 999 do redis.call('ltrim', 'list:' .. i, 10, -10) end
    for i = 0, 1999, 2 do redis.call('hdel', 'hash:' .. i, 'f0', 'f31', 'f62', 'f93') end
    for i = 0, 299 do redis.call('zremrangebyrank', 'zset:' .. i, 0, 99) end
    for i = 0, 49 do redis.call('setrange', 'big:' .. i, 100000, 'end') end
    return d" 0
  alive || return 0
  r dbsize
  r debug digest
  r flushall async
  r dbsize
  st=0
  redis_stop || st=$?
  echo "server exit $st"
}

[ -d "$work" ] && rm -rf "$work"
mkdir -p "$work"
if [[ " ${programs[*]} " == *" redis "* ]]; then
  # The same protocol stream for both runs (written once: awk is slow at it).
  LC_ALL=C awk -v n=100000 -f "$programs_dir/redis-load.awk" >"$work/redis-load.resp"
fi
echo "::: LD_PRELOAD=$lib, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_all=$(now)
failed=()
for p in "${programs[@]}"; do
  fn=case_${p//-/_}
  if ! declare -F "$fn" >/dev/null; then
    echo "error: unknown program $p" >&2
    exit 2
  fi
  secs=()
  for side in glibc lib; do
    dir=$work/$side/$p
    mkdir -p "$dir"
    l=
    [ "$side" = glibc ] || l=$lib
    t0=$(now)
    # errexit is off inside the case (|| context): a failing step is recorded in
    # the output, and the case goes on.
    "$fn" "$l" "$dir" >"$dir/out" || echo "case exit $?" >>"$dir/out"
    secs+=("$(since "$t0")")
  done
  if cmp -s "$work/glibc/$p/out" "$work/lib/$p/out"; then
    verdict=ok
  else
    verdict=DIFFERENT
    failed+=("$p")
  fi
  printf '%-16s %-9s glibc %6ss   lib %6ss\n' "$p" "$verdict" "${secs[0]}" "${secs[1]}"
  if [ "$verdict" = DIFFERENT ]; then
    diff -u --label "glibc/$p/out" --label "lib/$p/out" \
      "$work/glibc/$p/out" "$work/lib/$p/out" | head -60 || true
    echo "(logs: $work/{glibc,lib}/$p/)"
  fi
done
echo "::: $(since "$start_all") s in all; outputs in $work"
if [ ${#failed[@]} -gt 0 ]; then
  echo "DIFFERENT: ${failed[*]}"
  exit 1
fi
echo "all ${#programs[@]} programs gave the same output"
