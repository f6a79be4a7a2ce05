//! The IOVA domain: the range tree behind one lock, with one magazine cache per size
//! class in front of it (Linux `struct iova_domain` with its `rcaches`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::error::{CheckError, IovaError};
use super::live::{LiveTable, Take};
use super::range::Iova;
use super::rcache::{order_of, ClassSource, IOVA_RANGE_CACHE_MAX_SIZE};
use super::tree::{Kind, RangeTree, Ranges};
use crate::{Cache, Config, DepotPolicy, Options, Stats, Trim};

/// An IOVA allocator for one IOMMU domain, compatible with Linux's `drivers/iommu/iova.c`.
///
/// Two layers, as in Linux:
///
/// - the **range tree** ([`alloc`](Self::alloc), [`free`](Self::free),
///   [`find`](Self::find), [`reserve`](Self::reserve)): allocated and reserved ranges in
///   an ordered map behind one lock, allocated top-down below a limit, first fit from the
///   top (see the [module docs](super) for the search and its speed-ups);
/// - the **fast path** ([`alloc_fast`](Self::alloc_fast), [`free_fast`](Self::free_fast)):
///   one [`Cache`] of pfns per size class of 1, 2, 4, ..., 32 pages in front of the tree.
///   A request is rounded up to its class and size-aligned; a cached pfn is handed out
///   only if the range fits under the caller's `limit_pfn`; larger requests go to the
///   tree.
///
/// Ranges in magazines stay allocated in the tree (as Linux's cached IOVAs do), so the
/// tree never hands them out twice; they go back to it when a magazine is returned to
/// the class's source: on overflow of a `Fixed` depot, on [`trim`](Self::trim),
/// [`flush_cpu`](Self::flush_cpu), [`flush`](Self::flush), when an exhausted
/// `alloc_fast` flushes, and on drop.
///
/// Unlike Linux, bad input is detected and refused with an [`IovaError`], leaving the
/// domain unchanged: see [`free_fast`](Self::free_fast) for what that costs, and
/// [`with_free_check`](Self::with_free_check) for Linux's unchecked fast path.
///
/// ```
/// use magazine::iova::IovaDomain;
///
/// // 4 KiB pages; pfn 0 is never handed out.
/// let domain = IovaDomain::new(4096, 1);
/// let dma_limit = domain.dma_32bit_pfn() - 1; // a device with 32-bit DMA
///
/// // Slow path: an exact range, top-down below the limit.
/// let iova = domain.alloc(3, dma_limit, false).unwrap();
/// assert_eq!(iova.pfn_hi, dma_limit);
/// assert_eq!(domain.find(iova.pfn_lo + 1), Some(iova));
/// domain.free(iova.pfn_lo).unwrap();
///
/// // Fast path: rounded up to 4 pages, size-aligned, cached on free. (`alloc_fast`
/// // and `free_fast` use the current CPU's slot; `_on` names one, so that this
/// // example does not depend on which CPU runs it.)
/// let pfn = domain.alloc_fast_on(0, 3, dma_limit).unwrap();
/// assert_eq!(pfn % 4, 0);
/// domain.free_fast_on(0, pfn, 3).unwrap();
/// assert_eq!(domain.alloc_fast_on(0, 4, dma_limit), Some(pfn), "served by the magazine");
/// domain.free_fast(pfn, 4).unwrap();
///
/// // Bad input is refused and changes nothing.
/// assert!(domain.free_fast(pfn, 4).is_err());
/// domain.check().unwrap();
/// ```
pub struct IovaDomain {
    granule: u64,
    shift: u32,
    start_pfn: u64,
    dma_32bit_pfn: u64,
    ranges: Arc<Ranges>,
    /// One cache per size class; index = order (log2 of the size in pages). A boxed
    /// array, so that indexing it by an order from `order_of` needs no bounds check; built
    /// on the heap one cache at a time (six caches at once overflow the small stacks of
    /// shuttle's threads).
    rcaches: Box<[Cache<ClassSource>; IOVA_RANGE_CACHE_MAX_SIZE]>,
    /// The fast-path ranges in callers' hands; `None` in [`FreeCheck::Unchecked`] mode.
    live: Option<LiveTable>,
    exhaustion_flushes: AtomicU64,
    /// Picks the slot of `alloc_fast`/`free_fast` ([`Options::current_cpu`]); `None` is
    /// [`crate::cpu::current`], called directly (inlined) rather than through a pointer.
    current_cpu: Option<fn() -> usize>,
    /// Ranges a fast-path miss allocates from the tree under one lock hold (1: Linux's
    /// one range per miss, the default; see [`IovaDomain::with_miss_batch`]).
    miss_batch: usize,
}

/// Whether [`IovaDomain::free_fast`] checks what it is given (see
/// [`IovaDomain::with_free_check`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FreeCheck {
    /// Every range `alloc_fast` hands out is recorded in a lock-free table of one byte per
    /// pfn (a store; `free_fast` ends the record with a compare-and-swap), and `free_fast`
    /// refuses a double free, a wrong size or
    /// a range it did not hand out with an [`IovaError`], changing nothing. The default.
    #[default]
    Checked,
    /// Linux's semantics: `free_fast` trusts its caller and puts the pfn into a magazine
    /// as it is. A double free then puts a pfn into the cache twice and it is later
    /// handed out twice; a wrong size caches the range in the wrong class; a range that
    /// did not come from `alloc_fast` corrupts the cache. [`IovaDomain::check`] can no
    /// longer tell ranges in callers' hands from lost ones. Only for callers that
    /// guarantee correct frees (as Linux's DMA layer does); `BENCHMARKS.md` measures
    /// what the check costs.
    Unchecked,
}

