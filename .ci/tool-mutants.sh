#!/usr/bin/env bash
# Shows that Miri and the sanitizers can fail: builds `magazine` with a known bug (a
# `cfg(magazine_mutant = "...")` twin in src/, as loom-tests/mutants.sh does) and runs the
# tool on a stress test, which must stop with the tool's own report (not merely a failed
# assertion). Fails if a seeded bug escapes. Writes its table to target/tool-mutants.md.
#
#   link_frees_without_epoch a dropped magazine's depot node is freed at once, not
#                            through the epoch: Miri must report the use-after-free of a
#                            node a racing pop still reads (tests/stress.rs)
#   slot_release_relaxed     the slot hand-back store is Relaxed, not Release: TSan must
#                            report the race between two owners' accesses to the magazines
#                            (x86 emits the same instruction for both orderings, so only a
#                            tool that checks the memory model sees it; tests/stress.rs)
#   pop_reads_after_unpin    a depot pop's pin ends with its load of the stack's head, so it
#                            reads the head node's `next` unpinned: AddressSanitizer must
#                            report the heap-use-after-free of a node freed meanwhile by the
#                            epoch, once its magazine was dropped (tests/depot_epoch.rs, up
#                            to three runs: the read is a few instructions long). The node
#                            is freed only after the epoch has moved on twice, which Miri's
#                            schedules did not reach in 8 seeds of the stress tests (5 min)
#
#   bash .ci/tool-mutants.sh [miri|tsan|asan]...    (default: all three)
#
# Measured on the shared 2-core machine: 43-58 s for Miri and TSan with the builds cached.
# Each tool reuses the dependencies built by miri.sh or sanitizers.sh, rebuilding only
# `magazine` (run alone, without them, the Miri part builds them first: 141 s on
# 2026-12-07, load average 4-5).
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/nightly.sh
need_nightly miri
export CARGO_TERM_COLOR=never
# The crate's debug assertions on, in an optimised build; for `magazine` only, so that std
# and the dependencies keep the release profile (changing it for them rebuilds them all).
DEBUG_ASSERTIONS=(--config 'profile.release.package.magazine.debug-assertions=true')
TARGET=x86_64-unknown-linux-gnu
ROOT=${SANITIZER_TARGET_ROOT:-target}
mkdir -p "$ROOT"
report=$ROOT/tool-mutants.md
log=$(mktemp)
failed=0

