//! `realloc` on every kind of move: within a class, to a smaller or a larger class, from a
//! class to a large mapping and back, and between large sizes (`mremap`, growing and
//! shrinking), for alignments from 8 bytes to beyond a page. Every result is aligned and
//! keeps the old contents up to the smaller size; and once the blocks are freed and the
//! caches trimmed, every class's count of blocks out is back where it was (a block kept in
//! place in a smaller class would be freed into that class's books, which never handed
//! it out). The mutants `realloc_shrinks_in_place` and `large_realloc_ignores_alignment`
//! (`RUSTFLAGS='--cfg magazine_mutant="..."'`) fail it.

use std::alloc::{alloc, dealloc, realloc, Layout};
use std::sync::Mutex;

use magazine_malloc::classes::{class_size, CLASSES, MAX_SIZE};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// The tests count blocks per class: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn byte(seed: usize, offset: usize) -> u8 {
    (seed.wrapping_mul(0x9e37_79b9) >> 8) as u8 ^ (offset as u8).wrapping_mul(31) ^ 0x5a
}

/// The offsets of `from..to` that are written and checked: all of the first 4 KiB, then
/// every 509th (a prime: every offset within a page comes up), so that blocks of
/// megabytes cost little in a debug build.
fn sampled(from: usize, to: usize) -> impl Iterator<Item = usize> {
    (from..to.min(4 * KIB)).chain((from.max(4 * KIB).next_multiple_of(509)..to).step_by(509))
}

/// A live block filled with `byte(seed, ..)` at the sampled offsets.
struct Block {
    ptr: *mut u8,
    layout: Layout,
    seed: usize,
}

impl Block {
    fn new(size: usize, align: usize, seed: usize) -> Block {
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: a nonzero size.
        let ptr = unsafe { alloc(layout) };
        assert!(!ptr.is_null(), "size {size} align {align}");
        assert_eq!(ptr as usize % align, 0, "alloc: size {size} align {align}");
        let block = Block { ptr, layout, seed };
        block.fill(0, size);
        block
    }

    /// Writes the sampled bytes of `from..to`, and the last one.
    fn fill(&self, from: usize, to: usize) {
        for offset in sampled(from, to).chain(to.checked_sub(1)) {
            // SAFETY: within the live block.
            unsafe { *self.ptr.add(offset) = byte(self.seed, offset) };
        }
    }

    /// Checks the sampled bytes of the first `len`.
    fn check(&self, len: usize, what: &str) {
        for offset in sampled(0, len) {
            // SAFETY: within the live block.
            let found = unsafe { *self.ptr.add(offset) };
            assert_eq!(
                found,
                byte(self.seed, offset),
                "{what}: byte {offset} of {len} changed (align {})",
                self.layout.align()
            );
        }
    }

    /// Reallocates to `size` bytes: aligned, the old contents kept; the rest is filled.
    fn resize(&mut self, size: usize) {
        let (old, align) = (self.layout.size(), self.layout.align());
        // SAFETY: allocated with `self.layout`; `size` is nonzero and far from overflow.
        let ptr = unsafe { realloc(self.ptr, self.layout, size) };
        let what = format!("realloc {old} -> {size} (align {align})");
        assert!(!ptr.is_null(), "{what}: null");
        assert_eq!(ptr as usize % align, 0, "{what}: misaligned result {ptr:p}");
        self.ptr = ptr;
        self.layout = Layout::from_size_align(size, align).unwrap();
        self.check(old.min(size), &what);
        self.fill(old.min(size), size);
    }

