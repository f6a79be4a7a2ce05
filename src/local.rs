//! A per-thread handle: its own loaded and previous magazines, no atomics on a hit.

use core::fmt;
use core::mem::ManuallyDrop;

use crate::cache::{Cache, Rescue};
use crate::pair::MagazinePair;
use crate::source::Source;

/// A per-thread front end of a [`Cache`], from [`Cache::local`].
///
/// It owns a loaded and a previous magazine, so a hit is a plain array operation with no
/// atomic instruction and no CPU lookup; only an exchange with the depot (once per
/// `magazine_size` operations at most) touches shared memory. Use one per worker thread
/// when threads are long-lived; the per-CPU path ([`Cache::alloc`]) suits everything else.
///
/// On drop, its magazines (partly filled ones too) go to the depot, or to the source when
/// a `Fixed` depot is at its cap: nothing is lost, and the items stay cached for other
/// threads. It is `Send`, so it may be dropped on another thread.
///
/// Upholds DESIGN.md invariant 1 (its magazines are owned, never shared) and 3 (no path
/// waits for another thread).
///
/// ```
/// use magazine::{Cache, Source};
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
/// let cache = Cache::new(Ids(Default::default()));
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let mut local = cache.local();
///             for _ in 0..1000 {
///                 let id = local.alloc().unwrap();
///                 local.free(id);
///             }
///         });
///     }
/// });
/// assert!(cache.stats().alloc_hits >= 1998);
/// ```
pub struct LocalCache<'a, S: Source> {
    cache: &'a Cache<S>,
    /// Taken out only by `drop`.
    magazines: ManuallyDrop<MagazinePair<S::Item>>,
    /// Hits not yet published to the cache's counters.
    alloc_hits: usize,
    free_hits: usize,
}

impl<'a, S: Source> LocalCache<'a, S> {
    pub(crate) fn new(cache: &'a Cache<S>) -> Self {
        Self {
            cache,
            magazines: ManuallyDrop::new(MagazinePair::new(cache.config().magazine_size)),
            alloc_hits: 0,
            free_hits: 0,
        }
    }

    /// Allocates an item: from this handle's magazines, else a full magazine from the
    /// depot, else the source (with the cache's flush-and-retry on exhaustion).
    #[inline]
    pub fn alloc(&mut self) -> Option<S::Item> {
        match self.magazines.alloc() {
            Some(item) => {
                self.alloc_hits += 1;
                Some(item)
            }
            None => self.alloc_miss(),
        }
    }

    /// Frees an item: into this handle's magazines, else by giving a full magazine to the
    /// depot, else to the source.
    #[inline]
    pub fn free(&mut self, item: S::Item) {
        match self.magazines.free(item) {
            Ok(()) => self.free_hits += 1,
            Err(item) => self.free_miss(item),
        }
    }

    /// The cache this handle belongs to.
    pub fn cache(&self) -> &'a Cache<S> {
        self.cache
    }

    #[cold]
    fn alloc_miss(&mut self) -> Option<S::Item> {
        self.publish_counters();
        self.magazines
            .refill(self.cache.depot())
            .or_else(|| self.cache.alloc_slow())
    }

    #[cold]
    fn free_miss(&mut self, item: S::Item) {
        self.publish_counters();
        let size = self.cache.config().magazine_size;
        if let Some(full) = self.magazines.spill(item, self.cache.depot(), size) {
            let empty = self.cache.release(full);
            self.cache.depot().push_empty(empty);
        }
    }

    fn publish_counters(&mut self) {
        let counters = self.cache.counters();
        counters
            .local_alloc_hits
            .add(core::mem::take(&mut self.alloc_hits));
        counters
            .local_free_hits
            .add(core::mem::take(&mut self.free_hits));
    }
}

impl<S: Source> Drop for LocalCache<'_, S> {
    fn drop(&mut self) {
        self.publish_counters();
        // SAFETY: taken exactly once, here; `self.magazines` is not used afterwards.
        let MagazinePair { loaded, previous } = unsafe { ManuallyDrop::take(&mut self.magazines) };
        // MUTANT: the previous magazine is dropped with its items instead of being placed.
        #[cfg(magazine_mutant = "local_drop_forgets_previous")]
        let previous = {
            drop(previous);
            crate::magazine::Magazine::new(self.cache.config().magazine_size)
        };
        let depot = self.cache.depot();
        // Place both magazines before calling the source, so that a panicking source
        // cannot drop the second: a refused one waits in a rescue guard.
        let refused = [loaded, previous].map(|magazine| {
            if magazine.is_empty() {
                depot.push_empty(magazine);
                None
            } else {
                depot.push_full(magazine).err()
            }
        });
        let mut pending = refused.map(|magazine| Rescue::new(depot, magazine));
        for rescue in &mut pending {
            if let Some(full) = rescue.take() {
                let empty = self.cache.release(full);
                depot.push_empty(empty);
            }
        }
    }
}

impl<S: Source> fmt::Debug for LocalCache<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalCache")
            .field("loaded", &self.magazines.loaded)
            .field("previous", &self.magazines.previous)
            .finish()
    }
}
