//! Blocks found from their address alone (`MagazineMalloc::free`, `resize`, `usable_size`,
//! what C's `free`, `realloc` and `malloc_usable_size` are built on): every kind of block
//! is found and freed; an address that is no block's start (inside a block, on the stack,
//! another heap's, a chunk's header, made up) is refused and changes nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use magazine_malloc::{MagazineMalloc, NotABlock};

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

const HEAP: MagazineMalloc = MagazineMalloc::new();

/// Layouts of every kind of block: span classes (aligned too), page classes, large blocks
/// (aligned to a page, and beyond).
fn layouts() -> Vec<Layout> {
    let mut layouts = Vec::new();
    for (size, align) in [
        (1, 1),
        (24, 8),
        (100, 64),
        (4000, 8),
        (32 << 10, 32 << 10),
        (40 << 10, 4096),
        (300 << 10, 8),
        (1 << 20, 8),
        (3 << 20, 8),
        (100, 64 << 10),
        (5 << 20, 1 << 21),
    ] {
        layouts.push(Layout::from_size_align(size, align).unwrap());
    }
    layouts
}

#[test]
fn every_kind_of_block_is_found_and_freed() {
    for round in 0..3u8 {
        let blocks: Vec<(*mut u8, Layout)> = layouts()
            .into_iter()
            .map(|layout| {
                // SAFETY: nonzero sizes, written within.
                let block = unsafe {
                    let block = black_box(if round == 1 {
                        HEAP.alloc_zeroed(layout)
                    } else {
                        HEAP.alloc(layout)
                    });
                    assert!(!block.is_null());
                    block.write_bytes(round, layout.size());
                    block
                };
                (block, layout)
            })
            .collect();
        for &(block, layout) in &blocks {
            let usable = HEAP.usable_size(block).expect("a block of ours");
            assert!(usable >= layout.size(), "{layout:?}: {usable}");
            // Inside the block (class sizes are multiples of 8; a page inside a mapping).
            assert_eq!(HEAP.usable_size(block.wrapping_add(1)), None, "{layout:?}");
            if layout.size() > 32 << 10 {
                let page_inside = block.wrapping_add(4096);
                assert_eq!(HEAP.usable_size(page_inside), None, "{layout:?}");
            }
        }
        for (block, layout) in blocks {
            // SAFETY: a live block of ours, freed once.
            assert_eq!(unsafe { HEAP.free(black_box(block)) }, Ok(()), "{layout:?}");
        }
    }
}

#[test]
fn addresses_that_start_no_block_are_refused() {
    let local = 0u64;
    // SAFETY: a nonzero size; the system's block, freed by the system below.
    let foreign = unsafe { System.alloc(Layout::new::<[u64; 4]>()) };
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: a nonzero size.
    let ours = black_box(unsafe { HEAP.alloc(layout) });
    // The chunk that holds `ours` (4 MiB-aligned), whose first span is its header.
    let chunk = (ours as usize & !((4 << 20) - 1)) as *mut u8;
    for bad in [
        &local as *const u64 as *mut u8,
        foreign,
        ours.wrapping_add(8),
        ours.wrapping_add(1),
        chunk,
        chunk.wrapping_add(64),
        0x1000 as *mut u8,
        usize::MAX as *mut u8,
        (1usize << 47) as *mut u8,
    ] {
        assert_eq!(HEAP.usable_size(bad), None, "{bad:p}");
        // SAFETY: no block of ours starts there: refused, nothing done.
        assert_eq!(unsafe { HEAP.free(bad) }, Err(NotABlock), "{bad:p}");
        // SAFETY: as above.
        let resized = unsafe { HEAP.resize(bad, layout) };
        assert_eq!(resized, Err(NotABlock), "{bad:p}");
    }
    assert_eq!(HEAP.usable_size(ours), Some(64), "still ours, untouched");
    // SAFETY: each freed once, by its own allocator.
    unsafe {
        HEAP.free(ours).unwrap();
        System.dealloc(foreign, Layout::new::<[u64; 4]>());
    }
}

#[test]
fn resize_keeps_contents_between_every_kind() {
    let sizes = [
        8usize,
        100,
        5000,
        40 << 10,
        700 << 10,
        2 << 20,
        9 << 20,
        300,
        2 << 20,
        16,
    ];
    let first = Layout::from_size_align(sizes[0], 8).unwrap();
    // SAFETY: a nonzero size.
    let mut block = unsafe { HEAP.alloc(first) };
    let mut size = sizes[0];
    for (step, &new) in sizes.iter().enumerate().skip(1) {
        // SAFETY: `size` bytes of ours, filled with a pattern, then resized: the first
        // `min(size, new)` bytes must stay.
        unsafe {
            for i in 0..size {
                block.add(i).write((i as u8).wrapping_add(step as u8));
            }
            let resized = HEAP
                .resize(block, Layout::from_size_align(new, 16).unwrap())
                .expect("a block of ours");
            assert!(!resized.is_null());
            for i in 0..size.min(new) {
                assert_eq!(
                    resized.add(i).read(),
                    (i as u8).wrapping_add(step as u8),
                    "{size} -> {new}"
                );
            }
            assert!(HEAP.usable_size(resized).unwrap() >= new);
            block = resized;
        }
        size = new;
    }
    // SAFETY: the last block, freed once.
    unsafe { HEAP.free(block).unwrap() };
}
