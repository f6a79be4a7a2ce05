//! The live table: which fast-path ranges are in callers' hands, so that a double free or
//! a wrong size given to `free_fast` is an error instead of a corrupted magazine.
//!
//! Linux trusts its callers here: a pfn freed twice through `free_iova_fast` sits in a
//! magazine twice and is later handed out twice. Checking against the range tree would
//! cost the tree lock on every fast free, the very lock the magazines exist to avoid, and
//! would not tell "in a caller's hands" from "in a magazine" (cached ranges stay in the
//! tree). So the domain records each range it hands out through `alloc_fast` here.
//!
//! # Layout
//!
//! One byte of state per pfn: 0 when the pfn is not live, `order + 1` when a range of that
//! size class starting there is in a caller's hands. The bytes live in *leaves* of
//! [`LEAF_PFNS`] consecutive pfns, allocated on first use and found through a fixed
//! directory of buckets, each an append-only lock-free list of leaves. A fast operation is
//! a hash, a walk of a (normally one-leaf) list and one atomic access to the pfn's byte: a
//! store when `alloc_fast` hands the pfn out, a compare-and-swap when `free_fast` ends its
//! life (so two frees cannot both succeed). No lock, and two threads conflict only on the
//! same pfn. Leaves are never
//! removed before the domain drops, so a reader can hold a leaf reference without any
//! reclamation scheme.
//!
//! Memory: one byte per pfn of every [`LEAF_PFNS`]-pfn region the fast path ever handed a
//! range out of (4 KiB per 4096 pages, i.e. 16 MiB of mapped I/O space at 4 KiB pages),
//! plus the directory. The tree allocates top-down and reuses freed space, so this follows
//! the span of I/O space in use, not the number of operations.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr;

use crate::sync::{AtomicPtr, AtomicU8, Ordering};

/// Pfns per leaf (a power of two). Small under the model checkers, where every byte is a
/// modelled atomic, and under Miri, which interprets a leaf's zeroing and every scan of it
/// byte by byte.
#[cfg(not(any(magazine_model, miri)))]
const LEAF_BITS: u32 = 12;
#[cfg(all(miri, not(magazine_model)))]
const LEAF_BITS: u32 = 6;
#[cfg(magazine_model)]
const LEAF_BITS: u32 = 2;
/// Pfns per leaf.
pub(crate) const LEAF_PFNS: usize = 1 << LEAF_BITS;
/// Buckets in the directory (a power of two).
#[cfg(not(any(magazine_model, miri)))]
const BUCKETS: usize = 1024;
#[cfg(all(miri, not(magazine_model)))]
const BUCKETS: usize = 8;
#[cfg(magazine_model)]
const BUCKETS: usize = 2;

/// Fibonacci hashing constant (2^64 / golden ratio): spreads region numbers, whose low
/// bits are often equal, over the whole word.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// Cache lines per leaf's state bytes (the spread of consecutive pfns, see [`byte_of`]).
const SPREAD_LINES: usize = if LEAF_PFNS >= 64 * 64 { 64 } else { 1 };

/// The byte of `pfn` in its leaf (below [`LEAF_PFNS`], so indexing a leaf's states by it
/// needs no bounds check). Consecutive pfns go to different cache lines (the byte
/// index is the pfn's offset with its low and high bits swapped), because the tree hands
/// out neighbouring ranges to different CPUs: with one line per 64 neighbours, two
/// threads' allocations would bounce that line between their cores on every operation.
#[inline]
// SPREAD_LINES is 1 in the small leaves of the model builds. (No `reason =`: lint
// reasons need Rust 1.81, and the crate's `rust-version` is 1.80.)
#[allow(clippy::modulo_one)]
fn byte_of(pfn: u64) -> usize {
    let offset = (pfn as usize) & (LEAF_PFNS - 1);
    let per_line = LEAF_PFNS / SPREAD_LINES;
    (offset % SPREAD_LINES) * per_line + offset / SPREAD_LINES
}

/// The pfn offset in its leaf of byte `index` (the inverse of [`byte_of`]).
fn pfn_of(index: usize) -> u64 {
    let per_line = LEAF_PFNS / SPREAD_LINES;
    ((index % per_line) * SPREAD_LINES + index / per_line) as u64
}

