//! The cache: per-CPU slots in front of the depot, in front of the source. The slow path
//! of an allocation is in [`exhaustion`]; returning items to the source, in [`release`].

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use core::fmt;

use crossbeam_utils::CachePadded;

use crate::depot::Depot;
use crate::depot::Overflow;
use crate::policy::{Config, Options};
use crate::process_flag::ProcessFlag;
use crate::slot::{Slot, SlotGuard, Taken};
use crate::source::Source;
use crate::stats::{OwnedCounter, SharedCounter, Stats};
use crate::sync::AtomicBool;

mod exhaustion;
mod hit_path;
mod release;

pub use hit_path::HitPath;

pub(crate) use exhaustion::Home;

/// A magazine/depot cache in front of a [`Source`].
///
/// `alloc` and `free` go to the calling CPU's slot (its loaded and previous magazines),
/// then exchange whole magazines with the lock-free depot, and only then call the source.
/// See the [crate docs](crate) for the layout, the guarantees and their limits.
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) (conservation): every item it is given is in exactly one
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
///
/// # The caller's obligation: free each item once
///
/// [`free`](Self::free) and [`free_on`](Self::free_on) take any `S::Item` on trust: the
/// cache never looks inside an item. An item freed twice is cached twice and later handed
/// out to two owners; an item that did not come from this cache or its source is cached
/// and eventually passed to the source's `free_batch`. The cache cannot detect either, so
/// [conservation](crate::docs::design#invariant-1-conservation) holds only for callers that
/// free each allocated item exactly once. When callers cannot be trusted, put a checking
/// front end before the cache, as `magazine::iova::IovaDomain` does (feature `iova`): it
/// records what its fast path hands out and refuses a double or foreign free with an
/// error. See [`docs::obligations`](crate::docs::obligations).
pub struct Cache<S: Source> {
    slots: Box<[CachePadded<Slot<S::Item>>]>,
    depot: Depot<S::Item>,
    config: Config,
    options: Options,
    source: S,
    counters: CacheCounters,
    /// Whether the last allocation from the source found it exhausted, and no item went
    /// to the source since. A hint that only orders the slow path (an exhausted
    /// allocation does not ask the source first while it stays dry; it asks at the end in
    /// any case); never needed for correctness. Written only when it changes.
    source_dry: AtomicBool,
    /// True while an exhausted allocation flushes the cache: one flush at a time, the
    /// others wait for it while retrying what is cached.
    ///
    /// | value | meaning         | transition                                                  |
    /// |-------|-----------------|-------------------------------------------------------------|
    /// | clear | no flush        | `try_set` (Acquire) by the flushing thread; a forked child takes a flag its parent held over |
    /// | set   | flush running   | `clear` (Release) by the same thread, also on unwind        |
    flushing: ProcessFlag,
    /// Where the slots are for the restartable sequences of `src/rseq.rs`, when the cache
    /// runs them (see [`Options::restartable_sequences`]).
    #[cfg(all(magazine_rseq, not(miri)))]
    sequences: Option<crate::rseq::Layout>,
}

/// Counters of the slow paths and of `LocalCache` handles, shared by all threads; nothing
/// on a hit or a slot's depot exchange writes them (those count in the slot). Handles
/// publish their counts in batches (see [`LocalCache`](crate::LocalCache)); each side of a hand-off has a
/// cache line of its own so that the two do not bounce one line between them.
#[derive(Default)]
pub(crate) struct CacheCounters {
    pub(crate) source_allocs: SharedCounter,
    pub(crate) source_alloc_calls: SharedCounter,
    pub(crate) source_frees: SharedCounter,
    pub(crate) source_free_calls: SharedCounter,
    pub(crate) busy_misses: SharedCounter,
    pub(crate) exhaustion_flushes: SharedCounter,
    pub(crate) steals: SharedCounter,
    pub(crate) trimmed: SharedCounter,
    /// Depot exchanges outside a slot: trims, flushes, busy misses, steals.
    pub(crate) depot_pops: SharedCounter,
    pub(crate) depot_pushes: SharedCounter,
    /// Published by handles.
    pub(crate) local_alloc: CachePadded<LocalCounts>,
    pub(crate) local_free: CachePadded<LocalCounts>,
}

/// What handles publish from one side (allocating or freeing).
#[derive(Default)]
pub(crate) struct LocalCounts {
    pub(crate) hits: SharedCounter,
    pub(crate) exchanges: SharedCounter,
}

impl<S: Source> Cache<S> {
    /// A cache with [`Config::default`]: magazines of 127 items, a slot per CPU, a
    /// dynamic depot trimmed by working set.
    ///
    /// # Panics
    ///
    /// As [`with_config`](Self::with_config); with the default magazine of 127 items that
    /// is never for items under ~72 PB, but the allocation itself may abort as described
    /// there.
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
    /// assert_eq!(cache.config().magazine_size, 127);
    /// ```
    pub fn new(source: S) -> Self {
        Self::with_config(source, Config::default())
    }

    /// A cache with the given configuration.
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0, or with "capacity overflow" if one
    /// magazine of `config.magazine_size` items exceeds `isize::MAX` bytes
    /// (`magazine_size * size_of::<S::Item>()`). Every CPU slot allocates its two magazines
    /// up front, `cpus * 2 * magazine_size` items in all: if the allocator cannot provide
    /// that memory the process aborts, as for any `Vec`, rather than panics. Building a
    /// magazine takes time proportional to `magazine_size`, even for zero-sized items.
    ///
    /// ```
    /// use magazine::{Cache, Config, DepotPolicy};
    /// # use magazine::Source;
    /// # struct Ids(std::sync::atomic::AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// // Linux <= 6.6: magazines of 127, at most 32 full ones in the depot.
    /// let config = Config { depot: DepotPolicy::Fixed { max_full: 32 }, ..Config::default() };
    /// let cache = Cache::with_config(Ids(Default::default()), config);
    /// assert_eq!(cache.config().depot, DepotPolicy::Fixed { max_full: 32 });
    /// ```
    pub fn with_config(source: S, config: Config) -> Self {
        Self::with_options(source, config, Options::default())
    }

