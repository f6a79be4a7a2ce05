//! The class caches: one `magazine::Cache` per size class, in front of the class's
//! source, created at the class's first use so that unused classes cost nothing.
//!
//! Everything here runs with the thread marked inside the allocator (`lib.rs`, the
//! re-entrancy rule): what a cache allocates while it runs comes from the class sources,
//! past the caches. The caches themselves live in place, in a static array: a class's
//! cache is at an address known from its class alone, so a call loads no pointer to find
//! it, and a page of the array becomes resident only when a class in it is used. A hit
//! does not read the cache at all: each class's state and a copy of its cache's hit path
//! ([`magazine::HitPath`]) share one cache line of their own, the only line of metadata a
//! hit reads before the CPU's slot (in a program whose own work evicts the allocator's
//! lines between calls, each one is a cache miss).

use std::cell::UnsafeCell;
use std::mem::{size_of, MaybeUninit};
use std::sync::atomic::{AtomicU8, Ordering};

use magazine::{Cache, Config, DepotPolicy, HitPath, Trim};

use crate::classes::{self, CLASSES};
use crate::source::ClassSource;
use crate::{fork, os};

/// A class's cache.
pub(crate) type ClassCache = Cache<ClassSource>;

/// Full magazines a class's depot keeps through trims: none. A class that wakes up after a
/// whole quiet interval takes its source's lock once per magazine; a magazine kept instead
/// would hold its blocks' spans resident, up to a span per block after a burst (with one
/// kept, the `stringmap` workload of `malloc/bench.sh` ended with 345 spans held after its
/// trims; `MALLOC_BENCH_STATS=1` prints them).
const DEPOT_TARGET: usize = 0;

/// Full magazines a class's depot holds at most, per CPU; beyond, a full magazine goes back
/// to the class's source. A burst of frees in an order unrelated to the blocks' addresses
/// (a sorted vector of strings dropped) would otherwise come out of the depot in that
/// order, scattered over the whole heap, where the spans' free lists hand a span's blocks
/// out together: `rayon-sort` of `malloc/bench.sh` went from 0.74x mimalloc's throughput
/// to 0.91x with a cap of 128, and `serde-json` kept its speed (BENCHMARKS.md). Every
/// magazine under the cap keeps its blocks' spans resident until a trim; with the
/// allocator's own trims, 64 and 128 gave the same peak RSS to the C library's Python and
/// Lua runs (`BENCH_PROGRAMS="python lua" BENCH_ALLOCATORS="mimalloc magazine" bash
/// malloc/preload/bench.sh 3 LIB` with each, 2026-12-07 14:11-14:13 UTC, quiet: 75.7 and
/// 76.2 MB, 87.6 and 87.7 MB). A by-hand comparison on a loaded machine had credited the
/// cap with a fall of 8-9% that was the trims' (its build trimmed only on missed frees).
const DEPOT_MAX_FULL_PER_CPU: usize = 64;

/// The class caches in place, each written once by the thread that builds it (see
/// [`ENTRIES`]), never moved or dropped.
struct Stored([UnsafeCell<MaybeUninit<ClassCache>>; CLASSES]);

// SAFETY: a cache is written only by the one thread that moved its state from `EMPTY` to
// `BUILDING`, and read by others only after its state says it is built (Release, paired
// with their Acquire); `ClassCache` itself is `Sync`.
unsafe impl Sync for Stored {}

static STORED: Stored = Stored([const { UnsafeCell::new(MaybeUninit::uninit()) }; CLASSES]);

/// A class's cache's hit path.
type ClassHits = HitPath<'static, ClassSource>;

/// What a hit of a class reads: the class's state and its cache's hit path, in a cache
/// line of their own.
#[repr(C, align(64))]
struct Entry {
    /// Where the class's cache stands:
    ///
    /// | value | meaning | transition |
    /// |---|---|---|
    /// | `EMPTY` | not built | `BUILDING` by a CAS (Relaxed: it only elects) of the thread that builds it |
    /// | `BUILDING` | a thread writes it | `READY` (Release) when written, or `READY_WITHOUT_HITS` when the cache runs no restartable sequences; `EMPTY` when the system refused memory or a call inside panicked; `EMPTY` in a forked child (the builder is gone) |
    /// | `READY` | built, for good, and `hits` written | none |
    /// | `READY_WITHOUT_HITS` | built, for good, with no hit path (its hits take the slot) | none |
    ///
    /// Two built states rather than an `Option` in `hits`, so that a hit tests one byte.
    state: AtomicU8,
    /// The cache's hit path when the state is `READY`: written with the cache, before the
    /// state, never again.
    hits: UnsafeCell<MaybeUninit<ClassHits>>,
}