/// What [`LiveTable::take`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// The pfn was live with the given order; it is not any more.
    Taken,
    /// The pfn is live with another order (left live).
    OtherOrder(u8),
    /// The pfn is not live.
    Absent,
}

/// The states of [`LEAF_PFNS`] consecutive pfns.
struct Leaf {
    /// The pfns `region << LEAF_BITS ..` are this leaf's.
    region: u64,
    /// The next leaf of the bucket; written once, before the leaf is published, and
    /// never again.
    next: *mut Leaf,
    /// Per pfn: 0 = not live, `order + 1` = live with that order. A free's change is a
    /// read-modify-write, so two frees of one pfn cannot both see it live: that needs only
    /// the byte's own modification order. The Release/Acquire pairs on it make a free that
    /// ends a life happen after the `alloc_fast` that recorded it, so the table and the
    /// cache's own hand-over of the pfn never disagree about which came first. In the
    /// leaf itself: a fast operation loads no pointer to them and checks no length.
    states: [AtomicU8; LEAF_PFNS],
}

/// The pfns handed out by `alloc_fast` and not yet freed, each with its size order.
///
/// Upholds the domain's half of [invariant 1](crate::docs::design#invariant-1-conservation)
/// for a checked fast path: a pfn enters a magazine only through a `take` that found it
/// live, and each live pfn can be taken once.
pub(crate) struct LiveTable {
    /// Heads of the buckets' leaf lists, null when empty. A leaf is linked by a Release
    /// compare-and-swap of its bucket's head after its fields are written; readers load
    /// heads with Acquire. Leaves are only ever prepended, never unlinked before drop.
    /// A fixed-size array: indexing it by a bucket number needs no bounds check.
    buckets: Box<[AtomicPtr<Leaf>; BUCKETS]>,
}

// SAFETY: leaves are reached only through the buckets' atomics, their immutable fields are
// written before publication and their states are atomics; the table owns every leaf.
unsafe impl Send for LiveTable {}
// SAFETY: as above: all shared mutation is atomic.
unsafe impl Sync for LiveTable {}

impl LiveTable {
    /// An empty table (its directory only; no leaf yet).
    pub(crate) fn new() -> Self {
        let buckets: Box<[AtomicPtr<Leaf>]> = (0..BUCKETS)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect();
        // Built on the heap (a `Box::new` of the array would build it on the stack first).
        let Ok(buckets) = buckets.try_into() else {
            unreachable!("BUCKETS buckets");
        };
        Self { buckets }
    }

    #[inline]
    fn bucket(region: u64) -> usize {
        // The top bits of the product depend on every bit of the region number.
        (region.wrapping_mul(SPREAD) >> (u64::BITS - BUCKETS.trailing_zeros())) as usize
    }

    /// The leaf of `region` among the leaves from `head` (one of our buckets' heads) on.
    #[inline]
    fn find_from(&self, head: *mut Leaf, region: u64) -> Option<&Leaf> {
        let mut leaf = head;
        while !leaf.is_null() {
            // SAFETY: a non-null pointer in a bucket list is a published leaf (Acquire on
            // the head, fields written before the Release link), never freed before the
            // table drops, which needs `&mut self`: it lives as long as `&self`.
            let found = unsafe { &*leaf };
            if found.region == region {
                return Some(found);
            }
            leaf = found.next;
        }
        None
    }

    /// The byte of `pfn`, if its leaf exists.
    #[inline]
    fn state(&self, pfn: u64) -> Option<&AtomicU8> {
        let region = pfn >> LEAF_BITS;
        let head = self.buckets[Self::bucket(region)].load(Ordering::Acquire);
        let leaf = self.find_from(head, region)?;
        Some(&leaf.states[byte_of(pfn)])
    }

    /// The byte of `pfn`, creating its leaf if need be.
    #[inline]
    fn state_or_insert(&self, pfn: u64) -> &AtomicU8 {
        match self.state(pfn) {
            Some(state) => state,
            None => &self.insert_leaf(pfn >> LEAF_BITS).states[byte_of(pfn)],
        }
    }

