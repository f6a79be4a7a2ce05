//! Page classes (blocks above 32 KiB, to 1 MiB): each block is a mapping of its own, cached
//! like any block. A block freed and asked for again is the same mapping (no system call,
//! no page fault); trims unmap what nobody uses.
//!
//! One test function: the heap is the whole process's. The mutant `pages_never_unmapped`
//! (a page class's source keeps what its cache gives back) fails it.

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;

use magazine_malloc::classes::{class_of, class_size, magazine_size, CLASSES, SPAN_CLASSES};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// Allocates `count` blocks of `layout`, writing every byte.
fn allocate(layout: Layout, count: usize) -> Vec<usize> {
    (0..count)
        .map(|i| {
            // SAFETY: a nonzero size; written within it.
            // Through `black_box`: the optimiser removes allocations whose contents are
            // never read, and what the allocator does with these is the test.
            unsafe {
                let block = black_box(alloc(layout));
                assert!(!block.is_null(), "{layout:?}");
                block.write_bytes(i as u8 | 1, layout.size());
                black_box(block) as usize
            }
        })
        .collect()
}

fn free(blocks: &[usize], layout: Layout) {
    for &block in blocks {
        // SAFETY: allocated with `layout` by `allocate`, freed once.
        unsafe { dealloc(black_box(block as *mut u8), layout) };
    }
}

fn page_bytes() -> usize {
    MagazineMalloc::new().stats().page_bytes
}

/// Keeps the thread on the CPU it runs on: a block freed into one CPU's magazines is not
/// what another CPU's allocation finds first. Best effort (a failure only weakens nothing
/// here: the test then runs where the scheduler puts it, as without the pin).
fn pin_to_current_cpu() {
    // SAFETY: `sched_getcpu` has no preconditions; `set` is a valid, zeroed CPU set written
    // only through the libc macros; `sched_setaffinity` reads it.
    unsafe {
        let Ok(cpu) = usize::try_from(libc::sched_getcpu()) else {
            return;
        };
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[test]
fn page_class_blocks_are_reused_and_trimmed_back() {
    pin_to_current_cpu();
    let heap = MagazineMalloc::new();
    // Its own trims off: the test counts what stays cached between the trims it calls.
    heap.set_auto_trim(None);
    let start = page_bytes();
    // Every page class, at a size just above the class below it (the smallest request the
    // class serves), more blocks than a CPU's two magazines hold: the depot takes some.
    let sizes: Vec<(Layout, usize)> = (SPAN_CLASSES..CLASSES)
        .map(|class| {
            let layout = Layout::from_size_align(class_size(class - 1) + 1, 8).unwrap();
            assert_eq!(class_of(layout), Some(class));
            (layout, 3 * magazine_size(class) + 1)
        })
        .collect();
    let first: Vec<Vec<usize>> = sizes.iter().map(|&(l, n)| allocate(l, n)).collect();
    let mapped = page_bytes();
    let asked: usize = sizes.iter().map(|&(l, n)| l.size() * n).sum();
    assert!(mapped - start >= asked, "{mapped} bytes mapped for {asked}");

    for (blocks, &(layout, _)) in first.iter().zip(&sizes) {
        free(blocks, layout);
    }
    assert_eq!(page_bytes(), mapped, "freed blocks stay cached, mapped");

    // Blocks again: all cached ones, no new mapping (no source call in any page class).
    let source_allocs = |stats: &magazine_malloc::MallocStats| -> Vec<u64> {
        let pages = stats.classes.iter().filter(|c| c.class >= SPAN_CLASSES);
        pages.map(|c| c.cache.source_allocs).collect()
    };
    let before = source_allocs(&heap.stats());
    assert_eq!(before.len(), CLASSES - SPAN_CLASSES);
    let second: Vec<Vec<usize>> = sizes.iter().map(|&(l, n)| allocate(l, n)).collect();
    assert_eq!(page_bytes(), mapped, "cached blocks were reused");
    assert_eq!(source_allocs(&heap.stats()), before, "no page class missed");

    for (blocks, &(layout, _)) in second.iter().zip(&sizes) {
        free(blocks, layout);
    }
    heap.trim();
    heap.trim();
    let after = heap.stats();
    assert_eq!(
        after.page_bytes, start,
        "two trims with nothing used between them unmap every cached block\n{after}"
    );
    for class in after.classes.iter().filter(|c| c.class >= SPAN_CLASSES) {
        assert_eq!(class.blocks_out, 0, "class of {} B\n{after}", class.size);
        assert_eq!(class.spans, 0);
    }
}
