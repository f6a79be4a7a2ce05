//! Large allocations: more than 1 MiB, or aligned to more than a class serves (32 KiB, a
//! page above 32 KiB). Each is a mapping of its own, a whole number of pages.
//!
//! A freed large mapping aligned to a page is kept for reuse ([`Retained`]): up to
//! [`RETAINED_SLOTS`] mappings and [`RETAINED_MAX`] bytes, the oldest unmapped first to make
//! room. An allocation takes the smallest kept mapping that holds it and unmaps the rest of
//! it, so a program that frees a 4 MiB buffer and asks for another gets the same pages
//! back, without page faults. Trims unmap what was kept before the previous trim (the
//! working-set rule of the class caches); an allocation that the system refuses unmaps
//! everything kept and tries again. An allocation aligned beyond a page, and a zeroed one,
//! always get a fresh mapping (which reads as zeroes); a mapping larger than
//! `RETAINED_MAX` is unmapped when freed.

use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::pagemap::{self, Mapping};
use crate::{auto_trim, os};

/// Bytes mapped for large allocations in use now (statistics).
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The most freed mappings kept at once.
pub(crate) const RETAINED_SLOTS: usize = 8;

/// The most bytes of freed mappings kept at once (resident as far as they were touched).
pub(crate) const RETAINED_MAX: usize = 32 << 20;

/// A freed mapping kept for reuse.
#[derive(Clone, Copy)]
struct Kept {
    addr: usize,
    /// Its length; 0 for an empty slot.
    len: usize,
    /// The trim count when it was kept.
    trims: u64,
    /// The order in which mappings were kept (the oldest goes first).
    order: u64,
}

const EMPTY: Kept = Kept {
    addr: 0,
    len: 0,
    trims: 0,
    order: 0,
};

/// Freed mappings kept for reuse, under a lock held for a scan of the slots only: every
/// system call is made after it is released, and nothing allocates under it.
pub(crate) struct Retained {
    slots: [Kept; RETAINED_SLOTS],
    /// Bytes kept.
    bytes: usize,
    /// Trims so far.
    trims: u64,
    /// Mappings kept so far.
    kept: u64,
}

static RETAINED: Mutex<Retained> = Mutex::new(Retained {
    slots: [EMPTY; RETAINED_SLOTS],
    bytes: 0,
    trims: 0,
    kept: 0,
});

/// The lock of the kept mappings, for the fork handlers (`fork`) as well. No other lock of
/// the allocator is taken while it is held.
pub(crate) fn lock() -> MutexGuard<'static, Retained> {
    // Nothing panics while it is held, so it is never poisoned; if it were, its state
    // would still be whole.
    RETAINED.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Retained {
    /// Removes the smallest kept mapping of at least `len` bytes.
    fn take(&mut self, len: usize) -> Option<Kept> {
        let best = (0..RETAINED_SLOTS)
            .filter(|&i| self.slots[i].len >= len)
            .min_by_key(|&i| self.slots[i].len)?;
        Some(self.remove(best))
    }

    fn remove(&mut self, i: usize) -> Kept {
        let kept = std::mem::replace(&mut self.slots[i], EMPTY);
        self.bytes -= kept.len;
        kept
    }

    /// Keeps `[addr, addr + len)`, first making room by removing the oldest mappings into
    /// `evicted`; false (nothing kept) when `len` alone is over the limit.
    fn keep(&mut self, addr: usize, len: usize, evicted: &mut [Kept; RETAINED_SLOTS]) -> bool {
        if len > RETAINED_MAX {
            return false;
        }
        let mut n = 0;
        loop {
            let free = self.slots.iter().position(|kept| kept.len == 0);
            match free {
                Some(i) if self.bytes + len <= RETAINED_MAX => {
                    self.kept += 1;
                    self.slots[i] = Kept {
                        addr,
                        len,
                        trims: self.trims,
                        order: self.kept,
                    };
                    self.bytes += len;
                    return true;
                }
                _ => {
                    // A slot is used: all are, or the kept bytes are over the limit.
                    let Some(oldest) = (0..RETAINED_SLOTS)
                        .filter(|&i| self.slots[i].len != 0)
                        .min_by_key(|&i| self.slots[i].order)
                    else {
                        return false;
                    };
                    evicted[n] = self.remove(oldest);
                    n += 1;
                }
            }
        }
    }

    /// Removes every kept mapping that was kept before the previous trim, or every one.
    fn remove_older(&mut self, all: bool) -> [Kept; RETAINED_SLOTS] {
        let mut removed = [EMPTY; RETAINED_SLOTS];
        for (i, out) in removed.iter_mut().enumerate() {
            let kept = self.slots[i];
            if kept.len != 0 && (all || kept.trims < self.trims) {
                *out = self.remove(i);
            }
        }
        removed
    }
}