    /// The leaf of `region`, created and linked unless another thread links it first.
    /// Once per region in the domain's life: out of line.
    #[cold]
    #[inline(never)]
    fn insert_leaf(&self, region: u64) -> &Leaf {
        let bucket = &self.buckets[Self::bucket(region)];
        let mut head = bucket.load(Ordering::Acquire);
        let mut spare: Option<Box<Leaf>> = None;
        loop {
            if let Some(leaf) = self.find_from(head, region) {
                break leaf;
            }
            let mut new = spare.take().unwrap_or_else(|| {
                Box::new(Leaf {
                    region,
                    next: ptr::null_mut(),
                    states: core::array::from_fn(|_| AtomicU8::new(0)),
                })
            });
            new.next = head;
            let new = Box::into_raw(new);
            match bucket.compare_exchange(head, new, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: just published; leaves live as long as the table.
                Ok(_) => break unsafe { &*new },
                Err(current) => {
                    // SAFETY: the CAS failed, so `new` was never published: still ours.
                    spare = Some(unsafe { Box::from_raw(new) });
                    head = current;
                }
            }
        }
    }

    /// Records `pfn`, which the caller owns and which is not live, as live with `order`.
    ///
    /// A plain store, not a read-modify-write: the caller took `pfn` out of a magazine or
    /// the tree, so no correct thread can free it before this returns; a thread that frees
    /// it anyway (a caller's bug: it is not theirs) can be told from its owner by no
    /// table. Every free is a read-modify-write, so two frees still cannot both succeed.
    #[inline]
    pub(crate) fn insert(&self, pfn: u64, order: u8) {
        let state = self.state_or_insert(pfn);
        debug_assert_eq!(
            state.load(Ordering::Relaxed),
            0,
            "pfn {pfn:#x} handed out while live"
        );
        state.store(order + 1, Ordering::Release);
    }

    /// Ends the life of `pfn` if it is live with `order`.
    #[inline]
    pub(crate) fn take(&self, pfn: u64, order: u8) -> Take {
        let Some(state) = self.state(pfn) else {
            return Take::Absent;
        };
        // MUTANT (`live_take_load_then_store`): check, then clear: two frees both pass.
        let found = if cfg!(magazine_mutant = "live_take_load_then_store") {
            let found = state.load(Ordering::Acquire);
            if found == order + 1 {
                state.store(0, Ordering::Release);
            }
            found
        } else {
            match state.compare_exchange(order + 1, 0, Ordering::AcqRel, Ordering::Acquire) {
                Ok(found) | Err(found) => found,
            }
        };
        match found {
            0 => Take::Absent,
            live if live == order + 1 => Take::Taken,
            live => Take::OtherOrder(live - 1),
        }
    }

    /// Ends the life of `pfn` whatever its order; returns the order it was live with.
    pub(crate) fn remove(&self, pfn: u64) -> Option<u8> {
        let previous = self.state(pfn)?.swap(0, Ordering::AcqRel);
        previous.checked_sub(1)
    }

    /// Whether `pfn` is live.
    pub(crate) fn contains(&self, pfn: u64) -> bool {
        self.state(pfn)
            .is_some_and(|state| state.load(Ordering::Acquire) != 0)
    }

    /// Calls `f` with every leaf.
    fn for_each_leaf(&self, mut f: impl FnMut(&Leaf)) {
        for bucket in self.buckets.iter() {
            let mut leaf = bucket.load(Ordering::Acquire);
            while !leaf.is_null() {
                // SAFETY: as in `find_from`: a published leaf, alive while `&self` is.
                let found = unsafe { &*leaf };
                f(found);
                leaf = found.next;
            }
        }
    }

    /// All live pfns with their orders (exact only when no thread works on the table).
    pub(crate) fn snapshot(&self) -> Vec<(u64, u8)> {
        let mut all = Vec::new();
        self.for_each_leaf(|leaf| {
            for (index, state) in leaf.states.iter().enumerate() {
                let state = state.load(Ordering::Acquire);
                if state != 0 {
                    all.push(((leaf.region << LEAF_BITS) | pfn_of(index), state - 1));
                }
            }
        });
        all
    }

