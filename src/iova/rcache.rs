//! Size classes and the source behind each class's cache: how the magazines hand ranges
//! back to the shared range tree.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::error::IovaError;
use super::range::Iova;
use super::tree::{Kind, Ranges};
use crate::{Source, Stats};

/// Number of cached size classes: ranges of 1, 2, 4, ..., 32 pages are cached, larger
/// ones are not (Linux `IOVA_RANGE_CACHE_MAX_SIZE`, the log of the largest cached size
/// plus one).
pub const IOVA_RANGE_CACHE_MAX_SIZE: usize = 6;

/// The size class (order) of a fast-path request of `size` pages, if it is cached: sizes
/// round up to a power of two (Linux `order_base_2`). `None` for 0 too, so that the fast
/// path tells "cached" from "anything else" with one test.
#[inline]
pub(crate) fn order_of(size: u64) -> Option<u8> {
    // 0 wraps to u64::MAX: order 64, not cached.
    let order = u64::BITS - size.wrapping_sub(1).leading_zeros();
    ((order as usize) < IOVA_RANGE_CACHE_MAX_SIZE).then_some(order as u8)
}

/// The source of one size class's [`Cache`](crate::Cache): an `Arc` of the shared range
/// tree plus the class's order. Each class's cache owns one; all of them (and the
/// domain) share the tree, so a magazine flushed from any cache lands in the same tree.
///
/// The cache only ever *returns* ranges through it ([`Source::free_batch`]). Allocation
/// needs the caller's `limit_pfn`, which [`Source::alloc`] cannot carry, so the domain
/// never lets a class's cache allocate: it takes cached pfns with `alloc_cached_where`,
/// and on a miss allocates through [`alloc_below`](Self::alloc_below), which counts the
/// allocation here so that the class's [`Stats::source_allocs`](crate::Stats) mean what
/// they say.
pub(crate) struct ClassSource {
    ranges: Arc<Ranges>,
    order: u8,
    /// Ranges of this class the tree allocated on fast-path misses.
    allocs: AtomicU64,
    /// Times a miss of this class found the tree full and flushed every cache.
    exhaustion_flushes: AtomicU64,
}

impl ClassSource {
    pub(crate) fn new(ranges: Arc<Ranges>, order: u8) -> Self {
        Self {
            ranges,
            order,
            allocs: AtomicU64::new(0),
            exhaustion_flushes: AtomicU64::new(0),
        }
    }

    /// A size-aligned range of this class ending at or below `limit_pfn`, for a pfn the
    /// caller will hand out (and record as live): the fast path's miss.
    pub(crate) fn alloc_below(&self, limit_pfn: u64) -> Result<Iova, IovaError> {
        let size = 1u64 << self.order;
        let iova = self
            .ranges
            .lock()
            .alloc(size, limit_pfn, true, Kind::Fast)?;
        self.allocs.fetch_add(1, Ordering::Relaxed);
        Ok(iova)
    }

    /// Up to `max` size-aligned ranges of this class ending at or below `limit_pfn`,
    /// allocated under one hold of the tree lock and handed to `out` as they land: the
    /// same pfns, in the same order, and the same cached-node state as `max` calls of
    /// [`alloc_below`](Self::alloc_below) in a row (see `RangeTree::alloc_batch`). Returns
    /// how many it handed; the error only when the first allocation fails. The caller
    /// owns every range handed (it records the ones it hands out as live, and frees the
    /// others into the class's cache, where they are Linux's cached IOVAs).
    pub(crate) fn alloc_below_batch(
        &self,
        limit_pfn: u64,
        max: usize,
        out: &mut dyn FnMut(Iova),
    ) -> Result<usize, IovaError> {
        let size = 1u64 << self.order;
        let handed = self
            .ranges
            .lock()
            .alloc_batch(size, limit_pfn, true, Kind::Fast, max, out)?;
        self.allocs.fetch_add(handed as u64, Ordering::Relaxed);
        Ok(handed)
    }

