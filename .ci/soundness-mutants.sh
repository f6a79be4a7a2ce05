#!/usr/bin/env bash
# The soundness regressions catch the defects they were written for: builds `magazine`
# with each defect put back (a `cfg(magazine_mutant = "...")` twin in src/, set by the
# RUSTC_WRAPPER of loom-tests/mutants.sh on this crate alone) and runs the test that pins
# it down, which must fail (a hang, stopped after 60 s, counts as caught). Fails if one
# escapes.
#
#   slot_drop_skips_fold     a slot drops its magazines with the sequences' hits still in
#                            the loaded magazine's length word (a source panicking in the
#                            cache's drop): an out-of-bounds read
#   gap_slots_unfenced       slots at and above the configured CPU count are taken without
#                            a fence while CPUs beyond the count run sequences on them
#   failed_fence_keeps_claim a failed `membarrier` panics with the claim out of its guard,
#                            which leaves the slot claimed for ever
#   held_item_dropped        an item taken out of the cache unwinds away when the source
#                            panics on a refused magazine (the busy-slot and exhaustion paths)
#   flush_drains_unbounded   a flush drains the depot until it is empty, chasing producers
#   node_check_panics        a depot node whose address does not fit the head word panics
#                            (with the magazine out of its place) instead of refusing
#   refill_unguarded         a batch refill fills its magazine outside the rescue guard, so
#                            a source that panics half way drops the items it handed
#
# The first three need restartable sequences and two CPUs: where the tests skip (they say
# so), those mutants are skipped too. Debug builds (the bugs show as failed assertions or
# the standard library's precondition checks). Measured on the 2-core machine: about 15 s
# a mutant with the dependencies built.
#
# In the test command's target directory, whose dependencies are built already (the
# wrapper is not part of cargo's fingerprint either): the mutants of `magazine` are built
# there with one profile setting of the crate set to its default value explicitly
# (MUTANT_PROFILE: `split-debuginfo = "off"`, the same code), which gives their artifacts
# names of their own, so a mutant build is never taken for the real crate's, even if this
# script is stopped half way.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
export RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh
MUTANT_PROFILE=(--config 'profile.dev.package.magazine.split-debuginfo="off"')
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# mutant, then the cargo test arguments of the test that must catch it.
MUTANTS=(
  "slot_drop_skips_fold --test fences a_source_panicking_in_the_caches_drop_after_sequence_hits"
  "gap_slots_unfenced --test cpu_count_gap"
  "failed_fence_keeps_claim --test fences no_fence_at_all"
  "held_item_dropped --test unwinding a_panicking_source_on_the_busy_paths"
  "flush_drains_unbounded --test regressions flush_ends_while_frees_keep_coming"
  "node_check_panics --lib a_node_that_does_not_fit"
  "refill_unguarded --test cache a_source_panicking_in_the_middle_of_a_batch"
  "default_collector --test foreign_garbage"
  "infallible_magazine --test out_of_memory"
  "flag_ignores_process --test fork"
)

# The tests first, unmutated: they must pass, and say whether they ran or skipped.
unset MAGAZINE_MUTANT
cargo test --test fences --test cpu_count_gap -- --nocapture >"$log" 2>&1 || { cat "$log"; exit 1; }
sequences=yes
if grep -q "skipped" "$log"; then
  sequences=no
  echo "soundness mutants: the sequence tests skip here ($(grep -m1 skipped "$log")); their mutants are skipped"
fi

failed=0
for entry in "${MUTANTS[@]}"; do
  read -ra words <<<"$entry"
  mutant=${words[0]}
  args=("${words[@]:1}")
  case $mutant in
    slot_drop_skips_fold | gap_slots_unfenced | failed_fence_keeps_claim)
      [ "$sequences" = yes ] || { echo "soundness: $mutant skipped"; continue; } ;;
  esac
  start=$SECONDS
  # The wrapper's cfg is not in cargo's fingerprint: rebuild the crate for each mutant.
  cargo clean -p magazine >/dev/null 2>&1 || true
  MAGAZINE_MUTANT=$mutant cargo test "${MUTANT_PROFILE[@]}" "${args[@]}" --no-run >"$log" 2>&1 ||
    { cat "$log"; exit 1; }
  status=0
  MAGAZINE_MUTANT=$mutant RUST_BACKTRACE=0 timeout 60 cargo test "${MUTANT_PROFILE[@]}" "${args[@]}" >"$log" 2>&1 ||
    status=$?
  [ "$status" -ne 124 ] || echo "killed after 60 s: a hang" >>"$log"
  if [ "$status" -ne 0 ]; then
    what=$(grep -m1 -E "precondition|SIG|killed after|chased|membarrier failed|left:" "$log" \
      || grep -m1 -E "panicked at" "$log" || true)
    what=$(echo "$what" | cut -c1-120)
    echo "soundness: caught $mutant in $((SECONDS - start)) s: $what"
  else
    echo "soundness: MUTANT $mutant ESCAPED"
    failed=1
  fi
done
cargo clean -p magazine >/dev/null 2>&1 || true
exit $failed
