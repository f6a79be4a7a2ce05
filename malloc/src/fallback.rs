//! Systems other than Linux: every call goes to the system allocator; there is nothing to
//! trim and nothing to count.

use std::alloc::{GlobalAlloc, Layout, System};

use crate::stats::MallocStats;

pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    // SAFETY: `GlobalAlloc::alloc`'s contract, which our caller holds.
    unsafe { System.alloc(layout) }
}

pub(crate) fn alloc_zeroed(layout: Layout) -> *mut u8 {
    // SAFETY: as in `alloc`.
    unsafe { System.alloc_zeroed(layout) }
}

/// # Safety
///
/// `GlobalAlloc::dealloc`'s contract.
pub(crate) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract; every block came from `System`.
    unsafe { System.dealloc(ptr, layout) }
}

/// # Safety
///
/// `GlobalAlloc::realloc`'s contract.
pub(crate) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: the caller's contract; every block came from `System`.
    unsafe { System.realloc(ptr, layout, new_size) }
}

pub(crate) fn trim() {}

pub(crate) fn register_thread() {}

pub(crate) fn set_auto_trim(_interval: Option<std::time::Duration>) {}

pub(crate) fn auto_trim() -> Option<std::time::Duration> {
    None
}

pub(crate) fn stats() -> MallocStats {
    MallocStats::default()
}

/// Blocks of the system allocator cannot be found from their address (it keeps their
/// layout in its own way): nothing is one of ours.
pub(crate) fn usable_size(_ptr: *const u8) -> Option<usize> {
    None
}

/// # Safety
///
/// None: nothing is done.
pub(crate) unsafe fn free(_ptr: *mut u8) -> bool {
    false
}

/// # Safety
///
/// None: nothing is done.
pub(crate) unsafe fn resize(_ptr: *mut u8, _new: Layout) -> Result<*mut u8, ()> {
    Err(())
}