// SAFETY: `hits` is written only by the thread that moved `state` from `EMPTY` to
// `BUILDING`, and read by others only after `state` says `READY` (Release, paired with
// their Acquire); a `HitPath` of a `Sync` cache is `Sync`.
unsafe impl Sync for Entry {}

static ENTRIES: [Entry; CLASSES] = [const {
    Entry {
        state: AtomicU8::new(EMPTY),
        hits: UnsafeCell::new(MaybeUninit::uninit()),
    }
}; CLASSES];
// One line each: a hit reads one.
const _: () = assert!(size_of::<Entry>() == 64);
const EMPTY: u8 = 0;
const BUILDING: u8 = 1;
const READY: u8 = 2;
const READY_WITHOUT_HITS: u8 = 3;

/// Whether a state is one of a built cache.
fn built(state: u8) -> bool {
    matches!(state, READY | READY_WITHOUT_HITS)
}

/// The cache of `class`, created at the first call; `None` when the system refuses the
/// memory for it, or another thread is building it (the caller uses the class's source
/// meanwhile).
/// The caller is inside the allocator.
#[inline]
pub(crate) fn get(class: usize) -> Option<&'static ClassCache> {
    match existing(class) {
        Some(cache) => Some(cache),
        None => create(class),
    }
}

/// The cache of `class` if it was created.
#[inline]
pub(crate) fn existing(class: usize) -> Option<&'static ClassCache> {
    if !built(ENTRIES[class].state.load(Ordering::Acquire)) {
        return None;
    }
    // SAFETY: a built state was stored (Release, paired with the Acquire load) after the
    // cache was written in full, and it is never written, moved or dropped again.
    Some(unsafe { (*STORED.0[class].get()).assume_init_ref() })
}

/// The configuration of `class`'s cache: a slot per CPU the system may bring up (what
/// restartable sequences need), magazines of `classes::magazine_size`, a depot that grows
/// with demand and is trimmed by working set.
fn config(class: usize) -> Config {
    Config {
        magazine_size: classes::magazine_size(class),
        cpus: os::configured_cpus(),
        depot: DepotPolicy::Dynamic {
            target: DEPOT_TARGET,
            trim: Trim::WorkingSet,
        },
    }
}

/// The hit path of `class`'s cache if it was created and runs restartable sequences.
#[inline]
pub(crate) fn hits(class: usize) -> Option<&'static ClassHits> {
    let entry = &ENTRIES[class];
    if entry.state.load(Ordering::Acquire) != READY {
        return None;
    }
    // SAFETY: `READY` was stored (Release, paired with the Acquire load) after `hits` was
    // written, and it is never written again.
    Some(unsafe { (*entry.hits.get()).assume_init_ref() })
}

