//! The class caches: one `magazine::Cache` per size class, in front of the class's
//! source, created at the class's first use so that unused classes cost nothing.
//!
//! Everything here runs with the thread marked inside the allocator (`lib.rs`, the
//! re-entrancy rule): what a cache allocates while it runs comes from the class sources,
//! past the caches. The caches themselves live in the arena.

use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use magazine::{Cache, Config, DepotPolicy, Trim};

use crate::arena;
use crate::classes::{self, CLASSES};
use crate::os;
use crate::source::ClassSource;

/// A class's cache.
pub(crate) type ClassCache = Cache<ClassSource>;

/// Full magazines a class's depot keeps through trims: none. A class that wakes up after a
/// whole quiet interval takes its source's lock once per magazine; a magazine kept instead
/// would hold its blocks' spans resident (up to a span per block after a burst: measured
/// 22 MiB for a map of 10^6 strings dropped and trimmed, with one magazine per class).
const DEPOT_TARGET: usize = 0;

/// The class caches, null until first used. A cache is never freed (nor moved) once
/// published.
static CACHES: [AtomicPtr<ClassCache>; CLASSES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; CLASSES];

/// The cache of `class`, created at the first call; `None` when the arena cannot hold it.
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
    let layout = Layout::new::<ClassCache>();
    let fresh = arena::alloc(layout) as *mut ClassCache;
    if fresh.is_null() {
        return None;
    }
    let cache = Cache::with_config(ClassSource::new(class), config(class));
    // SAFETY: `fresh` is an arena block for `ClassCache`'s layout, ours alone.
    unsafe { fresh.write(cache) };
    match CACHES[class].compare_exchange(
        ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            // SAFETY: published, so never freed from now on.
            Some(unsafe { &*fresh })
        }
        Err(winner) => {
            // SAFETY: ours, never shared: drop it (it holds no item: it never ran) and
            // give its block back. The winner was published fully built (Acquire).
            unsafe {
                ptr::drop_in_place(fresh);
                arena::dealloc(fresh as *mut u8, layout);
                Some(&*winner)
            }
        }
    }
}
