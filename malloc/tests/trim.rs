//! Memory goes back: after a large working set is freed, what overflows the depot's cap
//! goes back to its spans at once (emptied spans stay resident until trims), and two trims
//! an interval apart give the rest back to the system (the statistics count the spans, and
//! the resident set falls); the trimmer thread does the same on its own.
//!
//! One test function: the heap and the resident set are the whole process's. The mutants
//! `spans_never_return` and `free_spans_kept_for_ever` (`.ci/on-malloc.sh`) fail it.

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
    // Freed blocks sit in magazines up to the depot's cap (64 full magazines per CPU,
    // beside each CPU's two in its slot and one on its shelf); beyond it they went back to
    // their spans, and the spans emptied that way to their free lists, at once.
    let freed = heap.stats();
    let mine = freed.classes.iter().find(|c| c.class == class).unwrap();
    // SAFETY: `sysconf` has no preconditions (the allocator sizes its caches by it).
    let cpus = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }).unwrap();
    let cap = (64 + 3) * cpus * mine.magazine_size;
    assert!(
        mine.blocks_out <= cap,
        "{} blocks stay cached\n{freed}",
        mine.blocks_out
    );
    assert!(
        freed.spans_free_resident > before.spans_free_resident,
        "the overflow went back to its spans without a trim, and emptied some\n{freed}"
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

    // The trimmer thread gives back what stays cached on its own.
    free(blocks, layout);
    static HEAP: MagazineMalloc = MagazineMalloc::new();
    HEAP.spawn_trimmer(Duration::from_millis(50)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = heap.stats();
        let mine = stats.classes.iter().find(|c| c.class == class).unwrap();
        if mine.blocks_out <= 8 * mine.magazine_size {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the trimmer left {} blocks cached\n{stats}",
            mine.blocks_out
        );
        thread::sleep(Duration::from_millis(20));
    }
}
