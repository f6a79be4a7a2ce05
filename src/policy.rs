//! Configuration: how big magazines are, how many CPU slots, and how the depot grows and
//! shrinks.

/// How [`Cache::trim`](crate::Cache::trim) shrinks a [`DepotPolicy::Dynamic`] depot.
///
/// ```
/// use magazine::{DepotPolicy, Trim};
///
/// // Linux >= 6.7: one magazine per 100 ms tick while above the number of CPUs.
/// let linux = DepotPolicy::Dynamic { target: 64, trim: Trim::OnePerTick };
/// // Bonwick: whatever nobody used during the last interval, at once.
/// let bonwick = DepotPolicy::Dynamic { target: 64, trim: Trim::WorkingSet };
/// assert_ne!(linux, bonwick);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trim {
    /// Linux >= 6.7: each trim releases one full magazine while the depot holds more than
    /// `target` (Linux runs it every 100 ms while `depot_size > num_online_cpus()`). Call
    /// `trim()` every 100 ms, as Linux does: the interval is the rate.
    OnePerTick,
    /// Bonwick & Adams: each trim releases the magazines that nobody needed during the
    /// whole interval since the previous trim, i.e. the interval's low-water mark of the
    /// full stack (never going below `target`), all at once. Call `trim()` every 2 s: the
    /// interval is the working-set window
    /// ([`docs::trimming`](crate::docs::trimming)).
    WorkingSet,
}

/// How many full magazines the depot may hold.
///
/// ```
/// use magazine::{Config, DepotPolicy};
///
/// // Linux <= 6.6: 32 full magazines, overflow returned to the allocator.
/// let config = Config { depot: DepotPolicy::Fixed { max_full: 32 }, ..Config::default() };
/// # let _ = config;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DepotPolicy {
    /// Linux <= 6.6: at most `max_full` full magazines; a full magazine that does not fit
    /// is returned to the source in one `free_batch` call. `trim` never releases full
    /// magazines. A `max_full` above the bound of a [`Dynamic`](Self::Dynamic) depot (65279
    /// full magazines on 32-bit targets) acts as that bound.
    Fixed {
        /// The cap on full magazines (Linux: `MAX_GLOBAL_MAGS = 32`).
        max_full: usize,
    },
    /// The depot grows without bound, short of the most magazines a depot stack can count:
    /// 2^32 - 1 on 64-bit targets, **65535 on 32-bit targets** (see
    /// [`docs::obligations`](crate::docs::obligations#depot-length-on-32-bit-targets)). The
    /// last 256 of those places are kept for the rescue path, which holds a magazine while
    /// a panicking source unwinds and never panics, so the depot holds at most 65279 full
    /// magazines on 32-bit targets (2^32 - 257 on 64-bit ones); a full magazine beyond that
    /// is returned to the source, as a `Fixed` depot's overflow is.
    /// [`Cache::trim`](crate::Cache::trim) shrinks it toward `target` full magazines with
    /// the given rule.
    Dynamic {
        /// The number of full magazines trimming leaves in place.
        target: usize,
        /// The trimming rule.
        trim: Trim,
    },
}

impl DepotPolicy {
    /// The largest number of full magazines the depot accepts.
    pub(crate) fn max_full(&self) -> usize {
        match *self {
            DepotPolicy::Fixed { max_full } => max_full,
            DepotPolicy::Dynamic { .. } => usize::MAX,
        }
    }

    /// The baseline size of the depot: the cap, or the trim target.
    pub(crate) fn target(&self) -> usize {
        match *self {
            DepotPolicy::Fixed { max_full } => max_full,
            DepotPolicy::Dynamic { target, .. } => target,
        }
    }
}

/// Cache configuration. Start from [`Config::default`] and set the fields you need:
///
/// ```
/// use magazine::{Config, DepotPolicy, Trim};
///
/// let config = Config {
///     magazine_size: 64,
///     depot: DepotPolicy::Dynamic { target: 8, trim: Trim::WorkingSet },
///     ..Config::default()
/// };
/// assert_eq!(config.magazine_size, 64);
/// ```
///
/// # Panics
///
/// `Config` itself never panics; the cache constructors check it (a `magazine_size` or
/// `cpus` of 0, a magazine too large for the address space).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Items per magazine (Linux: `IOVA_MAG_SIZE = 127`). At least 1. Every magazine is
    /// allocated at its full size (two per CPU slot when the cache is built, more as the
    /// depot grows), so keep it in the tens to hundreds: a cache constructor panics with
    /// "capacity overflow" when `magazine_size * size_of::<Item>()` exceeds `isize::MAX`
    /// bytes, and aborts when the memory is not available (see the `# Panics` section of
    /// [`Cache::with_config`](crate::Cache::with_config)).
    pub magazine_size: usize,
    /// Number of per-CPU slots. CPU ids at or above it share slots (id modulo `cpus`).
    /// At least 1.
    pub cpus: usize,
    /// How the depot grows and shrinks.
    pub depot: DepotPolicy,
}

