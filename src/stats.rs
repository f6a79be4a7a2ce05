//! Statistics: what served each operation and how big the depot is.

use crate::sync::{AtomicUsize, Ordering};

/// A snapshot of a cache's counters, from [`Cache::stats`](crate::Cache::stats).
///
/// Counters are summed from per-slot counters that only the slot's owner writes, so they
/// add no contended atomic to the fast path; a snapshot taken while threads work is
/// approximate. When the cache is quiescent, `depot_full` and `depot_empty` equal the real
/// stack lengths (DESIGN.md invariant 5). Counters of a live [`LocalCache`](crate::LocalCache)
/// are published when it exchanges a magazine with the depot and when it is dropped.
///
/// ```
/// use magazine::{Cache, Config, DepotPolicy, Source, Stats};
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
/// let config = Config { magazine_size: 2, cpus: 1, depot: DepotPolicy::Fixed { max_full: 8 } };
/// let cache = Cache::with_config(Ids(Default::default()), config);
/// let ids: Vec<u32> = (0..6).map(|_| cache.alloc().unwrap()).collect();
/// ids.into_iter().for_each(|id| cache.free(id));
/// let stats: Stats = cache.stats();
/// assert_eq!(stats.source_allocs, 6);
/// assert_eq!(stats.depot_full, 1, "2 + 2 in the slot, one magazine of 2 in the depot");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Allocations served by a loaded or previous magazine.
    pub alloc_hits: u64,
    /// Frees served by a loaded or previous magazine.
    pub free_hits: u64,
    /// Full magazines taken from the depot (by a slot, a handle, `trim` or a flush).
    pub depot_pops: u64,
    /// Full magazines given to the depot.
    pub depot_pushes: u64,
    /// Items allocated from the source (the slow path).
    pub source_allocs: u64,
    /// Items returned to the source (overflow, trim, flush, slow path).
    pub source_frees: u64,
    /// Full magazines released by [`Cache::trim`](crate::Cache::trim).
    pub trimmed: u64,
    /// Full magazines in the depot now.
    pub depot_full: usize,
    /// Empty magazines in the depot now.
    pub depot_empty: usize,
    /// The most full magazines the depot has held at once.
    pub depot_peak: usize,
    /// Operations that found their CPU slot taken by another thread (a miss, never a wait).
    pub busy_misses: u64,
    /// Times an exhausted source made `alloc` flush the cache and retry.
    pub exhaustion_flushes: u64,
}

/// A counter with one writer at a time (the owner of a slot), read by anyone: a load and a
/// store instead of a read-modify-write. Owners are ordered by the slot's Acquire/Release
/// hand-over, so no increment is lost.
#[derive(Debug, Default)]
pub(crate) struct OwnedCounter(AtomicUsize);

impl OwnedCounter {
    #[inline]
    pub(crate) fn add(&self, n: usize) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed) as u64
    }
}

/// A counter any thread bumps; used only off the fast path.
#[derive(Debug, Default)]
pub(crate) struct SharedCounter(AtomicUsize);

impl SharedCounter {
    pub(crate) fn add(&self, n: usize) {
        if n != 0 {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed) as u64
    }
}
