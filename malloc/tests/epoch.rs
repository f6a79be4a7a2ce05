//! Another library's epoch garbage never runs inside an allocation. The class caches pin
//! a collector of the `magazine` crate's own, so the deferred functions of crossbeam-epoch's
//! default collector (any library's) run only where that collector is pinned, never in
//! the middle of `alloc` or `dealloc`, where one that takes a lock the allocating thread
//! holds would deadlock and one that panics would unwind out of the allocator.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::{self, ThreadId};

use crossbeam_epoch as epoch;
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// The thread that allocates; it never pins crossbeam-epoch's default collector.
static ALLOCATOR: OnceLock<ThreadId> = OnceLock::new();
static RAN: AtomicUsize = AtomicUsize::new(0);
static RAN_INSIDE: AtomicUsize = AtomicUsize::new(0);

#[test]
fn another_librarys_garbage_never_runs_inside_an_allocation() {
    const DEFERRED: usize = 20_000;
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..DEFERRED {
                let guard = epoch::pin();
                let block = vec![i as u8; 100 + i % 3000]; // freed by the closure
                guard.defer(move || {
                    RAN.fetch_add(1, Ordering::Relaxed);
                    if ALLOCATOR.get() == Some(&thread::current().id()) {
                        RAN_INSIDE.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(block);
                });
                guard.flush();
            }
            while !done.load(Ordering::Relaxed) {
                epoch::pin().flush();
                thread::yield_now();
            }
        });
        s.spawn(|| {
            ALLOCATOR.set(thread::current().id()).unwrap();
            // Blocks of many classes in bursts: misses, depot exchanges and pins.
            for round in 0..200 {
                let churn: Vec<Vec<u8>> = (0..5_000)
                    .map(|i| vec![1; 16 + ((i + round) % 200) * 8])
                    .collect();
                drop(churn);
            }
            done.store(true, Ordering::Relaxed);
        });
    });
    let stats = MagazineMalloc::new().stats();
    let exchanges: u64 = stats
        .classes
        .iter()
        .map(|c| c.cache.depot_pops + c.cache.depot_pushes)
        .sum();
    assert!(
        exchanges > 1000,
        "the caches exchanged with their depots (pinned): {exchanges}"
    );
    assert!(
        RAN.load(Ordering::Relaxed) > 0,
        "the garbage was collected somewhere"
    );
    assert_eq!(
        RAN_INSIDE.load(Ordering::Relaxed),
        0,
        "another library's deferred functions ran inside allocations"
    );
}
