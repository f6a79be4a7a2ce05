//! How many magazines a stack surely holds, and the least it surely held since the current
//! trim interval began, in one atomic word.

use crate::sync::{AtomicUsize, Ordering};

/// Bits of each half of the word.
const HALF: u32 = usize::BITS / 2;
/// The most magazines a stack can count: 2^32 - 1 on 64-bit targets, 65535 on 32-bit ones.
pub(crate) const MAX_LEN: usize = (1 << HALF) - 1;
/// Places of [`MAX_LEN`] that only a rescue (a magazine held while a source panicked) may
/// take, so that a full stack never makes unwinding fail.
pub(crate) const RESCUE_RESERVE: usize = 256;
/// The most magazines an ordinary push may leave in a stack: a `Dynamic` depot is bounded
/// by this (65279 magazines on 32-bit targets, which a real depot can reach); a full
/// magazine beyond it goes to the source, as a `Fixed` depot's overflow does.
pub(crate) const MAX_PUSHED: usize = MAX_LEN - RESCUE_RESERVE;

/// The working-set counter of a depot stack: magazines that are linked and not claimed by
/// a pop, and the low-water mark of that count over the current trim interval.
///
/// Upholds the precision half of [invariant 4](crate::docs::design#invariant-4-bounded-memory): a working-set trim releases at
/// most the magazines that stayed in the stack for the whole interval. Two choices make
/// the count a *lower bound* of what the stack holds at every instant, so its low-water
/// mark never exceeds the real one:
///
/// - a push [`add`](Level::add)s *after* its node is linked, and a pop
///   [`claim`](Level::claim)s *before* it unlinks one (a claim also guarantees the popper a
///   node: claims never outnumber linked nodes);
/// - the count and its low-water mark share one word and change in one compare-and-swap,
///   so no length change can slip past the low-water update.
///
/// Both were found necessary by `proofs/trim.pml`: with the low-water mark in a separate
/// atomic, or with the count lowered only *after* the unlink (as the stack's capacity
/// counter is), a pop racing a push and a trim lets the trim release a magazine pushed
/// during the interval. Erring low only makes a trim keep a magazine it could have released
/// (at most one per push in flight at the interval's minimum).
///
/// | bits      | meaning                                                             |
/// |-----------|---------------------------------------------------------------------|
/// | low half  | `count`: linked magazines not claimed by a pop                      |
/// | high half | `low`: the least `count` since the last [`Level::restart_interval`] |
///
/// Transitions: `add` raises `count`; `claim` lowers `count` and sets
/// `low = min(low, count)`; `restart_interval` sets `low = count`. So `low <= count`.
/// All are SeqCst read-modify-writes, paid once per magazine, not per item.
#[derive(Debug)]
pub(crate) struct Level(AtomicUsize);

fn unpack(word: usize) -> (usize, usize) {
    (word & MAX_LEN, word >> HALF)
}

fn pack(count: usize, low: usize) -> usize {
    debug_assert!(count <= MAX_LEN && low <= count);
    count | (low << HALF)
}

impl Level {
    pub(crate) fn new() -> Self {
        Self(AtomicUsize::new(0))
    }

    /// Counts a magazine that has just been linked.
    pub(crate) fn add(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (count, low) = unpack(word);
                debug_assert!(count < MAX_LEN, "the stack's capacity counter bounds this");
                Some(pack(count + 1, low))
            });
    }

    /// Claims one counted magazine for a pop, lowering the low-water mark with the count;
    /// `false` when none is counted.
    pub(crate) fn claim(&self) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (count, low) = unpack(word);
                let count = count.checked_sub(1)?;
                Some(pack(count, low.min(count)))
            })
            .is_ok()
    }

    /// Ends the interval and starts the next at the current count. Returns the ended
    /// interval's low-water mark: how many magazines stayed in the stack all of it (at
    /// least).
    pub(crate) fn restart_interval(&self) -> usize {
        let word = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (count, _) = unpack(word);
                Some(pack(count, count))
            })
            .expect("the update never refuses");
        unpack(word).1
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;

    #[test]
    fn low_water_follows_claims_until_restarted() {
        let level = Level::new();
        (0..5).for_each(|_| level.add());
        assert_eq!(
            level.restart_interval(),
            0,
            "the first interval began empty"
        );
        assert!(level.claim());
        assert!(level.claim());
        level.add();
        assert_eq!(
            level.restart_interval(),
            3,
            "the dip to 3, not the current 4"
        );
        assert_eq!(level.restart_interval(), 4, "nothing moved: all 4 stayed");
    }

    #[test]
    fn nothing_to_claim_in_an_empty_count() {
        let level = Level::new();
        assert!(!level.claim());
        level.add();
        assert!(level.claim());
        assert!(!level.claim());
        assert_eq!(level.restart_interval(), 0);
    }
}
