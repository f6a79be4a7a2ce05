//! The slow backing allocator behind a cache.

use alloc::boxed::Box;
use alloc::sync::Arc;

/// The backing allocator: a range allocator, an id allocator, a slab.
///
/// The cache calls it only on its slow paths: `alloc_batch` (or `alloc`, one item at a
/// time, with [`Options::source_batch`](crate::Options::source_batch) of 1) when no
/// magazine can serve, and `free_batch` with whole magazines (overflow of a `Fixed`
/// depot, trim, flush, drop).
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

    /// Slow path: up to `max` items from the backing allocator in one call, each handed
    /// to `out`; returns how many it handed (fewer than `max`, down to 0, when the
    /// allocator runs short). The cache calls it when an allocation finds its magazines
    /// and the depot empty, to fill a whole magazine with one call (one lock hold of the
    /// allocator, where [`alloc`](Self::alloc) would take it once per item): see
    /// [`Options::source_batch`](crate::Options::source_batch).
    ///
    /// The default calls [`alloc`](Self::alloc) until it has handed `max` items or the
    /// allocator is exhausted, so sources written before batches keep working; implement
    /// it to allocate under one lock hold. Hand each item to `out` as soon as it is
    /// yours: if the source panics half way, the items it has handed are kept by the cache
    /// (none is lost), and the ones it has not are its own. Handing more than `max` items
    /// is a broken contract that the cache survives (the extra items are cached, not
    /// lost), but not one to rely on.
    ///
    /// ```
    /// use magazine::Source;
    /// use std::sync::Mutex;
    ///
    /// struct Ids(Mutex<Vec<u32>>);
    ///
    /// impl Source for Ids {
    ///     type Item = u32;
    ///     fn alloc(&self) -> Option<u32> {
    ///         self.0.lock().unwrap().pop()
    ///     }
    ///     fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u32)) -> usize {
    ///         // One lock hold for the whole batch.
    ///         let mut free = self.0.lock().unwrap();
    ///         let take = max.min(free.len());
    ///         let start = free.len() - take;
    ///         free.drain(start..).for_each(&mut *out);
    ///         take
    ///     }
    ///     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
    ///         self.0.lock().unwrap().extend(items);
    ///     }
    /// }
    ///
    /// let ids = Ids(Mutex::new((0..10).collect()));
    /// let mut got = Vec::new();
    /// assert_eq!(ids.alloc_batch(4, &mut |id| got.push(id)), 4);
    /// assert_eq!(got, [6, 7, 8, 9]);
    /// assert_eq!(ids.alloc_batch(100, &mut |id| got.push(id)), 6, "short: the rest");
    /// assert_eq!(ids.alloc_batch(100, &mut |id| got.push(id)), 0, "exhausted");
    /// ```
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(Self::Item)) -> usize {
        let mut handed = 0;
        while handed < max {
            let Some(item) = self.alloc() else {
                break;
            };
            out(item);
            handed += 1;
        }
        handed
    }

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

            fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(S::Item)) -> usize {
                (**self).alloc_batch(max, out)
            }

            fn free_batch(&self, items: &mut dyn Iterator<Item = S::Item>) {
                (**self).free_batch(items)
            }
        }
    )*};
}

forward_source!(&S, Box<S>, Arc<S>);
