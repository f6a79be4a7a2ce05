//! Statistics: what served each operation and how big the depot is.

use core::fmt;

use crate::sync::{AtomicUsize, Ordering};

/// A snapshot of a cache's counters, from [`Cache::stats`](crate::Cache::stats).
///
/// Counters are summed from per-slot counters that only the slot's owner writes, so they
/// add no contended atomic to the fast path; a snapshot taken while threads work is
/// approximate. When the cache is quiescent, `depot_full` and `depot_empty` equal the real
/// stack lengths ([invariant 5](crate::docs::design#invariant-5-accounting)). Counters of a
/// live [`LocalCache`](crate::LocalCache) are published in batches (at a miss once 4096
/// hits have built up on that side, and when it is dropped), so a snapshot may lag a live
/// handle by up to 4096 hits per side.
///
/// **Trim and flush activity is counted too**, not only the traffic of `alloc` and `free`:
/// `depot_pops` rises with every full magazine a trim or a flush takes from the depot,
/// `source_frees` with every item they return to the source (`trimmed` counts the trimmed
/// magazines alone). The rates ([`alloc_hit_rate`](Self::alloc_hit_rate),
/// [`free_hit_rate`](Self::free_hit_rate), [`source_share`](Self::source_share)) subtract
/// trims out. `Display` prints the line you would log; the totals of allocations and frees
/// are estimates (the counters do not count an operation the depot or the source served
/// directly, see [`alloc_hit_rate`](Self::alloc_hit_rate)), so the line marks them with
/// `~`, and the rates computed from them are estimates too:
///
/// ```
/// # use magazine::{Cache, Source};
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
/// # let cache = Cache::new(Ids(Default::default()));
/// # let id = cache.alloc_on(0).unwrap();
/// # cache.free_on(0, id);
/// # assert_eq!(cache.alloc_on(0), Some(id));
/// let stats = cache.stats();
/// println!("id cache: {stats}");
/// // id cache: alloc 1/~2 hits (50.0%), free 1/~1 hits (100.0%), source 1 allocs 0 frees, ...
/// assert_eq!(stats.alloc_hit_rate(), Some(0.5));
/// assert!(stats.to_string().starts_with("alloc 1/~2 hits (50.0%), free 1/~1 hits"));
/// ```
///
/// ```
/// use magazine::{Cache, Config, DepotPolicy, Source, Stats};
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
/// let config = Config { magazine_size: 2, cpus: 1, depot: DepotPolicy::Fixed { max_full: 8 } };
/// let cache = Cache::with_config(Ids(Default::default()), config);
/// let ids: Vec<u32> = (0..6).map(|_| cache.alloc().unwrap()).collect();
/// ids.into_iter().for_each(|id| cache.free(id));
/// let stats: Stats = cache.stats();
/// assert_eq!(stats.source_allocs, 6);
/// assert_eq!(stats.depot_full, 1, "2 + 2 in the slot, one magazine of 2 in the depot");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Allocations served by a loaded or previous magazine.
    pub alloc_hits: u64,
    /// Frees served by a loaded or previous magazine.
    pub free_hits: u64,
    /// Full magazines taken from the depot: by a slot or a handle that needs items, and
    /// also by [`Cache::trim`](crate::Cache::trim) and the flushes (so it rises with trims).
    pub depot_pops: u64,
    /// Non-empty magazines given to the depot: full ones from slots and handles, partly
    /// filled ones from dropped handles, frees that found every slot busy, and idle slots
    /// reclaimed by trim.
    pub depot_pushes: u64,
    /// Items allocated from the source (the slow path).
    pub source_allocs: u64,
    /// Calls that allocated from the source: `Source::alloc_batch` calls (each refills a
    /// magazine with up to [`Options::source_batch`](crate::Options::source_batch) items
    /// and serves one allocation), or `Source::alloc` calls with a batch of 1. Calls that
    /// found the source exhausted are not counted.
    pub source_alloc_calls: u64,
    /// Items returned to the source: overflow of a `Fixed` depot, trims, flushes and the
    /// cache's drop. (A free that finds every slot busy goes into a partly filled depot
    /// magazine, not to the source.)
    pub source_frees: u64,
    /// `Source::free_batch` calls (each with at most a magazine of items).
    pub source_free_calls: u64,
    /// Full magazines released by [`Cache::trim`](crate::Cache::trim).
    pub trimmed: u64,
    /// Magazines holding items in the depot now: full ones (its stacks and its CPU
    /// shelves) and the partly filled ones of the loose path.
    pub depot_full: usize,
    /// Empty magazines in the depot now (its stacks and its CPU shelves).
    pub depot_empty: usize,
    /// The most magazines holding items that the depot has held at once (full ones, and
    /// the partly filled ones that handle drops, idle-slot reclaims and rescues push onto
    /// its full stack): the highest length that stack reached, and at least every
    /// `depot_full` a `stats()` call has seen. Between
    /// two calls, magazines on CPU shelves (at most one per slot, see
    /// [`Options::cpu_shelves`](crate::Options::cpu_shelves)) may be missing from it.
    pub depot_peak: usize,
    /// Operations that found their CPU slot taken by another thread (a miss, never a wait).
    pub busy_misses: u64,
    /// Allocations that found the source exhausted. Each then takes a depot magazine, else
    /// flushes the cache until it finds a magazine with an item (another CPU slot's: see
    /// `steals`; else the depot's), else asks the source again (see [the exhaustion
    /// rule](crate::docs::design#the-exhaustion-rule)).
    pub exhaustion_flushes: u64,
    /// Takes of another CPU's slot's magazines (both of them, when both hold items) by an
    /// allocation that found the source exhausted, in its flush or while it waits for
    /// another's (instead of flushing them to the source and allocating one at a time).
    pub steals: u64,
    /// Takes of a CPU slot that needed a fence: a `membarrier` system call that
    /// interrupts the slot's CPU (a thread that runs on that CPU is its own fence and
    /// makes no call; where `membarrier` fails, a moment on that CPU). Only in a cache that runs restartable sequences
    /// ([`Options::restartable_sequences`](crate::Options::restartable_sequences)), where
    /// a thread takes another CPU's slot that way: flushes of an exhausted allocation,
    /// steals whose items are all in the loaded magazine, `flush_cpu`, `flush`, idle
    /// reclaim, and `alloc_on`/`free_on` for a CPU the thread is not on, once a thread on
    /// that CPU has activated the slot with `alloc` or `free` (plain slots need no fence).
    /// A steal that finds the slot's `previous` magazine holding items takes it with no
    /// fence, and a thread that wants a slot's items skips a slot that looks empty without
    /// one.
    pub fenced_takes: u64,
}

