//! Another library's epoch garbage never runs inside a cache call.
//!
//! crossbeam-epoch's default collector is process-wide, and `Guard::defer` is a safe API:
//! any library may defer a closure there (crossbeam-skiplist drops values that way), and
//! any pin of that collector may run it. If the cache pinned it, a depot exchange inside
//! `alloc` or `free` could run another library's closure while the caller holds its own
//! locks (a deadlock when the closure takes one of them), or unwind a panic out of the
//! cache. The cache pins a collector of its own (mutant `default_collector` puts the
//! default one back, and this test fails).

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};
use std::thread::{self, ThreadId};

use magazine::{Cache, Config, Source};

/// Ids from a counter; freed ones are forgotten (the test checks where closures run, not
/// conservation).
struct Ids(AtomicU32);

impl Source for Ids {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        Some(self.0.fetch_add(1, Ordering::Relaxed))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        items.for_each(drop);
    }
}

/// The thread that uses the cache; it never pins crossbeam-epoch's default collector.
static CACHE_USER: OnceLock<ThreadId> = OnceLock::new();
/// A lock the cache user holds around its cache calls, as a caller of an allocator may.
static CALLER_LOCK: Mutex<()> = Mutex::new(());
/// Foreign closures run anywhere, and those that ran on the cache user's thread.
static RAN: AtomicUsize = AtomicUsize::new(0);
static RAN_INSIDE: AtomicUsize = AtomicUsize::new(0);
/// Closures that found the caller's lock held by their own thread: a deadlock with a
/// blocking `lock`.
static WOULD_DEADLOCK: AtomicUsize = AtomicUsize::new(0);

/// The deferred function of "another library": it observes where it runs, takes the lock
/// its thread may hold, and panics if it finds itself inside a cache call.
fn foreign_garbage() {
    RAN.fetch_add(1, Ordering::Relaxed);
    if CACHE_USER.get() != Some(&thread::current().id()) {
        return;
    }
    RAN_INSIDE.fetch_add(1, Ordering::Relaxed);
    if let Err(TryLockError::WouldBlock) = CALLER_LOCK.try_lock() {
        WOULD_DEADLOCK.fetch_add(1, Ordering::Relaxed);
    }
    panic!("another library's deferred function ran inside a cache call");
}

#[test]
fn another_librarys_deferred_functions_never_run_inside_a_cache_call() {
    const DEFERRED: usize = if cfg!(miri) { 500 } else { 20_000 };
    const ROUNDS: usize = if cfg!(miri) { 50 } else { 2_000 };
    // Small magazines and two slots: nearly every burst exchanges with the depot (a pin).
    let config = Config {
        magazine_size: 4,
        cpus: 2,
        ..Config::default()
    };
    let cache = Cache::with_config(Ids(AtomicU32::new(0)), config);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            // Another library: defers closures into the default collector, and keeps it
            // moving (its own pins collect what is due).
            for _ in 0..DEFERRED {
                let guard = crossbeam_epoch::pin();
                guard.defer(foreign_garbage);
                guard.flush();
            }
            while !done.load(Ordering::Relaxed) {
                crossbeam_epoch::pin().flush();
                thread::yield_now();
            }
        });
        s.spawn(|| {
            /// Ends the other thread's loop however this one ends (a panic included).
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _done = Done(&done);
            CACHE_USER.set(thread::current().id()).unwrap();
            let mut items = Vec::with_capacity(64);
            for round in 0..ROUNDS {
                let _held = CALLER_LOCK.lock().unwrap();
                for _ in 0..(8 + round % 48) {
                    items.push(cache.alloc_on(round % 2).unwrap());
                }
                for item in items.drain(..) {
                    cache.free_on((round + 1) % 2, item);
                }
                if round % 64 == 0 {
                    cache.trim();
                }
            }
        });
    });
    let stats = cache.stats();
    assert!(
        stats.depot_pops + stats.depot_pushes > ROUNDS as u64,
        "the cache user exchanged with the depot (pinned) often: {stats}"
    );
    assert!(
        RAN.load(Ordering::Relaxed) > 0,
        "the foreign garbage was collected somewhere"
    );
    assert_eq!(
        RAN_INSIDE.load(Ordering::Relaxed),
        0,
        "ran inside a cache call"
    );
    assert_eq!(WOULD_DEADLOCK.load(Ordering::Relaxed), 0);
}
