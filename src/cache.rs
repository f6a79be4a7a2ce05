//! The cache: per-CPU slots in front of the depot, in front of the source.

use alloc::boxed::Box;
use core::fmt;

use crossbeam_utils::CachePadded;

use crate::depot::Depot;
use crate::local::LocalCache;
use crate::magazine::Magazine;
use crate::pair::MagazinePair;
use crate::policy::{Config, Options};
use crate::slot::{Slot, SlotGuard};
use crate::source::Source;
use crate::stats::{SharedCounter, Stats};

/// A magazine/depot cache in front of a [`Source`].
///
/// `alloc` and `free` go to the calling CPU's slot (its loaded and previous magazines),
/// then exchange whole magazines with the lock-free depot, and only then call the source.
/// See the [crate docs](crate) for the layout, the guarantees and their limits.
///
/// Upholds DESIGN.md invariant 1 (conservation): every item it is given is in exactly one
/// slot magazine, handle magazine or depot magazine until it is handed out or returned to
/// the source, also across trim, flush, drop and a panicking source. It composes the
/// invariants of the CPU slots (3, progress), the depot (4, 5) and its stacks (2).
///
/// ```
/// use magazine::{Cache, Source};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// /// Hands out ids 0, 1, 2, ... and forgets freed ones (a real source would keep them).
/// struct Ids(AtomicU32);
///
/// impl Source for Ids {
///     type Item = u32;
///     fn alloc(&self) -> Option<u32> {
///         Some(self.0.fetch_add(1, Ordering::Relaxed))
///     }
///     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
///         items.for_each(drop);
///     }
/// }
///
/// let cache = Cache::new(Ids(AtomicU32::new(0)));
/// let id = cache.alloc().unwrap();
/// cache.free(id);
/// assert_eq!(cache.alloc(), Some(id), "a freed id comes back from the magazine");
/// assert_eq!(cache.stats().alloc_hits, 1);
/// ```
pub struct Cache<S: Source> {
    slots: Box<[CachePadded<Slot<S::Item>>]>,
    depot: Depot<S::Item>,
    config: Config,
    options: Options,
    source: S,
    counters: CacheCounters,
}

/// Counters of the slow paths and of `LocalCache` handles, shared by all threads. The
/// handles' hit counters are published on every depot exchange, by allocating threads and
/// by freeing threads respectively: each has a cache line of its own so that the two sides
/// of a hand-off do not bounce one line between them.
#[derive(Default)]
pub(crate) struct CacheCounters {
    pub(crate) source_allocs: SharedCounter,
    pub(crate) source_frees: SharedCounter,
    pub(crate) busy_misses: SharedCounter,
    pub(crate) exhaustion_flushes: SharedCounter,
    pub(crate) local_alloc_hits: CachePadded<SharedCounter>,
    pub(crate) local_free_hits: CachePadded<SharedCounter>,
}

impl<S: Source> Cache<S> {
    /// A cache with [`Config::default`]: magazines of 127 items, a slot per CPU, a
    /// dynamic depot trimmed by working set.
    pub fn new(source: S) -> Self {
        Self::with_config(source, Config::default())
    }

    /// A cache with the given configuration.
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0.
    pub fn with_config(source: S, config: Config) -> Self {
        Self::with_options(source, config, Options::default())
    }

    /// A cache with the given configuration and [`Options`].
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0.
    pub fn with_options(source: S, config: Config, options: Options) -> Self {
        assert!(
            config.magazine_size > 0,
            "Config::magazine_size must be at least 1"
        );
        assert!(config.cpus > 0, "Config::cpus must be at least 1");
        let slots = (0..config.cpus)
            .map(|_| CachePadded::new(Slot::new(config.magazine_size)))
            .collect();
        Self {
            slots,
            depot: Depot::new(&config, &options),
            config,
            options,
            source,
            counters: CacheCounters::default(),
        }
    }

