//! The size-class table: every size and power-of-two alignment maps to the smallest class
//! that holds it, aligned, with at most 12.5% waste from 64 bytes on; and blocks the
//! allocator hands out for each class and alignment are aligned and usable.

use std::alloc::{alloc, dealloc, Layout};

use magazine_malloc::classes::{class_of, class_size, magazine_size, CLASSES, MAX_ALIGN, MAX_SIZE};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

#[test]
fn classes_ascend_from_8_to_32_kib_in_tcmalloc_spacing() {
    assert_eq!(CLASSES, 80);
    let sizes: Vec<usize> = (0..CLASSES).map(class_size).collect();
    assert_eq!(&sizes[..9], &[8, 16, 24, 32, 40, 48, 56, 64, 72]);
    assert_eq!(*sizes.last().unwrap(), MAX_SIZE);
    for pair in sizes.windows(2) {
        let (small, large) = (pair[0], pair[1]);
        assert!(small < large);
        // Within a doubling [2^k, 2^(k+1)] the step is 2^k / 8 (8 below 64).
        let base = if small < 64 { 64 } else { 1 << small.ilog2() };
        assert_eq!(large - small, base / 8, "{small} -> {large}");
    }
    for class in 0..CLASSES {
        assert!((4..=64).contains(&magazine_size(class)));
    }
}

#[test]
fn every_size_and_alignment_gets_the_smallest_fitting_class() {
    for align in (0..=MAX_ALIGN.ilog2()).map(|shift| 1usize << shift) {
        for size in 1..=MAX_SIZE {
            let layout = Layout::from_size_align(size, align).unwrap();
            let rounded = size.next_multiple_of(align);
            let Some(class) = class_of(layout) else {
                assert!(rounded > MAX_SIZE, "size {size} align {align} has no class");
                continue;
            };
            let block = class_size(class);
            assert!(block >= size, "size {size} align {align}: block {block}");
            assert_eq!(block % align, 0, "size {size} align {align}: block {block}");
            if rounded >= 64 {
                // At most 12.5% more than the smallest block the alignment allows.
                assert!(
                    (block - rounded) * 8 <= rounded,
                    "size {size} align {align}: block {block} wastes more than 12.5%"
                );
            }
            if align <= 8 && size >= 64 {
                assert!((block - size) * 8 <= size, "size {size}: block {block}");
            }
            // No smaller class would do.
            if let Some(smaller) = class.checked_sub(1) {
                let below = (0..=smaller)
                    .map(class_size)
                    .find(|&s| s >= size && s % align == 0);
                assert_eq!(
                    below, None,
                    "size {size} align {align}: {block} is not the smallest"
                );
            }
        }
    }
    let large = Layout::from_size_align(MAX_SIZE + 1, 8).unwrap();
    assert_eq!(class_of(large), None);
    let over_aligned = Layout::from_size_align(8, MAX_ALIGN * 2).unwrap();
    assert_eq!(class_of(over_aligned), None);
}

#[test]
fn blocks_are_aligned_and_whole_for_every_class_and_alignment() {
    let mut sizes: Vec<usize> = (0..CLASSES)
        .flat_map(|class| {
            let size = class_size(class);
            [size - 1, size, size + 1]
        })
        .filter(|&size| size > 0)
        .collect();
    sizes.extend([40_000, 65_536, 100_001, 1 << 20]);
    for align in (0..=16).map(|shift| 1usize << shift) {
        for &size in &sizes {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a nonzero size; the block is written within its size and freed
            // once with its layout.
            unsafe {
                let block = alloc(layout);
                assert!(!block.is_null(), "size {size} align {align}");
                assert_eq!(block as usize % align, 0, "size {size} align {align}");
                block.write_bytes(0xa5, size);
                assert_eq!(*block.add(size - 1), 0xa5);
                dealloc(block, layout);
            }
        }
    }
    let stats = MagazineMalloc::new().stats();
    assert!(
        stats.classes.len() == CLASSES && stats.totals().0 > 0,
        "the test runs on MagazineMalloc: every class was used ({stats})"
    );
}
