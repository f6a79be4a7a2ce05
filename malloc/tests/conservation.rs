//! Conservation: a block handed out is never handed out again, nor overlaps another,
//! while it is live; and it keeps what was written into it until it is freed. A
//! single-threaded random run over a list of sizes and alignments (every class, large
//! ones, over-aligned ones) with trims along the way, so that spans empty, go back and are
//! reused. The mutant `bump_repeats_last` (`RUSTFLAGS='--cfg
//! magazine_mutant="bump_repeats_last"'`: a span hands its last block out twice) fails it.

use std::alloc::{alloc, dealloc, Layout};
use std::collections::BTreeMap;

use magazine_malloc::classes::{class_size, CLASSES};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// xorshift64*: the same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A live block: its end, layout and the byte written all over it.
struct Live {
    end: usize,
    layout: Layout,
    tag: u8,
}

/// The offsets checked before a free: the first and last 32 bytes and every 256th.
fn checked_offsets(size: usize) -> impl Iterator<Item = usize> {
    (0..size.min(32))
        .chain(size.saturating_sub(32)..size)
        .chain((0..size).step_by(256))
}

#[test]
fn live_blocks_are_distinct_and_keep_their_contents() {
    let mut sizes: Vec<(usize, usize)> = (0..CLASSES)
        .flat_map(|class| [(class_size(class), 8), (class_size(class) - 3, 1)])
        .filter(|&(size, _)| size > 0)
        .collect();
    sizes.extend([(33, 16), (100, 64), (5000, 4096), (40_000, 8), (200_000, 8)]);
    sizes.extend([(70_000, 1 << 16), (8, 1 << 15)]);
    // Small sizes often, as programs do.
    let small: Vec<(usize, usize)> = sizes.iter().copied().filter(|&(s, _)| s <= 256).collect();

    let heap = MagazineMalloc::new();
    let mut rng = Rng(0x853c_49e6_748f_ea9b);
    let mut live: BTreeMap<usize, Live> = BTreeMap::new();
    let mut keys: Vec<usize> = Vec::new(); // the live blocks again, to pick one at random
    let mut handed = 0u64;
    const STEPS: usize = 300_000;
    for step in 0..STEPS {
        // Grow the live set for a while, then shrink it, and again.
        let phase = (step / 25_000) % 2 == 0;
        let allocate = live.is_empty() || rng.below(100) < if phase { 70 } else { 30 };
        if allocate {
            let list = if rng.below(3) == 0 { &sizes } else { &small };
            let (size, align) = list[rng.below(list.len())];
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a nonzero size.
            let block = unsafe { alloc(layout) } as usize;
            assert!(block != 0, "out of memory at step {step}");
            assert_eq!(
                block % align,
                0,
                "misaligned block of {size} at step {step}"
            );
            let end = block + size;
            if let Some((&start, other)) = live.range(..end).next_back() {
                assert!(
                    other.end <= block,
                    "step {step}: block {block:#x}+{size} overlaps live {start:#x}+{}",
                    other.layout.size()
                );
            }
            let tag = (handed % 251) as u8 + 1;
            // SAFETY: the block's `size` bytes are ours.
            unsafe { (block as *mut u8).write_bytes(tag, size) };
            live.insert(block, Live { end, layout, tag });
            keys.push(block);
            handed += 1;
        } else {
            let block = keys.swap_remove(rng.below(keys.len()));
            let Live { end, layout, tag } = live.remove(&block).unwrap();
            for offset in checked_offsets(end - block) {
                // SAFETY: within the live block.
                let found = unsafe { *(block as *const u8).add(offset) };
                assert_eq!(
                    found, tag,
                    "block {block:#x}+{offset} changed before its free"
                );
            }
            // SAFETY: allocated with `layout`, freed once.
            unsafe { dealloc(block as *mut u8, layout) };
        }
        if step % 20_000 == 19_999 {
            heap.trim(); // empties spans of what stayed cached: they go back, and come again
        }
    }
    let stats = heap.stats();
    assert!(stats.spans_returned > 0, "trims returned spans: {stats}");
    for (block, Live { layout, .. }) in live {
        // SAFETY: allocated with `layout`, freed once.
        unsafe { dealloc(block as *mut u8, layout) };
    }
    assert!(handed > STEPS as u64 / 3);
}
