//! Large allocations: more than 1 MiB, or aligned to more than a class serves (32 KiB, a
//! page above 32 KiB). Each is a mapping of its own, a whole number of pages, unmapped
//! when freed: its memory goes back to the system at once, and no cache keeps it.

use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::os;

/// Bytes mapped for large allocations now (statistics).
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The mapping's length for `size` bytes: whole pages, at least one.
fn length(size: usize) -> Option<usize> {
    let page = os::page_size();
    Some(size.max(1).checked_add(page - 1)? & !(page - 1))
}

/// A fresh mapping for `layout` (zeroed), or null when the system refuses.
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    let Some(len) = length(layout.size()) else {
        return ptr::null_mut();
    };
    let addr = if layout.align() <= os::page_size() {
        os::map(len)
    } else {
        os::map_aligned(len, layout.align())
    };
    match addr {
        Some(addr) => {
            MAPPED.fetch_add(len, Ordering::Relaxed);
            addr as *mut u8
        }
        None => ptr::null_mut(),
    }
}

/// Unmaps a large allocation.
///
/// # Safety
///
/// `ptr` came from [`alloc()`] (or [`realloc()`]) with `layout` and is not used again.
pub(crate) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    let Some(len) = length(layout.size()) else {
        return;
    };
    // SAFETY: the caller's contract: the whole mapping, which nobody uses any more.
    unsafe { os::unmap(ptr as usize, len) };
    MAPPED.fetch_sub(len, Ordering::Relaxed);
}

/// Resizes a large allocation aligned to at most a page to `new_size` bytes (still
/// large): in place when the page count stays, else by `mremap`, which moves the pages
/// rather than copying them. Null (the old allocation untouched) when the kernel
/// refuses.
///
/// # Safety
///
/// `ptr` came from [`alloc()`] (or this function) with `layout`, whose alignment is at most
/// the page size.
pub(crate) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let (Some(old), Some(new)) = (length(layout.size()), length(new_size)) else {
        return ptr::null_mut();
    };
    if old == new {
        return ptr;
    }
    // SAFETY: the caller's contract: `[ptr, ptr + old)` is one whole mapping of ours.
    match unsafe { os::remap(ptr as usize, old, new) } {
        Some(moved) => {
            MAPPED.fetch_add(new, Ordering::Relaxed);
            MAPPED.fetch_sub(old, Ordering::Relaxed);
            moved as *mut u8
        }
        None => ptr::null_mut(),
    }
}

/// Bytes mapped for large allocations now.
pub(crate) fn mapped() -> usize {
    MAPPED.load(Ordering::Relaxed)
}
