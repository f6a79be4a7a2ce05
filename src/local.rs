//! A per-thread handle: its own loaded and previous magazines, no atomics on a hit.

use alloc::collections::TryReserveError;
use core::fmt;
use core::mem::ManuallyDrop;

use crate::cache::{Cache, Home};
use crate::depot::Near;
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
/// Like [`Cache::free`], [`free`](Self::free) takes any item on trust: free each item at
/// most once per allocation, and only items of this cache or its source. A double or
/// foreign free is not detected and leads to an item handed out twice or given to the
/// source (see [`docs::obligations`](crate::docs::obligations)).
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) (its magazines are
/// owned, never shared) and [3](crate::docs::design#invariant-3-progress) (no path waits
/// for another thread, except an allocation that finds the source exhausted while
/// another thread flushes the cache: see [the exhaustion
/// rule](crate::docs::design#the-exhaustion-rule)).
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
///
/// # In a `thread_local!`
///
/// A handle per thread without passing one around: keep it in a `thread_local!`. The
/// handle borrows its cache and a thread-local lives as long as its thread, so the cache
/// must be `'static`, e.g. a `static` `std::sync::LazyLock`. Each thread's
/// handle is made on its first use and dropped when the thread exits, which gives its
/// magazines to the depot. A `static` is never dropped: [`Cache::flush`] returns what is
/// cached when the source must see everything come back. (`examples/thread_local.rs` is
/// the same as a program.)
///
/// ```
/// use std::cell::RefCell;
/// use std::sync::LazyLock;
/// use magazine::{Cache, LocalCache, Source};
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
///
/// static CACHE: LazyLock<Cache<Ids>> = LazyLock::new(|| Cache::new(Ids(Default::default())));
///
/// thread_local! {
///     static LOCAL: RefCell<LocalCache<'static, Ids>> = RefCell::new(CACHE.local());
/// }
///
/// fn alloc_id() -> u32 {
///     LOCAL.with(|local| local.borrow_mut().alloc()).expect("ids never run out")
/// }
///
/// fn free_id(id: u32) {
///     LOCAL.with(|local| local.borrow_mut().free(id));
/// }
///
/// let worker = std::thread::spawn(|| {
///     let id = alloc_id();
///     free_id(id);
///     assert_eq!(alloc_id(), id, "a hit on this thread's handle");
///     free_id(id);
///     id
/// });
/// // The worker's handle was dropped: its magazine (the source's batch of 127 ids, the
/// // last one freed on top) waits in the depot.
/// let id = worker.join().unwrap();
/// assert_eq!(CACHE.cached(), 127);
/// assert_eq!(alloc_id(), id, "this thread's handle refills from the depot");
/// ```
pub struct LocalCache<'a, S: Source> {
    cache: &'a Cache<S>,
    /// Taken out only by `drop`.
    magazines: ManuallyDrop<MagazinePair<S::Item>>,
    /// Counts not yet published to the cache's counters (see [`PUBLISH_EVERY`]).
    alloc_hits: usize,
    free_hits: usize,
    depot_pops: usize,
    depot_pushes: usize,
}

/// Hits a handle counts before it publishes them to the cache's shared counters (on a
/// miss; also on drop). Publishing on every exchange put a contended read-modify-write on
/// the depot exchange; now `Stats` lags behind a live handle by at most this many hits
/// per side.
const PUBLISH_EVERY: usize = 4096;

// The handle's constructor lives beside the handle, so that the per-CPU front end
// (`cache.rs`) does not depend on this one.
impl<S: Source> Cache<S> {
    /// Returns a per-thread handle whose hits touch no atomic at all (see [`LocalCache`]).
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
    /// let mut local = cache.local(); // one per worker thread
    /// let id = local.alloc().unwrap();
    /// local.free(id);
    /// assert_eq!(local.alloc(), Some(id), "a hit: no atomic instruction");
    /// drop(local); // its magazines go to the depot, nothing is lost
    /// ```
    ///
    /// The handle's two magazines are allocated here; if the allocator refuses them the
    /// process aborts, as for any `Vec` ([`try_local`](Self::try_local) returns the error).
    pub fn local(&self) -> LocalCache<'_, S> {
        self.try_local().unwrap_or_else(|_| {
            alloc::alloc::handle_alloc_error(crate::cache::magazine_layout::<S::Item>(
                self.config(),
            ))
        })
    }

    /// [`local`](Self::local) for callers that must not abort: the error when the
    /// allocator refuses the memory for the handle's two magazines.
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
    /// let mut local = cache.try_local()?;
    /// assert!(local.alloc().is_some());
    /// # Ok::<(), std::collections::TryReserveError>(())
    /// ```
    pub fn try_local(&self) -> Result<LocalCache<'_, S>, TryReserveError> {
        Ok(LocalCache {
            cache: self,
            magazines: ManuallyDrop::new(MagazinePair::try_new(self.config().magazine_size)?),
            alloc_hits: 0,
            free_hits: 0,
            depot_pops: 0,
            depot_pushes: 0,
        })
    }
}

