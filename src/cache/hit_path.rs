//! [`HitPath`]: a cache's hits, run from a copy of where its slots are.

use core::fmt;
use core::marker::PhantomData;

use crate::source::Source;

use super::Cache;

/// A cache's hits ([`Cache::alloc_if_hit`], [`Cache::free_if_hit`]), run from a copy of
/// what they read of the cache: where its slots are. Made by [`Cache::hit_path`] for a
/// cache that [runs restartable sequences](Cache::runs_restartable_sequences), and
/// borrowing it.
///
/// It exists for allocators that keep many caches and look one up on every call: a hit
/// through the cache reads the cache's own fields first (a cache line of metadata of its
/// own), while a `HitPath` of 48 bytes fits in one line beside whatever the caller keeps
/// per cache (a state, a size), so that a lookup and a hit touch one line fewer. In a
/// program whose own work evicts the allocator's metadata between calls, each line is a
/// cache miss. Its hits are the cache's, counted in its statistics.
///
/// ```
/// use magazine::Cache;
/// # use magazine::Source;
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
///
/// let cache = Cache::new(Ids(Default::default()));
/// let id = cache.alloc().unwrap();
/// match cache.hit_path() {
///     Some(hits) => {
///         if let Err(id) = hits.free_if_hit(id) {
///             cache.free(id); // a miss: the magazine was full
///         }
///     }
///     None => cache.free(id), // no restartable sequences here
/// }
/// ```
pub struct HitPath<'a, S: Source> {
    /// A copy of the cache's, which never changes while the cache lives.
    #[cfg(all(magazine_rseq, not(miri)))]
    layout: crate::rseq::Layout,
    /// The borrow of the cache: its slots outlive the copy, and the path is `Send` and
    /// `Sync` exactly when the cache is.
    _cache: PhantomData<&'a Cache<S>>,
}

impl<S: Source> Cache<S> {
    /// A copy of what this cache's hits read, to run them without the cache's address
    /// ([`HitPath`]); `None` when the cache does not
    /// [run restartable sequences](Self::runs_restartable_sequences) (its hits take the
    /// slot through the cache then).
    pub fn hit_path(&self) -> Option<HitPath<'_, S>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        return self.sequences.map(|layout| HitPath {
            layout,
            _cache: PhantomData,
        });
        #[cfg(not(all(magazine_rseq, not(miri))))]
        None
    }
}

impl<S: Source> HitPath<'_, S> {
    /// [`Cache::alloc_if_hit`] of the cache: an item from the loaded magazine of the
    /// current CPU's slot, counted as a hit; `None`, with nothing done, on anything else.
    /// It never calls the source, allocates, takes a lock, pins the epoch or waits.
    #[inline]
    pub fn alloc_if_hit(&self) -> Option<S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        // SAFETY: `layout` is the cache's (copied; it never changes), whose slots outlive
        // `self` (the borrow), taken only by the fenced protocol since the cache runs
        // sequences. The sequence is assembly that cannot unwind; on any miss it changed
        // nothing.
        return unsafe { crate::rseq::alloc(&self.layout, crate::rseq::ANY_CPU) }.ok();
        #[cfg(not(all(magazine_rseq, not(miri))))]
        None
    }

    /// [`Cache::free_if_hit`] of the cache: `item` pushed onto the loaded magazine of the
    /// current CPU's slot, counted as a hit; the item handed back, with nothing done, on
    /// anything else. Like [`alloc_if_hit`](Self::alloc_if_hit), it never calls the
    /// source, allocates, takes a lock, pins or waits.
    ///
    /// # Errors
    ///
    /// The item, when the hit did not happen.
    #[inline]
    pub fn free_if_hit(&self, item: S::Item) -> Result<(), S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        // SAFETY: as in `alloc_if_hit`.
        return unsafe { crate::rseq::free(&self.layout, crate::rseq::ANY_CPU, item) }
            .map_err(|(item, _)| item);
        #[cfg(not(all(magazine_rseq, not(miri))))]
        Err(item)
    }
}

impl<S: Source> Clone for HitPath<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: Source> Copy for HitPath<'_, S> {}

impl<S: Source> fmt::Debug for HitPath<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HitPath").finish_non_exhaustive()
    }
}
