//! Fresh blocks come out at rising addresses: a refill carves a span's blocks in address
//! order, and the magazine (last in, first out) must hand them out in that order, the one
//! the hardware prefetchers follow when a program later walks its data in allocation order
//! (descending runs of a magazine's length, ascending from run to run, made such walks up
//! to twice as slow).

use std::alloc::{alloc, dealloc, Layout};

use magazine_malloc::classes::{class_of, class_size, magazine_size};
use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

#[test]
fn a_fresh_magazine_hands_out_blocks_at_rising_addresses() {
    // SAFETY: `sched_getcpu` has no preconditions; `set` is a zeroed CPU set written only
    // through the libc macro. Pinned, the allocations below meet one CPU's magazines (a
    // failure to pin only risks a refill on another CPU, which the check tolerates).
    unsafe {
        if let Ok(cpu) = usize::try_from(libc::sched_getcpu()) {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    // A class nothing else in this process uses: its first refill carves a fresh span.
    let layout = Layout::from_size_align(1700, 8).unwrap();
    let class = class_of(layout).unwrap();
    let (size, count) = (class_size(class), magazine_size(class));
    // SAFETY: a nonzero size; freed below with the same layout, once.
    let blocks: Vec<usize> = (0..count)
        .map(|_| unsafe { alloc(layout) } as usize)
        .collect();
    assert!(blocks.iter().all(|&b| b != 0));
    let steps: Vec<isize> = blocks
        .windows(2)
        .map(|w| w[1] as isize - w[0] as isize)
        .collect();
    let rising = steps.iter().filter(|&&step| step == size as isize).count();
    assert!(
        rising + 1 >= steps.len(),
        "{count} fresh blocks of {size} B, steps between them: {steps:?}"
    );
    for block in blocks {
        // SAFETY: allocated above with `layout`.
        unsafe { dealloc(block as *mut u8, layout) };
    }
}