/// A snapshot of an [`IovaDomain`]'s counters, from [`IovaDomain::stats`].
///
/// ```
/// use magazine::iova::IovaDomain;
///
/// let domain = IovaDomain::new(4096, 1);
/// let limit = domain.dma_32bit_pfn() - 1;
/// let pfn = domain.alloc_fast_on(0, 1, limit).unwrap();
/// domain.free_fast_on(0, pfn, 1).unwrap();
/// let stats = domain.stats();
/// assert_eq!(stats.rcaches.len(), 6, "size classes 1, 2, 4, ... 32 pages");
/// assert_eq!(stats.tree_allocs, 1, "the first allocation came from the tree");
/// assert_eq!(stats.rcaches[0].free_hits, 1, "its free went to a magazine");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IovaStats {
    /// The counters of each size class's cache; index = order (1, 2, 4, ... pages).
    /// A class's `source_allocs` counts the ranges the tree allocated for its fast-path
    /// misses, `exhaustion_flushes` the flushes its misses caused, and `source_frees` the
    /// cached ranges its magazines returned to the tree.
    pub rcaches: Vec<Stats>,
    /// Ranges the tree allocated (slow path, and fast-path misses).
    pub tree_allocs: u64,
    /// Ranges removed from the tree (`free`, and magazines returned to the tree).
    pub tree_frees: u64,
    /// Tree allocations that found no space.
    pub tree_failures: u64,
    /// Failures answered without a search by the 32-bit bound (`max32_alloc_size`).
    pub early_failures: u64,
    /// Searches that needed Linux's second pass above the cached node.
    pub retry_searches: u64,
    /// Times an exhausted `alloc_fast` flushed every cache and retried (all size
    /// classes, and sizes over the largest class).
    pub exhaustion_flushes: u64,
    /// Allocated ranges in the tree, cached ones included.
    pub allocated_ranges: usize,
    /// Pages in allocated ranges, cached ones included.
    pub allocated_pages: u64,
    /// Reserved ranges in the tree.
    pub reserved_ranges: usize,
    /// Pages in reserved ranges.
    pub reserved_pages: u64,
    /// Fast-path ranges in callers' hands (allocated by `alloc_fast`, not yet freed).
    /// With [`FreeCheck::Unchecked`], the fast ranges in the tree minus the cached ones
    /// (exact only while no other thread uses the domain).
    pub fast_in_use: usize,
}

impl IovaDomain {
    /// A domain of pages of `granule` bytes whose allocations start at `start_pfn`, with
    /// the default cache configuration ([`Config::default`]: magazines of 127 pfns, a
    /// slot per CPU, a working-set trimmed depot). Linux `init_iova_domain`.
    ///
    /// # Panics
    ///
    /// If `granule` is not a power of two.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1); // 4 KiB pages; pfn 0 is never handed out
    /// assert_eq!(domain.granule(), 4096);
    /// assert_eq!(domain.dma_32bit_pfn(), 1 << 20, "4 GiB in 4 KiB pages");
    /// ```
    pub fn new(granule: u64, start_pfn: u64) -> Self {
        Self::with_config(granule, start_pfn, Config::default())
    }

    /// [`new`](Self::new) with `cpus` CPU slots per size class, and a dynamic depot with
    /// target `cpus` trimmed by working set.
    ///
    /// # Panics
    ///
    /// If `granule` is not a power of two or `cpus` is 0.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::with_cpus(4096, 1, 4);
    /// assert_eq!(domain.config().cpus, 4);
    /// ```
    pub fn with_cpus(granule: u64, start_pfn: u64, cpus: usize) -> Self {
        let config = Config {
            cpus,
            depot: DepotPolicy::Dynamic {
                target: cpus,
                trim: Trim::WorkingSet,
            },
            ..Config::default()
        };
        Self::with_config(granule, start_pfn, config)
    }

    /// [`new`](Self::new) with the given configuration for every size class's cache
    /// (magazine size, CPU slots, depot policy). Linux <= 6.6 is
    /// `DepotPolicy::Fixed { max_full: 32 }` with magazines of 127.
    ///
    /// # Panics
    ///
    /// If `granule` is not a power of two, or `config.magazine_size` or `config.cpus`
    /// is 0.
    ///
    /// ```
    /// use magazine::{Config, DepotPolicy};
    /// use magazine::iova::IovaDomain;
    ///
    /// // Linux <= 6.6: 32 full magazines of 127 pfns per size class.
    /// let config = Config { depot: DepotPolicy::Fixed { max_full: 32 }, ..Config::default() };
    /// let domain = IovaDomain::with_config(4096, 1, config);
    /// assert_eq!(domain.config().magazine_size, 127);
    /// ```
    pub fn with_config(granule: u64, start_pfn: u64, config: Config) -> Self {
        Self::with_options(granule, start_pfn, config, Options::default())
    }

    /// [`with_config`](Self::with_config) with [`Options`] for every size class's cache
    /// (e.g. `current_cpu`, which also picks the slot of
    /// [`alloc_fast`](Self::alloc_fast) and [`free_fast`](Self::free_fast)).
    /// [`Options::restartable_sequences`] is ignored: the fast paths take a slot whole (an
    /// allocation looks for a range under `limit_pfn`) or through the `_on` calls, which
    /// run no sequence on a slot that `alloc`/`free` never activated, so the caches run
    /// the slot protocol.
    ///
    /// # Panics
    ///
    /// As [`with_config`](Self::with_config).
    ///
    /// ```
    /// use magazine::{Config, Options};
    /// use magazine::iova::IovaDomain;
    ///
    /// let mut options = Options::default();
    /// options.current_cpu = Some(|| 0); // every thread uses slot 0
    /// let domain = IovaDomain::with_options(4096, 1, Config::default(), options);
    /// let pfn = domain.alloc_fast(1, u64::MAX).unwrap();
    /// domain.free_fast(pfn, 1).unwrap();
    /// assert_eq!(domain.stats().rcaches[0].free_hits, 1);
    /// ```
    pub fn with_options(granule: u64, start_pfn: u64, config: Config, options: Options) -> Self {
        assert!(
            granule.is_power_of_two(),
            "IOVA granule {granule} is not a power of two"
        );
        let shift = granule.trailing_zeros();
        // Linux: `1UL << (32 - iova_shift(iovad))`; pages of 4 GiB or more leave pfn 0.
        let dma_32bit_pfn = 1u64.checked_shl(32u32.saturating_sub(shift)).unwrap_or(1);
        let ranges = Arc::new(Ranges::new(RangeTree::new(start_pfn, dma_32bit_pfn)));
        let live = Some(LiveTable::new());
        // The fast paths call the `_on` functions, which never activate a slot for
        // restartable sequences (`Slot::owner`): the sequences would only add their checks,
        // so the caches run the slot protocol alone.
        let mut options = options;
        options.restartable_sequences = false;
        let rcaches: Box<[Cache<ClassSource>]> = (0..IOVA_RANGE_CACHE_MAX_SIZE as u8)
            .map(|order| {
                let source = ClassSource::new(Arc::clone(&ranges), order);
                Cache::with_options(source, config.clone(), options.clone())
            })
            .collect();
        let Ok(rcaches) = rcaches.try_into() else {
            unreachable!("one cache per size class");
        };
        Self {
            granule,
            shift,
            start_pfn,
            dma_32bit_pfn,
            ranges,
            rcaches,
            live,
            exhaustion_flushes: AtomicU64::new(0),
            current_cpu: options.current_cpu,
            miss_batch: 1,
        }
    }

