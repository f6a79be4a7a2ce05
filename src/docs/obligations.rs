//! What the cache trusts you with: the obligations of callers and sources that the cache
//! does not check, and the limits of what it promises.
//!
//! # Free only what you allocated, once
//!
//! [`Cache::free`], [`Cache::free_on`] and [`LocalCache::free`] take the item on trust.
//! The cache never looks inside an item, so it cannot tell:
//!
//! - a **double free**: the same item freed twice sits in a magazine twice, and the cache
//!   later hands it out twice, to two owners;
//! - a **foreign item**: an item that did not come from this cache's source (or from this
//!   cache) is cached like any other and eventually given to the source's `free_batch`,
//!   which then receives something it never handed out.
//!
//! Neither is undefined behaviour in Rust's sense (the cache is safe code over `T: Send`),
//! but both break [conservation](super::design#invariant-1-conservation) for your items,
//! silently and far from the mistake. This is the same trust Linux's `free_iova_fast`
//! places in its callers; checking on every free would cost the very shared state the
//! magazines exist to avoid.
//!
//! The caller's obligation, stated on [`Cache`], [`LocalCache`] and [`Source`]: **free an
//! item at most once per allocation, and only items this cache (or its source) handed
//! out.** When callers cannot be trusted, put a checking front end in front of the cache.
//! [`IovaDomain`] is one: it records every range it hands out through its fast path in a
//! lock-free table of one byte per pfn, and refuses a double free, a foreign pfn or a wrong size with an
//! [`IovaError`], leaving the domain unchanged:
//!
//! ```
//! use magazine::iova::{IovaDomain, IovaError};
//!
//! let domain = IovaDomain::new(4096, 1);
//! let limit = domain.dma_32bit_pfn() - 1;
//! let pfn = domain.alloc_fast_on(0, 1, limit).unwrap();
//! domain.free_fast_on(0, pfn, 1).unwrap();
//! assert_eq!(domain.free_fast_on(0, pfn, 1), Err(IovaError::DoubleFree { pfn }));
//! assert!(domain.free_fast_on(0, 12345, 1).is_err(), "never allocated");
//! domain.check().unwrap();
//! ```
//!
//! The price is one atomic access per fast operation, a compare-and-swap on each free
//! (see `BENCHMARKS.md`); [`FreeCheck::Unchecked`](crate::iova::FreeCheck) turns the check
//! off for callers that guarantee correct frees, as Linux does.
//!
//! # Sources
//!
//! A [`Source`] must hand out each item at most once until it gets it back through
//! `free_batch`; the cache relies on that for conservation. It may panic: the cache stays
//! consistent and keeps the items the source did not take (with one limit: a panic while
//! the cache itself is being dropped leaves the remaining items to be dropped with it;
//! [`failures`](super::failures#a-source-that-panics) has each path).
//! `free_batch` should consume the whole iterator; items it leaves are offered again, and
//! when a call consumes none the rest are dropped.
//!
//! # Callbacks must not re-enter the cache
//!
//! The `accept` closure of [`Cache::alloc_cached_where`] and
//! [`Cache::alloc_cached_where_on`] is called on cached items while the calling thread
//! owns the CPU slot it searches. From there, **do not call [`Cache::cached`],
//! [`Cache::flush`] or [`Cache::flush_cpu`] on the same cache**: each of them waits for
//! every slot it visits to be free, including the one the calling thread holds, so the
//! thread waits for itself forever. Calling `alloc`, `free` or their `_on` forms from
//! there does not hang (the held slot is a busy miss and another slot, the depot or the
//! source serves), but it is rarely what you want: keep `accept` a test of the item.
//! Nothing in the type system prevents the re-entry; the rule is yours to keep.
//!
//! The source, by contrast, is never called while the cache holds a slot (flushes give
//! the slot back before they hand its magazines to `free_batch`) or while an exhausted
//! allocation's flush holds its flag, so a source that calls back into the cache waits for
//! nothing (see [`failures`](super::failures#re-entry-from-the-source)). No function of
//! the crate may be called from a signal handler
//! (see [`failures`](super::failures#signals)).
//!
//! # Inside a global allocator
//!
//! A cache whose items are memory blocks can be the front end of a `#[global_allocator]`.
//! The cache then allocates through the allocator it serves: it keeps its own metadata in
//! the global heap. What it allocates, and when:
//!
//! - **When it is built** ([`Cache::with_options`](crate::Cache::with_options)): the CPU
//!   slots and their two magazines each (`cpus x 2 x magazine_size` items), the depot and
//!   its CPU shelves (it reads the environment with `getenv`, which neither allocates
//!   nor takes a lock of std's).
//! - **On a miss**, never on a hit: an empty magazine when a free finds none in the depot,
//!   a magazine's depot node at its first push, crossbeam-epoch's per-thread record at a
//!   thread's first pin (and a short-lived one at every pin once that thread-local is gone,
//!   during thread exit), garbage bags and queue nodes when a node is retired.
//! - **At thread exit**, outside any cache call: the thread-local destructor of the
//!   thread's epoch participant moves its garbage to the collector's global queue (a
//!   queue node of about 2 KiB).
//! - **On trim, flush and drop** it frees magazines and nodes; nodes are freed through the
//!   epoch, later, by whichever thread's pin of the crate's collector collects them.
//!
//! The cache's own allocations may fail (a null from the allocator): the cache degrades
//! ([`failures`](super::failures#system-calls-that-fail)). crossbeam-epoch's may not (it
//! aborts on a null), so an allocator that must return null when memory runs out serves
//! those from memory that user allocations cannot exhaust: `malloc/` serves every
//! allocation made while the thread is marked (below) from the class's source, else from
//! a static reserve. To mark thread exit's allocations as well, it calls
//! [`register_thread`](crate::register_thread) at a thread's first allocation and then
//! registers a thread-local destructor of its own, which runs before the participant's
//! (destructors run in the reverse order of their registration) and marks the thread for
//! the rest of its exit.
//!
//! What runs inside a cache call is the source, the cache's own code and the crate's own
//! deferred frees (its depot nodes): the cache pins an epoch collector of its own, never
//! crossbeam-epoch's process-wide default one, whose collection would run any library's
//! deferred functions (a lock the caller holds, a panic) inside an allocation.
//!
//! Its source is called from inside those paths (with no CPU slot held, see
//! [callbacks](#callbacks-must-not-re-enter-the-cache)). Without a rule, a miss would
//! allocate a magazine, which misses in another class's cache, which allocates, and so
//! on, or takes a lock its own thread already holds. The rule that makes it safe, which
//! is the obligation of the allocator around the cache and of its source:
//!
//! 1. **Mark the thread while it runs the cache**, and during its exit. Every call into a
//!    cache (allocation, free, trim, statistics, construction) runs with a thread-local
//!    flag set, and so does everything after the thread's exit marker (above). The flag
//!    is a `const`-initialised `Cell` with no destructor, so it can be read during
//!    thread exit, when destructors of other thread-locals still allocate and free.
//!    [`Cache::alloc_if_hit`](crate::Cache::alloc_if_hit) and
//!    [`Cache::free_if_hit`](crate::Cache::free_if_hit) are the exception: a hit by a
//!    restartable sequence, or nothing. They never allocate, call the source, take a lock
//!    or pin, and a slot that the thread's own cache call holds makes them miss, so they
//!    may run unmarked, before the flag is read (a thread's flag is then read only on a
//!    miss). The same holds for a [`HitPath`](crate::HitPath)'s, which are the cache's
//!    hits run from a copy of its slot layout (`malloc/` keeps one beside each class's
//!    state, so that a hit reads one line of metadata before the CPU's slot).
//! 2. **While marked, allocate from memory that never calls a cache**: the class's source
//!    directly, past its cache (what `malloc/` does: metadata blocks are then ordinary
//!    blocks, and their memory goes back with the source's spans), a separate arena, or
//!    the system directly for large requests. None of these may allocate either.
//! 3. **Free metadata where it came from, whoever frees it.** The epoch frees metadata
//!    later, from any thread, with the flag set or not. Metadata taken from a class's
//!    source is an ordinary block of the class and may go into its cache when freed from
//!    outside; a separate arena must recognise its blocks by address, whatever the flag
//!    says, before routing by layout (a class, or a mapping).
//! 4. **A cache's block freed while marked goes to its source, not into a cache** (a hit
//!    by `free_if_hit` aside, see 1). The crate's deferred frees run inside pins of the
//!    cache; those blocks go straight back to the source instead of re-entering a cache
//!    from inside one.
//! 5. **The source never allocates and holds its locks only within its own calls.** It
//!    keeps its state in the memory it manages (span descriptors, free blocks) and never
//!    calls the cache or the allocator with a lock held.
//!
//! With these, every chain of calls is at most allocator, cache, source (or arena), no
//! lock is taken twice by one thread, and nothing waits for a thread that waits for it.
//! Start no thread from inside the allocator (a periodic trim runs on a thread the
//! program starts).
//!
//! The crate `magazine-malloc` in the repository's `malloc/` directory is the worked
//! example: a size class per cache, created lazily, with the flag and the routing
//! (`malloc/src/heap.rs` has the routing table) and a source that never allocates and
//! serves the caches' own allocations past them (`malloc/src/source.rs`).
//!
//! # Fork
//!
//! `fork` copies only the calling thread; the child inherits a `Cache` as the parent's
//! other threads (dead threads, in the child) left it, in the middle of their calls. No
//! protocol of the cache waits for one of them on the `alloc`/`free` paths, so in the
//! child:
//!
//! - **What leaks.** A CPU slot that a dead thread owned or claimed stays busy for good:
//!   calls that want it take another slot, the depot's loose path or the source, and its
//!   items are never handed out again. So do the magazines a dead thread had in hand (a
//!   pop past its claim, a push before its link, a [`LocalCache`]'s). A dead thread pinned
//!   in crossbeam-epoch stops the epoch: what the child retires is never freed.
//! - **What it may call.** [`Cache::alloc`], [`Cache::free`], their `_on` forms,
//!   [`Cache::alloc_cached_where`], [`Cache::trim`], [`Cache::try_flush`] and
//!   [`Cache::stats`]. The flags that one thread holds at a time (a trim's, the
//!   exhaustion flush's) record their holder's process id, so a flag that a dead thread
//!   held is taken over in the child, never waited for (a child forked inside a new PID
//!   namespace by a parent whose own id there is the child's, 1 for 1, would not tell
//!   them apart). **Not** [`Cache::flush`],
//!   [`Cache::flush_cpu`] or [`Cache::cached`], which wait for each slot's owner, nor the
//!   cache's drop, which would empty a slot that a dead owner left half updated: leak the
//!   cache instead (`tests/fork.rs`: a child forked while a parent thread trims trims).
//! - **What the allocator on it must do.** The source's locks are the adopter's: a
//!   source lock held by a dead thread hangs the child at its next refill or flush. Take
//!   every lock of the source (and any other lock the allocator's paths take) before the
//!   fork, in the order the code nests them, and release them after it in the parent and
//!   in the child (`pthread_atfork`). Trims may run under such a lock too, so that no
//!   trim has magazines in hand at the fork (they would leak in the child).
//!   `malloc/src/fork.rs` does both. [`IovaDomain`] keeps its
//!   ranges under a lock of its own that no fork handler holds: a child must not use a
//!   domain that other threads of its parent were using.
//!
//! # Depot length on 32-bit targets
//!
//! Each depot stack keeps its length and its working-set low-water mark in one atomic
//! word, half a word each, so that a trim never releases a magazine pushed during its
//! interval (see [invariant 4](super::design#invariant-4-bounded-memory)). A stack
//! therefore counts at most 2^32 - 1 magazines on 64-bit targets and **65535 magazines on
//! 32-bit targets**. A [`DepotPolicy::Dynamic`] depot, which otherwise grows without bound,
//! stops growing there: a full magazine that does not fit is returned to the source, as a
//! `Fixed` depot's overflow is. With the default 127 items per magazine that is about 8.3M
//! cached items before the bound matters.
//!
//! # Counters are a snapshot
//!
//! [`Stats`] sums counters that each slot's owner writes without a read-modify-write, so a
//! snapshot taken while threads work is approximate; it is exact when the cache is
//! quiescent. Some counters include more than the fast path's traffic: `depot_pops`
//! counts every full magazine taken from the depot, also by [`Cache::trim`] and the
//! flushes, and `source_frees` counts items returned by trims and flushes as well (see the
//! field docs on [`Stats`]).
//!
//! [`Cache`]: crate::Cache
//! [`Cache::free`]: crate::Cache::free
//! [`Cache::free_on`]: crate::Cache::free_on
//! [`Cache::alloc_cached_where`]: crate::Cache::alloc_cached_where
//! [`Cache::alloc_cached_where_on`]: crate::Cache::alloc_cached_where_on
//! [`Cache::cached`]: crate::Cache::cached
//! [`Cache::flush`]: crate::Cache::flush
//! [`Cache::flush_cpu`]: crate::Cache::flush_cpu
//! [`Cache::trim`]: crate::Cache::trim
//! [`Cache::try_flush`]: crate::Cache::try_flush
//! [`Cache::alloc`]: crate::Cache::alloc
//! [`Cache::stats`]: crate::Cache::stats
//! [`LocalCache`]: crate::LocalCache
//! [`LocalCache::free`]: crate::LocalCache::free
//! [`Source`]: crate::Source
//! [`Stats`]: crate::Stats
//! [`DepotPolicy::Dynamic`]: crate::DepotPolicy::Dynamic
//! [`IovaDomain`]: crate::iova::IovaDomain
//! [`IovaError`]: crate::iova::IovaError
