//! Large allocations (above 1 MiB): a freed mapping is kept for reuse, within the limits
//! (8 mappings, 32 MiB), handed to the next allocation it holds (the rest unmapped), never
//! to a zeroed or over-aligned one; trims unmap what was kept.
//!
//! One test function: the kept mappings are the whole process's. The mutant
//! `large_kept_for_ever` (trims unmap nothing) fails it.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::hint::black_box;

use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

const MIB: usize = 1 << 20;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// A large block of `layout`, every byte written with `fill`. Through `black_box`, as is
/// every block freed: in release the optimiser otherwise removes allocations whose
/// contents are never read, and these blocks' whole point is what the allocator does with
/// them (it did, with the allocator declared in the library: a test saw 8 MiB kept of 24).
fn filled(layout: Layout, fill: u8) -> *mut u8 {
    // SAFETY: a nonzero size; written within it.
    unsafe {
        let block = black_box(alloc(layout));
        assert!(!block.is_null());
        block.write_bytes(fill, layout.size());
        black_box(block)
    }
}

fn free(block: *mut u8, layout: Layout) {
    // SAFETY: every caller passes a block allocated with `layout`, once.
    unsafe { dealloc(black_box(block), layout) };
}

#[test]
fn freed_large_mappings_are_reused_within_limits_and_trimmed() {
    let heap = MagazineMalloc::new();
    // Its own trims off: the test counts what stays cached between the trims it calls.
    heap.set_auto_trim(None);
    heap.trim();
    heap.trim();
    assert_eq!(heap.stats().large_kept_bytes, 0);

    // The same size again: the same mapping.
    let first = filled(layout(3 * MIB), 1);
    free(first, layout(3 * MIB));
    assert_eq!(heap.stats().large_kept_bytes, 3 * MIB);
    let again = filled(layout(3 * MIB), 2);
    assert_eq!(again, first, "the kept mapping was reused");
    assert_eq!(heap.stats().large_kept_bytes, 0);
    free(again, layout(3 * MIB));

    // A smaller one takes the smallest kept mapping that holds it, its tail unmapped.
    let big = filled(layout(8 * MIB), 3);
    free(big, layout(8 * MIB));
    let smaller = filled(layout(5 * MIB), 4);
    assert_eq!(
        smaller, big,
        "the 3 MiB mapping is too small; the 8 MiB one fits"
    );
    let stats = heap.stats();
    assert_eq!(
        stats.large_kept_bytes,
        3 * MIB,
        "the 3 MiB one is still kept"
    );
    assert_eq!(stats.large_bytes, 5 * MIB, "the 8 MiB one's tail went back");
    free(smaller, layout(5 * MIB));

    // A zeroed allocation never gets a previous user's bytes.
    let dirty = filled(layout(2 * MIB), 0xa5);
    free(dirty, layout(2 * MIB));
    // SAFETY: a nonzero size; read within it, then freed once.
    unsafe {
        let zeroed = alloc_zeroed(layout(2 * MIB));
        assert!(!zeroed.is_null());
        let bytes = std::slice::from_raw_parts(zeroed, 2 * MIB);
        assert!(
            bytes.iter().all(|&b| b == 0),
            "a zeroed block reads as zeroes"
        );
        dealloc(zeroed, layout(2 * MIB));
    }

    // Over-aligned mappings are not kept.
    let aligned = Layout::from_size_align(3 * MIB, 2 * MIB).unwrap();
    let kept = heap.stats().large_kept_bytes;
    // SAFETY: a nonzero size; freed once with its layout.
    unsafe {
        let block = alloc(aligned);
        assert!(!block.is_null());
        assert_eq!(block as usize % (2 * MIB), 0);
        dealloc(block, aligned);
    }
    assert_eq!(
        heap.stats().large_kept_bytes,
        kept,
        "an over-aligned mapping is unmapped"
    );

    // At most 8 mappings and 32 MiB are kept: the oldest go first.
    let many: Vec<*mut u8> = (0..12).map(|i| filled(layout(3 * MIB), i)).collect();
    for &block in &many {
        free(block, layout(3 * MIB));
    }
    let kept = heap.stats().large_kept_bytes;
    assert!(
        (8 * 3 * MIB..=32 * MIB).contains(&kept),
        "{kept} bytes kept"
    );
    let newest = filled(layout(3 * MIB), 0);
    assert!(
        many[4..].contains(&newest),
        "an older mapping was unmapped first"
    );
    free(newest, layout(3 * MIB));

    // Two trims with no large allocation between them unmap every kept mapping.
    heap.trim();
    heap.trim();
    let stats = heap.stats();
    assert_eq!(stats.large_kept_bytes, 0, "{stats}");
    assert_eq!(stats.large_bytes, 0, "{stats}");
}