    /// Chooses whether `free_fast` checks its argument ([`FreeCheck`]; checked by
    /// default). Only for a new domain: it would not know which ranges are in callers'
    /// hands.
    ///
    /// # Panics
    ///
    /// If a fast-path range was allocated already.
    ///
    /// ```
    /// use magazine::iova::{FreeCheck, IovaDomain};
    ///
    /// // Linux semantics: no double-free detection on the fast path.
    /// let domain = IovaDomain::new(4096, 1).with_free_check(FreeCheck::Unchecked);
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// assert_eq!(domain.alloc_fast_on(0, 1, u64::MAX), Some(pfn));
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// domain.check().unwrap();
    /// ```
    pub fn with_free_check(mut self, check: FreeCheck) -> Self {
        let fresh = self
            .ranges
            .lock()
            .ranges()
            .all(|(_, kind)| kind != Kind::Fast);
        assert!(fresh, "with_free_check on a domain that used its fast path");
        self.live = match check {
            FreeCheck::Checked => Some(LiveTable::new()),
            FreeCheck::Unchecked => None,
        };
        self
    }

    /// Opt-in batching of fast-path misses: an [`alloc_fast`](Self::alloc_fast) that
    /// finds no cached range under its limit allocates up to `batch` ranges of its size
    /// class under one hold of the tree lock (capped at the magazine size; 0 counts as 1),
    /// hands out the first and frees the others into the slot's magazines, so the next
    /// misses of that slot are hits. The default, 1, is Linux's one range per miss.
    ///
    /// The ranges are the ones `batch` misses in a row would allocate, in that order
    /// (they are freed into the magazine last first, so the slot hands them out highest
    /// first, as single misses would); what differs from Linux is when the tree sees
    /// them: the lock is taken once per batch instead of once per range, and the ranges
    /// not handed out yet are cached IOVAs, which a flush or a trim returns to the tree.
    /// The seed case study (`examples/seed/README.md`) measures what a batch costs under
    /// the lock.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1).with_miss_batch(4);
    /// let pfns: Vec<u64> = (0..4).map(|_| domain.alloc_fast_on(0, 1, 0xff).unwrap()).collect();
    /// assert_eq!(pfns, [0xff, 0xfe, 0xfd, 0xfc], "the order of four single misses");
    /// let stats = domain.stats();
    /// assert_eq!(stats.tree_allocs, 4, "four ranges");
    /// assert_eq!(stats.rcaches[0].alloc_hits, 3, "from one miss: three hits follow");
    /// domain.check().unwrap();
    /// ```
    pub fn with_miss_batch(mut self, batch: usize) -> Self {
        self.miss_batch = batch.clamp(1, self.config().magazine_size.max(1));
        self
    }

    /// Ranges a fast-path miss allocates (see [`with_miss_batch`](Self::with_miss_batch)).
    pub fn miss_batch(&self) -> usize {
        self.miss_batch
    }

    /// Whether `free_fast` checks its argument.
    pub fn free_check(&self) -> FreeCheck {
        match self.live {
            Some(_) => FreeCheck::Checked,
            None => FreeCheck::Unchecked,
        }
    }

    /// The page size in bytes.
    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// The lowest pfn the domain allocates.
    pub fn start_pfn(&self) -> u64 {
        self.start_pfn
    }

    /// The first pfn at or above 4 GiB: limits below it are "32-bit" limits, which have
    /// their own cached search start and early-failure bound.
    pub fn dma_32bit_pfn(&self) -> u64 {
        self.dma_32bit_pfn
    }

    /// The slot hint of the calling thread, for `alloc_fast` and `free_fast`.
    #[inline]
    fn current_cpu(&self) -> usize {
        match self.current_cpu {
            Some(current_cpu) => current_cpu(),
            None => crate::cpu::current(),
        }
    }

    /// The configuration of the size-class caches.
    pub fn config(&self) -> &Config {
        self.rcaches[0].config()
    }

    /// The bus address of `pfn` (Linux `iova_dma_addr`).
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// assert_eq!(domain.dma_addr(0x10), 0x10000);
    /// assert_eq!(domain.pfn(0x10fff), 0x10);
    /// assert_eq!(domain.pages(4097), 2);
    /// ```
    pub fn dma_addr(&self, pfn: u64) -> u64 {
        pfn << self.shift
    }

    /// The pfn of a bus address (Linux `iova_pfn`).
    pub fn pfn(&self, dma_addr: u64) -> u64 {
        dma_addr >> self.shift
    }

