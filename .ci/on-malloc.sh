#!/usr/bin/env bash
# The crate's own suite on the global allocator built on it: every unit and integration
# test binary of `magazine` links `magazine_malloc` under `--cfg magazine_test_malloc`, and
# that crate then declares `MagazineMalloc` as the `#[global_allocator]` (the doc tests,
# built by rustdoc, keep the system allocator). The suite's caches, their magazines, depot
# nodes and epoch records, and the tests' own data all live in MagazineMalloc; thread
# exits included. In release, with the allocator's own tests (one build; the debug runs
# are in the test command): the stress tests at full speed. `stress.rs` checks that its
# allocations reach MagazineMalloc's caches.
#
# The cfg is set by a rustc wrapper on those two packages alone (not in RUSTFLAGS, which
# rebuilt every dependency for it in a target directory of its own: 113 s of the step's
# 197 s on 2026-12-07), in the default target directory, whose release dependencies the
# later release steps (valgrind, rseq, bench smoke) then find built. The wrapper's cfg is
# not in cargo's fingerprint: the two packages' artifacts are named apart from the plain
# release builds by a profile setting at its release default (`codegen-units = 16`), so
# neither build is ever taken for the other's.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
TEST_MALLOC_PROFILE=(--config 'profile.release.package.magazine.codegen-units=16'
  --config 'profile.release.package.magazine-malloc.codegen-units=16')
RUSTC_WRAPPER=$PWD/.ci/test-malloc-rustc.sh \
  cargo test "${TEST_MALLOC_PROFILE[@]}" -p magazine -p magazine-malloc --release --lib --tests

# The seeded bugs the allocator's own tests must catch, built in through the same rustc
# wrapper as the crate's mutants (it adds `--cfg magazine_mutant=...` to `magazine_malloc`),
# in the test command's target directory, whose dependencies are built already, with the
# allocator's artifacts named apart by a profile setting at its default value (as in
# soundness-mutants.sh): a mutant build is never taken for the real crate's.
export RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh
MUTANT_PROFILE=(--config 'profile.dev.package.magazine-malloc.split-debuginfo="off"'
  --config 'profile.dev.package.magazine-malloc-preload.split-debuginfo="off"')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
# The allocator's tests unmutated first (built by the test command already, unless a step
# before cleaned `magazine`), so that `magazine` itself is never built with a mutant's cfg.
cargo test -p magazine-malloc -p magazine-malloc-preload --no-run >"$log" 2>&1 || { cat "$log"; exit 1; }
# Each entry: the mutant, the package whose test must catch it, the test (`lib`: its unit
# tests). The C layer's (`magazine-malloc-preload`) are caught by its tests of the C
# functions' semantics.
for entry in "bump_repeats_last magazine-malloc conservation" \
  "node_pops_twice magazine-malloc conservation" \
  "spans_never_return magazine-malloc trim" "free_spans_kept_for_ever magazine-malloc trim" \
  "realloc_shrinks_in_place magazine-malloc realloc" \
  "large_realloc_ignores_alignment magazine-malloc realloc" \
  "no_fork_handlers magazine-malloc fork" "no_reserve magazine-malloc out_of_memory" \
  "no_exit_marker magazine-malloc out_of_memory" "pages_never_unmapped magazine-malloc pages" \
  "large_kept_for_ever magazine-malloc large" \
  "block_offset_unchecked magazine-malloc by_address" \
  "auto_trim_never_due magazine-malloc auto_trim" \
  "null_while_building magazine-malloc lib" \
  "calloc_wraps magazine-malloc-preload c_api" \
  "usable_size_short magazine-malloc-preload c_api"; do
  read -r mutant package test <<<"$entry"
  target=(--test "$test")
  [ "$test" != lib ] || target=(--lib)
  cargo clean -p magazine-malloc -p magazine-malloc-preload >/dev/null 2>&1 || true
  MAGAZINE_MUTANT=$mutant cargo test "${MUTANT_PROFILE[@]}" -p "$package" "${target[@]}" --no-run >"$log" 2>&1 ||
    { cat "$log"; exit 1; }
  # No backtrace: symbolising one allocates, and a heap with wrong books may crash there
  # before the test's message is printed.
  if MAGAZINE_MUTANT=$mutant RUST_BACKTRACE=0 timeout 120 \
    cargo test "${MUTANT_PROFILE[@]}" -p "$package" "${target[@]}" >"$log" 2>&1; then
    echo "malloc: MUTANT $mutant ESCAPED"
    failed=1
  else
    # The assertion's message, else a child's failed check, else the signal that ended
    # the test binary.
    message=$(grep -m1 -A1 'panicked at' "$log" | tail -n 1 | cut -c1-100 || true)
    [ -n "$message" ] || message=$(grep -m1 -o 'check failed: .*' "$log" | cut -c1-100 || true)
    [ -n "$message" ] || message=$(grep -m1 -o 'signal: [^)]*' "$log" || true)
    echo "malloc: caught $mutant: $message"
  fi
done
cargo clean -p magazine-malloc -p magazine-malloc-preload >/dev/null 2>&1 || true
exit $failed