/// Settings beyond the contract's [`Config`], for [`Cache::with_options`]. Marked
/// `#[non_exhaustive]` because the set will grow: start from [`Options::default`].
///
/// ```
/// use magazine::Options;
///
/// let mut options = Options::default();
/// options.max_empty = Some(4);
/// options.current_cpu = Some(|| 0); // e.g. a no_std target's CPU-id register
/// ```
///
/// [`Cache::with_options`]: crate::Cache::with_options
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The most empty magazines the depot keeps for reuse; surplus ones are freed. `None`
    /// means the larger of the depot's target (or cap) and `cpus`.
    pub max_empty: Option<usize>,
    /// The most full magazines the depot keeps: one beyond it is returned to the source
    /// in one `free_batch` call, as a [`Fixed`](DepotPolicy::Fixed) depot's overflow is.
    /// `None` means the policy's own bound (a `Fixed` depot's cap; none short of the
    /// stack's count for a `Dynamic` one); a value above it acts as it. For a `Dynamic`
    /// depot this bounds what a burst of frees leaves cached between trims, which still
    /// trim by the policy's rule: an allocator whose source hands out items in address
    /// order gets the burst's items back in that order, where magazines would keep the
    /// order in which they were freed.
    pub max_full: Option<usize>,
    /// The CPU id that [`Cache::alloc`](crate::Cache::alloc) and
    /// [`Cache::free`](crate::Cache::free) use to pick a slot. `None` means
    /// [`cpu::current`](crate::cpu::current): the rseq area's CPU id or `sched_getcpu()`
    /// on Linux. Set it on
    /// `no_std` targets (where the default is always 0) or to pin the mapping yourself;
    /// a cache with one runs no [restartable sequences](Self::restartable_sequences).
    pub current_cpu: Option<fn() -> usize>,
    /// Whether [`Cache::trim`](crate::Cache::trim) also takes the magazines of CPU slots
    /// that saw no operation during the whole interval since the previous trim (busy
    /// slots are skipped, never waited for) and treats them as unused depot magazines:
    /// what the policy keeps stays in the depot, the rest goes to the source. tcmalloc
    /// reclaims idle per-CPU caches the same way; Linux and Bonwick leave them in place.
    ///
    /// `None` (the default) means on for [`Trim::WorkingSet`] and off for the other
    /// policies, which reproduce Linux.
    pub reclaim_idle_slots: Option<bool>,
    /// Whether the depot keeps a shelf per CPU slot: room for one full and one empty
    /// magazine that the CPU's exchanges try before the shared stacks, so that CPUs that
    /// give and take magazines do not contend on the stacks' cache lines (see
    /// [`docs::design`](crate::docs::design#cpu-shelves)). Shelved magazines are part of
    /// the depot: other CPUs' refills take them before going to the source, flushes drain
    /// them, trims take them when unused for a whole interval. They add at most one full
    /// and one empty magazine per slot to what the depot may hold.
    ///
    /// `None` (the default) means on for [`DepotPolicy::Dynamic`]. A
    /// [`DepotPolicy::Fixed`] depot never has shelves, whatever this says: its cap counts
    /// the full stack alone and stays hard.
    pub cpu_shelves: Option<bool>,
    /// Whether `alloc` and `free` run as restartable sequences on the current CPU's slot,
    /// where the platform allows: Linux x86_64 with glibc 2.35 or later (which registers
    /// the threads' rseq areas) and a kernel with `membarrier`'s rseq fence (5.10 or
    /// later), for a cache with a slot for every CPU the system may bring up (`cpus` of at
    /// least `sysconf(_SC_NPROCESSORS_CONF)`; `Config::default()`'s available parallelism
    /// is smaller under a CPU affinity mask or a cgroup limit, and the sequences are then
    /// off: [`Cache::runs_restartable_sequences`](crate::Cache::runs_restartable_sequences)
    /// tells; a count below the highest CPU id + 1 costs fences, not soundness: see
    /// [`docs::design`](crate::docs::design#restartable-sequences)) and no
    /// [`current_cpu`](Self::current_cpu) of its own, whose magazines hold fewer than
    /// `2^31` items (the length shares a word with the hit counts). A hit then takes no
    /// lock and does no read-modify-write, and a thread preempted in the middle of one
    /// holds up nobody; see [`docs::design`](crate::docs::design#restartable-sequences).
    /// On by default.
    ///
    /// On the machines of `BENCHMARKS.md` an alloc/free pair on one thread costs
    /// 0.20-0.45x the slot protocol's, 8 threads of pairs on 2 cores run at 5.7-24x its
    /// throughput with no busy misses, and a 1 -> 1 hand-off at 1.6-4.3x an `ArrayQueue`.
    ///
    /// The cost is elsewhere: once a thread on a CPU has run `alloc` or `free` there (it
    /// *activates* that CPU's slot), an operation that takes the slot from a thread that
    /// is not on that CPU (`flush_cpu`, `flush`, `cached`, trims that reclaim idle slots,
    /// exhaustion flushes and steals that need the loaded magazine, and `alloc_on` /
    /// `free_on` / `alloc_cached_where_on` for that slot) waits up to 2 us for that CPU to
    /// acknowledge its claim, and when no thread there calls into the cache meanwhile,
    /// makes a `membarrier` system call that interrupts that CPU (about 9 us there; see
    /// [`Stats::fenced_takes`](crate::Stats::fenced_takes)). Steals that find the other
    /// slot's `previous` magazine full, and polls of a cache that holds nothing, need
    /// neither. Slots that no `alloc` or `free` has activated (the `_on` calls never do)
    /// are taken with a compare-and-swap as without sequences, from any thread: a
    /// simulator that drives the slots from one thread with the `_on` calls pays nothing
    /// for this option. Turn it off for a cache whose slots are both used by `alloc` /
    /// `free` on their CPUs and taken from elsewhere all the time.
    ///
    /// When off, or where unavailable, every operation takes its slot with a
    /// compare-and-swap: the portable protocol that loom and shuttle check.
    /// [`Cache::runs_restartable_sequences`](crate::Cache::runs_restartable_sequences)
    /// tells which one a cache runs.
    pub restartable_sequences: bool,
    /// How many items an allocation that finds its magazines and the depot empty asks
    /// the source for, in one [`Source::alloc_batch`](crate::Source::alloc_batch) call:
    /// it keeps them as its slot's (or handle's) loaded magazine, so the next allocations
    /// there are hits, and the source's lock is taken once per batch instead of once per
    /// item. `None` (the default) means a whole magazine (`magazine_size`), as Bonwick's
    /// magazine layer and SLUB's sheaves refill; `Some(1)` asks for one item at a time
    /// with [`Source::alloc`](crate::Source::alloc) (the behaviour before batches, and
    /// Linux's); values are capped at `magazine_size`, and 0 counts as 1. The exhaustion
    /// path's last ask of the source is a batch too.
    ///
    /// The cost of a batch: items leave the source before anyone asks for them, so with
    /// a pool close to exhaustion one slot may hold what another needs (the exhaustion
    /// flush then steals it), and a cache that stops being used holds up to a magazine
    /// more per slot until trimmed. `BENCHMARKS.md` has the measurements behind the
    /// default (the `refill` group).
    pub source_batch: Option<usize>,
}

