#!/usr/bin/env bash
# The restartable-sequence fast path on the real assembly (tests/rseq.rs, release build),
# then its seeded bugs, which the same test must catch:
#
#   fence_skipped       a fenced take of another CPU's slot skips the membarrier, so a
#                       sequence that read FREE before the take commits while the taker
#                       owns the slot (heap corruption or a lost item)
#   commit_before_read  the pop of a one-word item commits before it loads the item, so an
#                       abort between the two loses the item (`one_word_items`)
#   count_before_commit the push of a copied item counts its hit inside its own section,
#                       before the commit, so an abort in between counts it twice
#                       (`hits_are_counted_once`)
#
# Where the cache cannot run sequences (another platform, an old kernel, valgrind), the
# test checks the slot protocol and the mutants are skipped, saying so.
# Measured on the 2-core machine: about 3 s for the test, 80-90 s per mutant build.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
log=$(mktemp)
trap 'rm -f "$log"' EXIT

cargo test --release --test rseq -- --nocapture 2>&1 | tee "$log" | grep -E '^test |restartable|signals|test result'
if ! grep -q 'restartable sequences: true' "$log"; then
  echo "rseq: the cache does not run restartable sequences here; mutants skipped"
  exit 0
fi

failed=0
for mutant in fence_skipped commit_before_read count_before_commit; do
  start=$SECONDS
  RUSTFLAGS="--cfg magazine_mutant=\"$mutant\"" CARGO_TARGET_DIR="target/rseq-mutant-$mutant" \
    cargo test --release --test rseq --no-run >"$log" 2>&1 || { cat "$log"; exit 1; }
  caught=
  # A bug in a one-instruction window: up to three runs of 4 * 10^7 operations.
  for attempt in 1 2 3; do
    # A correct build passes in seconds; a hang (a corrupted magazine can loop forever)
    # is a catch too, after 120 s.
    status=0
    RUSTFLAGS="--cfg magazine_mutant=\"$mutant\"" CARGO_TARGET_DIR="target/rseq-mutant-$mutant" \
      MAGAZINE_RSEQ_OPS=40000000 timeout 120 cargo test --release --test rseq >"$log" 2>&1 \
      || status=$?
    [ "$status" -ne 124 ] || echo "killed after 120 s: a hang" >>"$log"
    if [ "$status" -ne 0 ]; then
      caught=$attempt
      break
    fi
  done
  if [ -n "$caught" ]; then
    what=$(grep -m1 -E "panicked|malloc\(\)|assertion|SIG|killed after" "$log" | cut -c1-120 || true)
    echo "rseq: caught $mutant on run $caught in $((SECONDS - start)) s: $what"
  else
    echo "rseq: MUTANT $mutant ESCAPED three runs"
    failed=1
  fi
done
exit $failed