# verdict <tool> <mutant> <status> <seconds> <pattern>: a row of the table from $log.
verdict() {
  local tool=$1 mutant=$2 status=$3 seconds=$4 pattern=$5 what where test
  if [ "$status" -ne 0 ] && grep -q "$pattern" "$log"; then
    # The report from its first words (Miri's output interleaves the seeds' test lines).
    what=$(grep -m1 -o "$pattern.*" "$log" | sed 's/ (pid=[0-9]*)//; s/ on address 0x.*//' | cut -c1-150)
    # Where: the first frame in this crate's src/ of Miri's backtrace, or the function of
    # TSan's earlier access.
    where=$(sed -n "/$pattern/,\$p" "$log" | grep -m1 -o 'at src/[^: ]*:[0-9]*' | sed 's/^at //' || true)
    [ -n "$where" ] || where=$(sed -n '/Previous write\|Previous read/{n;p;q}' "$log" \
      | sed 's/^ *#0 \(.*\) [^ ]*-cgu\..*/\1/' | perl -pe '1 while s/(\w)<[^<>]*>/$1/g')
    # ASan: the function of the bad access, and the one that freed the memory.
    if [ -z "$where" ] && grep -q 'freed by thread' "$log"; then
      where="$(sed -n "/$pattern/,\$p" "$log" | grep -m1 -oE '#0 0x[0-9a-f]+ in [^ ]+' \
        | sed 's/.* in //' || true),"
      where="$where freed by $(sed -n '/freed by thread/,$p' "$log" \
        | grep -m1 -oE 'in [^ ]*(epoch|Link)[^ ]*' | sed 's/^in //' || true)"
    fi
    what="$what${where:+ (at \`$where\`)}"
    what=${what//|/\\|}
    test=$(grep -o '^test [a-z_0-9]* \.\.\.' "$log" | tail -n 1 | cut -d' ' -f2 || true)
    # A sanitizer that halts the process leaves no test line: the test file.
    [ -n "$test" ] || test=$(grep -m1 -o 'Running [^ ]*' "$log" | cut -d' ' -f2 || true)
    echo "| \`$mutant\` | $tool | caught by \`${test:-?}\` in $seconds s | $what |" >>"$report"
    echo "  $tool: caught $mutant in ${seconds}s: $what"
  else
    echo "| \`$mutant\` | $tool | **escaped** (exit status $status, $seconds s) | |" >>"$report"
    echo "  $tool: MUTANT $mutant ESCAPED (exit status $status)"
    tail -n 30 "$log"
    failed=1
  fi
}

miri() {
  local mutant=link_frees_without_epoch status=0 start
  echo "--- miri: $mutant"
  # cargo-miri ignores RUSTC_WRAPPER, so the cfg goes in the rustflags of `magazine`'s
  # profile (nightly cargo's `-Zprofile-rustflags`), in miri.sh's target directory: only
  # `magazine` is rebuilt, the dependencies are miri.sh's, and the mutant's artifacts are
  # named apart from the real crate's by those flags.
  # The flags of miri.sh (the leak check off: a seed that finds no UB must not stop the
  # seeds after it on crossbeam's apparent leaks), more seeds, and 2,000 operations per
  # stress test instead of miri.sh's 500 (passed through Miri's isolation): more pops race.
  export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks"
  MIRIFLAGS+=" -Zmiri-many-seeds=0..${MIRI_MUTANT_SEEDS:-8} -Zmiri-env-forward=MAGAZINE_STRESS_OPS"
  export MAGAZINE_STRESS_OPS=2000
  local flags="[\"--cfg\", 'magazine_mutant=\"$mutant\"']"
  local profile=(-Zprofile-rustflags --config "profile.dev.package.magazine.rustflags=$flags")
  cargo +nightly miri test "${profile[@]}" -p magazine --test stress --no-run
  start=$SECONDS
  cargo +nightly miri test "${profile[@]}" -p magazine --test stress >"$log" 2>&1 || status=$?
  unset MAGAZINE_STRESS_OPS
  verdict Miri "$mutant" "$status" $((SECONDS - start)) 'Undefined Behavior'
}

# The TSan target dir of sanitizers.sh, with only `magazine` rebuilt (through the RUSTC_WRAPPER
# of mutants.sh, whose cfg is not in cargo's fingerprint: hence the explicit cleans).
clean_tsan_magazine() {
  CARGO_TARGET_DIR=$ROOT/tsan cargo +nightly clean --release --target "$TARGET" -p magazine \
    >/dev/null 2>&1 || true
}

tsan() {
  local mutant=slot_release_relaxed status=0 start
  echo "--- tsan: $mutant"
  trap clean_tsan_magazine EXIT
  clean_tsan_magazine
  export RUSTFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=$ROOT/tsan
  RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh MAGAZINE_MUTANT=$mutant \
    cargo +nightly test "$BUILD_STD" --target "$TARGET" --release "${DEBUG_ASSERTIONS[@]}" -p magazine --test stress --no-run
  start=$SECONDS
  TSAN_OPTIONS="halt_on_error=1" \
    RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh MAGAZINE_MUTANT=$mutant \
    cargo +nightly test "$BUILD_STD" --target "$TARGET" --release "${DEBUG_ASSERTIONS[@]}" -p magazine --test stress \
    -- --test-threads=1 >"$log" 2>&1 || status=$?
  unset RUSTFLAGS CARGO_TARGET_DIR
  verdict ThreadSanitizer "$mutant" "$status" $((SECONDS - start)) 'WARNING: ThreadSanitizer'
  clean_tsan_magazine
}

# The ASan target dir of sanitizers.sh, with only `magazine` rebuilt, as for TSan.
clean_asan_magazine() {
  CARGO_TARGET_DIR=$ROOT/asan cargo +nightly clean --release --target "$TARGET" -p magazine \
    >/dev/null 2>&1 || true
}

asan() {
  local mutant=pop_reads_after_unpin status=0 start attempt
  echo "--- asan: $mutant"
  trap 'clean_tsan_magazine; clean_asan_magazine' EXIT
  clean_asan_magazine
  export RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=$ROOT/asan
  RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh MAGAZINE_MUTANT=$mutant \
    cargo +nightly test "$BUILD_STD" --target "$TARGET" --release "${DEBUG_ASSERTIONS[@]}" -p magazine --test depot_epoch --no-run
  start=$SECONDS
  # $DEPOT_EPOCH_OPS (nightly.sh) operations per worker: a whole run takes 17-18 s under
  # ASan, a caught one stops at the report; up to three runs.
  for attempt in 1 2 3; do
    status=0
    MAGAZINE_DEPOT_OPS=$DEPOT_EPOCH_OPS ASAN_OPTIONS="detect_leaks=1 halt_on_error=1" \
      RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh MAGAZINE_MUTANT=$mutant \
      cargo +nightly test "$BUILD_STD" --target "$TARGET" --release "${DEBUG_ASSERTIONS[@]}" -p magazine --test depot_epoch \
      >"$log" 2>&1 || status=$?
    ! grep -q 'ERROR: AddressSanitizer' "$log" || break
  done
  echo "  asan: $attempt run(s)"
  unset RUSTFLAGS CARGO_TARGET_DIR
  verdict AddressSanitizer "$mutant" "$status" $((SECONDS - start)) 'ERROR: AddressSanitizer'
  clean_asan_magazine
}

{
  echo "| mutant | tool | verdict (time of the run, build excluded) | first report |"
  echo "|---|---|---|---|"
} >"$report"
if [ $# -eq 0 ]; then set -- miri tsan asan; fi
for tool in "$@"; do
  case $tool in
    miri) miri ;;
    tsan) tsan ;;
    asan) asan ;;
    *) echo "unknown tool $tool (miri, tsan or asan)" >&2; exit 2 ;;
  esac
done
rm -f "$log"
echo
cat "$report"
exit "$failed"
