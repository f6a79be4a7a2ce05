//! A stack's length and the low-water mark of its current trim interval, in one atomic
//! word.

use crate::sync::{AtomicUsize, Ordering};

/// Bits of each half of the word.
const HALF: u32 = usize::BITS / 2;
/// The most magazines a stack can count: 2^32 - 1 on 64-bit targets, 65535 on 32-bit ones.
pub(crate) const MAX_LEN: usize = (1 << HALF) - 1;

/// The length of a depot stack and the least length it had since the current trim
/// interval began.
///
/// Upholds the precision half of DESIGN.md invariant 4 (a working-set trim releases at
/// most the magazines that stayed in the stack for the whole interval) and, with
/// [`Stack`](crate::stack::Stack), invariant 5. Both numbers live in one word and change
/// together in one compare-and-swap, so no interleaving can slip between a length change
/// and its low-water update. (With two separate atomics, a pop preempted between its
/// decrement and its low-water update, followed by a push and a trim, lets the trim count
/// the popped magazine as unused; `proofs/trim.pml` has that counterexample.)
///
/// | bits      | meaning                                                          |
/// |-----------|------------------------------------------------------------------|
/// | low half  | `len`: magazines reserved or linked (see `Stack`)                 |
/// | high half | `low`: the least `len` since the last [`Level::restart_interval`] |
///
/// Transitions: `reserve` raises `len`; `release` lowers `len` and sets
/// `low = min(low, len)`; `restart_interval` sets `low = len`. So `low <= len` always.
/// All are SeqCst read-modify-writes, paid once per magazine, not per item.
#[derive(Debug)]
pub(crate) struct Level(AtomicUsize);

fn unpack(word: usize) -> (usize, usize) {
    (word & MAX_LEN, word >> HALF)
}

fn pack(len: usize, low: usize) -> usize {
    debug_assert!(len <= MAX_LEN && low <= len);
    len | (low << HALF)
}

impl Level {
    pub(crate) fn new() -> Self {
        Self(AtomicUsize::new(0))
    }

    /// Magazines reserved or linked.
    pub(crate) fn len(&self) -> usize {
        unpack(self.0.load(Ordering::SeqCst)).0
    }

    /// Counts one more magazine if fewer than `cap` (and than [`MAX_LEN`]) are counted;
    /// returns the new length. Check and increment are one atomic step.
    pub(crate) fn reserve(&self, cap: usize) -> Option<usize> {
        let cap = cap.min(MAX_LEN);
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (len, low) = unpack(word);
                (len < cap).then(|| pack(len + 1, low))
            })
            .ok()
            .map(|word| unpack(word).0 + 1)
    }

    /// Counts one magazine less and lowers the low-water mark to the new length; returns
    /// the new length.
    pub(crate) fn release(&self) -> usize {
        let word = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (len, low) = unpack(word);
                debug_assert!(len > 0, "released more magazines than counted");
                let len = len - 1;
                Some(pack(len, low.min(len)))
            })
            .expect("the update never refuses");
        unpack(word).0 - 1
    }

    /// Ends the interval and starts the next at the current length. Returns the ended
    /// interval's low-water mark: how many magazines stayed counted the whole interval.
    pub(crate) fn restart_interval(&self) -> usize {
        let word = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let (len, _) = unpack(word);
                Some(pack(len, len))
            })
            .expect("the update never refuses");
        unpack(word).1
    }
}

#[cfg(all(test, not(any(loom, feature = "shuttle"))))]
mod tests {
    use super::*;

    #[test]
    fn low_water_follows_releases_until_restarted() {
        let level = Level::new();
        for expected in 1..=5 {
            assert_eq!(level.reserve(usize::MAX), Some(expected));
        }
        assert_eq!(
            level.restart_interval(),
            0,
            "the first interval began empty"
        );
        assert_eq!(level.release(), 4);
        assert_eq!(level.release(), 3);
        assert_eq!(level.reserve(usize::MAX), Some(4));
        assert_eq!(
            level.restart_interval(),
            3,
            "the dip to 3, not the current 4"
        );
        assert_eq!(level.restart_interval(), 4, "nothing moved: all 4 stayed");
    }

    #[test]
    fn reserve_stops_at_the_cap() {
        let level = Level::new();
        assert_eq!(level.reserve(2), Some(1));
        assert_eq!(level.reserve(2), Some(2));
        assert_eq!(level.reserve(2), None);
        assert_eq!(level.len(), 2);
        assert_eq!(level.reserve(usize::MAX), Some(3), "the cap is per call");
    }
}