impl Stats {
    /// Allocations, estimated: magazine hits, plus allocations served by a full magazine
    /// from the depot (the depot pops that were not trims), plus those served by a call to
    /// the source (the rest of its batch is served by hits later). A flush also pops the
    /// depot, so after flushes the estimate runs a little high.
    fn allocs_estimated(&self) -> u64 {
        let depot_refills = self.depot_pops.saturating_sub(self.trimmed);
        self.alloc_hits + depot_refills + self.source_alloc_calls
    }

    /// Frees, estimated: magazine hits plus one per full magazine given to the depot
    /// (each such push is what a missing free does).
    fn frees_estimated(&self) -> u64 {
        self.free_hits + self.depot_pushes
    }

    /// The share of allocations served by a loaded or previous magazine, from 0.0 to
    /// 1.0; `None` before any allocation. The counters do not count allocations served
    /// by the depot directly, so the total is estimated from the depot pops that were
    /// not trims (a flush's pops make it a little low).
    ///
    /// ```
    /// let stats = magazine::Stats::default();
    /// assert_eq!(stats.alloc_hit_rate(), None);
    /// ```
    pub fn alloc_hit_rate(&self) -> Option<f64> {
        ratio(self.alloc_hits, self.allocs_estimated())
    }

    /// The share of frees served by a loaded or previous magazine, from 0.0 to 1.0;
    /// `None` before any free. Estimated like [`alloc_hit_rate`](Self::alloc_hit_rate):
    /// every full magazine given to the depot counts as one missing free (frees that went
    /// straight to the source are not told apart).
    pub fn free_hit_rate(&self) -> Option<f64> {
        ratio(self.free_hits, self.frees_estimated())
    }

    /// The share of allocations that called the source, the slow path, from 0.0 to 1.0;
    /// `None` before any allocation. The number to watch: keeping it low is what the
    /// cache is for. A call that refills a magazine with a batch counts once. Same
    /// estimated total as [`alloc_hit_rate`](Self::alloc_hit_rate).
    pub fn source_share(&self) -> Option<f64> {
        ratio(self.source_alloc_calls, self.allocs_estimated())
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole != 0).then(|| part as f64 / whole as f64)
}

/// Writes `value` as a percentage with one decimal, or `-` when undefined.
fn percent(f: &mut fmt::Formatter<'_>, value: Option<f64>) -> fmt::Result {
    match value {
        Some(value) => write!(f, "{:.1}%", value * 100.0),
        None => f.write_str("-"),
    }
}

impl fmt::Display for Stats {
    /// One line for a log: hits and rates, slow path, depot, trims and the rare events.
    /// `~` marks the estimated totals (and so the rates) of allocations and frees; every
    /// other figure is a count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "alloc {}/~{} hits (",
            self.alloc_hits,
            self.allocs_estimated()
        )?;
        percent(f, self.alloc_hit_rate())?;
        write!(
            f,
            "), free {}/~{} hits (",
            self.free_hits,
            self.frees_estimated()
        )?;
        percent(f, self.free_hit_rate())?;
        write!(
            f,
            "), source {} allocs in {} calls, {} frees in {} calls, depot {} full {} empty (peak {}), \
             {} pops {} pushes, {} trimmed, {} busy misses, {} exhaustion flushes, {} steals, {} fenced takes",
            self.source_allocs,
            self.source_alloc_calls,
            self.source_frees,
            self.source_free_calls,
            self.depot_full,
            self.depot_empty,
            self.depot_peak,
            self.depot_pops,
            self.depot_pushes,
            self.trimmed,
            self.busy_misses,
            self.exhaustion_flushes,
            self.steals,
            self.fenced_takes
        )
    }
}

/// A counter with one writer at a time (the owner of a slot), read by anyone: a load and a
/// store instead of a read-modify-write. Owners are ordered by the slot's Acquire/Release
/// hand-over, so no increment is lost.
#[derive(Debug, Default)]
pub(crate) struct OwnedCounter(AtomicUsize);

impl OwnedCounter {
    #[inline]
    pub(crate) fn add(&self, n: usize) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed) as u64
    }
}

/// A counter any thread bumps; used only off the fast path.
#[derive(Debug, Default)]
pub(crate) struct SharedCounter(AtomicUsize);

impl SharedCounter {
    pub(crate) fn add(&self, n: usize) {
        if n != 0 {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed) as u64
    }
}