    /// The number of pages covering `bytes` bytes (Linux `iova_align(..) >> shift`).
    pub fn pages(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.granule)
    }

    /// Allocates `size` pages ending at or below `limit_pfn`, as high as possible (see
    /// the [module docs](super) for the search), aligned to `size` rounded up to a power
    /// of two when `size_aligned`. Linux `alloc_iova`. `None` on bad input or when no
    /// range fits; [`try_alloc`](Self::try_alloc) says which. Does not flush the caches
    /// (as Linux); [`alloc_fast`](Self::alloc_fast) does. A limit of `u64::MAX` means
    /// the whole space (the anchor pfn `u64::MAX` itself is never allocated).
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let iova = domain.alloc(3, 0xff, false).unwrap();
    /// assert_eq!((iova.pfn_lo, iova.pfn_hi), (0xfd, 0xff), "top-down below the limit");
    /// let aligned = domain.alloc(3, 0xff, true).unwrap();
    /// assert_eq!(aligned.pfn_lo % 4, 0, "aligned to 3 rounded up to 4");
    /// assert_eq!(domain.alloc(0, 0xff, false), None);
    /// ```
    pub fn alloc(&self, size: u64, limit_pfn: u64, size_aligned: bool) -> Option<Iova> {
        self.try_alloc(size, limit_pfn, size_aligned).ok()
    }

    /// [`alloc`](Self::alloc), saying why it failed.
    ///
    /// ```
    /// use magazine::iova::IovaError;
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// assert_eq!(domain.try_alloc(0, 0xff, false), Err(IovaError::ZeroSize));
    /// assert_eq!(
    ///     domain.try_alloc(300, 0xff, false),
    ///     Err(IovaError::TooLarge { size: 300, space: 0xff })
    /// );
    /// ```
    pub fn try_alloc(
        &self,
        size: u64,
        limit_pfn: u64,
        size_aligned: bool,
    ) -> Result<Iova, IovaError> {
        self.ranges
            .lock()
            .alloc(size, limit_pfn, size_aligned, Kind::Allocated)
    }

    /// The range containing `pfn`: allocated (cached ones too, as in Linux) or reserved.
    /// Linux `find_iova`.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let iova = domain.alloc(4, 0xff, false).unwrap();
    /// assert_eq!(domain.find(iova.pfn_lo + 2), Some(iova));
    /// assert_eq!(domain.find(iova.pfn_lo - 1), None);
    /// ```
    pub fn find(&self, pfn: u64) -> Option<Iova> {
        self.ranges.lock().find(pfn).map(|(iova, _)| iova)
    }

    /// Frees the allocation containing `pfn` (Linux `free_iova`). A range from
    /// `alloc_fast` may be freed here too; it then bypasses the cache.
    ///
    /// # Errors
    ///
    /// [`IovaError::NotAllocated`] if no allocation contains `pfn` (never allocated, or
    /// freed already), [`IovaError::Reserved`] for a reserved range,
    /// [`IovaError::DoubleFree`] for a fast-path range already freed into a magazine.
    ///
    /// ```
    /// use magazine::iova::IovaError;
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// let iova = domain.alloc(4, 0xff, false).unwrap();
    /// domain.free(iova.pfn_lo + 1).unwrap(); // any pfn of the range frees it
    /// assert_eq!(domain.free(iova.pfn_lo), Err(IovaError::NotAllocated { pfn: iova.pfn_lo }));
    /// ```
    pub fn free(&self, pfn: u64) -> Result<(), IovaError> {
        self.free_locked(&mut self.ranges.lock(), pfn)
    }

    /// Up to `max` ranges of `size` pages ending at or below `limit_pfn` under one hold of
    /// the tree lock, each handed to `out` as it lands: the same ranges, in the same
    /// order, with the same cached nodes afterwards as `max` calls of
    /// [`try_alloc`](Self::try_alloc) in a row (the placement stays Linux's), for a
    /// caller that needs many ranges at once and would otherwise take the lock once per
    /// range. Stops at the first allocation that fails. Each range is freed with
    /// [`free`](Self::free) or [`free_batch`](Self::free_batch).
    ///
    /// The fast path does not use it: a miss of [`alloc_fast`](Self::alloc_fast)
    /// allocates one range from the tree, as Linux's `alloc_iova_fast` does.
    ///
    /// # Errors
    ///
    /// As [`try_alloc`](Self::try_alloc), only when the first allocation fails (then
    /// nothing is handed); a later failure ends the batch with the ranges handed so far.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// let mut pfns = Vec::new();
    /// let handed = domain.alloc_batch(1, 0xff, true, 4, &mut |iova| pfns.push(iova.pfn_lo));
    /// assert_eq!(handed, Ok(4));
    /// assert_eq!(pfns, [0xff, 0xfe, 0xfd, 0xfc], "as four `alloc` calls in a row");
    /// assert_eq!(domain.free_batch(pfns.iter().copied()), Ok(4));
    /// domain.check().unwrap();
    /// ```
    pub fn alloc_batch(
        &self,
        size: u64,
        limit_pfn: u64,
        size_aligned: bool,
        max: usize,
        out: &mut dyn FnMut(Iova),
    ) -> Result<usize, IovaError> {
        self.ranges
            .lock()
            .alloc_batch(size, limit_pfn, size_aligned, Kind::Allocated, max, out)
    }

    /// Frees the allocation containing each pfn of `pfns`, in order, under one hold of the
    /// tree lock: what [`free`](Self::free) of each would do. Returns how many it freed.
    ///
    /// # Errors
    ///
    /// As [`free`](Self::free), for the first pfn that cannot be freed (the error names
    /// it); the pfns before it are freed, it and the rest are left as they are.
    ///
    /// ```
    /// use magazine::iova::{IovaDomain, IovaError};
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// let a = domain.alloc(1, 0xff, false).unwrap().pfn_lo;
    /// let b = domain.alloc(1, 0xff, false).unwrap().pfn_lo;
    /// assert_eq!(domain.free_batch([a, a, b]), Err(IovaError::NotAllocated { pfn: a }));
    /// assert_eq!(domain.find(b).map(|iova| iova.pfn_lo), Some(b), "b is left");
    /// assert_eq!(domain.free_batch([b]), Ok(1));
    /// ```
    pub fn free_batch(&self, pfns: impl IntoIterator<Item = u64>) -> Result<usize, IovaError> {
        let mut tree = self.ranges.lock();
        let mut freed = 0;
        for pfn in pfns {
            self.free_locked(&mut tree, pfn)?;
            freed += 1;
        }
        Ok(freed)
    }

    /// [`free`](Self::free) under the tree lock the caller holds.
    fn free_locked(&self, tree: &mut RangeTree, pfn: u64) -> Result<(), IovaError> {
        match classify(tree, pfn, None)? {
            Freed::Allocation(iova) => tree.remove(iova.pfn_lo, Kind::Allocated),
            Freed::Fast(iova) => {
                // Unchecked, the range is trusted to be in the caller's hands.
                let live = self.live.as_ref();
                if live.is_some_and(|live| live.remove(iova.pfn_lo).is_none()) {
                    return Err(IovaError::DoubleFree { pfn });
                }
                tree.remove(iova.pfn_lo, Kind::Fast)
            }
        };
        Ok(())
    }

    /// Reserves `pfn_lo..=pfn_hi` so that it is never allocated (Linux `reserve_iova`),
    /// e.g. an MSI window or a PCI hole. Reserving over reserved pages is allowed; they
    /// stay reserved, in the ranges they were reserved as (Linux merges them: see
    /// [Differences from Linux](crate::iova#differences-from-linux)). If only cached
    /// (freed) ranges are in the way, the caches are flushed first.
    ///
    /// # Errors
    ///
    /// [`IovaError::InvalidRange`] if `pfn_lo > pfn_hi` or `pfn_hi == u64::MAX`;
    /// [`IovaError::Overlap`] if an allocation in a caller's hands overlaps the range.
    ///
    /// ```
    /// use magazine::iova::IovaError;
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// domain.reserve(0xf0, 0xff).unwrap(); // e.g. an MSI window
    /// let iova = domain.alloc(1, 0xff, false).unwrap();
    /// assert_eq!(iova.pfn_lo, 0xef, "allocations avoid the reserved window");
    /// assert_eq!(domain.reserve(0xe0, 0xef), Err(IovaError::Overlap { allocated: iova }));
    /// ```
    pub fn reserve(&self, pfn_lo: u64, pfn_hi: u64) -> Result<(), IovaError> {
        let mut tree = self.ranges.lock();
        match tree.reserve(pfn_lo, pfn_hi) {
            Err(IovaError::Overlap { .. }) => {}
            result => return result,
        }
        // Refuse, changing nothing, if a caller holds a range in the way. Otherwise only
        // magazines hold the ranges in the way: return them to the tree and try again.
        let held = tree
            .overlapping(pfn_lo, pfn_hi)
            .into_iter()
            .find(|&(range, kind)| match kind {
                Kind::Allocated => true,
                // Unchecked, a fast range may be in a caller's hands or cached: flush,
                // and the tree's own check below refuses what is still allocated.
                Kind::Fast => self
                    .live
                    .as_ref()
                    .is_some_and(|live| live.contains(range.pfn_lo)),
                Kind::Reserved => false,
            });
        if let Some((allocated, _)) = held {
            return Err(IovaError::Overlap { allocated });
        }
        drop(tree);
        self.flush();
        self.ranges.lock().reserve(pfn_lo, pfn_hi)
    }

    /// Allocates `size` pages ending at or below `limit_pfn` through the size-class
    /// caches, on the current CPU's slot (Linux `alloc_iova_fast(.., flush_rcache =
    /// true)`); returns the first pfn.
    ///
    /// Sizes up to 32 pages round up to a power of two and are always size-aligned; a
    /// cached pfn is taken only if its range fits under `limit_pfn` (the newest such one
    /// in the slot's magazines, else one from a full depot magazine when both of the
    /// slot's are empty), else the tree allocates. Larger sizes are not rounded and go to
    /// the tree, size-aligned. When the tree has no space, every cache is flushed back to
    /// it (skipping slots other threads are working on) and the allocation is retried
    /// once. `None` on bad input (size 0, limit below `start_pfn`, size larger than the
    /// space) or when nothing fits even then.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let limit = domain.dma_32bit_pfn() - 1;
    /// let pfn = domain.alloc_fast(3, limit).unwrap(); // 3 pages round up to 4
    /// assert_eq!(pfn % 4, 0);
    /// assert!(pfn + 3 <= limit);
    /// domain.free_fast(pfn, 3).unwrap();
    /// ```
    #[inline]
    pub fn alloc_fast(&self, size: u64, limit_pfn: u64) -> Option<u64> {
        self.alloc_fast_on(self.current_cpu(), size, limit_pfn)
    }

    /// [`alloc_fast`](Self::alloc_fast) on the slot of `cpu` (modulo
    /// [`Config::cpus`]), for pinned threads and simulators.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// assert_eq!(domain.alloc_fast_on(0, 1, u64::MAX), Some(pfn), "from slot 0's magazine");
    /// assert_eq!(domain.alloc_fast_on(0, 1, pfn - 1).map(|p| p < pfn), Some(true), "under the limit");
    /// ```
    #[inline]
    pub fn alloc_fast_on(&self, cpu: usize, size: u64, limit_pfn: u64) -> Option<u64> {
        // Inlined into the caller up to the magazine hit; misses, size 0 and sizes over
        // the largest class are out of line.
        let Some(order) = order_of(size) else {
            return self.alloc_uncached(size, limit_pfn);
        };
        let size = 1u64 << order;
        let cache = &self.rcaches[usize::from(order)];
        // A cached range's last pfn never overflows: it is below the anchor.
        let fits = |&pfn: &u64| pfn + (size - 1) <= limit_pfn;
        let pfn = match cache.alloc_cached_where_on(cpu, fits) {
            Some(pfn) => pfn,
            None if self.miss_batch > 1 => self.alloc_miss_batch(cpu, order, limit_pfn)?,
            None => self.alloc_miss(order, limit_pfn)?,
        };
        if let Some(live) = &self.live {
            live.insert(pfn, order);
        }
        Some(pfn)
    }

    /// `alloc_fast` of size 0 (refused) or over the largest class: a size-aligned tree
    /// allocation, not cached.
    #[cold]
    #[inline(never)]
    fn alloc_uncached(&self, size: u64, limit_pfn: u64) -> Option<u64> {
        if size == 0 {
            return None;
        }
        let uncached = || {
            self.ranges
                .lock()
                .alloc(size, limit_pfn, true, Kind::Allocated)
        };
        self.retry_after_flush(uncached, || {})
            .map(|iova| iova.pfn_lo)
    }

    /// `alloc_fast` of class `order` that found no cached range under `limit_pfn`: the
    /// tree allocates (the caller records the range as live).
    #[cold]
    #[inline(never)]
    fn alloc_miss(&self, order: u8, limit_pfn: u64) -> Option<u64> {
        let source = self.rcaches[usize::from(order)].source();
        let miss = || source.alloc_below(limit_pfn);
        self.retry_after_flush(miss, || source.count_exhaustion_flush())
            .map(|iova| iova.pfn_lo)
    }

    /// [`alloc_miss`](Self::alloc_miss) of a domain that batches its misses
    /// ([`with_miss_batch`](Self::with_miss_batch)): the first range for the caller, the
    /// rest freed into the slot of `cpu` last first.
    #[cold]
    #[inline(never)]
    fn alloc_miss_batch(&self, cpu: usize, order: u8, limit_pfn: u64) -> Option<u64> {
        let cache = &self.rcaches[usize::from(order)];
        let source = cache.source();
        let mut pfns = Vec::with_capacity(self.miss_batch);
        let miss = || {
            pfns.clear();
            let mut first = None;
            source.alloc_below_batch(limit_pfn, self.miss_batch, &mut |iova| match first {
                None => first = Some(iova),
                Some(_) => pfns.push(iova.pfn_lo),
            })?;
            Ok(first.expect("a batch that did not fail handed a range"))
        };
        let first = self.retry_after_flush(miss, || source.count_exhaustion_flush())?;
        // Last first: the magazine hands out its newest pfn, so the next hits follow the
        // order of single misses. The ranges are fast ranges not in anyone's hands: cached.
        for &pfn in pfns.iter().rev() {
            cache.free_on(cpu, pfn);
        }
        Some(first.pfn_lo)
    }

    /// Runs a tree allocation; when the tree has no space, flushes every cache back to
    /// it, counts the flush (in the domain and through `count`, for the size class that
    /// caused it) and runs the allocation once more (Linux's `flush_rcache` retry).
    fn retry_after_flush(
        &self,
        mut alloc: impl FnMut() -> Result<Iova, IovaError>,
        count: impl FnOnce(),
    ) -> Option<Iova> {
        match alloc() {
            Ok(iova) => Some(iova),
            Err(IovaError::NoSpace) => {
                self.exhaustion_flushes.fetch_add(1, Ordering::Relaxed);
                count();
                for cache in self.rcaches.iter() {
                    // Skips slots other threads hold: never waits for another thread
                    // (invariant 3, progress, in `crate::docs::design`).
                    cache.try_flush();
                }
                alloc().ok()
            }
            Err(_) => None,
        }
    }

    /// Frees a range from [`alloc_fast`](Self::alloc_fast) of `size` pages (the size
    /// asked for, or the same rounded up) into the current CPU's magazines (Linux
    /// `free_iova_fast`). Sizes over 32 pages go to the tree. A size-aligned range of a
    /// class's size from [`alloc`](Self::alloc) is accepted too and cached.
    ///
    /// Each fast-path range in a caller's hands is recorded in a lock-free table of one
    /// byte per pfn, so this costs one atomic read-modify-write more than Linux (never
    /// the tree lock when the range came from `alloc_fast`); that is the price of
    /// refusing a double free or a wrong size, which Linux would turn into a range
    /// handed out twice. [`FreeCheck::Unchecked`] turns the check off.
    ///
    /// # Errors
    ///
    /// [`IovaError::ZeroSize`]; [`IovaError::SizeMismatch`] if the allocation at `pfn`
    /// does not start there or is of another size class; [`IovaError::DoubleFree`] if it
    /// was freed into a magazine already; [`IovaError::NotAllocated`] and
    /// [`IovaError::Reserved`] as for [`free`](Self::free).
    ///
    /// ```
    /// use magazine::iova::IovaError;
    /// use magazine::iova::IovaDomain;
    ///
    /// let domain = IovaDomain::new(4096, 1);
    /// let pfn = domain.alloc_fast(2, u64::MAX).unwrap();
    /// assert!(matches!(domain.free_fast(pfn, 8), Err(IovaError::SizeMismatch { .. })));
    /// domain.free_fast(pfn, 2).unwrap();
    /// assert_eq!(domain.free_fast(pfn, 2), Err(IovaError::DoubleFree { pfn }));
    /// ```
    #[inline]
    pub fn free_fast(&self, pfn: u64, size: u64) -> Result<(), IovaError> {
        self.free_fast_on(self.current_cpu(), pfn, size)
    }

    /// [`free_fast`](Self::free_fast) on the slot of `cpu` (modulo [`Config::cpus`]).
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// // Allocated on CPU 0, completed (freed) on CPU 1, as an IRQ on another CPU does.
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.free_fast_on(1, pfn, 1).unwrap();
    /// assert_eq!(domain.alloc_fast_on(1, 1, u64::MAX), Some(pfn));
    /// ```
    #[inline]
    pub fn free_fast_on(&self, cpu: usize, pfn: u64, size: u64) -> Result<(), IovaError> {
        // Inlined into the caller up to the magazine hit; refusals, frees of ranges not
        // from `alloc_fast`, size 0 and sizes over the largest class are out of line.
        let Some(order) = order_of(size) else {
            return self.free_uncached(pfn, size);
        };
        let cache = &self.rcaches[usize::from(order)];
        let Some(live) = &self.live else {
            // FreeCheck::Unchecked: Linux's `free_iova_fast`.
            cache.free_on(cpu, pfn);
            return Ok(());
        };
        // MUTANT (`free_fast_caches_first`): the pfn reaches a magazine before its life
        // ends, so another thread can allocate it while it is still recorded as live.
        let early = cfg!(magazine_mutant = "free_fast_caches_first");
        if early {
            cache.free_on(cpu, pfn);
        }
        match live.take(pfn, order) {
            Take::Taken => {
                if !early {
                    cache.free_on(cpu, pfn);
                }
                Ok(())
            }
            not_live => self.free_fast_not_live(cpu, pfn, size, order, not_live),
        }
    }

    /// `free_fast` of class `order` for a pfn the live table did not hold with that
    /// order: a wrong size, or a pfn not handed out by `alloc_fast`.
    #[cold]
    #[inline(never)]
    fn free_fast_not_live(
        &self,
        cpu: usize,
        pfn: u64,
        size: u64,
        order: u8,
        found: Take,
    ) -> Result<(), IovaError> {
        match found {
            Take::OtherOrder(live) => {
                let found = Iova {
                    pfn_lo: pfn,
                    pfn_hi: pfn + (1u64 << live) - 1,
                };
                Err(size_mismatch(pfn, size, found))
            }
            Take::Absent => self.free_fast_untracked(cpu, pfn, size, order),
            Take::Taken => unreachable!("a taken pfn is freed into its magazine"),
        }
    }

    /// `free_fast` of a class size for a pfn not handed out by `alloc_fast`: an
    /// allocation from `alloc` (accepted), or an error.
    fn free_fast_untracked(
        &self,
        cpu: usize,
        pfn: u64,
        size: u64,
        order: u8,
    ) -> Result<(), IovaError> {
        let mut tree = self.ranges.lock();
        let iova = match classify(&tree, pfn, Some(size))? {
            // Not live (the live table said so), so in a magazine, or being handed out
            // by a cache right now.
            Freed::Fast(_) => return Err(IovaError::DoubleFree { pfn }),
            Freed::Allocation(iova) => iova,
        };
        let class_size = 1u64 << order;
        if iova.size() == class_size && pfn % class_size == 0 {
            // Exactly what `alloc_fast` would have handed out: cache it.
            tree.set_kind(pfn, Kind::Fast);
            drop(tree);
            self.rcaches[usize::from(order)].free_on(cpu, pfn);
            Ok(())
        } else if order_of(iova.size()) == Some(order) {
            // Same class but not cacheable as is (e.g. 3 pages, or unaligned).
            tree.remove(pfn, Kind::Allocated);
            Ok(())
        } else {
            Err(size_mismatch(pfn, size, iova))
        }
    }

    /// `free_fast` of size 0 (refused) or of a size over the largest class: an exact tree
    /// free.
    #[cold]
    #[inline(never)]
    fn free_uncached(&self, pfn: u64, size: u64) -> Result<(), IovaError> {
        if size == 0 {
            return Err(IovaError::ZeroSize);
        }
        let mut tree = self.ranges.lock();
        match classify(&tree, pfn, Some(size))? {
            Freed::Allocation(iova) if iova.size() == size => {
                tree.remove(pfn, Kind::Allocated);
                Ok(())
            }
            // A fast range is freed by its class size, never as an uncached size.
            Freed::Allocation(found) | Freed::Fast(found) => Err(size_mismatch(pfn, size, found)),
        }
    }

    /// Returns the pfns cached on `cpu`'s slot of every size class to the tree, as Linux
    /// does when a CPU goes offline (`free_cpu_cached_iovas`). Waits for a thread working
    /// on that slot.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// assert_eq!(domain.find(pfn).map(|iova| iova.pfn_lo), Some(pfn), "cached ranges stay allocated");
    /// domain.flush_cpu(0); // CPU 0 goes offline
    /// assert_eq!(domain.find(pfn), None, "back in the tree's free space");
    /// ```
    pub fn flush_cpu(&self, cpu: usize) {
        for cache in self.rcaches.iter() {
            cache.flush_cpu(cpu);
        }
    }

    /// Returns every cached pfn of every size class to the tree (Linux
    /// `free_cpu_cached_iovas` on every CPU, then `free_global_cached_iovas`).
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// domain.flush();
    /// assert_eq!(domain.stats().allocated_ranges, 0);
    /// ```
    pub fn flush(&self) {
        for cache in self.rcaches.iter() {
            cache.flush();
        }
    }

    /// One trim step of every size class's depot (see [`Cache::trim`]); returns the
    /// number of magazines released. Call it periodically: the domain starts no thread.
    ///
    /// ```
    /// use magazine::{Config, DepotPolicy, Trim};
    /// use magazine::iova::IovaDomain;
    ///
    /// // One CPU slot, magazines of 2 pfns, a depot trimmed by working set down to 0.
    /// let depot = DepotPolicy::Dynamic { target: 0, trim: Trim::WorkingSet };
    /// let config = Config { magazine_size: 2, cpus: 1, depot };
    /// let domain = IovaDomain::with_config(4096, 1, config);
    /// let pfns: Vec<u64> = (0..8).map(|_| domain.alloc_fast_on(0, 1, u64::MAX).unwrap()).collect();
    /// pfns.iter().for_each(|&pfn| domain.free_fast_on(0, pfn, 1).unwrap());
    /// domain.trim(); // starts the first interval
    /// assert!(domain.trim() > 0, "magazines idle for a whole interval go back to the tree");
    /// ```
    pub fn trim(&self) -> usize {
        self.rcaches.iter().map(|cache| cache.trim()).sum()
    }

    /// The range a search under `limit_pfn` starts from (Linux's `cached_node`, or
    /// `cached32_node` for limits below [`dma_32bit_pfn`](Self::dma_32bit_pfn)); `None`
    /// is the anchor above the space. The search takes the highest fit below this range,
    /// else the highest fit between it and the limit. For tests and tracing.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// assert_eq!(domain.cached_node(0xff), None, "the anchor: nothing allocated yet");
    /// let iova = domain.alloc(1, 0xff, false).unwrap();
    /// assert_eq!(domain.cached_node(0xff), Some(iova));
    /// ```
    pub fn cached_node(&self, limit_pfn: u64) -> Option<Iova> {
        self.ranges.lock().cached_node(limit_pfn)
    }

    /// A snapshot of the counters. Takes the tree lock and walks the tree.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let iova = domain.alloc(4, 0xff, false).unwrap();
    /// let stats = domain.stats();
    /// assert_eq!((stats.tree_allocs, stats.allocated_pages), (1, 4));
    /// domain.free(iova.pfn_lo).unwrap();
    /// assert_eq!(domain.stats().tree_frees, 1);
    /// ```
    pub fn stats(&self) -> IovaStats {
        let rcaches = self
            .rcaches
            .iter()
            .map(|cache| cache.source().complete(cache.stats()))
            .collect();
        let cached: usize = self.rcaches.iter().map(|cache| cache.cached()).sum();
        let fast_in_use = self.live.as_ref().map(LiveTable::len);
        let tree = self.ranges.lock();
        let mut stats = IovaStats {
            rcaches,
            tree_allocs: tree.counters.allocs,
            tree_frees: tree.counters.frees,
            tree_failures: tree.counters.failures,
            early_failures: tree.counters.early_failures,
            retry_searches: tree.counters.retry_searches,
            exhaustion_flushes: self.exhaustion_flushes.load(Ordering::Relaxed),
            ..IovaStats::default()
        };
        let mut fast_in_tree = 0;
        for (iova, kind) in tree.ranges() {
            fast_in_tree += usize::from(kind == Kind::Fast);
            if kind == Kind::Reserved {
                stats.reserved_ranges += 1;
                stats.reserved_pages += iova.size();
            } else {
                stats.allocated_ranges += 1;
                stats.allocated_pages += iova.size();
            }
        }
        stats.fast_in_use = fast_in_use.unwrap_or(fast_in_tree.saturating_sub(cached));
        stats
    }

    /// Verifies the domain: the tree (ranges disjoint and well formed, allocations at or
    /// above `start_pfn`), the cached search starts (each names a range in the tree), the
    /// 32-bit early-failure bounds (no range of a recorded size fits), and the fast path
    /// (every range in a caller's hands is a size-aligned class range in the tree, and
    /// per size class, ranges in the tree = ranges in callers' hands + pfns in the cache:
    /// conservation).
    ///
    /// Exact only while no other thread uses the domain; it waits for busy slots.
    ///
    /// # Errors
    ///
    /// A [`CheckError`] describing the first inconsistency found.
    ///
    /// ```
    /// use magazine::iova::IovaDomain;
    /// let domain = IovaDomain::new(4096, 1);
    /// let pfn = domain.alloc_fast_on(0, 1, u64::MAX).unwrap();
    /// domain.check().unwrap(); // one range in a caller's hands
    /// domain.free_fast_on(0, pfn, 1).unwrap();
    /// domain.check().unwrap(); // one in a magazine
    /// ```
    pub fn check(&self) -> Result<(), CheckError> {
        let cached: Vec<usize> = self.rcaches.iter().map(|cache| cache.cached()).collect();
        let tree = self.ranges.lock();
        tree.check()?;
        let fail = |message: String| Err(CheckError(message));
        let mut in_tree = [0usize; IOVA_RANGE_CACHE_MAX_SIZE];
        for (iova, kind) in tree.ranges() {
            if kind != Kind::Fast {
                continue;
            }
            let size = iova.size();
            match order_of(size) {
                Some(order) if size.is_power_of_two() && iova.pfn_lo % size == 0 => {
                    in_tree[usize::from(order)] += 1;
                }
                _ => return fail(format!("fast range {iova} is not a size-aligned class")),
            }
        }
        let Some(live) = &self.live else {
            // Unchecked: callers' hands are not recorded; the cache holds no more than
            // the tree has.
            for order in 0..IOVA_RANGE_CACHE_MAX_SIZE {
                if in_tree[order] < cached[order] {
                    return fail(format!(
                        "size class {order}: {} fast ranges in the tree, {} cached",
                        in_tree[order], cached[order]
                    ));
                }
            }
            return Ok(());
        };
        let live = live.snapshot();
        let mut in_hands = [0usize; IOVA_RANGE_CACHE_MAX_SIZE];
        for &(pfn, order) in &live {
            match tree.find(pfn) {
                Some((iova, Kind::Fast)) if iova.pfn_lo == pfn && iova.size() == 1 << order => {
                    in_hands[usize::from(order)] += 1;
                }
                found => {
                    return fail(format!(
                        "pfn {pfn:#x} handed out with order {order} is {found:?} in the tree"
                    ))
                }
            }
        }
        for order in 0..IOVA_RANGE_CACHE_MAX_SIZE {
            if in_tree[order] != in_hands[order] + cached[order] {
                return fail(format!(
                    "size class {order}: {} fast ranges in the tree, {} in callers' hands, \
                     {} cached",
                    in_tree[order], in_hands[order], cached[order]
                ));
            }
        }
        Ok(())
    }
}

