#!/usr/bin/env bash
# The model-check suites of `magazine` (see loom-tests/README.md). This is what CI calls.
#
#   loom-tests/run.sh fast          loom, --cfg loom: every scenario at preemption bound 2, and
#                                   all but the `_wide` ones at 3; the depot ones (scenarios 1-3,
#                                   9) but depot_aba also at 4
#   loom-tests/run.sh full          loom, --cfg loom --cfg crossbeam_loom: scenarios 1-3, push/pop
#                                   and growth at bound 2, ABA and shrink at bound 1
#   loom-tests/run.sh shuttle       shuttle: PCT (depth 3) + random, SHUTTLE_ITERATIONS (10000) each; DFS
#   loom-tests/run.sh shuttle-long  the same with 100000 iterations (opt-in)
#   loom-tests/run.sh mutants       loom-tests/mutants.sh: every mutant must be caught
#   loom-tests/run.sh all           fast, full, shuttle, mutants (CI)
#
# Loom tests run one per process (`--exact`, `--test-threads=1`): with crossbeam_loom a
# failing assertion aborts the whole binary, so this is how the first panic gets reported.
# MODEL_JOBS (default: the number of cores) processes run at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# The suites run optimised, but with the crate's debug assertions on, so that the invariants
# it states with `debug_assert!` are checked in every explored execution.
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
TARGET=${MODEL_TARGET_ROOT:-target}

# build_test_binary <name of the tests/ file> <cargo args...>: builds, prints the binary's path.
build_test_binary() {
  local name=$1; shift
  local log
  log=$(mktemp)
  # mutants.sh builds in the same directories; never run a leftover mutant.
  if [ -e "$CARGO_TARGET_DIR/.mutant-built" ]; then
    cargo clean --release -p magazine >/dev/null 2>&1
    rm -f "$CARGO_TARGET_DIR/.mutant-built"
  fi
  if ! cargo test --release -p magazine-loom-tests --no-run "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  sed -n "s|.*Executable tests/$name.rs (\(.*\))|\1|p" "$log" | tail -n 1
  rm -f "$log"
}

# run_one <suite> <binary> <env assignment> <test>: one test in its own process. Prints its
# line, and on failure its first panic; exits 255 on failure, which stops xargs from
# starting more.
run_one() {
  local suite=$1 binary=$2 setting=$3 test=$4 start=$SECONDS log
  log=$(mktemp)
  if env "$setting" "$binary" --exact "$test" --test-threads=1 --nocapture >"$log" 2>&1; then
    printf '  ok    %-12s %-32s %-26s %4ss  %s\n' "$suite" "$test" "$setting" "$((SECONDS - start))" \
      "$(grep -o -m1 'loom: [0-9]* executions\|shuttle dfs.*' "$log" || true)"
    rm -f "$log"
  else
    # One write, so that a test finishing beside it does not split the report.
    printf '  FAIL  %-12s %-32s %-26s %4ss\n%s\n  (full log: %s)\n' "$suite" "$test" "$setting" \
      "$((SECONDS - start))" "$(grep -m1 -A6 'panicked at' "$log" || tail -n 20 "$log")" "$log"
    exit 255
  fi
}
export -f run_one

# queue <suite> <binary> <env assignment> <test>...: adds one run per test to the queue that
# run_queue runs. The checkers are single-threaded: JOBS processes (one per core) run at a
# time, the longest first (LONGEST below, seconds measured on the 2-core machine in the
# clean-clone run of 2026-12-07), so that the runs still going at the end are short ones
# and both cores stay busy to the end; the suites' and bounds' runs share one queue.
JOBS=${MODEL_JOBS:-$(nproc)}
QUEUE=()
declare -A LONGEST=(
  ["loom full:LOOM_MAX_PREEMPTIONS=1:depot_aba"]=55
  ["loom fast:LOOM_MAX_PREEMPTIONS=3:refill_race"]=42
  ["loom fast:LOOM_MAX_PREEMPTIONS=4:depot_growth"]=39
  ["shuttle:SHUTTLE_ITERATIONS=10000:depot_aba_dfs"]=16
  ["shuttle:SHUTTLE_ITERATIONS=10000:depot_push_pop_dfs"]=15
  ["loom fast:LOOM_MAX_PREEMPTIONS=3:depot_aba"]=14
  ["loom full:LOOM_MAX_PREEMPTIONS=2:depot_push_pop"]=13
  ["loom fast:LOOM_MAX_PREEMPTIONS=2:slot_busy_is_a_miss_wide"]=10
  ["loom full:LOOM_MAX_PREEMPTIONS=1:depot_shrink_one_per_tick"]=10
  ["loom full:LOOM_MAX_PREEMPTIONS=1:depot_shrink_working_set"]=9
  ["loom fast:LOOM_MAX_PREEMPTIONS=3:depot_growth"]=8
  ["loom full:LOOM_MAX_PREEMPTIONS=2:depot_growth"]=8
  ["shuttle:SHUTTLE_ITERATIONS=10000:refill_race"]=8
)
queue() {
  local suite=$1 binary=$2 setting=$3 test; shift 3
  for test in "$@"; do
    QUEUE+=("${LONGEST["$suite:$setting:$test"]:-0} ${#QUEUE[@]}"$'\t'"$suite"$'\t'"$binary"$'\t'"$setting"$'\t'"$test")
  done
}

