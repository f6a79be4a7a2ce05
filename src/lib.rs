//! A magazine/depot object cache for allocator authors.
//!
//! `magazine` puts per-CPU (and per-thread) *magazines* in front of a lock-free *depot*
//! that grows and shrinks with demand, in front of your slow backing allocator (the
//! [`Source`]). It is the design of Bonwick & Adams' magazine layer (USENIX 2001) and of
//! the Linux IOVA "rcache", with a depot that neither caps out (Linux <= 6.6 collapsed
//! from ~1.9M to 300-400K IOPS on 256 CPUs because its depot held 32 magazines) nor
//! trims one magazine per 100 ms (Linux >= 6.7), but trims its unused working set.
//!
//! **Thread exit:** the per-CPU path keeps nothing per thread, so a thread's exit changes
//! nothing. A [`LocalCache`] handle gives its magazines (partly filled ones too) to the
//! depot when it is dropped, on any thread; they stay cached for the other threads.
//!
//! ```text
//!   alloc / free            alloc / free                 LocalCache (per thread)
//!        |                       |                        +-------------------+
//!   +----v-------------+    +----v-------------+          | loaded | previous |
//!   | slot 0 (CPU 0)   |    | slot 1 (CPU 1)   |   ...    +---------^---------+
//!   | loaded|previous  |    | loaded|previous  |                    |
//!   +----^-------------+    +----^-------------+                    |
//!        | whole magazines       |                                  |
//!   +----v-----------------------v----------------------------------v---------+
//!   | depot: Treiber stack of FULL magazines | Treiber stack of EMPTY ones     |
//!   |        (lock-free, crossbeam-epoch)    | capped; trim() frees idle ones  |
//!   +----^--------------------------------------------------------------------+
//!        | slow path: alloc_batch() / free_batch(), a whole magazine per call
//!   +----v--------------------------------------------------------------------+
//!   | Source (your allocator: range allocator, id allocator, slab, ...)       |
//!   +-------------------------------------------------------------------------+
//! ```
//!
//! # Quick start
//!
//! ```
//! use magazine::{Cache, Config, DepotPolicy, Source, Trim};
//! use std::sync::Mutex;
//!
//! /// A toy id allocator: a free list behind a lock (the "slow path").
//! struct IdAllocator(Mutex<Vec<u32>>);
//!
//! impl Source for IdAllocator {
//!     type Item = u32;
//!     fn alloc(&self) -> Option<u32> {
//!         self.0.lock().unwrap().pop()
//!     }
//!     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
//!         self.0.lock().unwrap().extend(items);
//!     }
//! }
//!
//! let config = Config {
//!     magazine_size: 32,
//!     depot: DepotPolicy::Dynamic { target: 4, trim: Trim::WorkingSet },
//!     ..Config::default()
//! };
//! let cache = Cache::with_config(IdAllocator(Mutex::new((0..1000).collect())), config);
//! let ids: Vec<u32> = (0..100).map(|_| cache.alloc().unwrap()).collect();
//! ids.into_iter().for_each(|id| cache.free(id));
//! cache.trim(); // call every 2 s or so (docs::trimming); the cache starts no thread
//! drop(cache); // every cached id goes back to the allocator
//! ```
//!
//! # Guarantees and their limits
//!
//! The design, with the problem it solves, its vocabulary and the five invariants below in
//! full, is in [`docs::design`]; what the cache trusts you with is in [`docs::obligations`].
//!
//! 1. [**Conservation.**](docs::design#invariant-1-conservation) Every item handed to the
//!    cache is, when the cache is quiescent, in exactly one place: a caller's hands, a
//!    magazine (slot, handle or depot) or the source. Trim, flush, handle drop and cache
//!    drop return items to the source exactly once. A source that panics loses nothing:
//!    the items it did not take stay in a slot or go to the depot, and the cache keeps
//!    serving. (Limits: a source that panics while the cache itself is being dropped
//!    leaves the remaining items to be dropped with the cache (see [`docs::failures`]);
//!    and the cache cannot see a
//!    double free or a foreign item: [freeing each item once](docs::obligations) is the
//!    caller's obligation.)
//! 2. [**Memory safety.**](docs::design#invariant-2-memory-safety) Depot nodes (each
//!    magazine is its own) are freed through crossbeam-epoch only after every thread that
//!    could read them has unpinned; the stack head's tag, bumped by every push and pop,
//!    keeps a stale pointer from winning a compare-and-swap (no ABA, within the tag's
//!    wrap bound: see the design docs).
//! 3. [**Progress.**](docs::design#invariant-3-progress) `alloc` and `free` never wait for
//!    another thread: a hit either runs as a restartable sequence that the kernel aborts if
//!    the thread is preempted (the default where the platform has them) or takes the CPU
//!    slot with one compare-and-swap, and a slot held by another thread is a miss (served
//!    by another slot or the depot, never by waiting). The depot is lock-free. (Limits:
//!    [`Cache::flush_cpu`], [`Cache::flush`] and [`Cache::cached`] wait for a slot's owner
//!    to finish its bounded step, so they must not be called from
//!    [inside a callback](docs::obligations#callbacks-must-not-re-enter-the-cache); with
//!    restartable sequences, a take of another CPU's slot waits up to 2 us for that CPU to
//!    acknowledge it, then fences it; an allocation that finds the source exhausted while
//!    another thread flushes keeps looking for a cached item until that flush ends.)
//! 4. [**Bounded memory.**](docs::design#invariant-4-bounded-memory) With
//!    [`DepotPolicy::Dynamic`], once the load stops, repeated [`Cache::trim`] brings the
//!    depot down to `target` full magazines; with [`Trim::WorkingSet`] a single trim
//!    releases the magazines that stayed unused for the whole interval, never more (a push
//!    in flight at the interval's low point can make it keep one more). The empty stack is
//!    capped by [`Options::max_empty`]. The items a cache can hold are at most
//!    `cpus x 2 x magazine_size` in the slots, plus `magazine_size` per full depot
//!    magazine, plus two magazines per live [`LocalCache`]. (Limit: on 32-bit targets a
//!    depot stack counts at most 65535 magazines; see
//!    [`docs::obligations`](docs::obligations#depot-length-on-32-bit-targets).)
//! 5. [**Accounting.**](docs::design#invariant-5-accounting) When quiescent,
//!    [`Stats::depot_full`] and [`Stats::depot_empty`] equal the real stack lengths.
//!
//! # Choosing a front end
//!
//! - [`Cache::alloc`] / [`Cache::free`]: per-CPU, for any thread, no setup. On Linux
//!   x86_64 (glibc 2.35+, kernel 5.10+) a hit is a restartable sequence with no locked
//!   instruction ([`Options::restartable_sequences`], on by default; about 2.4 ns a pair
//!   on the benchmark machine). Elsewhere, one compare-and-swap per operation takes the
//!   CPU's slot (about 6 ns uncontended there), plus the CPU lookup ([`cpu::current`]: one
//!   load from the thread's rseq area on x86_64 glibc, `sched_getcpu()` elsewhere).
//! - [`Cache::local`]: a [`LocalCache`] per long-lived thread; a hit is a plain array
//!   operation (no atomic), within a few tenths of a nanosecond of a `Vec` push/pop.
//! - [`Cache::alloc_on`] / [`Cache::free_on`]: a named slot, for pinned threads and
//!   simulators.
//!
//! Without restartable sequences a slot is held for a few instructions, but a thread
//! preempted while holding one makes that slot a miss for everyone else until it runs
//! again (the next free slot serves, else the depot, and [`Stats::busy_misses`] counts it).
//! The kernel avoids this by disabling preemption; a user-space cache cannot, so with more
//! runnable threads than CPUs prefer `LocalCache` there. With them, a preempted hit holds
//! up nobody (the kernel aborts it); only a miss holds the slot, for its magazine exchange.
//!
//! # Choosing a depot policy
//!
//! | policy | grows | shrinks | use it for |
//! | --- | --- | --- | --- |
//! | `Fixed { max_full }` | up to the cap; overflow goes to the source | never | reproducing Linux <= 6.6, hard memory caps |
//! | `Dynamic { trim: OnePerTick }` | without bound | one magazine per `trim()` | reproducing Linux >= 6.7 |
//! | `Dynamic { trim: WorkingSet }` (default) | without bound | the unused working set per `trim()` | everything else |
//!
//! Call [`Cache::trim`] periodically: every 2 s for `WorkingSet` (the interval is the
//! working-set window; shorter ones release magazines that are needed again moments
//! later), every 100 ms for `OnePerTick` (Linux's rate). Or start a thread that does it
//! with `Cache::start_default_reaper` on an `Arc<Cache>` (feature `std`). The measurements
//! behind the advice are in [`docs::trimming`].
//!
//! # Unwinding and failures
//!
//! Slot ownership is held by a guard, so a panic never leaves a slot taken. The source
//! never runs while a slot is held or a flush's flag is set: while its `free_batch` runs,
//! the magazine being drained (and any other taken out with it) is held by a rescue guard
//! that returns it to the depot on unwind, past a `Fixed` cap if need be, and an item the
//! caller already took out is held by a guard that does the same for it. A failed
//! `membarrier` never panics. [`docs::failures`] has the contract path by path, with
//! failing system calls, configuration edges, re-entry and signals.