    /// Allocates an item: from the current CPU's magazines, else a full magazine from the
    /// depot, else the source. When the source is exhausted, everything cached is
    /// returned to it and the allocation is retried once (Linux's
    /// `alloc_iova_fast(..., flush_rcache = true)`); `None` means the source is empty even
    /// then.
    #[inline]
    pub fn alloc(&self) -> Option<S::Item> {
        self.alloc_on(self.current_cpu())
    }

    /// Frees an item: into the current CPU's magazines, else by giving a full magazine to
    /// the depot, else (a `Fixed` depot at its cap) by returning a magazine's worth of
    /// items to the source.
    #[inline]
    pub fn free(&self, item: S::Item) {
        self.free_on(self.current_cpu(), item)
    }

    /// [`alloc`](Self::alloc) on the slot of `cpu` (taken modulo [`Config::cpus`]), for
    /// pinned threads and simulators.
    #[inline]
    pub fn alloc_on(&self, cpu: usize) -> Option<S::Item> {
        if let Some(mut slot) = self.take_slot(cpu) {
            if let Some(item) = slot.with(|magazines| magazines.alloc()) {
                slot.slot().alloc_hits.add(1);
                return Some(item);
            }
            if let Some(item) = slot.with(|magazines| magazines.refill(&self.depot)) {
                return Some(item);
            }
        }
        self.alloc_slow()
    }

    /// [`free`](Self::free) on the slot of `cpu` (taken modulo [`Config::cpus`]).
    #[inline]
    pub fn free_on(&self, cpu: usize, item: S::Item) {
        let Some(mut slot) = self.take_slot(cpu) else {
            return self.free_slow(item);
        };
        let item = match slot.with(|magazines| magazines.free(item)) {
            Ok(()) => {
                slot.slot().free_hits.add(1);
                return;
            }
            Err(item) => item,
        };
        let size = self.config.magazine_size;
        let refused = slot.with(|magazines| magazines.spill(item, &self.depot, size));
        drop(slot);
        if let Some(full) = refused {
            let empty = self.release(full);
            self.depot.push_empty(empty);
        }
    }

    /// Allocates an item from the cache only, never from the source: the newest cached
    /// item on the current CPU's slot (or in a full magazine from the depot) for which
    /// `accept` returns true. For callers whose source needs arguments the `Source` trait
    /// does not carry, such as an IOVA allocator's `limit_pfn`: on `None` they call their
    /// allocator themselves.
    pub fn alloc_cached_where(&self, accept: impl FnMut(&S::Item) -> bool) -> Option<S::Item> {
        self.alloc_cached_where_on(self.current_cpu(), accept)
    }

    /// [`alloc_cached_where`](Self::alloc_cached_where) on the slot of `cpu`.
    pub fn alloc_cached_where_on(
        &self,
        cpu: usize,
        mut accept: impl FnMut(&S::Item) -> bool,
    ) -> Option<S::Item> {
        let mut slot = self.take_slot(cpu)?;
        if let Some(item) = slot.with(|magazines| magazines.alloc_where(&mut accept)) {
            slot.slot().alloc_hits.add(1);
            return Some(item);
        }
        // As Linux's `__iova_rcache_get`: a depot magazine only when both of the slot's
        // are empty; when they hold items that do not fit, the caller's allocator serves.
        slot.with(|magazines| {
            if !magazines.is_empty() {
                return None;
            }
            magazines.refill_with(&self.depot, |loaded| loaded.pop_where(accept))
        })
    }

