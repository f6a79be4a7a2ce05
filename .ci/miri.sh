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
# test binaries run in two groups side by side (one build, shared: cargo takes its lock only
# to build), balanced by their interpretation time.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/nightly.sh
need_nightly miri
start=$SECONDS
# Builds Miri's sysroot from rust-src on first use (its dependencies come from crates.io).
cargo +nightly miri setup
seeds=${MIRI_SEEDS:-1}
export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks -Zmiri-many-seeds=0..$seeds"
GROUPS_OF_TESTS=(
  "--test stress --test reaper --test contract --test regressions --test unwinding"
  "--lib --test cache --test iova_stress"
)
all=()
for group in "${GROUPS_OF_TESTS[@]}"; do read -ra flags <<<"$group"; all+=("${flags[@]}"); done
cargo +nightly miri test -p magazine "${all[@]}" --no-run
work=$(mktemp -d)
pids=()
for index in "${!GROUPS_OF_TESTS[@]}"; do
  read -ra flags <<<"${GROUPS_OF_TESTS[$index]}"
  # --report-time: Miri's clock is virtual under isolation, so the times it prints measure
  # interpretation work, whatever else the machine is doing.
  cargo +nightly miri test -p magazine "${flags[@]}" -- -Zunstable-options --report-time \
    >"$work/$index.log" 2>&1 &
  pids+=($!)
done
failed=0
for index in "${!pids[@]}"; do
  status=0
  wait "${pids[$index]}" || status=$?
  echo "--- miri group: ${GROUPS_OF_TESTS[$index]} (exit status $status)"
  cat "$work/$index.log"
  [ "$status" -eq 0 ] || failed=1
done
rm -rf "$work"
[ "$failed" -eq 0 ] || { echo "::: miri: FAILED"; exit 1; }
echo "::: miri: ok in $((SECONDS - start)) s ($seeds seeds, build included)"
