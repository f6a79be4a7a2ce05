#!/usr/bin/env bash
# Mutation check of the model-check suites: builds `magazine` with one known bug at a time
# (a `cfg(magazine_mutant = "...")` twin in src/) and runs the loom suite (fast mode,
# bound 2 then 3) and the shuttle suite against it, each stopping at its first failure.
# Every mutant must be caught by at least one checker; the table says which checker caught
# it, with which scenario, after how many seconds of checking (build time excluded), and
# which checker it escaped.
#
# Each checker first runs the scenario written for the mutant's protocol (FIRST below),
# then the rest of its suite in order, so that a caught mutant costs one scenario, not the
# suite before it. A mutant that scenario misses is still hunted through the whole suite.
# Shuttle is not run against the weak-memory mutants (SC_BLIND): it schedules every atomic
# as SeqCst, so an ordering bug is invisible to it (slot_release_relaxed escaped its whole
# suite every time it was tried); loom and ThreadSanitizer (.ci/tool-mutants.sh) catch it.
#
#   loom-tests/mutants.sh [mutant...]      (default: all)
#
# A mutant by hand, e.g.:
#   RUSTFLAGS='--cfg loom --cfg magazine_mutant="trim_no_recheck"' \
#     CARGO_TARGET_DIR=target/loom-mutant cargo test --release -p magazine-loom-tests
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# The suites run optimised, but with the crate's debug assertions on, so that the invariants
# it states with `debug_assert!` are checked in every explored execution.
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
TARGET=${MODEL_TARGET_ROOT:-target}
ALL=(
  slot_release_relaxed        # slot hand-back store Release -> Relaxed
  tag_not_bumped              # the stack head's tag is never bumped: a bare pointer to recycled nodes (ABA)
  trim_no_recheck             # trim pops its count without re-checking the target
  local_drop_forgets_previous # LocalCache drop loses its previous magazine
  busy_slot_waits             # the busy-slot path waits for the owner
  fixed_cap_load_then_push    # Fixed overflow: load the length, then push
  alloc_loose_forgets_rest    # busy-slot alloc frees the rest of the partial magazine
  steal_unowned               # steal / flush / idle reclaim touch a slot without taking it
  flush_flag_stays_set        # the one-flush-at-a-time flag is never cleared
  flush_drops_rest            # the exhaustion flush keeps one magazine of a slot and drops the other
  live_take_load_then_store   # IOVA live table: free_fast loads the state, then clears it
  free_fast_caches_first      # IOVA free_fast caches the pfn before its life ends
  shelf_take_load_then_store  # CPU shelf take: load the place, then clear it (two takers, one magazine)
  shelf_put_load_then_store   # CPU shelf put: check the place is empty, then store (overwrites a magazine)
  refill_replaces_loaded      # a batch refill replaces its slot's loaded magazine without re-checking it
  waiter_gives_up             # an allocation that waited for another's exhaustion flush returns None
)
# The scenario that exercises each mutant's protocol: run first by both checkers.
declare -A FIRST=(
  [slot_release_relaxed]=busy_slot_loose
  [tag_not_bumped]=depot_aba
  [trim_no_recheck]=depot_shrink_one_per_tick
  [local_drop_forgets_previous]=local_drop_race
  [busy_slot_waits]=busy_slot_loose
  [fixed_cap_load_then_push]=fixed_overflow
  [alloc_loose_forgets_rest]=busy_slot_loose
  [steal_unowned]=exhaustion_retry
  [flush_flag_stays_set]=exhaustion_retry
  [flush_drops_rest]=exhaustion_retry
  [live_take_load_then_store]=iova_double_free_race
  [free_fast_caches_first]=iova_double_free_race
  [shelf_take_load_then_store]=shelf_race
  [shelf_put_load_then_store]=shelf_race
  [refill_replaces_loaded]=refill_race
  [waiter_gives_up]=exhaustion_race
)
SC_BLIND=(slot_release_relaxed)
if [ $# -gt 0 ]; then MUTANTS=("$@"); else MUTANTS=("${ALL[@]}"); fi
WRAPPER=$PWD/loom-tests/mutant-rustc.sh
PER_TEST_TIMEOUT=${MUTANT_TEST_TIMEOUT:-300}
MUTANT_OPT_LEVEL=${MUTANT_OPT_LEVEL:-0}
SHUTTLE_ITERATIONS=${SHUTTLE_ITERATIONS:-10000}
export SHUTTLE_ITERATIONS

# build <checker> <mutant> <copy>: builds the checker's test binary with the mutant, in the
# target directory of run.sh (the dependencies are built once), and copies it to <copy>.
# The wrapper's cfg is not part of cargo's fingerprint, so the crate is rebuilt explicitly,
# here and on exit. Only the checker's own test target is built (not the crate's unit tests
# nor the other checker's file), with `magazine` and the scenarios at MUTANT_OPT_LEVEL
# (default 0): the same code, debug assertions and checks, with no LLVM optimisation;
# every mutant was still caught by the same first scenario in 0-1 s, as at opt-levels 1
# and 3. On 2026-12-07 four mutants (eight builds) took 85-87 s at opt-level 1 and
# 18-23 s at 0, run back to back; all sixteen 48 s at 0.
# The dependencies (loom, shuttle, crossbeam) keep the release profile, so they are not
# rebuilt.
OPT=(--config "profile.release.package.magazine.opt-level=$MUTANT_OPT_LEVEL"
  --config "profile.release.package.magazine-loom-tests.opt-level=$MUTANT_OPT_LEVEL")
build() {
  local checker=$1 mutant=$2 copy=$3 log flags=() rustflags= binary
  log=$(mktemp)
  case $checker in
    loom) rustflags="--cfg loom" ;;
    shuttle) flags=(--features shuttle) ;;
  esac
  export CARGO_TARGET_DIR=$TARGET/$checker
  mkdir -p "$CARGO_TARGET_DIR"
  touch "$CARGO_TARGET_DIR/.mutant-built"
  cargo clean --release -p magazine >/dev/null 2>&1 || true
  if ! RUSTFLAGS=$rustflags RUSTC_WRAPPER=$WRAPPER MAGAZINE_MUTANT=$mutant \
    cargo test --release -p magazine-loom-tests --test "$checker" --no-run "${flags[@]}" \
    "${OPT[@]}" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  binary=$(sed -n "s|.*Executable tests/$checker.rs (\(.*\))|\1|p" "$log" | tail -n 1)
  rm -f "$log"
  [ -x "$binary" ] && cp "$binary" "$copy"
}

