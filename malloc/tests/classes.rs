//! The size-class table: every size and power-of-two alignment maps to the smallest class
//! that holds it, aligned, with at most 12.5% waste from 64 bytes on in the span classes
//! and 25% in the page classes; and blocks the allocator hands out for each class and
//! alignment are aligned and usable.

use std::alloc::{alloc, dealloc, Layout};

use magazine_malloc::classes::{
    class_of, class_size, magazine_size, CLASSES, MAX_ALIGN, MAX_SIZE, PAGE_ALIGN, SPAN_CLASSES,
    SPAN_MAX,
};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

#[test]
fn classes_ascend_from_8_bytes_to_1_mib() {
    assert_eq!((SPAN_CLASSES, CLASSES), (80, 100));
    let sizes: Vec<usize> = (0..CLASSES).map(class_size).collect();
    assert_eq!(&sizes[..9], &[8, 16, 24, 32, 40, 48, 56, 64, 72]);
    assert_eq!(sizes[SPAN_CLASSES - 1], SPAN_MAX);
    assert_eq!(*sizes.last().unwrap(), MAX_SIZE);
    for pair in sizes.windows(2) {
        let (small, large) = (pair[0], pair[1]);
        assert!(small < large);
        // Within a doubling [2^k, 2^(k+1)] the step is 2^k / 8 (8 below 64) for span
        // classes, 2^k / 4 for page classes.
        let base = if small < 64 { 64 } else { 1 << small.ilog2() };
        let per_doubling = if small < SPAN_MAX { 8 } else { 4 };
        assert_eq!(large - small, base / per_doubling, "{small} -> {large}");
    }
    for class in 0..SPAN_CLASSES {
        assert!((4..=64).contains(&magazine_size(class)));
    }
    for class in SPAN_CLASSES..CLASSES {
        let items = magazine_size(class);
        assert!(
            items == 1 || items * class_size(class) <= 128 << 10,
            "class {class}"
        );
    }
}

#[test]
fn every_size_and_alignment_gets_the_smallest_fitting_class() {
    // Every size of the span classes; above them every 512th and both sides of each page
    // class's bound (the page table's granularity is 8 KiB).
    let mut sizes: Vec<usize> = (1..=SPAN_MAX).collect();
    sizes.extend((SPAN_MAX + 1..=MAX_SIZE).step_by(512));
    for class in SPAN_CLASSES..CLASSES {
        let bound = class_size(class);
        sizes.extend([bound - 1, bound, bound + 1]);
    }
    for align in (0..=MAX_ALIGN.ilog2()).map(|shift| 1usize << shift) {
        for &size in &sizes {
            let layout = Layout::from_size_align(size, align).unwrap();
            let rounded = size.next_multiple_of(align);
            let Some(class) = class_of(layout) else {
                assert!(
                    rounded > MAX_SIZE || (rounded > SPAN_MAX && align > PAGE_ALIGN),
                    "size {size} align {align} has no class"
                );
                continue;
            };
            let block = class_size(class);
            assert!(block >= size, "size {size} align {align}: block {block}");
            assert_eq!(block % align, 0, "size {size} align {align}: block {block}");
            // At most 12.5% (span classes, from 64 bytes on) or 25% (page classes) more
            // than the smallest block the alignment allows.
            let waste = if class < SPAN_CLASSES { 8 } else { 4 };
            if rounded >= 64 {
                assert!(
                    (block - rounded) * waste <= rounded,
                    "size {size} align {align}: block {block} wastes more than 1/{waste}"
                );
            }
            if align <= 8 && size >= 64 {
                assert!((block - size) * waste <= size, "size {size}: block {block}");
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
    let page_over_aligned = Layout::from_size_align(SPAN_MAX + 1, PAGE_ALIGN * 2).unwrap();
    assert_eq!(class_of(page_over_aligned), None);
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
