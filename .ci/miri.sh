#!/usr/bin/env bash
# Under Miri: the library's unit tests, the contract, behaviour (tests/cache.rs), regression
# and reaper tests, and the stress tests (tests/stress.rs, tests/iova_stress.rs), whose
# sizes shrink under `cfg(miri)`. Miri reports undefined behaviour (use-after-free, double
# free, invalid values, aliasing violations) and data races in the schedules it explores;
# each seed is another schedule and another weak-memory outcome. Not run: the loom-tests
# crate (its tests need `--cfg loom`), the benches, the doc tests (API examples), the soak
# (ignored everywhere) and the IOVA property and error tests (iova_fast, iova_model,
# iova_errors: single-threaded tree logic, far too slow interpreted; iova_stress covers the
# IOVA live table's unsafe code).
#
# Tree borrows, not stacked borrows: crossbeam-epoch trips stacked borrows inside itself (a
# retag of its `Local` in internal.rs, crossbeam-rs/crossbeam#545 and #878), so Miri would
# stop in crossbeam before reaching this crate's code; crossbeam's own CI runs Miri with
# tree borrows for that reason (crossbeam-rs/crossbeam#996).
# crossbeam-epoch keeps its pointers as tagged integers: `-Zmiri-permissive-provenance`
# accepts the integer-to-pointer casts (Miri warns about each otherwise), and Miri cannot
# follow such pointers from crossbeam's global collector, so the garbage still deferred at
# exit (our depot nodes among it) looks leaked (crossbeam-rs/crossbeam#579,
# rust-lang/miri#1618): `-Zmiri-ignore-leaks`. Leaks are checked by LeakSanitizer in
# sanitizers.sh and by valgrind (valgrind.sh), and lost items by the tracking source.
# Isolation stays on: nothing here needs the host's clock, files or environment (the one
# test that reads files is ignored under Miri).
#
#   bash .ci/miri.sh            (MIRI_SEEDS=N for N seeds, default 1)
#
# One seed by default, to keep `.ci/run` inside its budget; more seeds explore more
# schedules (MIRI_SEEDS=8 for a deeper run by hand). Miri interprets on one core, so the
# tests run as separate processes, two at a time (one build, shared: cargo takes its lock
# only to build), the longest first, so that both cores stay busy to the end: each
# process takes the next job of the list when it ends. The unwinding sweep, one of the
# longest tests, runs apart from the rest of its file.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/nightly.sh
need_nightly miri
start=$SECONDS
# Builds Miri's sysroot from rust-src on first use (its dependencies come from crates.io).
cargo +nightly miri setup
seeds=${MIRI_SEEDS:-1}
export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks -Zmiri-many-seeds=0..$seeds"
JOBS=${MIRI_JOBS:-$(nproc)}
sweep_slot=every_source_call_may_panic_under_the_slot_protocol
sweep_rseq=every_source_call_may_panic_with_restartable_sequences
# The cargo arguments of each process (test-binary arguments after `--`), in the order they
# start, by their wall times on the 2-core machine (2026-12-07, one seed): stress 100 s, the
# slot protocol's sweep 59 s, iova_stress 49 s, cache 44 s, the unit tests 26 s (68 s
# before the IOVA tree's batch test went from ten rounds to two), regressions 30 s, the
# rest of unwinding 11 s, reaper 9 s, contract 2 s.
# Not the sweep with restartable sequences: under Miri the cache never runs them
# (`sequences_available` is false under `cfg(miri)`), so that sweep ran the very same
# script on the slot protocol a second time (58 s; the same code paths, another schedule
# at most: 61.3 s against 62.0 s of Miri's clock).
MIRI_JOBS_LIST=(
  "--test stress"
  "--test unwinding -- --exact $sweep_slot"
  "--test iova_stress"
  "--test cache"
  "--lib"
  "--test regressions"
  "--test unwinding -- --skip $sweep_slot --skip $sweep_rseq"
  "--test reaper"
  "--test contract"
)
cargo +nightly miri test -p magazine --lib --test stress --test reaper --test contract \
  --test regressions --test unwinding --test cache --test iova_stress --no-run
work=$(mktemp -d)
for index in "${!MIRI_JOBS_LIST[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  read -ra flags <<<"${MIRI_JOBS_LIST[$index]}"
  # --report-time: Miri's clock is virtual under isolation, so the times it prints measure
  # interpretation work, whatever else the machine is doing.
  [[ " ${flags[*]} " == *" -- "* ]] || flags+=(--)
  (
    job_start=$SECONDS
    status=0
    cargo +nightly miri test -p magazine "${flags[@]}" -Zunstable-options --report-time \
      >"$work/$index.log" 2>&1 || status=$?
    echo "$status $((SECONDS - job_start))" >"$work/$index.status"
  ) &
done
wait
failed=0
for index in "${!MIRI_JOBS_LIST[@]}"; do
  read -r status seconds <"$work/$index.status"
  # A filter that matches no test (a renamed test) must not pass as a run.
  if [ "$status" -eq 0 ] && grep -q '^test result: ok\. 0 passed' "$work/$index.log"; then
    echo "miri: no test ran for ${MIRI_JOBS_LIST[$index]}" >>"$work/$index.log"
    status=1
  fi
  echo "--- miri: ${MIRI_JOBS_LIST[$index]} (exit status $status, $seconds s)"
  cat "$work/$index.log"
  [ "$status" -eq 0 ] || failed=1
done
rm -rf "$work"
[ "$failed" -eq 0 ] || { echo "::: miri: FAILED"; exit 1; }
echo "::: miri: ok in $((SECONDS - start)) s ($seeds seeds, build included)"