    /// Counts a flush of every cache that a miss of this class caused.
    pub(crate) fn count_exhaustion_flush(&self) {
        self.exhaustion_flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// The class's cache counters with the slow-path figures only this source knows.
    pub(crate) fn complete(&self, mut stats: Stats) -> Stats {
        stats.source_allocs = self.allocs.load(Ordering::Relaxed);
        stats.exhaustion_flushes = self.exhaustion_flushes.load(Ordering::Relaxed);
        stats
    }
}

impl Source for ClassSource {
    type Item = u64;

    /// Never allocates. A range from here would reach whoever called the cache's `alloc`
    /// without being recorded as live, and [`IovaDomain::check`] would count it in the
    /// tree but nowhere else; the domain allocates through
    /// [`alloc_below`](ClassSource::alloc_below) instead. (Were a class's `Cache::alloc`
    /// called, this `None` would make it flush the class and return `None`: a miss, not a
    /// corrupted domain.)
    ///
    /// [`IovaDomain::check`]: super::IovaDomain::check
    fn alloc(&self) -> Option<u64> {
        None
    }

    /// Never allocates either, for the same reason as [`alloc`](Source::alloc): hands
    /// nothing and returns 0, so a class's cache that asked for a batch would see an
    /// exhausted source, as with `alloc`. A batch of a class's ranges under one hold of
    /// the tree lock is [`alloc_below_batch`](ClassSource::alloc_below_batch), which needs
    /// the caller's `limit_pfn` and leaves the ranges to the caller to record.
    fn alloc_batch(&self, _max: usize, _out: &mut dyn FnMut(u64)) -> usize {
        0
    }

    /// Removes a magazine's worth of ranges from the tree under one lock acquisition
    /// (Linux `iova_magazine_free_pfns`).
    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        let mut tree = self.ranges.lock();
        for pfn in items {
            let removed = tree.remove(pfn, Kind::Fast);
            // Only fast ranges enter magazines, and only this source removes them.
            debug_assert!(removed, "cached pfn {pfn:#x} is not a fast range");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::tree::RangeTree;

    #[test]
    fn the_class_source_never_allocates_and_counts_the_domains_allocations() {
        let ranges = Arc::new(Ranges::new(RangeTree::new(1, 0x100)));
        let source = ClassSource::new(Arc::clone(&ranges), 2);
        assert_eq!(Source::alloc(&source), None);
        assert_eq!(ranges.lock().ranges().count(), 0, "the tree is untouched");
        let iova = source.alloc_below(0xff).unwrap();
        assert_eq!((iova.pfn_lo, iova.size()), (0xfc, 4));
        assert_eq!(source.complete(Stats::default()).source_allocs, 1);
    }

    #[test]
    fn the_class_source_hands_no_batch_and_the_domain_batch_matches_single_misses() {
        let ranges = Arc::new(Ranges::new(RangeTree::new(1, 0x100)));
        let source = ClassSource::new(Arc::clone(&ranges), 1);
        assert_eq!(source.alloc_batch(8, &mut |_| unreachable!()), 0);
        assert_eq!(ranges.lock().ranges().count(), 0, "the tree is untouched");

        let twin = ClassSource::new(Arc::new(Ranges::new(RangeTree::new(1, 0x100))), 1);
        let mut batch = Vec::new();
        assert_eq!(
            source.alloc_below_batch(0xf0, 5, &mut |iova| batch.push(iova)),
            Ok(5)
        );
        let singles: Vec<_> = (0..5).map(|_| twin.alloc_below(0xf0).unwrap()).collect();
        assert_eq!(batch, singles);
        assert_eq!(
            batch[0].pfn_lo, 0xee,
            "size-aligned, top-down under the limit"
        );
        assert_eq!(
            ranges.lock().cached_node(0xf0),
            twin.ranges.lock().cached_node(0xf0)
        );
        assert_eq!(source.complete(Stats::default()).source_allocs, 5);
    }

    #[test]
    fn sizes_round_up_to_their_class() {
        let orders: Vec<_> = [0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64]
            .iter()
            .map(|&size| order_of(size))
            .collect();
        assert_eq!(
            orders,
            [
                None,
                Some(0),
                Some(1),
                Some(2),
                Some(2),
                Some(3),
                Some(3),
                Some(4),
                Some(4),
                Some(5),
                Some(5),
                None,
                None
            ]
        );
    }
}