    /// Returns a per-thread handle whose hits touch no atomic at all (see [`LocalCache`]).
    pub fn local(&self) -> LocalCache<'_, S> {
        LocalCache::new(self)
    }

    /// One trim step of the depot policy; returns the number of full magazines released
    /// (their items go to the source). Call it periodically, e.g. every 100 ms as Linux
    /// does; the cache starts no thread of its own.
    ///
    /// - `Dynamic { trim: WorkingSet }` releases the magazines that stayed in the depot
    ///   during the whole interval since the previous call, never more, and never going
    ///   below `target`;
    /// - `Dynamic { trim: OnePerTick }` releases one magazine if the depot holds more than
    ///   `target`;
    /// - `Fixed` releases no full magazine.
    ///
    /// In every policy, empty magazines unused during the whole interval are freed. A trim
    /// that finds another trim running returns 0 at once.
    pub fn trim(&self) -> usize {
        self.depot.trim(|full| drop(self.release(full)))
    }

    /// Returns the items of `cpu`'s slot to the source, like a CPU going offline. Waits
    /// for a thread that is working on that slot to finish.
    pub fn flush_cpu(&self, cpu: usize) {
        let mut slot = self.slots[cpu % self.slots.len()].take();
        self.drain_slot(&mut slot);
    }

    /// Returns every cached item to the source: every slot (waiting for busy ones), then
    /// every depot magazine. Empty magazines are freed. Live [`LocalCache`] handles keep
    /// their own magazines.
    pub fn flush(&self) {
        for cpu in 0..self.slots.len() {
            self.flush_cpu(cpu);
        }
        self.drain_depot();
    }

    /// Like [`flush`](Self::flush), but skips slots that another thread is working on
    /// instead of waiting for them. This is what an exhausted `alloc` does.
    pub fn try_flush(&self) {
        for slot in self.slots.iter() {
            if let Some(mut slot) = slot.try_take() {
                self.drain_slot(&mut slot);
            }
        }
        self.drain_depot();
    }

    /// A snapshot of the counters (see [`Stats`]).
    pub fn stats(&self) -> Stats {
        let (alloc_hits, free_hits) = self.slots.iter().fold((0, 0), |(a, f), slot| {
            (a + slot.alloc_hits.get(), f + slot.free_hits.get())
        });
        Stats {
            alloc_hits: alloc_hits + self.counters.local_alloc_hits.get(),
            free_hits: free_hits + self.counters.local_free_hits.get(),
            depot_pops: self.depot.pops() as u64,
            depot_pushes: self.depot.pushes() as u64,
            source_allocs: self.counters.source_allocs.get(),
            source_frees: self.counters.source_frees.get(),
            trimmed: self.depot.trimmed() as u64,
            depot_full: self.depot.full_len(),
            depot_empty: self.depot.empty_len(),
            depot_peak: self.depot.peak(),
            busy_misses: self.counters.busy_misses.get(),
            exhaustion_flushes: self.counters.exhaustion_flushes.get(),
        }
    }

    /// The backing allocator.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The configuration the cache was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Items held in the CPU slots and the depot (not in `LocalCache` handles). Takes
    /// each slot in turn (waiting for busy ones), so the figure is exact only when
    /// quiescent.
    pub fn cached(&self) -> usize {
        let in_slots: usize = self
            .slots
            .iter()
            .map(|slot| slot.take().with(|magazines| magazines.len()))
            .sum();
        in_slots + self.depot.full_items()
    }

    pub(crate) fn depot(&self) -> &Depot<S::Item> {
        &self.depot
    }

    pub(crate) fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    /// The slot hint of the calling thread (see [`Options::current_cpu`]).
    #[inline]
    fn current_cpu(&self) -> usize {
        match self.options.current_cpu {
            Some(current_cpu) => current_cpu(),
            None => crate::cpu::current(),
        }
    }

    /// Takes the slot of `cpu`, or, when another thread holds it, the next free slot;
    /// `None` (a busy miss) when every slot is held. Never waits.
    #[inline]
    fn take_slot(&self, cpu: usize) -> Option<SlotGuard<'_, S::Item>> {
        let n = self.slots.len();
        let first = if cpu < n { cpu } else { cpu % n };
        #[cfg(not(magazine_mutant = "busy_slot_waits"))]
        if let Some(slot) = self.slots[first].try_take() {
            return Some(slot);
        }
        // MUTANT: the busy path waits for the slot's owner instead of missing.
        #[cfg(magazine_mutant = "busy_slot_waits")]
        return Some(self.slots[first].take());
        self.take_other_slot(first)
    }

    #[cold]
    fn take_other_slot(&self, busy: usize) -> Option<SlotGuard<'_, S::Item>> {
        self.counters.busy_misses.add(1);
        let n = self.slots.len();
        (1..n).find_map(|step| self.slots[(busy + step) % n].try_take())
    }

    /// Allocation from the source, with one flush-and-retry on exhaustion.
    #[cold]
    pub(crate) fn alloc_slow(&self) -> Option<S::Item> {
        if let Some(item) = self.source_alloc() {
            return Some(item);
        }
        self.counters.exhaustion_flushes.add(1);
        self.try_flush();
        self.source_alloc()
    }

    fn source_alloc(&self) -> Option<S::Item> {
        let item = self.source.alloc();
        if item.is_some() {
            self.counters.source_allocs.add(1);
        }
        item
    }

    /// Every slot is busy: the item goes straight to the source.
    #[cold]
    fn free_slow(&self, item: S::Item) {
        let mut single = Magazine::new(1);
        if single.push(item).is_ok() {
            drop(self.release(single));
        }
    }

    /// Returns a magazine's items to the source; returns the magazine, now empty.
    ///
    /// If the source panics, the items it has not taken stay in the magazine and the
    /// magazine goes into the depot (past a `Fixed` cap if need be): nothing is lost.
    pub(crate) fn release(&self, magazine: Magazine<S::Item>) -> Magazine<S::Item> {
        let mut rescue = Rescue::new(&self.depot, Some(magazine));
        let magazine = rescue.magazine.as_mut().expect("set above");
        self.free_to_source(magazine);
        rescue.take().expect("set above")
    }

    /// Hands every item of `magazine` to the source (see [`Source::free_batch`] for a
    /// source that stops early).
    fn free_to_source(&self, magazine: &mut Magazine<S::Item>) {
        while !magazine.is_empty() {
            let before = magazine.len();
            self.source.free_batch(&mut magazine.drain());
            let taken = before - magazine.len();
            self.counters.source_frees.add(taken);
            if taken == 0 {
                magazine.drain().for_each(drop);
            }
        }
    }

    /// Returns both magazines of an owned slot to the source, in place: if the source
    /// panics, what it did not take stays in the slot.
    fn drain_slot(&self, slot: &mut SlotGuard<'_, S::Item>) {
        slot.with(|magazines| self.drain_magazines(magazines));
    }

    fn drain_magazines(&self, magazines: &mut MagazinePair<S::Item>) {
        self.free_to_source(&mut magazines.loaded);
        self.free_to_source(&mut magazines.previous);
    }

    /// Returns every full depot magazine to the source and frees the empty ones.
    fn drain_depot(&self) {
        self.depot.drain(|full| drop(self.release(full)));
    }
}