impl<'a, S: Source> LocalCache<'a, S> {
    /// Allocates an item: from this handle's magazines, else a full magazine from the
    /// depot, else the source. When the source is exhausted, the cache's exhaustion path
    /// runs: a depot magazine, else a flush that keeps the first magazine with items it
    /// finds in a CPU slot or the depot (see [the exhaustion
    /// rule](crate::docs::design#the-exhaustion-rule)).
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
    /// let mut local = cache.local();
    /// let first = local.alloc().unwrap(); // a miss: the depot is empty, the source serves
    /// local.free(first);
    /// assert_eq!(local.alloc(), Some(first), "a hit in the handle's own magazine");
    /// ```
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
    ///
    /// ```
    /// use magazine::{Cache, Config};
    /// # use magazine::Source;
    /// # struct Ids(std::sync::atomic::AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// let config = Config { magazine_size: 2, ..Config::default() };
    /// let cache = Cache::with_config(Ids(Default::default()), config);
    /// let mut local = cache.local();
    /// let ids: Vec<u32> = (0..6).map(|_| local.alloc().unwrap()).collect();
    /// ids.into_iter().for_each(|id| local.free(id));
    /// // Two magazines of 2 in the handle; the third full one went to the depot.
    /// assert_eq!(cache.stats().depot_full, 1);
    /// drop(local);
    /// assert_eq!(cache.stats().depot_full, 3, "the handle's magazines joined it");
    /// ```
    #[inline]
    pub fn free(&mut self, item: S::Item) {
        match self.magazines.free(item) {
            Ok(()) => self.free_hits += 1,
            Err(item) => self.free_miss(item),
        }
    }

    /// The cache this handle belongs to.
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
    /// let local = cache.local();
    /// assert!(std::ptr::eq(local.cache(), &cache));
    /// ```
    pub fn cache(&self) -> &'a Cache<S> {
        self.cache
    }

    #[cold]
    fn alloc_miss(&mut self) -> Option<S::Item> {
        if self.alloc_hits >= PUBLISH_EVERY {
            self.publish_counters();
        }
        let near = self.near();
        if self.magazines.refill(&near) {
            self.depot_pops += 1;
            return self.magazines.alloc();
        }
        self.cache.alloc_slow(Home::Handle(&mut self.magazines))
    }

    #[cold]
    fn free_miss(&mut self, item: S::Item) {
        if self.free_hits >= PUBLISH_EVERY {
            self.publish_counters();
        }
        let near = self.near();
        match self.magazines.spill(item, &near) {
            Ok(()) => self.depot_pushes += 1,
            Err(overflow) => self.cache.release_overflow(overflow),
        }
    }

    /// The depot seen from the CPU this thread runs on now: its shelf first. Looked up at
    /// each exchange (a handle may move between CPUs; a stale guess costs a shared-stack
    /// exchange, never an item).
    fn near(&self) -> Near<'a, S::Item> {
        self.cache.depot().near(self.cache.current_cpu())
    }

    fn publish_counters(&mut self) {
        let counters = self.cache.counters();
        let take = core::mem::take::<usize>;
        counters.local_alloc.hits.add(take(&mut self.alloc_hits));
        counters
            .local_alloc
            .exchanges
            .add(take(&mut self.depot_pops));
        counters.local_free.hits.add(take(&mut self.free_hits));
        counters
            .local_free
            .exchanges
            .add(take(&mut self.depot_pushes));
    }
}

impl<S: Source> Drop for LocalCache<'_, S> {
    fn drop(&mut self) {
        self.publish_counters();
        // SAFETY: taken exactly once, here; `self.magazines` is not used afterwards.
        let MagazinePair { loaded, previous } = unsafe { ManuallyDrop::take(&mut self.magazines) };
        let previous = if cfg!(magazine_mutant = "local_drop_forgets_previous") {
            // MUTANT: the previous magazine is dropped with its items instead of placed.
            drop(previous);
            match crate::magazine::Magazine::try_new(self.cache.config().magazine_size) {
                Ok(empty) => empty,
                Err(_) => return,
            }
        } else {
            previous
        };
        // Place both magazines before calling the source, so that a panicking source
        // cannot drop the second: a refused one waits in a rescue guard.
        let depot = self.cache.depot();
        let mut pushed = 0;
        let refused = [loaded, previous].map(|magazine| {
            if magazine.is_empty() {
                depot.push_empty(magazine);
                return None;
            }
            let refused = depot.push_full(magazine).err();
            pushed += usize::from(refused.is_none());
            refused
        });
        self.cache.counters().depot_pushes.add(pushed);
        self.cache.release_each(refused);
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
