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
#   bash .ci/miri.sh            (MIRI_SEEDS=N for N seeds, default 2)
#
# Measured on the shared 2-core machine (upper bounds): 855 s wall, 8.2 CPU-min, with the
# builds cached; a first run adds `miri setup` (45 s) and the build (100 s). README has more.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/nightly.sh
need_nightly miri
start=$SECONDS
# Builds Miri's sysroot from rust-src on first use (its dependencies come from crates.io).
cargo +nightly miri setup
seeds=${MIRI_SEEDS:-2}
export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks -Zmiri-many-seeds=0..$seeds"
# --report-time: Miri's clock is virtual under isolation, so the times it prints measure
# interpretation work, whatever else the machine is doing.
cargo +nightly miri test -p magazine --lib --test contract --test cache --test regressions \
  --test reaper --test stress --test iova_stress -- -Zunstable-options --report-time
echo "::: miri: ok in $((SECONDS - start)) s ($seeds seeds, build included)"