# builder <checker>: builds every mutant in turn for one checker, in that checker's target
# directory, while the other checker's builder and the hunts run beside it (two builders
# keep both cores busy; a hunt starts as soon as its binary is there). Each build ends with
# <work>/<checker>.<mutant> and its status in <work>/<checker>.<mutant>.status.
builder() {
  local checker=$1 mutant status
  for mutant in "${MUTANTS[@]}"; do
    if [ "$checker" = shuttle ] && is_sc_blind "$mutant"; then continue; fi
    status=0
    build "$checker" "$mutant" "$work/$checker.$mutant" 2>"$work/$checker.$mutant.log" || status=$?
    echo "$status" >"$work/$checker.$mutant.status"
  done
}

is_sc_blind() { printf '%s\n' "${SC_BLIND[@]}" | grep -qx "$1"; }

# wait_built <checker> <mutant>: waits for the builder; fails if the build failed.
wait_built() {
  local status=$work/$1.$2.status
  while [ ! -e "$status" ]; do sleep 1; done
  [ "$(cat "$status")" = 0 ] || { cat "$work/$1.$2.log" >&2; return 1; }
}

# hunt <checker> <binary> <first test>: runs the suite, the first test first, until the
# first failure. Prints "caught <test> <seconds> <first line of the panic>" or
# "escaped - <seconds>".
hunt() {
  local checker=$1 binary=$2 first=$3 start=$SECONDS settings test setting log status
  case $checker in
    loom) settings=(LOOM_MAX_PREEMPTIONS=2 LOOM_MAX_PREEMPTIONS=3) ;;
    shuttle) settings=(SHUTTLE_ITERATIONS="$SHUTTLE_ITERATIONS") ;;
  esac
  mapfile -t tests < <(echo "$first"
    "$binary" --list 2>/dev/null | sed -n 's/: test$//p' | grep -vx "$first")
  log=$(mktemp)
  for setting in "${settings[@]}"; do
    for test in "${tests[@]}"; do
      status=0
      env "$setting" timeout "$PER_TEST_TIMEOUT" "$binary" --exact "$test" --test-threads=1 \
        >"$log" 2>&1 || status=$?
      if [ "$status" -ne 0 ]; then
        local why
        if [ "$status" -eq 124 ]; then
          why="timed out after ${PER_TEST_TIMEOUT}s"
        else
          why=$(grep -m1 -A1 'panicked at' "$log" | tail -n 1 | cut -c1-90 || true)
          # No panic: the process died (e.g. the allocator's "double free detected" abort).
          [ -n "$why" ] || why="$(grep -m1 -i 'free\|abort\|signal' "$log" | cut -c1-70 || true)"
          why="${why:+$why, }exit status $status"
        fi
        echo "caught $test/${setting#*=} $((SECONDS - start)) $why"
        rm -f "$log"
        return
      fi
    done
  done
  rm -f "$log"
  echo "escaped - $((SECONDS - start))"
}