    /// A cache with the given configuration and [`Options`].
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0, or with "capacity overflow" if one
    /// magazine of `config.magazine_size` items exceeds `isize::MAX` bytes
    /// (`magazine_size * size_of::<S::Item>()`). Every CPU slot allocates its two magazines
    /// up front, `cpus * 2 * magazine_size` items in all: if the allocator cannot provide
    /// that memory the process aborts, as for any `Vec`, rather than panics. Building a
    /// magazine takes time proportional to `magazine_size`, even for zero-sized items.
    ///
    /// ```
    /// use magazine::{Cache, Config, Options};
    /// # use magazine::Source;
    /// # struct Ids(std::sync::atomic::AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// let mut options = Options::default();
    /// options.max_empty = Some(2); // keep at most 2 empty magazines for reuse
    /// options.current_cpu = Some(|| 0); // e.g. a no_std target's CPU-id register
    /// let cache = Cache::with_options(Ids(Default::default()), Config::default(), options);
    /// let id = cache.alloc().unwrap();
    /// cache.free(id);
    /// assert_eq!(cache.alloc_on(0), Some(id), "alloc and free used slot 0");
    /// ```
    pub fn with_options(source: S, config: Config, options: Options) -> Self {
        // As `Vec`: a size beyond `isize::MAX` panics, a refusal of the memory aborts.
        assert!(
            core::alloc::Layout::array::<S::Item>(config.magazine_size).is_ok(),
            "capacity overflow"
        );
        let refused = magazine_layout::<S::Item>(&config);
        Self::try_with_options(source, config, options)
            .unwrap_or_else(|_| alloc::alloc::handle_alloc_error(refused))
    }

    /// [`with_config`](Self::with_config) for callers that must not abort: the error when
    /// the allocator refuses the memory for the slots, their magazines or the depot's
    /// shelves (all allocated here; what was allocated is freed again).
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0.
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
    /// let cache = Cache::try_with_config(Ids(Default::default()), Config::default())?;
    /// assert!(cache.alloc().is_some());
    /// // Magazines of 2^60 items: the allocator refuses them, and nothing aborts.
    /// let huge = Config { magazine_size: 1 << 60, cpus: 1, ..Config::default() };
    /// assert!(Cache::try_with_config(Ids(Default::default()), huge).is_err());
    /// # Ok::<(), std::collections::TryReserveError>(())
    /// ```
    pub fn try_with_config(source: S, config: Config) -> Result<Self, TryReserveError> {
        Self::try_with_options(source, config, Options::default())
    }

    /// [`with_options`](Self::with_options) for callers that must not abort: see
    /// [`try_with_config`](Self::try_with_config).
    ///
    /// # Panics
    ///
    /// If `config.magazine_size` or `config.cpus` is 0.
    pub fn try_with_options(
        source: S,
        config: Config,
        options: Options,
    ) -> Result<Self, TryReserveError> {
        assert!(
            config.magazine_size > 0,
            "Config::magazine_size must be at least 1"
        );
        assert!(config.cpus > 0, "Config::cpus must be at least 1");
        // When the cache runs sequences, every slot may run them (the sequences accept any
        // CPU id below the number of slots), so every slot is fenced: the decision and the
        // sequences' bounds check use the same bound. Slots whose CPU never runs one (ids
        // beyond the machine's) stay plain, and cost no fence (see `Slot::owner`).
        let sequences_on = options.restartable_sequences
            && options.current_cpu.is_none()
            && sequences_available(config.cpus);
        let slots: Box<[CachePadded<Slot<S::Item>>]> =
            crate::fallible::boxed_slice(config.cpus, |cpu| {
                let fenced = match cfg!(magazine_mutant = "gap_slots_unfenced") {
                    // MUTANT: slots at and above the configured CPU count are not fenced,
                    // while the sequences run on every slot.
                    true => (sequences_on && cpu < configured_cpus_for_mutant()).then_some(cpu),
                    false => sequences_on.then_some(cpu),
                };
                Slot::try_new(config.magazine_size, fenced).map(CachePadded::new)
            })?;
        #[cfg(all(magazine_rseq, not(miri)))]
        let sequences = if sequences_on {
            const {
                assert!(
                    core::mem::size_of::<CachePadded<Slot<S::Item>>>()
                        == 1 << crate::rseq::STRIDE_LOG2,
                    "slots are not as far apart as the restartable sequences assume"
                )
            };
            crate::rseq::Layout::new(
                slots[0].field_addresses(),
                core::mem::size_of::<CachePadded<Slot<S::Item>>>(),
                slots.len(),
                core::mem::size_of::<S::Item>(),
                config.magazine_size,
            )
        } else {
            None
        };
        let depot = Depot::try_new(&config, &options)?;
        Ok(Self {
            slots,
            depot,
            config,
            options,
            source,
            counters: CacheCounters::default(),
            source_dry: AtomicBool::new(false),
            flushing: ProcessFlag::new(),
            #[cfg(all(magazine_rseq, not(miri)))]
            sequences,
        })
    }