/// Unmaps mappings removed from the kept ones (empty slots are skipped).
fn unmap_all(mappings: &[Kept]) {
    for kept in mappings.iter().filter(|kept| kept.len != 0) {
        // SAFETY: a kept mapping is a whole mapping of ours that nobody uses; removed
        // from the slots, nobody else can take it.
        unsafe { os::unmap(kept.addr, kept.len) };
    }
}

/// A mapping for `layout`: a kept one if one holds it (its contents are a previous
/// user's), else a fresh one; null when the system refuses.
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    auto_trim::note_slow_call();
    let Some(len) = os::whole_pages(layout.size()) else {
        return ptr::null_mut();
    };
    if layout.align() <= os::page_size() {
        let kept = lock().take(len);
        if let Some(kept) = kept {
            // SAFETY: the kept mapping's tail beyond `len` is ours and nobody else's.
            unsafe { os::unmap(kept.addr + len, kept.len - len) };
            return registered(kept.addr, len);
        }
    }
    alloc_fresh(layout, len)
}

/// A fresh mapping for `layout` (reads as zeroes), or null when the system refuses.
pub(crate) fn alloc_zeroed(layout: Layout) -> *mut u8 {
    match os::whole_pages(layout.size()) {
        Some(len) => alloc_fresh(layout, len),
        None => ptr::null_mut(),
    }
}

/// A fresh mapping of `len` bytes for `layout`; when the system refuses, the kept mappings
/// are unmapped and the mapping is tried again.
fn alloc_fresh(layout: Layout, len: usize) -> *mut u8 {
    let map = || {
        if layout.align() <= os::page_size() {
            os::map(len)
        } else {
            os::map_aligned(len, layout.align())
        }
    };
    let addr = map().or_else(|| {
        let all = lock().remove_older(true);
        unmap_all(&all);
        all.iter().any(|kept| kept.len != 0).then(map).flatten()
    });
    match addr {
        Some(addr) => registered(addr, len),
        None => ptr::null_mut(),
    }
}

/// Hands out the mapping `[addr, addr + len)` once the map (`pagemap`) records it; when it
/// cannot, unmaps it and returns null.
fn registered(addr: usize, len: usize) -> *mut u8 {
    if !pagemap::insert(addr, Mapping::Large(len)) {
        // SAFETY: a whole mapping of ours that nobody else knows of.
        unsafe { os::unmap(addr, len) };
        return ptr::null_mut();
    }
    MAPPED.fetch_add(len, Ordering::Relaxed);
    addr as *mut u8
}