/// Holds a magazine that is out of every slot and stack while the source runs; if the
/// source panics, the guard puts the magazine (with the items the source did not take)
/// into the depot, past a `Fixed` cap if need be.
pub(crate) struct Rescue<'a, T> {
    depot: &'a Depot<T>,
    magazine: Option<Magazine<T>>,
}

impl<'a, T> Rescue<'a, T> {
    pub(crate) fn new(depot: &'a Depot<T>, magazine: Option<Magazine<T>>) -> Self {
        Self { depot, magazine }
    }

    /// Takes the magazine back: the danger is over.
    pub(crate) fn take(&mut self) -> Option<Magazine<T>> {
        self.magazine.take()
    }
}

impl<T> Drop for Rescue<'_, T> {
    fn drop(&mut self) {
        if let Some(magazine) = self.magazine.take() {
            if !magazine.is_empty() {
                self.depot.push_full_unbounded(magazine);
            }
        }
    }
}

impl<S: Source> Drop for Cache<S> {
    /// Returns every cached item to the source.
    fn drop(&mut self) {
        let mut slots = core::mem::take(&mut self.slots);
        for slot in slots.iter_mut() {
            self.drain_magazines(slot.get_mut());
        }
        self.drain_depot();
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for Cache<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("config", &self.config)
            .field("source", &self.source)
            .field("stats", &self.stats())
            .finish()
    }
}