# Leave no mutant behind in the shared target directories (the builders stopped first).
restore() {
  local dir pid
  for pid in "${builders[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${work:-}"
  for dir in "$TARGET/loom" "$TARGET/shuttle"; do
    if [ -e "$dir/.mutant-built" ]; then
      CARGO_TARGET_DIR=$dir cargo clean --release -p magazine >/dev/null 2>&1 || true
      rm -f "$dir/.mutant-built"
    fi
  done
}
builders=()
trap restore EXIT

report=$TARGET/mutants.md
mkdir -p "$TARGET"
work=$(mktemp -d)
{
  echo "| mutant | loom (fast, bound 2 then 3) | shuttle ($SHUTTLE_ITERATIONS iterations) | first panic |"
  echo "|---|---|---|---|"
} >"$report"
failed=0
builder loom &
builders+=($!)
builder shuttle &
builders+=($!)
for mutant in "${MUTANTS[@]}"; do
  echo "--- mutant $mutant"
  row="| \`$mutant\` |"
  caught=0
  why_any=
  for checker in loom shuttle; do
    if [ "$checker" = shuttle ] && is_sc_blind "$mutant"; then
      echo "  $checker: not run (an ordering bug; shuttle runs every atomic as SeqCst)"
      row="$row not run: an ordering bug, invisible to shuttle's SeqCst schedules |"
      continue
    fi
    wait_built "$checker" "$mutant" || { echo "  $checker: the build with $mutant failed"; exit 1; }
    binary=$work/$checker.$mutant
    read -r verdict test seconds why < <(hunt "$checker" "$binary" "${FIRST[$mutant]:?no FIRST scenario for $mutant}")
    echo "  $checker: $verdict $test in ${seconds}s ${why:-}"
    if [ "$verdict" = caught ]; then
      caught=1
      row="$row caught by \`$test\` in ${seconds} s |"
      [ -n "$why_any" ] || why_any="$checker: ${why:-}"
    else
      row="$row escaped (whole suite, ${seconds} s) |"
    fi
    rm -f "$binary"
  done
  echo "$row ${why_any//|/\\|} |" >>"$report"
  if [ "$caught" -eq 0 ]; then
    echo "  MUTANT $mutant ESCAPED EVERY CHECKER"
    failed=1
  fi
done
echo
cat "$report"
exit "$failed"
