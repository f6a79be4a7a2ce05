#!/usr/bin/env bash
# The restartable-sequence fast path on the real assembly (tests/rseq.rs, release build),
# then its seeded bugs, which the same test must catch:
#
#   fence_skipped           a fenced take of another CPU's slot skips the membarrier, so a
#                           sequence that read FREE before the claim commits while the
#                           taker owns the slot (heap corruption or a lost item)
#   commit_before_read      the pop of a one-word item commits before it loads the item, so
#                           an abort between the two loses the item (`one_word_items`)
#   count_before_commit     the push of a copied item counts its hit with a store of its
#                           own before the commit, so an abort in between counts it twice
#                           (`hits_are_counted_once`)
#   alloc_hits_overflow     the pop counts its hit without the guard bit, so the allocation
#                           hits overflow into the free hits before an owner folds them
#                           (`hits_are_counted_once`)
#   claim_takes_loaded      a steal's claim (no fence) moves the loaded magazine too, into
#                           which a sequence in flight still commits (`exhausted_pool`)
#   take_commits_with_store the take sequence commits with a plain store of TAKEN, which
#                           overwrites a claim's token: two owners (`exhausted_pool`)
#   plain_take_accepts_free a take of an active slot (FREE) goes the way of a plain one
#                           (PLAIN): a CAS with no claim or fence, while a sequence that
#                           read FREE may still commit (`slots_beyond_the_cpus_take_no_fence`)
#   abort_skips_rearm       the abort handler restarts past the store of `rseq_cs`, which
#                           the kernel cleared when it aborted the section: the retry runs
#                           unarmed, and a signal inside it lets a stale commit through
#                           (`abort_path_rearms_the_section`: a signal handler that finds
#                           the interrupted thread inside a section, or an item duplicated
#                           or lost by the handler's hits on the same slot)
#   activity_ignores_sequence_hits  idle-slot reclaim counts only the hits owners folded,
#                           so a slot that only sequences used during a trim interval is
#                           reclaimed as idle (`idle_reclaim_keeps_a_slot_that_only_sequences_use`)
#   pop_ignores_empty       the pop of a one-word item tests only the guard bit, not the
#                           borrow out of an empty magazine's length: it reads a cell past
#                           the storage and commits a length of u32::MAX (`one_word_items`)
#
# Not here: an acknowledgement made from another CPU. Its race needs another CPU's
# sequence to stay in flight through a whole claim, acknowledgement and take, which a
# stress test on real CPUs does not reach; the SPIN model proofs/rseq.pml checks the
# acknowledgement instead (control ACK_FROM_ELSEWHERE).
#
# Where the cache cannot run sequences (another platform, an old kernel, valgrind), the
# test checks the slot protocol and the mutants are skipped, saying so.
# The mutants are built through the RUSTC_WRAPPER of loom-tests/mutants.sh, which sets the
# mutant's cfg on the `magazine` crate alone, in the target directory of the test above, so
# the dependencies are built once; `magazine`'s mutant artifacts are named apart by a
# profile setting at its default value (as in soundness-mutants.sh), so a mutant build is
# never taken for the real crate's. A mutant with a test of its own (ONLY below) runs that test alone. Measured on the
# 2-core machine: about 4 s for the test; the first mutant build about 45 s, each further
# one about 15 s.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
cargo test --release --test rseq -- --nocapture >"$log" 2>&1 || status=$?
grep -E '^test |restartable|signals|test result' "$log" || true
if [ "$status" -ne 0 ]; then
  # The failure's own lines (the panics and the summary), which the filter above drops.
  grep -E -A12 'panicked at|^failures:' "$log" | head -80
  exit "$status"
fi
if ! grep -q 'restartable sequences: true' "$log"; then
  echo "rseq: the cache does not run restartable sequences here; mutants skipped"
  exit 0
fi

export RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh
MUTANT_PROFILE=(--config 'profile.release.package.magazine.split-debuginfo="off"')
# The test written for a mutant, run alone (the others run the whole binary).
declare -A ONLY=(
  [count_before_commit]=hits_are_counted_once
  [alloc_hits_overflow]=hits_are_counted_once
  [abort_skips_rearm]=abort_path_rearms_the_section
  [activity_ignores_sequence_hits]=idle_reclaim_keeps_a_slot_that_only_sequences_use
  [pop_ignores_empty]=one_word_items
)
failed=0
for mutant in fence_skipped commit_before_read count_before_commit alloc_hits_overflow \
  claim_takes_loaded take_commits_with_store plain_take_accepts_free abort_skips_rearm \
  activity_ignores_sequence_hits pop_ignores_empty; do
  start=$SECONDS
  # The wrapper's cfg is not in cargo's fingerprint: rebuild the crate for each mutant.
  cargo clean --release -p magazine >/dev/null 2>&1 || true
  MAGAZINE_MUTANT=$mutant cargo test "${MUTANT_PROFILE[@]}" --release --test rseq --no-run >"$log" 2>&1 ||
    { cat "$log"; exit 1; }
  caught=
  # A bug in a few-instruction window: up to three runs of 4 * 10^7 operations.
  for attempt in 1 2 3; do
    # A correct build passes in seconds; a hang (a corrupted magazine can loop forever)
    # is a catch too, after 120 s.
    status=0
    MAGAZINE_MUTANT=$mutant MAGAZINE_RSEQ_OPS=40000000 timeout 120 \
      cargo test "${MUTANT_PROFILE[@]}" --release --test rseq -- ${ONLY[$mutant]:-} >"$log" 2>&1 || status=$?
    [ "$status" -ne 124 ] || echo "killed after 120 s: a hang" >>"$log"
    if [ "$status" -ne 0 ]; then
      caught=$attempt
      break
    fi
  done
  if [ -n "$caught" ]; then
    what=$(grep -m1 -E "panicked|malloc\(\)|corruption|assertion|SIG|killed after" "$log" | cut -c1-120 || true)
    # A panic's message is on the line after its location.
    case $what in *panicked*) what="${what%:}: $(grep -m1 -A1 panicked "$log" | tail -n 1 | cut -c1-120)" ;; esac
    echo "rseq: caught $mutant on run $caught in $((SECONDS - start)) s: $what"
  else
    echo "rseq: MUTANT $mutant ESCAPED three runs"
    failed=1
  fi
done
# Leave no mutant build behind.
cargo clean --release -p magazine >/dev/null 2>&1 || true
exit $failed
