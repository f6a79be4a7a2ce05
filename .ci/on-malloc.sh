#!/usr/bin/env bash
# The crate's own suite on the global allocator built on it: every unit and integration
# test binary of `magazine` links `magazine_malloc` under `--cfg magazine_test_malloc`, and
# that crate then declares `MagazineMalloc` as the `#[global_allocator]` (the doc tests,
# built by rustdoc, keep the system allocator). The suite's caches, their magazines, depot
# nodes and epoch records, and the tests' own data all live in MagazineMalloc; thread
# exits included. In release, with the allocator's own tests (one build; the debug runs
# are in the test command): the stress tests at full speed. `stress.rs` checks that its
# allocations reach MagazineMalloc's caches.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR=target/on-malloc
export RUSTFLAGS="--cfg magazine_test_malloc"
cargo test -p magazine -p magazine-malloc --release --lib --tests

# The seeded bugs the allocator's own tests must catch, built in through the same rustc
# wrapper as the crate's mutants (it adds `--cfg magazine_mutant=...` to `magazine_malloc`).
export RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh
export CARGO_TARGET_DIR=target/malloc-mutant
unset RUSTFLAGS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
for entry in "bump_repeats_last conservation" "spans_never_return trim" \
  "realloc_shrinks_in_place realloc" "large_realloc_ignores_alignment realloc" \
  "no_fork_handlers fork" "no_reserve out_of_memory" "no_exit_marker out_of_memory" \
  "pages_never_unmapped pages" "large_kept_for_ever large"; do
  read -r mutant test <<<"$entry"
  cargo clean -p magazine-malloc >/dev/null 2>&1 || true
  MAGAZINE_MUTANT=$mutant cargo test -p magazine-malloc --test "$test" --no-run >"$log" 2>&1 ||
    { cat "$log"; exit 1; }
  # No backtrace: symbolising one allocates, and a heap with wrong books may crash there
  # before the test's message is printed.
  if MAGAZINE_MUTANT=$mutant RUST_BACKTRACE=0 timeout 120 cargo test -p magazine-malloc --test "$test" >"$log" 2>&1; then
    echo "malloc: MUTANT $mutant ESCAPED"
    failed=1
  else
    # The assertion's message, else the signal that ended the test binary.
    message=$(grep -m1 -A1 'panicked at' "$log" | tail -n 1 | cut -c1-100 || true)
    [ -n "$message" ] || message=$(grep -m1 -o 'signal: [^)]*' "$log" || true)
    echo "malloc: caught $mutant: $message"
  fi
done
cargo clean -p magazine-malloc >/dev/null 2>&1 || true
exit $failed