    /// Number of live pfns (exact only when no thread works on the table).
    pub(crate) fn len(&self) -> usize {
        let mut live = 0;
        self.for_each_leaf(|leaf| {
            live += leaf
                .states
                .iter()
                .filter(|state| state.load(Ordering::Relaxed) != 0)
                .count();
        });
        live
    }
}

impl Drop for LiveTable {
    fn drop(&mut self) {
        for bucket in self.buckets.iter_mut() {
            let mut leaf = bucket.load(Ordering::Relaxed);
            while !leaf.is_null() {
                // SAFETY: `&mut self`: no reader is left; each leaf is linked exactly once
                // (a failed CAS takes its leaf back), so this frees each once.
                let owned = unsafe { Box::from_raw(leaf) };
                leaf = owned.next;
            }
        }
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;

    // Pure arithmetic on the full-size leaf, which Miri does not build (see LEAF_BITS).
    #[cfg(not(miri))]
    #[test]
    fn neighbouring_pfns_use_different_cache_lines() {
        let bytes: Vec<usize> = (0..LEAF_PFNS as u64).map(byte_of).collect();
        let mut sorted = bytes.clone();
        sorted.sort_unstable();
        assert!(sorted.iter().copied().eq(0..LEAF_PFNS), "a permutation");
        for (offset, &byte) in bytes.iter().enumerate() {
            assert_eq!(pfn_of(byte), offset as u64);
        }
        assert!(bytes.windows(2).all(|pair| pair[0] / 64 != pair[1] / 64));
    }

    #[test]
    fn take_checks_the_order() {
        let live = LiveTable::new();
        live.insert(64, 3);
        assert!(live.contains(64));
        assert_eq!(live.take(64, 2), Take::OtherOrder(3));
        assert_eq!(live.take(64, 3), Take::Taken);
        assert_eq!(live.take(64, 3), Take::Absent);
        assert_eq!(live.len(), 0);
    }

    #[test]
    fn pfns_far_apart_and_in_one_bucket_keep_their_own_states() {
        let live = LiveTable::new();
        // Regions that share a bucket: the list holds several leaves.
        let regions = 4 * BUCKETS as u64;
        let mut pfns: Vec<u64> = (0..regions).map(|region| region << LEAF_BITS | 5).collect();
        pfns.extend([0, u64::MAX - 1, 1 << 40, (1 << 40) + 1]);
        for (index, &pfn) in pfns.iter().enumerate() {
            live.insert(pfn, (index % 6) as u8);
        }
        assert_eq!(live.len(), pfns.len());
        let mut snapshot = live.snapshot();
        snapshot.sort_unstable();
        let mut expected: Vec<_> = pfns
            .iter()
            .enumerate()
            .map(|(index, &pfn)| (pfn, (index % 6) as u8))
            .collect();
        expected.sort_unstable();
        assert_eq!(snapshot, expected);
        assert!(!live.contains(6) && live.contains(5));
        assert_eq!(
            live.remove(u64::MAX - 1),
            Some(((pfns.len() - 3) % 6) as u8)
        );
        assert_eq!(live.remove(u64::MAX - 1), None);
        assert_eq!(live.remove(7 << 50), None, "no leaf there");
        assert_eq!(live.take(7 << 50, 0), Take::Absent);
    }

    #[test]
    fn racing_frees_of_one_pfn_take_it_once() {
        use std::sync::atomic::AtomicUsize;
        let live = LiveTable::new();
        let taken = AtomicUsize::new(0);
        let rounds = if cfg!(miri) { 10 } else { 200 };
        for round in 0..rounds {
            let pfn = round * 4097;
            live.insert(pfn, 1);
            std::thread::scope(|scope| {
                for _ in 0..3 {
                    scope.spawn(|| {
                        if live.take(pfn, 1) == Take::Taken {
                            taken.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                        }
                    });
                }
            });
        }
        assert_eq!(taken.into_inner(), rounds as usize);
        assert_eq!(live.len(), 0);
    }
}