/// Frees a large allocation: kept for reuse when aligned to a page at most (unmapping the
/// oldest kept mappings to make room), else unmapped.
///
/// # Safety
///
/// `ptr` came from [`alloc()`] (or [`alloc_zeroed`], or [`realloc()`]) with `layout` and is
/// not used again.
pub(crate) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    auto_trim::note_slow_call();
    let Some(len) = os::whole_pages(layout.size()) else {
        return;
    };
    MAPPED.fetch_sub(len, Ordering::Relaxed);
    // Before the mapping can be unmapped (and its address mapped again by someone else).
    pagemap::remove(ptr as usize);
    let mut evicted = [EMPTY; RETAINED_SLOTS];
    let kept = layout.align() <= os::page_size() && lock().keep(ptr as usize, len, &mut evicted);
    if !kept {
        // SAFETY: the caller's contract: the whole mapping, which nobody uses any more.
        unsafe { os::unmap(ptr as usize, len) };
    }
    unmap_all(&evicted);
}

/// Resizes a large allocation aligned to at most a page to `new_size` bytes (still
/// large): in place when the page count stays, when it shrinks, or when the pages after
/// it are free; else its pages move onto a fresh mapping (`mremap`), not copied. Null
/// (the old allocation untouched) when the system refuses.
///
/// # Safety
///
/// `ptr` came from [`alloc()`] (or [`alloc_zeroed`], or this function) with `layout`,
/// whose alignment is at most the page size.
pub(crate) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let (Some(old), Some(new)) = (os::whole_pages(layout.size()), os::whole_pages(new_size)) else {
        return ptr::null_mut();
    };
    let addr = ptr as usize;
    if old == new {
        return ptr;
    }
    // SAFETY: the caller's contract: `[ptr, ptr + old)` is one whole mapping of ours.
    if unsafe { os::resize_in_place(addr, old, new) } {
        // The entry's leaf exists (the old entry is in it): only a length the map cannot
        // hold fails, and then the mapping is resized back.
        if !pagemap::insert(addr, Mapping::Large(new)) {
            // SAFETY: the mapping just resized, ours; back to its old length.
            unsafe { os::resize_in_place(addr, new, old) };
            return ptr::null_mut();
        }
        MAPPED.fetch_add(new, Ordering::Relaxed);
        MAPPED.fetch_sub(old, Ordering::Relaxed);
        return ptr;
    }
    // Elsewhere: a fresh mapping, recorded in the map, then the pages moved onto it.
    let target = alloc_fresh(page_aligned(new), new);
    if target.is_null() {
        return target;
    }
    // Before the move unmaps the old range, which someone else may then map.
    pagemap::remove(addr);
    // SAFETY: two distinct whole mappings of ours (the target is fresh), `new` > `old`.
    if unsafe { os::move_onto(addr, old, target as usize, new) } {
        MAPPED.fetch_sub(old, Ordering::Relaxed);
        target
    } else {
        // The old entry's leaf exists: its insertion cannot fail.
        let _ = pagemap::insert(addr, Mapping::Large(old));
        // SAFETY: the fresh target, ours, which nobody else knows of.
        unsafe { dealloc(target, page_aligned(new)) };
        ptr::null_mut()
    }
}

/// The layout of a large block of `len` bytes (a whole number of pages) aligned to a page:
/// how the blocks freed by their address alone are described.
pub(crate) fn page_aligned(len: usize) -> Layout {
    // A whole number of pages is at most `isize::MAX` rounded down to a page (`Layout`
    // sizes and `mmap` lengths are), and the page size is a power of two.
    Layout::from_size_align(len, os::page_size()).unwrap_or(Layout::new::<u8>())
}

/// Unmaps the mappings kept since before the previous trim (two trims with no large
/// allocation between them unmap every one).
pub(crate) fn trim() {
    let removed = {
        let mut retained = lock();
        let removed = if cfg!(magazine_mutant = "large_kept_for_ever") {
            // MUTANT: trims never unmap a kept mapping.
            [EMPTY; RETAINED_SLOTS]
        } else {
            retained.remove_older(false)
        };
        retained.trims += 1;
        removed
    };
    unmap_all(&removed);
}

/// Bytes mapped for large allocations in use now.
pub(crate) fn mapped() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

/// Bytes of freed large mappings kept for reuse now.
pub(crate) fn kept() -> usize {
    lock().bytes
}
