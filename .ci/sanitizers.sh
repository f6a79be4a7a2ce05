#!/usr/bin/env bash
# The stress tests under ThreadSanitizer, and the unit and integration tests of `magazine`
# under AddressSanitizer with LeakSanitizer on. Both rebuild std with the sanitizer (`-Zbuild-std`), so that
# std's own synchronisation (Mutex, channels, thread join) is seen and raises no false
# report. Optimised, with the crate's debug assertions on, each in its own target dir.
#
# ThreadSanitizer does not understand fences. crossbeam-epoch's build script sees the
# sanitizer (CARGO_CFG_SANITIZE) and sets `crossbeam_sanitize_thread`, under which it
# replaces its fences with acquire loads that TSan does understand; this crate's own code
# uses no fences. So no suppressions are needed, and there are none.
#
#   bash .ci/sanitizers.sh [tsan|asan]...     (default: both)
#
# Measured on the shared 2-core machine (upper bounds): 99 s with the builds cached; the
# first builds (std included) took 3.8 (TSan) and 6.3 (ASan) CPU-min. README has more.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/nightly.sh
need_nightly build-std
# The crate's debug assertions on, in an optimised build; for `magazine` only, so that std
# and the dependencies keep the release profile (changing it for them rebuilds them all).
DEBUG_ASSERTIONS=(--config 'profile.release.package.magazine.debug-assertions=true')
TARGET=x86_64-unknown-linux-gnu
ROOT=${SANITIZER_TARGET_ROOT:-target}

# sanitized <thread|address> <cargo test args...>: builds std and the tests with the
# sanitizer, in target/tsan or target/asan (tool-mutants.sh reuses target/tsan).
sanitized() {
  local name=$1; shift
  RUSTFLAGS="-Zsanitizer=$name" RUSTDOCFLAGS="-Zsanitizer=$name" \
    CARGO_TARGET_DIR="$ROOT/${name:0:1}san" \
    cargo +nightly test "$BUILD_STD" --target "$TARGET" --release "${DEBUG_ASSERTIONS[@]}" "$@"
}

tsan() {
  local start=$SECONDS
  # halt_on_error: the first race fails the run (TSan's default is to report and go on,
  # exiting 66 only at the end). The stress tests at their full size (10^6 allocations
  # each): a few seconds under TSan.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    sanitized thread -p magazine --test stress --test iova_stress
  echo "::: tsan: ok in $((SECONDS - start)) s (build included)"
}

asan() {
  local start=$SECONDS
  # The crate's own tests: every unit and integration test of `magazine` (the restartable
  # sequences, the fences, the failure modes and the depot's epoch included), optimised.
  # detect_leaks: LeakSanitizer fails the run on any leak at exit. The epoch test
  # (tests/depot_epoch.rs, the only reader of MAGAZINE_DEPOT_OPS) at the size that catches
  # a late pin (nightly.sh), its one run at that size on the real code: 17-18 s under
  # ASan on the shared 2-core machine, against 0.7 s at its default of 10^5.
  # allocator_may_return_null: a refused allocation is a null, as from the system
  # allocator (ASan aborts by default on a request beyond its maximum size): the crate's
  # fallible constructors and out-of-memory tests ask for such sizes on purpose.
  MAGAZINE_DEPOT_OPS=$DEPOT_EPOCH_OPS \
    ASAN_OPTIONS="detect_leaks=1 halt_on_error=1 allocator_may_return_null=1" \
    sanitized address -p magazine --lib --tests
  # Not the rest of the workspace, nor the doc tests (until 2026-12-07 they ran here too):
  # - `magazine-malloc`'s tests: its blocks and spans live in memory it maps itself, which
  #   ASan neither tracks nor poisons, so its own code's accesses go unchecked; the
  #   `magazine` caches it builds on are the code of the tests above. Building the
  #   workspace also rebuilt crossbeam-epoch, criterion and `magazine` with the workspace's
  #   features (90 s of the step on the 2-core machine).
  # - the C library's: they load the library into other programs (`dlopen` in the test,
  #   `LD_PRELOAD` into Python and coreutils), where ASan's runtime would have to come
  #   first in a process it was never linked into.
  # - the doc tests and examples: API examples, run natively by the test command; the
  #   doc tests' leaks of a cache kept in a `static` had to be suppressed here anyway.
  echo "::: asan: ok in $((SECONDS - start)) s (build included)"
}

if [ $# -eq 0 ]; then set -- tsan asan; fi
for tool in "$@"; do
  case $tool in
    tsan) tsan ;;
    asan) asan ;;
    *) echo "unknown sanitizer $tool (tsan or asan)" >&2; exit 2 ;;
  esac
done
