//! Another library's epoch garbage, collected by a pin inside one of the class caches:
//! its blocks are freed while the thread is inside the allocator, so they go straight to
//! their class's source, not into a cache (the re-entrancy rule's fourth point), and
//! nothing waits for itself.

use std::alloc::Layout;
use std::time::{Duration, Instant};

use crossbeam_epoch as epoch;
use magazine_malloc::classes::class_of;
use magazine_malloc::{ClassStats, MagazineMalloc};

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// A block size nothing else here uses: class 2560.
const SIZE: usize = 2500;

fn class_stats(class: usize) -> ClassStats {
    let stats = MagazineMalloc::new().stats();
    stats
        .classes
        .into_iter()
        .find(|c| c.class == class)
        .expect("the class is in use")
}

#[test]
fn garbage_freed_inside_a_cache_goes_straight_to_its_source() {
    const N: usize = 2000;
    let class = class_of(Layout::new::<[u8; SIZE]>()).unwrap();
    let boxes: Vec<Box<[u8; SIZE]>> = (0..N).map(|_| Box::new([7; SIZE])).collect();
    let before = class_stats(class);
    assert!(before.blocks_out >= N);
    {
        let guard = epoch::pin();
        for block in boxes {
            let block = Box::into_raw(block) as usize;
            // SAFETY: the box is ours and reachable from nowhere else; it is dropped once,
            // when the epoch has moved on.
            unsafe {
                guard.defer_unchecked(move || {
                    let block = Box::from_raw(block as *mut [u8; SIZE]);
                    assert!(block.iter().all(|&b| b == 7));
                })
            };
        }
        guard.flush();
    }
    // Allocations that miss their magazines pin the epoch inside the class caches, and
    // every so many pins collect garbage: ours, there.
    let deadline = Instant::now() + Duration::from_secs(30);
    let cache_frees = |now: &ClassStats| {
        now.cache.free_hits + now.cache.depot_pushes
            - before.cache.free_hits
            - before.cache.depot_pushes
    };
    loop {
        let churn: Vec<Vec<u8>> = (0..20_000).map(|i| vec![1; 16 + (i % 32) * 8]).collect();
        drop(churn);
        let now = class_stats(class);
        let back = before.blocks_out.saturating_sub(now.blocks_out);
        assert!(
            cache_frees(&now) < N as u64 / 10,
            "{} of {N} frees went into the cache rather than to the source",
            cache_frees(&now)
        );
        if back >= N {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the garbage was not collected: {back} of {N} blocks back"
        );
    }
}