impl Default for Options {
    /// Everything at its default: see each field.
    fn default() -> Self {
        Options {
            max_empty: None,
            max_full: None,
            current_cpu: None,
            reclaim_idle_slots: None,
            cpu_shelves: None,
            restartable_sequences: true,
            source_batch: None,
        }
    }
}

impl Options {
    /// Items per source refill (see [`source_batch`](Self::source_batch)): 1 to
    /// `magazine_size`.
    pub(crate) fn items_per_refill(&self, config: &Config) -> usize {
        self.source_batch
            .unwrap_or(config.magazine_size)
            .clamp(1, config.magazine_size.max(1))
    }

    /// Whether trim reclaims idle slots under `policy` (see
    /// [`reclaim_idle_slots`](Self::reclaim_idle_slots)).
    pub(crate) fn reclaims_idle_slots(&self, policy: &DepotPolicy) -> bool {
        self.reclaim_idle_slots.unwrap_or(matches!(
            policy,
            DepotPolicy::Dynamic {
                trim: Trim::WorkingSet,
                ..
            }
        ))
    }
}

impl Config {
    /// How many CPU shelves the depot has (see [`Options::cpu_shelves`]).
    pub(crate) fn shelf_count(&self, options: &Options) -> usize {
        let dynamic = matches!(self.depot, DepotPolicy::Dynamic { .. });
        match dynamic && options.cpu_shelves.unwrap_or(true) {
            true => self.cpus,
            false => 0,
        }
    }

    /// The cap on the full stack (see [`Options::max_full`]).
    pub(crate) fn full_cap(&self, options: &Options) -> usize {
        let bound = self.depot.max_full();
        options.max_full.map_or(bound, |cap| cap.min(bound))
    }

    /// The cap on the empty stack (see [`Options::max_empty`]).
    pub(crate) fn empty_cap(&self, options: &Options) -> usize {
        options
            .max_empty
            .unwrap_or_else(|| self.depot.target().max(self.cpus))
    }
}

impl Default for Config {
    /// Magazines of 127 items, one slot per available CPU, and a dynamic depot with target
    /// `cpus` trimmed by working set.
    fn default() -> Self {
        let cpus = default_cpus();
        Config {
            magazine_size: 127,
            cpus,
            depot: DepotPolicy::Dynamic {
                target: cpus,
                trim: Trim::WorkingSet,
            },
        }
    }
}

#[cfg(feature = "std")]
fn default_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(not(feature = "std"))]
fn default_cpus() -> usize {
    1
}