#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;

#[cfg(all(test, magazine_test_malloc))]
use magazine_malloc as _; // the unit tests on MagazineMalloc (.ci/run)

mod cache;
pub mod cpu;
mod depot;
pub mod docs;
mod fallible;
#[cfg(feature = "iova")]
pub mod iova;
mod level;
mod local;
mod magazine;
#[cfg(magazine_model)]
#[doc(hidden)]
pub mod model;
mod pair;
mod policy;
mod process_flag;
#[cfg(all(feature = "std", not(magazine_model)))]
mod reaper;
#[cfg(all(magazine_rseq, not(miri)))]
mod rseq;
mod shelf;
mod slot;
mod source;
mod stack;
mod stats;
mod sync;

pub use cache::{Cache, HitPath};
pub use local::LocalCache;
pub use policy::{Config, DepotPolicy, Options, Trim};
#[cfg(all(feature = "std", not(magazine_model)))]
pub use reaper::Reaper;
pub use source::Source;
pub use stats::Stats;

/// Registers the calling thread with the crate's epoch collector now, rather than at its
/// first depot exchange.
///
/// Every cache pins a collector of the crate's own (crossbeam-epoch's, separate from its
/// default one, so that a cache call runs no other library's deferred functions). A
/// thread's participant is registered at its first pin and released by a thread-local
/// destructor at thread exit, which allocates (crossbeam-epoch moves the thread's garbage
/// to a global queue node). An allocator built on the cache that serves those
/// allocations from reserved memory calls this at a thread's first allocation, then
/// registers a thread-local destructor of its own: destructors run in the reverse order
/// of their registration, so its own runs first and can mark the thread's remaining
/// allocations as the crate's (`magazine-malloc` does; see
/// [`docs::obligations`](crate::docs::obligations#inside-a-global-allocator)). Calling
/// it again, or during thread exit, does nothing.
///
/// ```
/// magazine::register_thread();
/// ```
#[cfg(all(feature = "std", not(magazine_model)))]
pub fn register_thread() {
    sync::register_thread();
}
