//! The live table: which fast-path ranges are in callers' hands, so that a double free or
//! a wrong size given to `free_fast` is an error instead of a corrupted magazine.
//!
//! Linux trusts its callers here: a pfn freed twice through `free_iova_fast` sits in a
//! magazine twice and is later handed out twice. Checking against the range tree would
//! cost the tree lock on every fast free, the very lock the magazines exist to avoid, and
//! would not tell "in a caller's hands" from "in a magazine" (cached ranges stay in the
//! tree). So the domain records each range it hands out through `alloc_fast` here, in a
//! table split into shards by pfn: a fast operation takes one short shard lock, which
//! threads working on different pfns rarely share.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Fibonacci hashing constant (2^64 / golden ratio): spreads aligned pfns, whose low bits
/// are all zero, over the whole word.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// A hasher for pfn keys: one multiply, with the high bits folded down because the map
/// indexes buckets by the low bits.
#[derive(Default)]
struct PfnHasher(u64);

impl Hasher for PfnHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(SPREAD);
    }
}

type Shard = HashMap<u64, u8, BuildHasherDefault<PfnHasher>>;

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

/// The pfns handed out by `alloc_fast` and not yet freed, each with its size order.
pub(crate) struct LiveTable {
    shards: Box<[Mutex<Shard>]>,
    shift: u32,
}

impl LiveTable {
    /// A table with about four shards per CPU slot (a power of two, 4 to 1024).
    pub(crate) fn new(cpus: usize) -> Self {
        let count = cpus.saturating_mul(4).clamp(4, 1024).next_power_of_two();
        Self {
            shards: (0..count).map(|_| Mutex::new(Shard::default())).collect(),
            shift: u64::BITS - count.trailing_zeros(),
        }
    }

    fn shard(&self, pfn: u64) -> MutexGuard<'_, Shard> {
        // The top bits of the product depend on every bit of the pfn.
        let index = (pfn.wrapping_mul(SPREAD) >> self.shift) as usize;
        // Nothing here panics while holding the lock; a poisoned shard is still whole.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `pfn` as live with `order`; false if it was live already.
    pub(crate) fn insert(&self, pfn: u64, order: u8) -> bool {
        self.shard(pfn).insert(pfn, order).is_none()
    }

    /// Ends the life of `pfn` if it is live with `order`.
    pub(crate) fn take(&self, pfn: u64, order: u8) -> Take {
        let mut shard = self.shard(pfn);
        match shard.get(&pfn) {
            None => Take::Absent,
            Some(&live) if live != order => Take::OtherOrder(live),
            Some(_) => {
                shard.remove(&pfn);
                Take::Taken
            }
        }
    }

    /// Ends the life of `pfn` whatever its order.
    pub(crate) fn remove(&self, pfn: u64) -> Option<u8> {
        self.shard(pfn).remove(&pfn)
    }

    /// Whether `pfn` is live.
    pub(crate) fn contains(&self, pfn: u64) -> bool {
        self.shard(pfn).contains_key(&pfn)
    }

    /// All live pfns with their orders (exact only when no thread works on the table).
    pub(crate) fn snapshot(&self) -> Vec<(u64, u8)> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            all.extend(shard.iter().map(|(&pfn, &order)| (pfn, order)));
        }
        all
    }

    /// Number of live pfns (exact only when no thread works on the table).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_checks_the_order() {
        let live = LiveTable::new(2);
        assert!(live.insert(64, 3));
        assert!(!live.insert(64, 3));
        assert_eq!(live.take(64, 2), Take::OtherOrder(3));
        assert_eq!(live.take(64, 3), Take::Taken);
        assert_eq!(live.take(64, 3), Take::Absent);
        assert_eq!(live.len(), 0);
    }
}
