//! The allocator's own trims: with no call of `trim`, the blocks a finished phase left in
//! a class's caches go back to its spans while the program goes on allocating elsewhere;
//! with the trims off they stay.
//!
//! One test function: the interval and the trims are the whole process's. The mutant
//! `auto_trim_never_due` fails it.

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use magazine_malloc::classes::class_of;
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// Allocates `count` blocks of `layout` and frees them all.
fn phase(layout: Layout, count: usize) {
    let blocks: Vec<usize> = (0..count)
        // SAFETY: a nonzero size.
        .map(|_| unsafe { black_box(alloc(layout)) } as usize)
        .collect();
    for block in blocks {
        assert_ne!(block, 0);
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { dealloc(block as *mut u8, layout) };
    }
}

/// Other work, for `time`: every 5 ms a small block of another class (hits) and a large
/// one (its path reads the clock and runs a due trim), each allocated and freed.
fn other_work(time: Duration) {
    let large = Layout::from_size_align(4 << 20, 8).unwrap();
    let deadline = Instant::now() + time;
    while Instant::now() < deadline {
        drop(black_box(vec![0u8; 24]));
        // SAFETY: a nonzero size, freed once.
        unsafe { dealloc(black_box(alloc(large)), large) };
        thread::sleep(Duration::from_millis(5));
    }
}

/// Blocks of `class` out of its source: cached or in use.
fn blocks_out(heap: &MagazineMalloc, class: usize) -> usize {
    let stats = heap.stats();
    stats
        .classes
        .iter()
        .find(|c| c.class == class)
        .map_or(0, |c| c.blocks_out)
}

#[test]
fn the_allocator_trims_by_itself_unless_told_not_to() {
    let heap = MagazineMalloc::new();
    assert_eq!(
        heap.auto_trim(),
        Some(Duration::from_millis(100)),
        "the default"
    );
    // A size nothing else in this process uses.
    let layout = Layout::from_size_align(1900, 8).unwrap();
    let class = class_of(layout).unwrap();

    heap.set_auto_trim(None);
    assert_eq!(heap.auto_trim(), None);
    phase(layout, 4000);
    let cached = blocks_out(&heap, class);
    assert!(cached > 0, "the freed blocks are cached");
    let trims = heap.stats().auto_trims;
    other_work(Duration::from_millis(300));
    assert_eq!(heap.stats().auto_trims, trims, "off: no trim");
    assert_eq!(
        blocks_out(&heap, class),
        cached,
        "off: the blocks stay cached"
    );

    heap.set_auto_trim(Some(Duration::from_millis(20)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while blocks_out(&heap, class) != 0 && Instant::now() < deadline {
        other_work(Duration::from_millis(50));
    }
    let stats = heap.stats();
    assert_eq!(
        blocks_out(&heap, class),
        0,
        "every cached block went back to its spans\n{stats}"
    );
    assert!(stats.auto_trims >= trims + 2, "{} trims", stats.auto_trims);
}