/// Builds and publishes the cache of `class`; `None` while another thread builds it.
#[cold]
#[inline(never)]
fn create(class: usize) -> Option<&'static ClassCache> {
    // The allocator's first setup; no lock of ours is held here.
    fork::register_once();
    // Relaxed: the CAS only elects the builder. What it writes is published by its Release
    // store of a built state; a build that failed wrote nothing; `existing` loads with
    // Acquire.
    let entry = &ENTRIES[class];
    if let Err(state) =
        entry
            .state
            .compare_exchange(EMPTY, BUILDING, Ordering::Relaxed, Ordering::Relaxed)
    {
        return match built(state) {
            true => existing(class),
            false => None,
        };
    }
    /// Back to `EMPTY` unless the cache was published: on a refusal, and if a call
    /// inside panics (the cache is then built again at the class's next miss).
    struct Unpublished(usize);
    impl Drop for Unpublished {
        fn drop(&mut self) {
            // Relaxed: nothing was written to publish.
            ENTRIES[self.0].state.store(EMPTY, Ordering::Relaxed);
        }
    }
    let unpublished = Unpublished(class);
    // Empty magazines are kept whatever their number (the default keeps `cpus`), until a
    // trim frees those unused for a whole interval: a burst of frees fills one magazine
    // per `magazine_size` blocks, and the allocations that drain them would otherwise
    // free the arrays (straight to the class's source, which discards emptied spans) for
    // the next burst to allocate and fault in again.
    let mut options = magazine::Options::default();
    options.max_empty = Some(usize::MAX);
    options.max_full = Some(DEPOT_MAX_FULL_PER_CPU * os::configured_cpus());
    let cache = Cache::try_with_options(ClassSource::new(class), config(class), options).ok()?;
    // SAFETY: our CAS made us the only thread that touches this cache and its entry's
    // `hits` until a built state is stored; nothing was written there before (a forked
    // child's half-built cache is overwritten, its allocations leak). The cache is never
    // moved or dropped after, so the hit path may borrow it for good.
    let state = unsafe {
        let cache: &'static ClassCache = (*STORED.0[class].get()).write(cache);
        match cache.hit_path() {
            Some(hits) => {
                (*entry.hits.get()).write(hits);
                READY
            }
            None => READY_WITHOUT_HITS,
        }
    };
    std::mem::forget(unpublished);
    entry.state.store(state, Ordering::Release);
    existing(class)
}

/// In a forked child: a cache that a thread of the parent was building stays unbuilt (that
/// thread is not in the child); the child builds it again at the class's next miss.
pub(crate) fn after_fork_in_child() {
    // Relaxed: the child has one thread.
    for entry in &ENTRIES {
        let _ = entry
            .state
            .compare_exchange(BUILDING, EMPTY, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Bytes of the class caches themselves (those built).
pub(crate) fn cache_bytes() -> usize {
    let built = ENTRIES
        .iter()
        .filter(|entry| built(entry.state.load(Ordering::Relaxed)))
        .count();
    built * (size_of::<ClassCache>() + size_of::<Entry>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap;
    use std::alloc::Layout;

    /// The 1 MiB class: used by no other test of this crate, nor by the test harness when
    /// `MagazineMalloc` is the global allocator (`magazine_test_malloc`).
    const CLASS: usize = CLASSES - 1;

    #[test]
    fn a_cache_being_built_is_passed_over_and_a_fork_builds_it_again() {
        assert_eq!(
            ENTRIES[CLASS].state.load(Ordering::Relaxed),
            EMPTY,
            "unused so far"
        );
        let layout = Layout::from_size_align(classes::class_size(CLASS), 8).unwrap();
        // Another thread is building the cache (its state alone says so).
        ENTRIES[CLASS].state.store(BUILDING, Ordering::Relaxed);
        assert!(get(CLASS).is_none() && existing(CLASS).is_none());
        // Allocations and frees meanwhile go to the class's source.
        let block = heap::alloc(layout);
        assert!(
            !block.is_null(),
            "served by the source while the cache is built"
        );
        // SAFETY: a block of that layout, ours, written within it.
        unsafe {
            block.write_bytes(0x5a, layout.size());
            heap::dealloc(block, layout);
        }
        assert_eq!(
            ENTRIES[CLASS].state.load(Ordering::Relaxed),
            BUILDING,
            "left to its builder"
        );
        // In a forked child the builder is gone: the cache is built again when needed.
        after_fork_in_child();
        assert_eq!(ENTRIES[CLASS].state.load(Ordering::Relaxed), EMPTY);
        let cache = get(CLASS).expect("built");
        assert!(std::ptr::eq(cache, existing(CLASS).unwrap()));
        assert!(built(ENTRIES[CLASS].state.load(Ordering::Relaxed)));
        let block = heap::alloc(layout);
        assert!(!block.is_null());
        // SAFETY: as above.
        unsafe { heap::dealloc(block, layout) };
        // A built cache is left alone by a fork.
        after_fork_in_child();
        assert!(built(ENTRIES[CLASS].state.load(Ordering::Relaxed)));
    }
}
