//! Memory reserved for the caches' own metadata, for when the system refuses more.
//!
//! crossbeam-epoch's allocations (a thread's participant record, the garbage bags it
//! moves to the global queue, at a depot exchange or at thread exit) cannot fail
//! gracefully: a null from the allocator aborts the process. They are made while the
//! thread is inside the allocator (`heap`), where class blocks come straight from the
//! class's source; when that source cannot get a new chunk from the system, the block
//! comes from here instead. User allocations never reach the reserve (their failure is a
//! null), so they cannot exhaust it.
//!
//! The reserve is a static array: part of the program's image, mapped when the program
//! starts (so it is there however little address space is left later), resident only in
//! the pages that were used. Blocks are carved with a bump index and, when freed, kept
//! in a list per class for reuse.

use core::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::classes::{self, SPAN_CLASSES};

/// The reserve's size: room for about 400 of crossbeam-epoch's largest records (about
/// 2 KiB each) at once, which a thousand threads exiting at once under memory exhaustion
/// would not all need (each bag is freed when the epoch moves on).
pub(crate) const BYTES: usize = 1 << 20;

/// The reserved memory, aligned like a span (every class block's alignment divides it).
#[repr(C, align(65536))]
struct Region(UnsafeCell<[u8; BYTES]>);

// SAFETY: the region's bytes are handed out as blocks under `STATE`'s lock, each to one
// owner at a time; nothing here reads or writes them but through those blocks (and the
// free lists' links, under the lock).
unsafe impl Sync for Region {}

static REGION: Region = Region(UnsafeCell::new([0; BYTES]));

/// The bump index and a free list per span class (0 for none), linked through each free
/// block's first word.
pub(crate) struct State {
    carved: usize,
    free: [usize; SPAN_CLASSES],
}

static STATE: Mutex<State> = Mutex::new(State {
    carved: 0,
    free: [0; SPAN_CLASSES],
});

/// The class of the block carved at each 8-byte offset of the region, plus one (0 where
/// no block starts): so that a reserve block can be freed by its address alone. Written
/// when a block is carved, under the lock, and never again (a carved block keeps its
/// class). In the program's image, resident only where the reserve was used.
static CLASS_AT: [AtomicU8; BYTES / 8] = [const { AtomicU8::new(0) }; BYTES / 8];

/// Bytes of reserve blocks out now (statistics).
static IN_USE: AtomicUsize = AtomicUsize::new(0);

fn start() -> usize {
    REGION.0.get() as usize
}

/// The reserve's lock, for the fork handlers (`fork`) as well.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    // Nothing panics while it is held, so it is never poisoned; if it were, its state
    // would still be whole.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `block` is in the reserve.
#[inline]
pub(crate) fn contains(block: usize) -> bool {
    block.wrapping_sub(start()) < BYTES
}

/// A block of `class` from the reserve; null when it is exhausted, or for a page class
/// (crossbeam-epoch's records and bags are span-class blocks; a cache's own arrays may be
/// larger on a machine with many CPUs, and their creation fails gracefully).
pub(crate) fn alloc(class: usize) -> *mut u8 {
    if classes::is_page_class(class) {
        return ptr::null_mut();
    }
    let size = classes::class_size(class);
    // A class block's alignment: the largest power of two dividing its size (class
    // lookups choose a class whose size is a multiple of the alignment asked for).
    let align = size & size.wrapping_neg();
    let mut state = lock();
    let block = match state.free[class] {
        0 => {
            let offset = (state.carved + align - 1) & !(align - 1);
            if offset + size > BYTES {
                return ptr::null_mut();
            }
            state.carved = offset + size;
            // Release: a free by address that reads it sees the carving.
            CLASS_AT[offset / 8].store(class as u8 + 1, Ordering::Release);
            start() + offset
        }
        block => {
            // SAFETY: a free block of ours, holding the next one's address in its first
            // word (written by `free`), aligned (at least 8).
            state.free[class] = unsafe { (block as *const usize).read() };
            block
        }
    };
    IN_USE.fetch_add(size, Ordering::Relaxed);
    block as *mut u8
}

/// The class of the reserve block that starts at `block`, `None` when no block starts
/// there. A free block is not told apart from a live one.
pub(crate) fn class_of(block: usize) -> Option<usize> {
    let offset = block.wrapping_sub(start());
    if offset >= BYTES || offset % 8 != 0 {
        return None;
    }
    (CLASS_AT[offset / 8].load(Ordering::Acquire) as usize).checked_sub(1)
}

/// Takes a block of `class` back into the reserve.
///
/// # Safety
///
/// `block` came from [`alloc`] for `class`, and its owner gives it up.
pub(crate) unsafe fn free(class: usize, block: usize) {
    let mut state = lock();
    // SAFETY: the caller's contract: the block is ours again, so its first word is ours
    // to write; it is aligned to at least 8.
    unsafe { (block as *mut usize).write(state.free[class]) };
    state.free[class] = block;
    IN_USE.fetch_sub(classes::class_size(class), Ordering::Relaxed);
}

/// Bytes of reserve blocks out now.
pub(crate) fn in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}
