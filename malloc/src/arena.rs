//! The metadata arena: where the allocator's own allocations go, those the class caches
//! make while they run (magazines, depot nodes, crossbeam-epoch's per-thread records and
//! garbage bags, the caches themselves).
//!
//! One address range is reserved at first use (`PROT_NONE`: 64 GiB of address space, or
//! less if the system refuses that much) and made accessible in 1 MiB steps as it is used.
//! Blocks are powers of two from 16 B to 32 KiB, aligned to their size, kept in a free list
//! per size under one lock; a list that runs dry takes a fresh run (4 KiB, or one block for
//! larger sizes) from the top of the range. Nothing here calls a cache or allocates, so
//! the arena is the end of every chain of allocations the allocator makes for itself.
//! Memory given back to the arena is reused by the arena only; the range never shrinks.
//!
//! Whether a pointer is the arena's is a range check, so a metadata block goes back here
//! whoever frees it, from whatever context (crossbeam-epoch frees its garbage later, from
//! any thread).

use std::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::os;

/// Address space reserved, tried in turn until the system accepts one.
const RESERVATIONS: [usize; 4] = [64 << 30, 8 << 30, 1 << 30, 128 << 20];
/// The range is made accessible this much at a time.
const COMMIT_STEP: usize = 1 << 20;
/// The smallest block: 16 B.
const MIN_SHIFT: u32 = 4;
/// The largest block: 32 KiB (larger metadata is mapped like any large allocation).
const MAX_SHIFT: u32 = 15;
const LISTS: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// A list of small blocks is refilled with a run of this many bytes.
const RUN: usize = 4096;

/// The reserved range, `[BASE, END)`; 0 before it is reserved. `END` is stored before
/// `BASE` (Release), so a reader that sees `BASE` sees `END`.
static BASE: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// Bytes in blocks handed out now, and bytes made accessible (statistics).
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static COMMITTED: AtomicUsize = AtomicUsize::new(0);

struct State {
    /// The first byte never handed out.
    top: usize,
    /// The end of the accessible part of the range.
    committed: usize,
    /// A free list per block size: each free block holds the next one's address in its
    /// first word; 0 ends a list.
    free: [usize; LISTS],
}

static STATE: Mutex<State> = Mutex::new(State {
    top: 0,
    committed: 0,
    free: [0; LISTS],
});

fn lock() -> MutexGuard<'static, State> {
    // Nothing panics while the arena is locked, so it is never poisoned; if it were, its
    // state would still be whole.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The log2 of the block that serves `layout`, `None` when it is larger than 32 KiB.
fn shift_of(layout: Layout) -> Option<u32> {
    let bytes = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    (bytes <= 1 << MAX_SHIFT).then(|| bytes.next_power_of_two().trailing_zeros())
}

/// Whether `ptr` is in the arena's range.
#[inline]
pub(crate) fn contains(ptr: *mut u8) -> bool {
    let base = BASE.load(Ordering::Acquire);
    let addr = ptr as usize;
    base != 0 && addr >= base && addr < END.load(Ordering::Relaxed)
}

/// A block for `layout` (at most 32 KiB, aligned to at most that), or null when the
/// system refuses the memory.
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    let Some(shift) = shift_of(layout) else {
        return core::ptr::null_mut();
    };
    let list = (shift - MIN_SHIFT) as usize;
    let mut state = lock();
    let block = match state.free[list] {
        0 => match refill(&mut state, shift) {
            Some(block) => block,
            None => return core::ptr::null_mut(),
        },
        block => {
            // SAFETY: a free block of ours, holding the next one's address (or 0) in its
            // first word, aligned to its size (at least 16).
            state.free[list] = unsafe { (block as *const usize).read() };
            block
        }
    };
    IN_USE.fetch_add(1 << shift, Ordering::Relaxed);
    block as *mut u8
}

/// A fresh run for the blocks of `1 << shift` bytes: returns its first block and lists
/// the others. Reserves the range at the first call.
fn refill(state: &mut State, shift: u32) -> Option<usize> {
    if state.top == 0 {
        reserve(state)?;
    }
    let size = 1usize << shift;
    let run = size.max(RUN);
    let start = state.top.checked_add(run - 1)? & !(run - 1);
    let end = start.checked_add(run)?;
    let limit = END.load(Ordering::Relaxed);
    if end > limit {
        return None;
    }
    if end > state.committed {
        let to = end
            .checked_add(COMMIT_STEP - 1)
            .map_or(limit, |to| to & !(COMMIT_STEP - 1))
            .min(limit);
        // SAFETY: `[committed, to)` is in our reservation and was never accessible. If
        // `mprotect` fails nothing changes and the caller gets null.
        if !unsafe { os::commit(state.committed, to - state.committed) } {
            return None;
        }
        COMMITTED.fetch_add(to - state.committed, Ordering::Relaxed);
        state.committed = to;
    }
    state.top = end;
    let list = (shift - MIN_SHIFT) as usize;
    let mut block = end - size;
    while block > start {
        // SAFETY: a block of the fresh run, accessible, ours alone under the lock.
        unsafe { (block as *mut usize).write(state.free[list]) };
        state.free[list] = block;
        block -= size;
    }
    Some(start)
}

/// Reserves the range: the largest of [`RESERVATIONS`] the system accepts.
fn reserve(state: &mut State) -> Option<()> {
    let (base, len) = RESERVATIONS
        .iter()
        .find_map(|&len| Some((os::map(len, libc::PROT_NONE)?, len)))?;
    state.top = base;
    state.committed = base;
    END.store(base + len, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    Some(())
}

/// Takes back a block.
///
/// # Safety
///
/// `ptr` came from [`alloc()`] with a layout of the same block size as `layout` and is not
/// used again.
pub(crate) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    let Some(shift) = shift_of(layout) else {
        return; // never handed out by the arena: nothing to do
    };
    let list = (shift - MIN_SHIFT) as usize;
    let mut state = lock();
    // SAFETY: the caller's contract: the block is ours again, at least 16 bytes.
    unsafe { (ptr as *mut usize).write(state.free[list]) };
    state.free[list] = ptr as usize;
    IN_USE.fetch_sub(1 << shift, Ordering::Relaxed);
}

/// Whether a block that serves `layout` also serves `new`: the same block size.
pub(crate) fn fits(layout: Layout, new: Layout) -> bool {
    shift_of(layout) == shift_of(new)
}

/// Bytes in use, bytes made accessible, bytes reserved.
pub(crate) fn counts() -> (usize, usize, usize) {
    let base = BASE.load(Ordering::Acquire);
    let reserved = if base == 0 {
        0
    } else {
        END.load(Ordering::Relaxed) - base
    };
    (
        IN_USE.load(Ordering::Relaxed),
        COMMITTED.load(Ordering::Relaxed),
        reserved,
    )
}