# run_queue: runs the queue, the longest first (then in the order queued); stops at the
# first failure.
run_queue() {
  local suite binary setting test
  [ ${#QUEUE[@]} -gt 0 ] || return 0
  printf '%s\n' "${QUEUE[@]}" | sort -k1,1nr -k2,2n | while IFS=$'\t' read -r _ suite binary setting test; do
    printf '%s\0' "$suite" "$binary" "$setting" "$test"
  done | xargs -0 -n 4 -P "$JOBS" bash -c 'run_one "$@"' _
  QUEUE=()
}

list_tests() { "$1" --list 2>/dev/null | sed -n 's/: test$//p'; }

fast() {
  local binary
  binary=$(CARGO_TARGET_DIR=$TARGET/loom RUSTFLAGS="--cfg loom" build_test_binary loom)
  mapfile -t tests < <(list_tests "$binary")
  echo "loom fast: ${#tests[@]} tests, bound 2"
  queue "loom fast" "$binary" LOOM_MAX_PREEMPTIONS=2 "${tests[@]}"
  # The `_wide` variants (three threads, or two CPU slots) at bound 2 only: at 3,
  # slot_busy_is_a_miss_wide alone took 112 s of CI's budget for what its narrow twin and
  # shuttle already explore.
  mapfile -t narrow < <(printf '%s\n' "${tests[@]}" | grep -v '_wide$')
  echo "loom fast: ${#narrow[@]} tests, bound 3"
  queue "loom fast" "$binary" LOOM_MAX_PREEMPTIONS=3 "${narrow[@]}"
  # depot_aba stops at bound 3 (68172 executions, 12 s); at 4 it took 141 s.
  mapfile -t depot < <(printf '%s\n' "${tests[@]}" | grep '^depot_' | grep -v '^depot_aba$')
  echo "loom fast: ${#depot[@]} depot tests, bound 4"
  queue "loom fast" "$binary" LOOM_MAX_PREEMPTIONS=4 "${depot[@]}"
}

# Scenarios 1-3 (the depot: push/pop, ABA, growth, shrink) with loom inside crossbeam-epoch
# too. Each has at most two threads that pin (the ABA shape's third thread, the pusher,
# does not pin). `depot_aba` runs at bound 1 here: with the tagged head every read and
# write of a node's `next` is a model atomic, and at bound 2 inside crossbeam-epoch it did
# not finish in 18 minutes (bound 1: ~1 minute, 207530 executions). The two shrink
# scenarios also run at bound 1: at 2 they took 3 minutes each (about 800000 executions).
# The fast mode checks all of them at bounds 2-4 with crossbeam-epoch outside the model.
FULL_TESTS=(depot_push_pop depot_growth)
FULL_TESTS_BOUND_1=(depot_aba depot_shrink_working_set depot_shrink_one_per_tick)

full() {
  local binary
  binary=$(CARGO_TARGET_DIR=$TARGET/loom-full RUSTFLAGS="--cfg loom --cfg crossbeam_loom" \
    build_test_binary loom)
  echo "loom full (crossbeam_loom): ${#FULL_TESTS[@]} tests at bound 2, ${#FULL_TESTS_BOUND_1[@]} at bound 1"
  queue "loom full" "$binary" LOOM_MAX_PREEMPTIONS=2 "${FULL_TESTS[@]}"
  queue "loom full" "$binary" LOOM_MAX_PREEMPTIONS=1 "${FULL_TESTS_BOUND_1[@]}"
}

shuttle() {
  local iterations=${1:-${SHUTTLE_ITERATIONS:-10000}} binary
  binary=$(CARGO_TARGET_DIR=$TARGET/shuttle build_test_binary shuttle --features shuttle)
  mapfile -t tests < <(list_tests "$binary")
  echo "shuttle: ${#tests[@]} tests, $iterations iterations per scheduler"
  queue shuttle "$binary" SHUTTLE_ITERATIONS="$iterations" "${tests[@]}"
}

mutants() { bash loom-tests/mutants.sh; }

timed() {
  local start=$SECONDS
  echo "=== $1"
  "$@"
  echo "=== $1: ok in $((SECONDS - start)) s"
}

# Each mode builds its binary and queues its runs; run_queue then runs them. `all` builds
# the three binaries first and runs the three suites' runs in one queue.
case ${1:-all} in
  fast) timed fast; timed run_queue ;;
  full) timed full; timed run_queue ;;
  shuttle) timed shuttle; timed run_queue ;;
  shuttle-long) timed shuttle 100000; timed run_queue ;;
  mutants) timed mutants ;;
  all)
    timed fast
    timed full
    timed shuttle
    timed run_queue
    timed mutants
    ;;
  *) echo "usage: $0 [fast|full|shuttle|shuttle-long|mutants|all]" >&2; exit 2 ;;
esac
