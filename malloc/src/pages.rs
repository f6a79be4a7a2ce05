//! The source of the page classes (above 32 KiB, to 1 MiB): each block is a mapping of its
//! own, of the class's size in whole pages, made when the class's cache misses and
//! unmapped when the cache gives the block back (a trim, or a depot that overflows into
//! it). Between the two the block lives in the class's cache like any other, pages
//! resident: a program that frees a 200 KiB buffer and allocates another gets the same
//! pages back, with no system call and no page fault.
//!
//! The blocks' own pages are all the books there are: no list, no lock. A block's tail
//! beyond the largest request it served is never touched, so never resident.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::classes::{self, CLASSES, SPAN_CLASSES};
use crate::os;
use crate::pagemap::{self, Mapping};

/// Blocks of each page class out now, cached or in use (statistics; Relaxed: counts
/// only, read without stopping anyone).
static OUT: [AtomicUsize; CLASSES - SPAN_CLASSES] =
    [const { AtomicUsize::new(0) }; CLASSES - SPAN_CLASSES];

/// The mapping's length of a block of `class`: its size in whole pages.
fn length(class: usize) -> usize {
    // A class size (at most 1 MiB) rounded up to pages cannot overflow.
    os::whole_pages(classes::class_size(class)).unwrap_or(usize::MAX)
}

/// Fills `blocks` with fresh blocks of page class `class`; returns how many (fewer when
/// the system refuses a mapping).
pub(crate) fn take(class: usize, blocks: &mut [usize]) -> usize {
    let len = length(class);
    let mut n = 0;
    for slot in blocks.iter_mut() {
        let Some(block) = os::map(len) else { break };
        if !pagemap::insert(block, Mapping::PageClass(class)) {
            // SAFETY: our fresh mapping, which nobody else knows of.
            unsafe { os::unmap(block, len) };
            break;
        }
        *slot = block;
        n += 1;
    }
    OUT[class - SPAN_CLASSES].fetch_add(n, Ordering::Relaxed);
    n
}

/// Unmaps `blocks` of page class `class`.
///
/// # Safety
///
/// Each block was handed out by [`take`] for `class`, is given back once, and nobody uses
/// it any more.
pub(crate) unsafe fn give(class: usize, blocks: &[usize]) {
    let len = length(class);
    // MUTANT: the blocks stay mapped (and counted), never given back to the system.
    if cfg!(magazine_mutant = "pages_never_unmapped") {
        return;
    }
    for &block in blocks {
        pagemap::remove(block);
        // SAFETY: the caller's contract: a whole mapping of ours that nobody uses.
        unsafe { os::unmap(block, len) };
    }
    OUT[class - SPAN_CLASSES].fetch_sub(blocks.len(), Ordering::Relaxed);
}

/// Bytes mapped for page-class blocks now: each class's blocks out times their length.
pub(crate) fn mapped() -> usize {
    (SPAN_CLASSES..CLASSES)
        .map(|class| out(class) * length(class))
        .sum()
}

/// Blocks of page class `class` out now.
pub(crate) fn out(class: usize) -> usize {
    OUT[class - SPAN_CLASSES].load(Ordering::Relaxed)
}
