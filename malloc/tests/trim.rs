//! Memory goes back: after a large working set is freed, two trims an interval apart give
//! its spans back to the system (the statistics count them, and the resident set falls);
//! the trimmer thread does the same on its own.
//!
//! One test function: the heap and the resident set are the whole process's. The mutant
//! `spans_never_return` (`RUSTFLAGS='--cfg magazine_mutant="spans_never_return"'`) fails
//! it.

use std::alloc::{alloc, dealloc, Layout};
use std::thread;
use std::time::{Duration, Instant};

use magazine_malloc::classes::{class_of, class_size};
use magazine_malloc::{rss, MagazineMalloc};

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

const MIB: usize = 1 << 20;

/// Allocates `bytes` in blocks of `layout`, touching every byte.
fn working_set(layout: Layout, bytes: usize) -> Vec<usize> {
    (0..bytes / layout.size())
        .map(|i| {
            // SAFETY: a nonzero size; written within it.
            unsafe {
                let block = alloc(layout);
                assert!(!block.is_null());
                block.write_bytes(i as u8 | 1, layout.size());
                block as usize
            }
        })
        .collect()
}

fn free(blocks: Vec<usize>, layout: Layout) {
    for block in blocks {
        // SAFETY: allocated with `layout` by `working_set`, freed once.
        unsafe { dealloc(block as *mut u8, layout) };
    }
}

#[test]
fn trimming_gives_spans_and_resident_memory_back() {
    let heap = MagazineMalloc::new();
    // A size nothing else in this process uses (class 3072: 21 blocks per 64 KiB span).
    let layout = Layout::from_size_align(3000, 8).unwrap();
    let class = class_of(layout).unwrap();
    assert_eq!(class_size(class), 3072);
    const SET: usize = 96 * MIB;

    let start = rss().expect("/proc/self/status").current;
    let before = heap.stats();
    let blocks = working_set(layout, SET);
    let loaded = rss().unwrap().current;
    assert!(
        loaded >= start + SET * 3 / 4,
        "the working set is resident: {start} -> {loaded}"
    );
    let spans_used = heap.stats().spans_held - before.spans_held;
    assert!(
        spans_used >= SET / (64 << 10),
        "{spans_used} spans for {SET} bytes"
    );

    free(blocks, layout);
    // Freed blocks sit in magazines: nothing went back yet.
    let freed = rss().unwrap().current;
    assert!(
        freed + SET / 2 > loaded,
        "nothing is returned without a trim"
    );

    heap.trim();
    thread::sleep(Duration::from_millis(200));
    heap.trim();
    let after = heap.stats();
    let trimmed = rss().unwrap().current;
    let returned = after.spans_returned - before.spans_returned;
    assert!(
        returned >= spans_used * 9 / 10,
        "{returned} of {spans_used} spans returned\n{after}"
    );
    let mine = after.classes.iter().find(|c| c.class == class).unwrap();
    assert!(mine.cache.trimmed > 0, "{after}");
    assert!(
        mine.blocks_out <= 8 * mine.magazine_size,
        "a magazine or so stays cached: {} blocks",
        mine.blocks_out
    );
    assert!(
        trimmed + SET * 3 / 4 <= loaded,
        "the resident set falls: {loaded} -> {trimmed} ({start} at the start)"
    );

    // The spans are reused: a second working set needs no new chunk.
    let chunks = after.chunk_bytes;
    let blocks = working_set(layout, SET / 2);
    assert_eq!(heap.stats().chunk_bytes, chunks, "freed spans were reused");

    // The trimmer thread gives it back on its own.
    free(blocks, layout);
    let returned_before = heap.stats().spans_returned;
    static HEAP: MagazineMalloc = MagazineMalloc::new();
    HEAP.spawn_trimmer(Duration::from_millis(50)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let returned = heap.stats().spans_returned - returned_before;
        if returned >= (SET / 2) / (64 << 10) * 9 / 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the trimmer returned {returned} spans"
        );
        thread::sleep(Duration::from_millis(20));
    }
}