    /// Whether `alloc` and `free` run as restartable sequences on the current CPU's
    /// slot (Linux x86_64 with glibc 2.35+ and a kernel with `membarrier`'s rseq fence; see
    /// [`Options::restartable_sequences`]), rather than by taking the slot.
    ///
    /// ```
    /// use magazine::{Cache, Options};
    /// # use magazine::Source;
    /// # struct Ids(std::sync::atomic::AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// let cache = Cache::new(Ids(Default::default()));
    /// if cache.runs_restartable_sequences() {
    ///     // Linux x86_64, glibc 2.35+, kernel 5.10+, a slot for every CPU.
    /// }
    /// let mut options = Options::default();
    /// options.restartable_sequences = false;
    /// let slots = Cache::with_options(Ids(Default::default()), Default::default(), options);
    /// assert!(!slots.runs_restartable_sequences(), "off when asked");
    /// let id = cache.alloc().unwrap();
    /// cache.free(id);
    /// assert_eq!(cache.stats().free_hits, 1, "either way");
    /// ```
    pub fn runs_restartable_sequences(&self) -> bool {
        #[cfg(all(magazine_rseq, not(miri)))]
        return self.sequences.is_some();
        #[cfg(not(all(magazine_rseq, not(miri))))]
        false
    }

    /// Allocates an item: from the current CPU's magazines, else a full magazine from the
    /// depot, else the source. When the source is exhausted, the allocation takes a depot
    /// magazine; without one it flushes (Linux's `alloc_iova_fast(..., flush_rcache =
    /// true)`), one flush at a time: it takes the other CPU slots in turn until one holds
    /// items, and keeps those (counted in [`Stats::steals`]), else one depot magazine; only
    /// when it found nothing does it ask the source once more (see [the exhaustion
    /// rule](crate::docs::design#the-exhaustion-rule)). `None` means the source is empty
    /// and nothing reachable is cached.
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
    /// let id = cache.alloc().expect("the source is never exhausted");
    /// // Nothing cached yet: the slow path, one call to the source for a magazine's worth
    /// // (Options::source_batch), of which the allocation takes one.
    /// let stats = cache.stats();
    /// assert_eq!((stats.source_alloc_calls, stats.source_allocs), (1, 127));
    /// cache.free(id);
    /// ```
    ///
    /// When the source runs dry:
    ///
    /// ```
    /// use magazine::{Cache, Config, Source};
    /// use std::sync::Mutex;
    ///
    /// /// Two ids only.
    /// struct Two(Mutex<Vec<u32>>);
    /// impl Source for Two {
    ///     type Item = u32;
    ///     fn alloc(&self) -> Option<u32> { self.0.lock().unwrap().pop() }
    ///     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { self.0.lock().unwrap().extend(items) }
    /// }
    ///
    /// // Two slots, whatever the machine (the default is a slot per CPU).
    /// let config = Config { cpus: 2, ..Config::default() };
    /// let cache = Cache::with_config(Two(Mutex::new(vec![0, 1])), config);
    /// let a = cache.alloc_on(0).unwrap();
    /// let b = cache.alloc_on(0).unwrap();
    /// cache.free_on(1, a); // cached on slot 1
    /// // The source is empty and so is the depot: alloc flushes, and the flush keeps the
    /// // first magazine it finds (slot 1's), so nothing goes back to the source.
    /// assert_eq!(cache.alloc_on(0), Some(a));
    /// let stats = cache.stats();
    /// assert_eq!(stats.exhaustion_flushes, 1, "one allocation found the source exhausted");
    /// assert_eq!(stats.steals, 1);
    /// assert_eq!(stats.source_frees, 0, "nothing had to be flushed");
    /// assert_eq!(cache.alloc_on(0), None, "both ids are out");
    /// cache.free(a);
    /// cache.free(b);
    /// ```
    #[inline]
    pub fn alloc(&self) -> Option<S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            return self.alloc_in_sequence(layout, crate::rseq::ANY_CPU);
        }
        self.alloc_here()
    }

    /// [`alloc`](Self::alloc) through the slot protocol. Kept out of line where a cache
    /// may run restartable sequences, so that `alloc` stays small enough to inline.
    #[cfg_attr(all(magazine_rseq, not(miri)), inline(never))]
    #[cfg_attr(not(all(magazine_rseq, not(miri))), inline)]
    fn alloc_here(&self) -> Option<S::Item> {
        self.alloc_on(self.current_cpu())
    }

    /// Frees an item: into the current CPU's magazines, else by giving a full magazine to
    /// the depot, else (a `Fixed` depot at its cap) by returning a magazine's worth of
    /// items to the source.
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
    /// cache.free(id); // into the current CPU's loaded magazine
    /// assert_eq!(cache.stats().free_hits, 1);
    /// ```
    #[inline]
    pub fn free(&self, item: S::Item) {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            return self.free_in_sequence(layout, crate::rseq::ANY_CPU, item);
        }
        self.free_here(item)
    }

    /// [`free`](Self::free) through the slot protocol (out of line as `alloc_here`).
    #[cfg_attr(all(magazine_rseq, not(miri)), inline(never))]
    #[cfg_attr(not(all(magazine_rseq, not(miri))), inline)]
    fn free_here(&self, item: S::Item) {
        self.free_on(self.current_cpu(), item)
    }

    /// [`alloc`](Self::alloc)'s hit alone: an item from the loaded magazine of the current
    /// CPU's slot by a restartable sequence, counted as a hit; `None`, with nothing done,
    /// on anything else (that magazine empty, the slot owned by a thread, a cache that does
    /// not [run sequences](Self::runs_restartable_sequences)), where the caller goes on
    /// with [`alloc`](Self::alloc). It never calls the source, allocates, takes a lock,
    /// pins the epoch or waits, so a global allocator may call it before it marks its
    /// thread as running the cache, whatever the thread is doing
    /// ([obligations](crate::docs::obligations#inside-a-global-allocator)).
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
    /// assert_eq!(cache.alloc_if_hit(), None, "nothing cached: a miss, and no source call");
    /// assert_eq!(cache.stats().source_alloc_calls, 0);
    /// let id = cache.alloc_if_hit().or_else(|| cache.alloc()).unwrap();
    /// cache.free(id);
    /// ```
    #[inline]
    pub fn alloc_if_hit(&self) -> Option<S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            // SAFETY: as in `alloc_in_sequence`: `layout` describes our slots, taken only
            // by the fenced protocol. The sequence is assembly that cannot unwind; on any
            // miss it changed nothing.
            return unsafe { crate::rseq::alloc(layout, crate::rseq::ANY_CPU) }.ok();
        }
        None
    }

    /// [`free`](Self::free)'s hit alone: `item` pushed onto the loaded magazine of the
    /// current CPU's slot by a restartable sequence, counted as a hit; the item handed
    /// back, with nothing done, on anything else (that magazine full, the slot owned, a
    /// cache that does not run sequences), where the caller goes on with
    /// [`free`](Self::free). Like [`alloc_if_hit`](Self::alloc_if_hit), it never calls the
    /// source, allocates, takes a lock, pins or waits.
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
    /// if let Err(id) = cache.free_if_hit(id) {
    ///     cache.free(id); // no sequences here, or the magazine was full
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// The item, when the hit did not happen.
    #[inline]
    pub fn free_if_hit(&self, item: S::Item) -> Result<(), S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            // SAFETY: as in `alloc_if_hit`.
            return unsafe { crate::rseq::free(layout, crate::rseq::ANY_CPU, item) }
                .map_err(|(item, _)| item);
        }
        Err(item)
    }

    /// [`alloc`](Self::alloc) on the slot of `cpu` (taken modulo [`Config::cpus`]), for
    /// pinned threads and simulators.
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
    /// let id = cache.alloc_on(3).unwrap();
    /// cache.free_on(3, id);
    /// assert_eq!(cache.alloc_on(3), Some(id), "slot 3's magazine serves it");
    /// ```
    #[inline]
    pub fn alloc_on(&self, cpu: usize) -> Option<S::Item> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            let index = cpu % self.slots.len();
            return match self.slots[index].is_plain() {
                false => self.alloc_in_sequence(layout, index),
                // A plain slot: no sequence would commit (see `Slot::owner`).
                true => self.alloc_from(self.take_slot_by_cas(index)),
            };
        }
        self.alloc_from(self.take_slot(cpu))
    }

    /// An allocation as a restartable sequence on the current CPU's slot (or only on
    /// `want`'s), else through the slot taken.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[inline]
    fn alloc_in_sequence(&self, layout: &crate::rseq::Layout, want: usize) -> Option<S::Item> {
        // SAFETY: `layout` describes our slots, which hold `S::Item`s; every take of them
        // follows the fenced protocol (they were built with their CPU), and `take_slot`
        // takes them with a sequence.
        match unsafe { crate::rseq::alloc(layout, want) } {
            Ok(item) => Some(item),
            Err(_) => self.alloc_after_sequence(layout, want),
        }
    }

    #[cfg(all(magazine_rseq, not(miri)))]
    #[cold]
    fn alloc_after_sequence(&self, layout: &crate::rseq::Layout, want: usize) -> Option<S::Item> {
        self.alloc_from(self.take_slot_in_sequence(layout, want))
    }

    /// An allocation from `slot`, or, without one, from the depot's loose magazines.
    #[inline]
    fn alloc_from(&self, slot: Option<SlotGuard<'_, S::Item>>) -> Option<S::Item> {
        let Some(mut slot) = slot else {
            return self.alloc_busy();
        };
        match slot.with(|magazines| magazines.alloc()) {
            Some(item) => {
                slot.slot().alloc_hits.add(1);
                Some(item)
            }
            None => self.alloc_miss(slot),
        }
    }

    /// [`free`](Self::free) on the slot of `cpu` (taken modulo [`Config::cpus`]).
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
    /// // The imbalanced pattern: CPU 0 allocates, CPU 1 frees (an IRQ completing I/O).
    /// let config = Config { magazine_size: 4, cpus: 2, ..Config::default() };
    /// let cache = Cache::with_config(Ids(Default::default()), config);
    /// let ids: Vec<u32> = (0..12).map(|_| cache.alloc_on(0).unwrap()).collect();
    /// ids.into_iter().for_each(|id| cache.free_on(1, id));
    /// // Slot 1 holds two full magazines; the third went to the depot for slot 0 to take.
    /// assert_eq!(cache.stats().depot_full, 1);
    /// assert!(cache.alloc_on(0).is_some());
    /// assert_eq!(cache.stats().depot_pops, 1);
    /// ```
    #[inline]
    pub fn free_on(&self, cpu: usize, item: S::Item) {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            let index = cpu % self.slots.len();
            return match self.slots[index].is_plain() {
                false => self.free_in_sequence(layout, index, item),
                true => self.free_into(self.take_slot_by_cas(index), item),
            };
        }
        self.free_into(self.take_slot(cpu), item)
    }

    /// A free as a restartable sequence on the current CPU's slot (or only on `want`'s),
    /// else through the slot taken.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[inline]
    fn free_in_sequence(&self, layout: &crate::rseq::Layout, want: usize, item: S::Item) {
        // SAFETY: as in `alloc_in_sequence`.
        if let Err((item, _)) = unsafe { crate::rseq::free(layout, want, item) } {
            self.free_after_sequence(layout, want, item);
        }
    }

    #[cfg(all(magazine_rseq, not(miri)))]
    #[cold]
    fn free_after_sequence(&self, layout: &crate::rseq::Layout, want: usize, item: S::Item) {
        self.free_into(self.take_slot_in_sequence(layout, want), item)
    }

    /// A free into `slot`, or, without one, into the depot's loose magazines.
    #[inline]
    fn free_into(&self, slot: Option<SlotGuard<'_, S::Item>>, item: S::Item) {
        let Some(mut slot) = slot else {
            return self.free_busy(item);
        };
        match slot.with(|magazines| magazines.free(item)) {
            Ok(()) => slot.slot().free_hits.add(1),
            Err(item) => self.free_miss(slot, item),
        }
    }

    /// Allocates an item from the cache only, never from the source: the newest cached
    /// item on the current CPU's slot (or in a full magazine from the depot) for which
    /// `accept` returns true. For callers whose source needs arguments the `Source` trait
    /// does not carry, such as an IOVA allocator's `limit_pfn`: on `None` they call their
    /// allocator themselves.
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
    /// // Magazines of 4: the first allocation brings ids 0 to 3 from the source.
    /// let config = magazine::Config { magazine_size: 4, ..Default::default() };
    /// let cache = Cache::with_config(Ids(Default::default()), config);
    /// let ids: Vec<u32> = (0..4).map(|_| cache.alloc_on(0).unwrap()).collect(); // 3, 2, 1, 0
    /// ids.into_iter().for_each(|id| cache.free_on(0, id));
    /// // Only ids below 2 will do (say, addresses under a device's limit): the newest such one.
    /// assert_eq!(cache.alloc_cached_where_on(0, |&id| id < 2), Some(0));
    /// // Nothing cached fits: None, and the source is not asked.
    /// assert_eq!(cache.alloc_cached_where_on(0, |&id| id > 100), None);
    /// assert_eq!(cache.stats().source_allocs, 4);
    /// ```
    ///
    /// # Do not re-enter the cache from `accept`
    ///
    /// `accept` runs while the calling thread holds a CPU slot. If it calls
    /// [`cached`](Self::cached) or [`flush`](Self::flush) on the same cache, or
    /// [`flush_cpu`](Self::flush_cpu) for the slot it holds, that call waits for the slot to
    /// be free, and the thread waits for itself forever. `alloc` and `free` from `accept` do
    /// not hang (the held slot is a busy miss) but are rarely what you want: keep `accept` a
    /// test of the item. See
    /// [`docs::obligations`](crate::docs::obligations#callbacks-must-not-re-enter-the-cache).
    pub fn alloc_cached_where(&self, accept: impl FnMut(&S::Item) -> bool) -> Option<S::Item> {
        self.alloc_cached_where_on(self.current_cpu(), accept)
    }

    /// [`alloc_cached_where`](Self::alloc_cached_where) on the slot of `cpu`.
    ///
    /// `accept` must not re-enter the cache either: see
    /// [`alloc_cached_where`](Self::alloc_cached_where).
    #[inline]
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
        self.alloc_cached_where_miss(slot, accept)
    }

    /// Nothing in the slot's magazines was accepted.
    #[cold]
    fn alloc_cached_where_miss(
        &self,
        mut slot: SlotGuard<'_, S::Item>,
        accept: impl FnMut(&S::Item) -> bool,
    ) -> Option<S::Item> {
        let counters = slot.slot();
        let home = self.slot_index(counters);
        // As Linux's `__iova_rcache_get`: a depot magazine only when both of the slot's
        // are empty; when they hold items that do not fit, the caller's allocator serves.
        slot.with(|magazines| {
            if !magazines.is_empty() || !magazines.refill(&self.depot.near(home)) {
                return None;
            }
            counters.depot_pops.add(1);
            magazines.loaded.pop_where(accept)
        })
    }

    /// One trim step of the depot policy; returns the number of full magazines released
    /// (their items go to the source). Call it periodically: the cache starts no thread of
    /// its own (`Cache::start_default_reaper`, feature `std`, starts one that does). How
    /// often depends on the policy; one recommendation each ([`docs::trimming`] has the
    /// measurements behind them):
    ///
    /// - `Dynamic { trim: WorkingSet }` (the default): every **2 s**. The interval is the
    ///   working-set window: a trim releases the magazines that stayed in the depot during
    ///   the whole interval since the previous call, never more, and never going below
    ///   `target`; with [`Options::reclaim_idle_slots`] (on by default here) the magazines
    ///   of CPU slots that nobody used during the interval count as such too. Shorter
    ///   intervals release magazines that are needed again moments later (in the seed
    ///   scenario's lazy-submit mode, 100 ms cost 12.9x the slow-path allocations of a
    ///   depot never trimmed; 2 s, 1.0x: see [`docs::trimming`](crate::docs::trimming)).
    /// - `Dynamic { trim: OnePerTick }`: every **100 ms**, Linux's period. The interval is
    ///   the release rate: one magazine per call while the depot holds more than `target`.
    /// - `Fixed`: releases no full magazine; every 2 s frees idle empty ones.
    ///
    /// In every policy, partly filled and empty depot magazines unused during the whole
    /// interval are released and freed. A trim that finds another trim running returns 0
    /// at once. What a trim takes from the depot counts in [`Stats::depot_pops`] and what it
    /// returns in [`Stats::source_frees`]; [`Stats::trimmed`] counts the magazines alone.
    /// Magazines it reclaims from idle slots into the depot count in
    /// [`Stats::depot_pushes`].
    ///
    /// ```
    /// use magazine::{Cache, Config, DepotPolicy, Trim};
    /// # use magazine::Source;
    /// # struct Ids(std::sync::atomic::AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// let depot = DepotPolicy::Dynamic { target: 1, trim: Trim::WorkingSet };
    /// let config = Config { magazine_size: 2, cpus: 1, depot };
    /// let cache = Cache::with_config(Ids(Default::default()), config);
    /// let ids: Vec<u32> = (0..10).map(|_| cache.alloc_on(0).unwrap()).collect();
    /// ids.into_iter().for_each(|id| cache.free_on(0, id));
    /// assert_eq!(cache.stats().depot_full, 3, "4 ids in the slot, 3 magazines of 2 in the depot");
    /// // Every 2 s in a real program (docs::trimming). The first call opens an interval; the
    /// // next releases what nobody used during it, down to the target: the depot's 3 magazines
    /// // and, since the slot saw no operation either, its 2 (`Options::reclaim_idle_slots`).
    /// assert_eq!(cache.trim(), 0);
    /// assert_eq!(cache.trim(), 4);
    /// let stats = cache.stats();
    /// assert_eq!((stats.trimmed, stats.source_frees), (4, 8), "4 magazines of 2 went home");
    /// assert_eq!(stats.depot_full, 1);
    /// assert_eq!(cache.cached(), 2, "one magazine of 2 kept at the target");
    /// ```
    ///
    /// [`docs::trimming`]: crate::docs::trimming
    pub fn trim(&self) -> usize {
        let mut popped = 0;
        let released = self.depot.trim(
            || self.reclaim_idle_slots(),
            |magazine| {
                popped += 1;
                self.release_to_source(magazine);
            },
        );
        self.counters.depot_pops.add(popped);
        self.counters.trimmed.add(released);
        released
    }

    /// Returns the items of `cpu`'s slot to the source, like a CPU going offline. Waits
    /// for a thread that is working on that slot to finish; the source runs after the
    /// slot is given back.
    ///
    /// With restartable sequences, taking the slot's loaded magazine from another CPU
    /// needs a fence of that CPU (`membarrier`, or, where that fails, a moment on that CPU
    /// by `sched_setaffinity`). Where neither works (a seccomp filter that denies both),
    /// only the slot's other magazine is returned; the loaded one stays cached until the
    /// slot's own CPU gives it up or the cache is dropped.
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
    /// let id = cache.alloc_on(0).unwrap(); // a magazine of 127 from the source, one used
    /// cache.free_on(0, id);
    /// assert_eq!(cache.cached(), 127);
    /// cache.flush_cpu(0); // CPU 0 goes offline: its items go back to the source
    /// assert_eq!(cache.cached(), 0);
    /// assert_eq!(cache.stats().source_frees, 127);
    /// ```
    pub fn flush_cpu(&self, cpu: usize) {
        let index = cpu % self.slots.len();
        let near = self.depot.near(index);
        // The slot is given back at the end of the statement, before the source runs.
        let magazines = match self.slots[index].take() {
            Taken::Whole(mut slot) => slot.with(|magazines| magazines.take_items(&near)),
            // Its CPU could not be fenced: the loaded magazine stays (see `Slot::take`).
            #[cfg(all(magazine_rseq, not(miri)))]
            Taken::Previous(mut claim) => {
                let previous = claim.previous();
                [None, crate::pair::replace_if_holding(previous, &near)]
            }
        };
        self.release_each(magazines);
    }

    /// Returns every cached item to the source: every slot (waiting for busy ones), then
    /// the depot's magazines. Empty magazines are freed. Live
    /// [`LocalCache`](crate::LocalCache) handles keep their own magazines.
    ///
    /// The flush ends while other threads keep freeing: it takes each slot once and as
    /// many depot magazines as the depot held when it got there (all of them when nobody
    /// pushes meanwhile). With restartable sequences, a slot whose CPU cannot be fenced
    /// (see [`flush_cpu`](Self::flush_cpu)) keeps its loaded magazine.
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
    /// let ids: Vec<u32> = (0..300).map(|_| cache.alloc_on(0).unwrap()).collect();
    /// ids.into_iter().for_each(|id| cache.free_on(1, id));
    /// cache.flush(); // slots and depot: everything goes home
    /// assert_eq!(cache.cached(), 0);
    /// // Three refills of a magazine (127 ids each) came from the source: all went back.
    /// assert_eq!(cache.stats().source_frees, 3 * 127);
    /// ```
    pub fn flush(&self) {
        for cpu in 0..self.slots.len() {
            self.flush_cpu(cpu);
        }
        self.drain_depot_once();
    }

    /// Like [`flush`](Self::flush), but skips slots that another thread is working on
    /// instead of waiting for them.
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
    /// let id = cache.alloc_on(0).unwrap();
    /// cache.free_on(0, id);
    /// cache.try_flush(); // no other thread holds a slot: the same as flush
    /// assert_eq!(cache.cached(), 0);
    /// ```
    pub fn try_flush(&self) {
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(mut slot) = slot.try_take_for_items() else {
                continue;
            };
            let near = self.depot.near(index);
            let magazines = slot.with(|magazines| magazines.take_items(&near));
            drop(slot);
            self.release_each(magazines);
        }
        self.drain_depot_once();
    }

    /// A snapshot of the counters (see [`Stats`]).
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
    /// for _ in 0..100 {
    ///     let id = cache.alloc_on(0).unwrap();
    ///     cache.free_on(0, id);
    /// }
    /// let stats = cache.stats();
    /// assert_eq!((stats.alloc_hits, stats.source_alloc_calls), (99, 1));
    /// println!("{stats}"); // alloc 99/~100 hits (99.0%), free 100/~100 hits (100.0%), ...
    /// ```
    pub fn stats(&self) -> Stats {
        let sum = |counter: fn(&Slot<S::Item>) -> &OwnedCounter| -> u64 {
            self.slots.iter().map(|slot| counter(slot).get()).sum()
        };
        let counters = &self.counters;
        // Hits that restartable sequences counted and no owner has folded yet.
        let [unfolded_allocs, unfolded_frees] = self
            .slots
            .iter()
            .map(|slot| slot.unfolded_hits())
            .fold([0, 0], |[a, f], [slot_a, slot_f]| [a + slot_a, f + slot_f]);
        Stats {
            alloc_hits: sum(|slot| &slot.alloc_hits)
                + unfolded_allocs
                + counters.local_alloc.hits.get(),
            free_hits: sum(|slot| &slot.free_hits)
                + unfolded_frees
                + counters.local_free.hits.get(),
            depot_pops: sum(|slot| &slot.depot_pops)
                + counters.depot_pops.get()
                + counters.local_alloc.exchanges.get(),
            depot_pushes: sum(|slot| &slot.depot_pushes)
                + counters.depot_pushes.get()
                + counters.local_free.exchanges.get(),
            source_allocs: counters.source_allocs.get(),
            source_alloc_calls: counters.source_alloc_calls.get(),
            source_frees: counters.source_frees.get(),
            source_free_calls: counters.source_free_calls.get(),
            trimmed: counters.trimmed.get(),
            depot_full: self.depot.full_len(),
            depot_empty: self.depot.empty_len(),
            depot_peak: self.depot.peak(),
            busy_misses: counters.busy_misses.get(),
            exhaustion_flushes: counters.exhaustion_flushes.get(),
            steals: counters.steals.get(),
            fenced_takes: self
                .slots
                .iter()
                .map(|slot| slot.fenced_takes() as u64)
                .sum(),
        }
    }

    /// The backing allocator.
    ///
    /// ```
    /// use magazine::{Cache, Source};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// # struct Ids(AtomicU32);
    /// # impl Source for Ids {
    /// #     type Item = u32;
    /// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, Ordering::Relaxed)) }
    /// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
    /// # }
    ///
    /// let cache = Cache::new(Ids(AtomicU32::new(0)));
    /// cache.alloc().unwrap();
    /// assert_eq!(cache.source().0.load(Ordering::Relaxed), 127, "a magazine's worth handed out");
    /// ```
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The configuration the cache was built with.
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
    /// let cache = Cache::new(Ids(Default::default()));
    /// assert_eq!(cache.config(), &Config::default());
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Items held in the CPU slots and the depot (not in `LocalCache` handles). Takes
    /// each slot in turn (waiting for busy ones), so the figure is exact only when
    /// quiescent.
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
    /// let ids: Vec<u32> = (0..5).map(|_| cache.alloc_on(0).unwrap()).collect();
    /// assert_eq!(cache.cached(), 122, "five of the source's batch of 127 in the caller's hands");
    /// ids.into_iter().for_each(|id| cache.free_on(0, id));
    /// assert_eq!(cache.cached(), 127);
    /// ```
    pub fn cached(&self) -> usize {
        let in_slots: usize = self
            .slots
            .iter()
            .map(|slot| match slot.take() {
                Taken::Whole(mut slot) => slot.with(|magazines| magazines.len()),
                // Its CPU could not be fenced: the loaded magazine's length by a look.
                #[cfg(all(magazine_rseq, not(miri)))]
                Taken::Previous(mut claim) => claim.previous().len() + claim.loaded_len(),
            })
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
    pub(crate) fn current_cpu(&self) -> usize {
        match self.options.current_cpu {
            Some(current_cpu) => current_cpu(),
            None => crate::cpu::current(),
        }
    }

    /// Takes the slot of `cpu`, or, when another thread holds it, the next free slot;
    /// `None` (every slot is held) sends the operation to the depot's loose path. Never
    /// waits.
    #[inline]
    fn take_slot(&self, cpu: usize) -> Option<SlotGuard<'_, S::Item>> {
        let n = self.slots.len();
        let first = if cpu < n { cpu } else { cpu % n };
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            return self.take_slot_with_sequences(layout, first);
        }
        self.take_slot_by_cas(first)
    }

    /// [`take_slot`](Self::take_slot) in a cache that runs restartable sequences: a plain
    /// slot (see `Slot::owner`) the slot protocol's way, an active one with a sequence.
    /// Out of line, so that the slot protocol's `take_slot` stays small enough to inline.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[inline(never)]
    fn take_slot_with_sequences(
        &self,
        layout: &crate::rseq::Layout,
        first: usize,
    ) -> Option<SlotGuard<'_, S::Item>> {
        match self.slots[first].is_plain() {
            true => self.take_slot_by_cas(first),
            false => self.take_slot_in_sequence(layout, first),
        }
    }

    /// Takes slot `first` with a compare-and-swap, or, when another thread holds it, the
    /// next slot that needs no fence.
    #[inline]
    fn take_slot_by_cas(&self, first: usize) -> Option<SlotGuard<'_, S::Item>> {
        if cfg!(magazine_mutant = "busy_slot_waits") {
            // MUTANT: the busy path waits for the slot's owner instead of missing.
            #[allow(irrefutable_let_patterns)] // one variant without sequences
            if let Taken::Whole(slot) = self.slots[first].take() {
                return Some(slot);
            }
        }
        if let Some(slot) = self.slots[first].try_take() {
            return Some(slot);
        }
        self.take_other_slot(first)
    }

    /// Takes the current CPU's slot (or only `want`'s) with a restartable sequence, else,
    /// when the thread is not on that CPU, with a fenced take. A busy slot is a miss: the
    /// other slots are not tried, since taking them would cost a fence each.
    #[cfg(all(magazine_rseq, not(miri)))]
    fn take_slot_in_sequence(
        &self,
        layout: &crate::rseq::Layout,
        want: usize,
    ) -> Option<SlotGuard<'_, S::Item>> {
        let taken = self.take_in_sequence(layout, want);
        if taken.is_none() {
            self.counters.busy_misses.add(1);
        }
        taken
    }

    /// [`take_slot_in_sequence`](Self::take_slot_in_sequence) without counting a miss.
    #[cfg(all(magazine_rseq, not(miri)))]
    fn take_in_sequence(
        &self,
        layout: &crate::rseq::Layout,
        want: usize,
    ) -> Option<SlotGuard<'_, S::Item>> {
        use crate::rseq::Miss;
        // SAFETY: as in `alloc_in_sequence`.
        match unsafe { crate::rseq::take(layout, want) } {
            // SAFETY: the sequence's commit took slot `index` for us, on that slot's CPU,
            // where no sequence that read `FREE` before it can still commit (it would have
            // been preempted, hence aborted; see `rseq::take`).
            Ok(index) => Some(unsafe { self.slots[index].guard_after_sequences() }),
            // Owned, or plain (no sequence has run on it yet: `Slot::owner`). A thread
            // that asked for its current CPU's slot activates a plain one; an `_on` call
            // never does.
            Err(Miss::Busy) => {
                let activate = want == crate::rseq::ANY_CPU;
                self.slots[self.sequence_slot(want)].try_take_plain(activate)
            }
            Err(_) => self.slots[self.sequence_slot(want)].try_take(),
        }
    }

    /// The slot a sequence for `want` (a slot index, or `rseq::ANY_CPU`) was about.
    #[cfg(all(magazine_rseq, not(miri)))]
    fn sequence_slot(&self, want: usize) -> usize {
        match want {
            crate::rseq::ANY_CPU => self.current_cpu() % self.slots.len(),
            want => want,
        }
    }

    /// Takes slot `index` again, for a slow path that gave it back while it ran the
    /// source or looked elsewhere. With restartable sequences, a thread still on that
    /// slot's CPU takes it with a sequence, not a fence (a fence would interrupt its own
    /// CPU); never waits.
    fn retake(&self, index: usize) -> Option<SlotGuard<'_, S::Item>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(layout) = &self.sequences {
            return self.take_in_sequence(layout, index);
        }
        self.slots[index].try_take()
    }

    #[cold]
    fn take_other_slot(&self, busy: usize) -> Option<SlotGuard<'_, S::Item>> {
        self.counters.busy_misses.add(1);
        let n = self.slots.len();
        (1..n).find_map(|step| self.slots[(busy + step) % n].try_take_unfenced())
    }

    /// Both magazines of the slot are empty: refill from the depot, else go to the slow
    /// path with the slot given back.
    #[cold]
    fn alloc_miss(&self, mut slot: SlotGuard<'_, S::Item>) -> Option<S::Item> {
        let counters = slot.slot();
        let home = self.slot_index(counters);
        if slot.with(|magazines| magazines.refill(&self.depot.near(home))) {
            counters.depot_pops.add(1);
            return slot.with(|magazines| magazines.alloc());
        }
        drop(slot);
        self.alloc_slow(Home::Slot(home))
    }

    /// Both magazines are full: the full `previous` goes to the depot, or, when a `Fixed`
    /// depot refuses it, to the source once the slot is given back.
    #[cold]
    fn free_miss(&self, mut slot: SlotGuard<'_, S::Item>, item: S::Item) {
        let counters = slot.slot();
        let near = self.depot.near(self.slot_index(counters));
        match slot.with(|magazines| magazines.spill(item, &near)) {
            Ok(()) => counters.depot_pushes.add(1),
            Err(overflow) => {
                drop(slot);
                self.release_overflow(overflow);
            }
        }
    }

    /// Every slot is held by another thread (more runnable threads than slots, some
    /// preempted while holding one): the item goes into a partly filled depot magazine.
    #[cold]
    fn free_busy(&self, item: S::Item) {
        match self.depot.free_loose(item) {
            Ok(()) => self.counters.depot_pushes.add(1),
            Err(overflow) => {
                if let Overflow::Magazine(_) = overflow {
                    self.counters.depot_pushes.add(1); // taken back out of the depot
                }
                self.release_overflow(overflow);
            }
        }
    }

    /// Every slot is held by another thread: an item from a partly filled or full depot
    /// magazine, else the slow path.
    #[cold]
    fn alloc_busy(&self) -> Option<S::Item> {
        match self.depot.alloc_loose() {
            Some((item, refused)) => {
                self.counters.depot_pops.add(1);
                Some(match refused {
                    Some(refused) => self.release_holding(refused, item),
                    None => item,
                })
            }
            None => self.alloc_slow(Home::Busy),
        }
    }

    /// The index of one of our slots, from its address.
    fn slot_index(&self, slot: &Slot<S::Item>) -> usize {
        let offset = slot as *const Slot<S::Item> as usize - self.slots.as_ptr() as usize;
        let index = offset / core::mem::size_of::<CachePadded<Slot<S::Item>>>();
        debug_assert!(core::ptr::eq(&*self.slots[index], slot));
        index
    }

    /// Every magazine idle for a whole trim interval, taken from its slot into the depot's
    /// full stack (a refused one goes to the source); returns how many the depot took.
    /// Busy slots are skipped.
    fn reclaim_idle_slots(&self) -> usize {
        if !self.options.reclaims_idle_slots(&self.config.depot) {
            return 0;
        }
        let mut reclaimed = 0;
        for slot in self.slots.iter() {
            if !slot.idle_since_last_check() {
                continue;
            }
            let Some(mut slot) = Self::take_victim(slot) else {
                continue;
            };
            // The shared stacks' empty magazines: taking the shelf's would mark it used.
            let magazines = slot.with(|magazines| magazines.take_items(&self.depot.stacks()));
            drop(slot);
            let refused = magazines.map(|magazine| {
                let magazine = magazine?;
                match self.depot.push_full(magazine) {
                    Ok(()) => {
                        reclaimed += 1;
                        None
                    }
                    Err(magazine) => Some(magazine),
                }
            });
            self.release_each(refused);
        }
        self.counters.depot_pushes.add(reclaimed);
        reclaimed
    }
}

/// What the aborting constructors (`with_options`, `local`) report to
/// `handle_alloc_error` when memory is refused: one magazine's storage.
pub(crate) fn magazine_layout<T>(config: &Config) -> core::alloc::Layout {
    core::alloc::Layout::array::<T>(config.magazine_size).unwrap_or(core::alloc::Layout::new::<T>())
}

/// Whether a cache of `slots` slots can run restartable sequences here (see
/// `rseq::available`).
fn sequences_available(slots: usize) -> bool {
    #[cfg(all(magazine_rseq, not(miri)))]
    return crate::rseq::available(slots);
    #[cfg(not(all(magazine_rseq, not(miri))))]
    {
        let _ = slots;
        false
    }
}

/// The configured CPU count the mutant `gap_slots_unfenced` fences below.
fn configured_cpus_for_mutant() -> usize {
    #[cfg(all(magazine_rseq, not(miri)))]
    return crate::rseq::configured_cpus().unwrap_or(0);
    #[cfg(not(all(magazine_rseq, not(miri))))]
    0
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
