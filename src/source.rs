//! The slow backing allocator behind a cache.

use alloc::boxed::Box;
use alloc::sync::Arc;

/// The backing allocator: a range allocator, an id allocator, a slab.
///
/// The cache calls it only on its slow paths: `alloc` when no magazine can serve, and
/// `free_batch` with whole magazines (overflow of a `Fixed` depot, trim, flush, drop).
/// Neither is called while the cache holds a CPU slot, except by [`Cache::flush_cpu`] and
/// [`Cache::flush`], which drain that slot in place.
///
/// # Panics
///
/// A source may panic; the cache stays consistent (see the crate docs on unwinding).
/// A source must not call back into the same cache from `free_batch`: a flush there would
/// wait for the slot it is being called from.
///
/// [`Cache::flush_cpu`]: crate::Cache::flush_cpu
/// [`Cache::flush`]: crate::Cache::flush
pub trait Source: Send + Sync {
    /// What is cached: an id, a pfn, a pointer, any `Send` value.
    type Item: Send;

    /// Slow path: one item from the backing allocator, `None` when exhausted.
    fn alloc(&self) -> Option<Self::Item>;

    /// Returns items to the backing allocator; called with whole magazines (batched).
    ///
    /// The source should consume the whole iterator. Items it leaves are offered again in
    /// a further call; when a call consumes none, the remaining items are dropped.
    fn free_batch(&self, items: &mut dyn Iterator<Item = Self::Item>);
}

impl<S: Source + ?Sized> Source for &S {
    type Item = S::Item;

    fn alloc(&self) -> Option<S::Item> {
        (**self).alloc()
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = S::Item>) {
        (**self).free_batch(items)
    }
}

impl<S: Source + ?Sized> Source for Box<S> {
    type Item = S::Item;

    fn alloc(&self) -> Option<S::Item> {
        (**self).alloc()
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = S::Item>) {
        (**self).free_batch(items)
    }
}

impl<S: Source + ?Sized> Source for Arc<S> {
    type Item = S::Item;

    fn alloc(&self) -> Option<S::Item> {
        (**self).alloc()
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = S::Item>) {
        (**self).free_batch(items)
    }
}
