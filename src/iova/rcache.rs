//! Size classes and the source behind each class's cache: how the magazines hand ranges
//! back to the shared range tree.

use std::sync::Arc;

use super::range::{Kind, Ranges, ANCHOR};
use crate::Source;

/// Number of cached size classes: ranges of 1, 2, 4, ..., 32 pages are cached, larger
/// ones are not (Linux `IOVA_RANGE_CACHE_MAX_SIZE`, the log of the largest cached size
/// plus one).
pub const IOVA_RANGE_CACHE_MAX_SIZE: usize = 6;

/// The size class (order) of a fast-path request of `size` pages, if it is cached: sizes
/// round up to a power of two (Linux `order_base_2`). `size` must not be 0.
pub(crate) fn order_of(size: u64) -> Option<u8> {
    let order = u64::BITS - (size - 1).leading_zeros();
    ((order as usize) < IOVA_RANGE_CACHE_MAX_SIZE).then_some(order as u8)
}

/// The source of one size class's [`Cache`](crate::Cache): an `Arc` of the shared range
/// tree plus the class's order. Each class's cache owns one; all of them (and the
/// domain) share the tree, so a magazine flushed from any cache lands in the same tree.
pub(crate) struct ClassSource {
    pub(crate) ranges: Arc<Ranges>,
    pub(crate) order: u8,
}

impl Source for ClassSource {
    type Item = u64;

    /// A size-aligned range of the class anywhere in the space. The domain never relies
    /// on it: it pops cached pfns with `alloc_cached_where` and calls the tree itself
    /// with the caller's `limit_pfn`, which this signature cannot carry.
    fn alloc(&self) -> Option<u64> {
        let size = 1u64 << self.order;
        let mut tree = self.ranges.lock();
        let iova = tree.alloc(size, ANCHOR - 1, true, Kind::Fast).ok()?;
        Some(iova.pfn_lo)
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

    #[test]
    fn sizes_round_up_to_their_class() {
        let orders: Vec<_> = [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64]
            .iter()
            .map(|&size| order_of(size))
            .collect();
        assert_eq!(
            orders,
            [
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
