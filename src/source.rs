//! The slow backing allocator behind a cache.

use alloc::boxed::Box;
use alloc::sync::Arc;

/// The backing allocator: a range allocator, an id allocator, a slab.
///
/// The cache calls it only on its slow paths: `alloc` when no magazine can serve, and
/// `free_batch` with whole magazines (overflow of a `Fixed` depot, trim, flush, drop).
/// Neither is called while the cache holds a CPU slot, so the source may take its own
/// locks freely.
///
/// # Obligations
///
/// - **Each item out once.** `alloc` must not hand out an item that is already out (in a
///   caller's hands or in the cache) until the item comes back through `free_batch`; the
///   cache relies on it to keep [conservation](crate::docs::design#invariant-1-conservation).
/// - **The cache does not check what it is given back.** [`Cache::free`] takes any item
///   of type `Item`: an item freed twice, or one that did not come from this source, is
///   cached and later handed out again or passed to `free_batch` as if it were yours.
///   Either the callers free each item once, or a checking front end stands between them
///   and the cache, as the IOVA layer does (`magazine::iova::IovaDomain` refuses double
///   and foreign frees with an error). See [`docs::obligations`](crate::docs::obligations).
///
/// # Panics
///
/// A source may panic; the cache stays consistent and loses no item, except that a panic
/// while the cache itself is being dropped leaves the remaining items to be dropped with
/// it ([`docs::failures`](crate::docs::failures#a-source-that-panics) has each path). A
/// source may also call into its own cache, but not from a signal handler.
///
/// # Example
///
/// A slab of fixed-size blocks handed out as indices, refilled from a counter:
///
/// ```
/// use magazine::{Cache, Source};
/// use std::sync::Mutex;
///
/// struct Slab {
///     free: Mutex<Vec<usize>>,
///     next: Mutex<usize>,
///     blocks: usize,
/// }
///
/// impl Source for Slab {
///     type Item = usize;
///
///     fn alloc(&self) -> Option<usize> {
///         if let Some(block) = self.free.lock().unwrap().pop() {
///             return Some(block);
///         }
///         let mut next = self.next.lock().unwrap();
///         (*next < self.blocks).then(|| {
///             *next += 1;
///             *next - 1
///         })
///     }
///
///     fn free_batch(&self, blocks: &mut dyn Iterator<Item = usize>) {
///         // One lock per magazine, not per block.
///         self.free.lock().unwrap().extend(blocks);
///     }
/// }
///
/// let cache = Cache::new(Slab { free: Mutex::new(Vec::new()), next: Mutex::new(0), blocks: 2 });
/// let (a, b) = (cache.alloc().unwrap(), cache.alloc().unwrap());
/// assert_eq!(cache.alloc(), None, "two blocks only");
/// cache.free(a);
/// cache.free(b);
/// ```
///
/// [`Cache::free`]: crate::Cache::free
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

/// Forwards to the source behind a reference or a smart pointer, so that a cache can
/// share its source with the rest of the program (`Cache<Arc<MySource>>`).
macro_rules! forward_source {
    ($($pointer:ty),*) => {$(
        impl<S: Source + ?Sized> Source for $pointer {
            type Item = S::Item;

            fn alloc(&self) -> Option<S::Item> {
                (**self).alloc()
            }

            fn free_batch(&self, items: &mut dyn Iterator<Item = S::Item>) {
                (**self).free_batch(items)
            }
        }
    )*};
}

forward_source!(&S, Box<S>, Arc<S>);
