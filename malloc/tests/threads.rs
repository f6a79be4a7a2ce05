//! Blocks of every class and large sizes, allocated on one thread, checked, reallocated
//! and freed on others: contents survive the hand-offs and `realloc`, whatever path a
//! block takes (class cache, `mremap`, a move between classes).

use std::alloc::{alloc, dealloc, realloc, Layout};
use std::sync::mpsc;
use std::thread;

use magazine_malloc::classes::{class_size, CLASSES};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// A block in flight between threads, filled with `fill(seed, ..)`.
struct Block {
    addr: usize,
    layout: Layout,
    seed: u64,
}

fn byte(seed: u64, offset: usize) -> u8 {
    (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8 ^ (offset as u8).wrapping_mul(31)
}

impl Block {
    fn new(size: usize, align: usize, seed: u64) -> Block {
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: a nonzero size.
        let ptr = unsafe { alloc(layout) };
        assert!(!ptr.is_null(), "size {size}");
        assert_eq!(ptr as usize % align, 0);
        let block = Block {
            addr: ptr as usize,
            layout,
            seed,
        };
        block.fill(0, size);
        block
    }

    fn fill(&self, from: usize, to: usize) {
        for offset in from..to {
            // SAFETY: within the block, which this thread owns.
            unsafe { *(self.addr as *mut u8).add(offset) = byte(self.seed, offset) };
        }
    }

    fn check(&self, len: usize) {
        for offset in 0..len {
            // SAFETY: within the block, which this thread owns.
            let found = unsafe { *(self.addr as *const u8).add(offset) };
            assert_eq!(
                found,
                byte(self.seed, offset),
                "block of {} bytes (seed {}) changed at {offset}",
                self.layout.size(),
                self.seed
            );
        }
    }

    fn resize(&mut self, size: usize) {
        let kept = self.layout.size().min(size);
        // SAFETY: the block was allocated with `self.layout`; `size` is nonzero.
        let ptr = unsafe { realloc(self.addr as *mut u8, self.layout, size) };
        assert!(!ptr.is_null());
        self.addr = ptr as usize;
        self.layout = Layout::from_size_align(size, self.layout.align()).unwrap();
        self.check(kept);
        self.fill(kept, size);
    }

    fn free(self) {
        self.check(self.layout.size());
        // SAFETY: allocated with this layout, freed once.
        unsafe { dealloc(self.addr as *mut u8, self.layout) };
    }
}

/// Every class size, a size inside every class, and large ones, some over-aligned.
fn sizes() -> Vec<(usize, usize)> {
    let mut sizes: Vec<(usize, usize)> = (0..CLASSES)
        .flat_map(|class| [(class_size(class), 8), (class_size(class) * 7 / 8 + 1, 8)])
        .collect();
    sizes.extend([(64, 64), (4096, 4096), (48, 16), (40_000, 8), (300_000, 8)]);
    sizes.extend([(70_000, 1 << 16), (1 << 20, 8), (3 << 20, 1 << 21)]);
    sizes
}

#[test]
fn blocks_keep_their_contents_across_threads() {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 3;
    let sizes = sizes();
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..THREADS).map(|_| mpsc::channel::<Block>()).unzip();
    thread::scope(|scope| {
        for (me, receiver) in receivers.into_iter().enumerate() {
            let next = senders[(me + 1) % THREADS].clone();
            let sizes = &sizes;
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    for (i, &(size, align)) in sizes.iter().enumerate() {
                        let seed = ((me as u64) << 40) | (round << 20) | i as u64;
                        next.send(Block::new(size, align, seed)).unwrap();
                    }
                    for i in 0..sizes.len() {
                        let mut block = receiver.recv().unwrap();
                        block.check(block.layout.size());
                        match i % 3 {
                            0 => block.free(),
                            1 => {
                                block.resize(block.layout.size() * 2 + 1);
                                block.free();
                            }
                            _ => {
                                block.resize(block.layout.size() / 3 + 1);
                                block.free();
                            }
                        }
                    }
                }
            });
        }
        drop(senders);
    });
    let stats = MagazineMalloc::new().stats();
    let (alloc_hits, free_hits, _, _) = stats.totals();
    assert!(
        alloc_hits > 0 && free_hits > 0,
        "served by MagazineMalloc: {stats}"
    );
}

#[test]
fn realloc_stays_in_place_within_a_class_and_keeps_contents_when_it_moves() {
    let mut block = Block::new(100, 8, 1);
    let at = block.addr;
    block.resize(104); // the same class (97..=104)
    assert_eq!(block.addr, at, "same class: in place");
    block.resize(98);
    assert_eq!(block.addr, at, "same class: in place");
    block.resize(1000); // another class: moved, contents kept
    block.resize(50_000); // large: a mapping of its own
    let large = block.addr;
    block.resize(50_001); // the same pages: in place
    assert_eq!(block.addr, large);
    block.resize(5 << 20); // mremap
    block.resize(40_000); // mremap, shrinking
    block.resize(24); // back to a class
    block.free();
}
