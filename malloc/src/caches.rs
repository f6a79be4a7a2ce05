//! The class caches: one `magazine::Cache` per size class, in front of the class's
//! source, created at the class's first use so that unused classes cost nothing.
//!
//! Everything here runs with the thread marked inside the allocator (`lib.rs`, the
//! re-entrancy rule): what a cache allocates while it runs comes from the class sources,
//! past the caches. A cache itself lives in a block of the class its size falls in, taken
//! from that class's source the same way and never given back.

use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use magazine::{Cache, Config, DepotPolicy, Trim};

use crate::classes::{self, CLASSES};
use crate::source::{self, ClassSource};
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

/// The class caches, null until first used. A cache is never freed (nor moved) once
/// published.
static CACHES: [AtomicPtr<ClassCache>; CLASSES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; CLASSES];

/// Bytes of the blocks that hold the published caches (statistics).
static CACHE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The cache of `class`, created at the first call; `None` when the system refuses the
/// memory for it.
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
    let cache = CACHES[class].load(Ordering::Acquire);
    if cache.is_null() {
        return None;
    }
    // SAFETY: a published cache was fully built before its Release publication (paired
    // with the Acquire load) and is never freed or moved.
    Some(unsafe { &*cache })
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

/// Builds and publishes the cache of `class`; a thread that loses the race drops its own
/// and uses the winner's.
#[cold]
#[inline(never)]
fn create(class: usize) -> Option<&'static ClassCache> {
    // The allocator's first setup; no lock of ours is held here.
    fork::register_once();
    // Far below `classes::MAX_SIZE`: always a class.
    let home = classes::class_of(Layout::new::<ClassCache>())?;
    let fresh = crate::heap::alloc_metadata(home) as *mut ClassCache;
    if fresh.is_null() {
        return None;
    }
    // Empty magazines are kept whatever their number (the default keeps `cpus`), until a
    // trim frees those unused for a whole interval: a burst of frees fills one magazine
    // per `magazine_size` blocks, and the allocations that drain them would otherwise
    // free the arrays (straight to the class's source, which discards emptied spans) for
    // the next burst to allocate and fault in again.
    let mut options = magazine::Options::default();
    options.max_empty = Some(usize::MAX);
    options.max_full = Some(DEPOT_MAX_FULL_PER_CPU * os::configured_cpus());
    let cache = match Cache::try_with_options(ClassSource::new(class), config(class), options) {
        Ok(cache) => cache,
        Err(_) => {
            // SAFETY: the block was ours alone, never written.
            unsafe { source::free_one(home, fresh as usize) };
            return None;
        }
    };
    // SAFETY: `fresh` is a block of `home`, whose size and alignment hold a `ClassCache`
    // (`class_of`), ours alone.
    unsafe { fresh.write(cache) };
    match CACHES[class].compare_exchange(
        ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            CACHE_BYTES.fetch_add(classes::class_size(home), Ordering::Relaxed);
            // SAFETY: published, so never freed from now on.
            Some(unsafe { &*fresh })
        }
        Err(winner) => {
            // SAFETY: ours, never shared: drop it (it holds no item: it never ran) and
            // give its block back. The winner was published fully built (Acquire).
            unsafe {
                ptr::drop_in_place(fresh);
                source::free_one(home, fresh as usize);
                Some(&*winner)
            }
        }
    }
}

/// Bytes of the blocks that hold the class caches themselves.
pub(crate) fn cache_bytes() -> usize {
    CACHE_BYTES.load(Ordering::Relaxed)
}
