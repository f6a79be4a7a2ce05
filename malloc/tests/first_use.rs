//! Threads that use every class for the first time at once: one thread builds each class's
//! cache while the others are served by the class's source (`malloc/src/caches.rs`), and
//! every allocation gets a block of its own, which keeps its contents through frees of the
//! others. Mutant `null_while_building` (a class being set up refuses allocations) fails
//! here when a thread meets a cache being built, and always in the unit test of
//! `caches.rs`.
//!
//! One test function: each class's first use in the process is the race.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::Barrier;
use std::thread;

use magazine_malloc::classes::{class_size, CLASSES};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

const THREADS: usize = 4;
/// Blocks each thread takes of each class at its first use.
const PER_CLASS: usize = 4;

fn mark(thread: usize, class: usize, i: usize) -> u8 {
    (thread * 31 + class * 7 + i) as u8
}

#[test]
fn threads_using_a_class_first_at_once_each_get_blocks_of_their_own() {
    // The only wait is before any assertion: a thread that fails leaves none waiting.
    let start = Barrier::new(THREADS);
    let blocks: Vec<Vec<(usize, Layout)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|me| {
                let start = &start;
                scope.spawn(move || {
                    let mut mine = Vec::with_capacity(CLASSES * PER_CLASS);
                    start.wait();
                    // Largest classes first: the test harness never used them.
                    for class in (0..CLASSES).rev() {
                        let layout = Layout::from_size_align(class_size(class), 8).unwrap();
                        for i in 0..PER_CLASS {
                            // SAFETY: a nonzero size.
                            let block = unsafe { alloc(layout) };
                            assert!(!block.is_null(), "class {class}: no block");
                            // SAFETY: a fresh block of `layout.size()` bytes.
                            unsafe {
                                block.write_bytes(mark(me, class, i), layout.size().min(256));
                                block.add(layout.size() - 1).write(mark(me, class, i));
                            }
                            mine.push((block as usize, layout));
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Every block kept what its thread wrote while the others wrote theirs.
    for (me, mine) in blocks.iter().enumerate() {
        for (n, &(addr, layout)) in mine.iter().enumerate() {
            let (class, i) = (CLASSES - 1 - n / PER_CLASS, n % PER_CLASS);
            let block = addr as *const u8;
            // SAFETY: a live block of `layout.size()` bytes, written by its thread.
            let (first, last) = unsafe { (block.read(), block.add(layout.size() - 1).read()) };
            assert_eq!((first, last), (mark(me, class, i), mark(me, class, i)));
        }
    }
    // No two live blocks overlap.
    let mut all: Vec<(usize, usize)> = blocks
        .iter()
        .flatten()
        .map(|&(addr, layout)| (addr, layout.size()))
        .collect();
    all.sort_unstable();
    for pair in all.windows(2) {
        assert!(pair[0].0 + pair[0].1 <= pair[1].0, "{pair:x?} overlap");
    }
    for (addr, layout) in blocks.into_iter().flatten() {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { dealloc(addr as *mut u8, layout) };
    }
    // Every class's cache was built, by one of the threads.
    let stats = MagazineMalloc::new().stats();
    assert_eq!(stats.classes.len(), CLASSES, "{stats}");
}