    fn free(self) {
        self.check(self.layout.size(), "before the free");
        // SAFETY: allocated with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// The blocks out of each class's spans now, `None` for a class not used yet.
fn blocks_out() -> Vec<Option<usize>> {
    let stats = MagazineMalloc::new().stats();
    let mut out = vec![None; CLASSES];
    for class in &stats.classes {
        out[class.class] = Some(class.blocks_out);
    }
    out
}

/// The blocks out of each class after the caches gave back what they hold: the second
/// trim gives back what the first left in the slots, and later ones pin the epoch, which
/// lets it free the depot nodes that earlier ones retired.
fn settled() -> Vec<Option<usize>> {
    let heap = MagazineMalloc::new();
    for _ in 0..16 {
        heap.trim();
    }
    blocks_out()
}

/// The alignments tried: from 8 bytes to beyond the largest class alignment (32 KiB) and
/// the page (4 KiB), up to a huge page and beyond.
const ALIGNS: [usize; 9] = [
    8,
    16,
    64,
    4 * KIB,
    16 * KIB,
    32 * KIB,
    64 * KIB,
    2 * MIB,
    8 * MIB,
];

#[test]
fn every_move_keeps_contents_and_alignment() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Each path visits: the same class, a smaller class, a larger one, a large mapping
    // growing and shrinking (by `mremap` up to a page's alignment), and a class again.
    let path = [
        100,
        104, // the same class (97..=104)
        60,  // a smaller class
        1000,
        20 * KIB,
        MAX_SIZE, // larger classes
        MAX_SIZE + 1,
        300 * KIB,
        5 * MIB, // large, growing
        5 * MIB - 100,
        200 * KIB, // large, shrinking
        3000,
        8, // classes again (or large, for the alignments no class serves)
    ];
    let mut seed = 0;
    for align in ALIGNS {
        let mut block = Block::new(path[0], align, seed);
        for &size in &path[1..] {
            block.resize(size);
        }
        block.free();
        seed += 1;
    }
    // Every pair of classes (class to class, both ways) and each class to large and back,
    // at the alignment each class size has.
    for from in 0..CLASSES {
        let size = class_size(from);
        let align = 1 << size.trailing_zeros().min(15);
        for to in [0, from / 2, from.saturating_sub(1), from + 1, CLASSES - 1] {
            if to >= CLASSES {
                continue;
            }
            let mut block = Block::new(size, align, seed);
            block.resize(class_size(to).max(align));
            block.resize(size);
            block.free();
            seed += 1;
        }
        let mut block = Block::new(size, align, seed);
        block.resize(MAX_SIZE + 4096);
        block.resize(size);
        block.free();
        seed += 1;
    }
    // Large blocks aligned beyond a page, grown and shrunk many times: a move by `mremap`
    // keeps only a page's alignment.
    for align in [64 * KIB, 2 * MIB, 8 * MIB] {
        let mut blocks: Vec<Block> = (0..4).map(|i| Block::new(100 * KIB, align, i)).collect();
        for round in 1..=6 {
            for (i, block) in blocks.iter_mut().enumerate() {
                block.resize((round * 700 + i * 300) * KIB);
            }
        }
        for block in &mut blocks {
            block.resize(40 * KIB);
        }
        blocks.into_iter().for_each(Block::free);
    }
}

/// Blocks moved per pair of classes.
const COUNT: usize = 1024;

/// How far a class's count may drift while nothing is lost: the test harness's own
/// allocations, and the depot nodes that trims retire, which the epoch frees a bag (64)
/// at a time, some time later (up to 134 blocks of the 64-byte class seen). Blocks kept
/// in place in a smaller class leave `COUNT` more out of their own class, and wrap the
/// smaller one's count.
const SLACK: usize = 256;

/// Allocates `COUNT` blocks of `from` bytes, reallocates each to `to` bytes and frees it.
fn moved(from: usize, to: usize) {
    let old = Layout::from_size_align(from, 8).unwrap();
    let new = Layout::from_size_align(to, 8).unwrap();
    let blocks: Vec<*mut u8> = (0..COUNT)
        .map(|i| {
            // SAFETY: a nonzero size; the first byte is within it. A failed assertion
            // leaves nothing half done (the test fails).
            unsafe {
                let block = alloc(old);
                assert!(!block.is_null());
                *block = i as u8;
                block
            }
        })
        .collect();
    for (i, block) in blocks.into_iter().enumerate() {
        // SAFETY: allocated with `old`, reallocated once, then freed once with `new`. A
        // failed assertion leaks the block and the rest (the test fails).
        unsafe {
            let block = realloc(block, old, to);
            assert!(!block.is_null());
            assert_eq!(*block, i as u8, "realloc {from} -> {to}: first byte");
            dealloc(block, new);
        }
    }
}

#[test]
fn blocks_moved_between_classes_go_back_to_their_own_class() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The allocator's own trims off: the test counts what stays cached between the trims it
    // calls.
    MagazineMalloc::new().set_auto_trim(None);
    // Every class's cache made first: a cache's own metadata (itself, its slots) stays
    // out for the life of the process.
    for class in 0..CLASSES {
        Block::new(class_size(class), 8, class).free();
    }
    let before = settled();
    // One move first, checked at once: a block freed into the wrong class goes back to
    // the wrong span list when trimmed, and a heap used long after that may crash before
    // the check can say why.
    moved(class_size(1), class_size(0));
    assert_back(&before, "16 B moved to 8 B");
    // From every class to the next smaller one and to the smallest, and from the
    // smallest to every larger one, `COUNT` blocks each: kept in place, they would leave
    // as many out of their class. (Contents are checked above: here the first byte.)
    for from in 1..CLASSES {
        moved(class_size(from), class_size(from - 1));
        moved(class_size(from), class_size(0));
        moved(class_size(0), class_size(from));
    }
    assert_back(&before, "every class moved down and up");
}

/// Asserts that, once the caches are trimmed, every class has as many blocks out as in
/// `before`, give or take `SLACK`.
fn assert_back(before: &[Option<usize>], what: &str) {
    let after = settled();
    let mut wrong = Vec::new();
    for class in 0..CLASSES {
        let (before, after) = (before[class].unwrap(), after[class].unwrap());
        if after.abs_diff(before) > SLACK {
            wrong.push(format!("{} B: {before} -> {after}", class_size(class)));
        }
    }
    // No statistics in the message: a heap whose books are wrong may not survive them.
    assert!(
        wrong.is_empty(),
        "{what}: blocks out before -> after the frees and the trims: {}",
        wrong.join("; ")
    );
}