/// What the tree holds at a pfn given to a free, once the pfns nobody may free are
/// refused.
enum Freed {
    /// A range from [`IovaDomain::alloc`] (or an uncached `alloc_fast`).
    Allocation(Iova),
    /// A fast-path range: in a caller's hands or in a magazine, which only the live table
    /// tells apart.
    Fast(Iova),
}

/// The one decision table of the free paths ([`IovaDomain::free`] and the three behind
/// [`IovaDomain::free_fast`]), so that they agree on what is an error:
///
/// | the tree holds at `pfn`                           | result                   |
/// |---------------------------------------------------|--------------------------|
/// | no range                                          | `Err(NotAllocated)`      |
/// | a reserved range                                  | `Err(Reserved)`          |
/// | a range not starting at `pfn`, and `size` is given | `Err(SizeMismatch)`     |
/// | an allocation                                     | `Ok(Freed::Allocation)`  |
/// | a fast-path range                                 | `Ok(Freed::Fast)`        |
///
/// `size` is the size a `free_fast` names its range by (its first pfn and size); `free`
/// names a range by any pfn in it and passes `None`. What a path then does with an
/// allocation or a fast range (cache it, remove it, or refuse a size or a double free)
/// is its own.
fn classify(tree: &RangeTree, pfn: u64, size: Option<u64>) -> Result<Freed, IovaError> {
    let (iova, kind) = tree.find(pfn).ok_or(IovaError::NotAllocated { pfn })?;
    match (kind, size) {
        (Kind::Reserved, _) => Err(IovaError::Reserved { pfn, range: iova }),
        (_, Some(size)) if iova.pfn_lo != pfn => Err(size_mismatch(pfn, size, iova)),
        (Kind::Allocated, _) => Ok(Freed::Allocation(iova)),
        (Kind::Fast, _) => Ok(Freed::Fast(iova)),
    }
}

fn size_mismatch(pfn: u64, size: u64, found: Iova) -> IovaError {
    IovaError::SizeMismatch { pfn, size, found }
}

impl fmt::Debug for IovaDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IovaDomain")
            .field("granule", &self.granule)
            .field("start_pfn", &self.start_pfn)
            .field("dma_32bit_pfn", &self.dma_32bit_pfn)
            .field("config", self.config())
            .finish_non_exhaustive()
    }
}
