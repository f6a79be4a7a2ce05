//! A class's [`Source`]: the central free list behind its cache, which hands out blocks
//! carved from spans and takes them back a magazine at a time. (A page class's source
//! maps and unmaps its blocks instead: `pages`.)
//!
//! Each class keeps the spans that have blocks to hand out in a list, under a lock. A
//! block handed out comes from its span's given-back blocks (`free_blocks`), else from
//! the span's bump index (fresh blocks: no free list is threaded through pages nobody
//! touched). A span with nothing left leaves the list; a span whose blocks all come back
//! (when the cache trims or flushes) goes back to `span`, which discards its pages in
//! time. The source
//! never allocates: everything it keeps is in the spans' descriptors and in the free
//! blocks themselves.

use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use magazine::Source;

use crate::classes::{self, SPAN_CLASSES};
use crate::span::{self, Span};
use crate::{auto_trim, free_blocks, pagemap, pages, reserve};

/// Blocks moved per lock hold; a batch is gathered under the lock into a buffer on the
/// stack and handed to the cache after it (the cache's magazines hold at most 64).
const BATCH: usize = 64;

/// A class's spans with blocks to hand out: a doubly linked list through the
/// descriptors' `next` and `prev`.
struct Spans {
    head: *mut Span,
}

// SAFETY: the descriptors are in chunk headers, mapped for the life of the process; the
// list and the spans in it are only touched under the class's lock.
unsafe impl Send for Spans {}

/// The central free list of one class.
struct Central {
    spans: Mutex<Spans>,
    /// Spans the class holds now (statistics).
    held: AtomicUsize,
    /// Blocks out of the class's hands now: cached or in use (statistics).
    out: AtomicUsize,
}

static CENTRAL: [Central; SPAN_CLASSES] = [const {
    Central {
        spans: Mutex::new(Spans {
            head: ptr::null_mut(),
        }),
        held: AtomicUsize::new(0),
        out: AtomicUsize::new(0),
    }
}; SPAN_CLASSES];

/// The source of one class's cache: a handle on the class's central free list.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassSource {
    class: usize,
}

impl ClassSource {
    pub(crate) const fn new(class: usize) -> Self {
        Self { class }
    }
}

impl Source for ClassSource {
    type Item = usize;

    fn alloc(&self) -> Option<usize> {
        auto_trim::note_slow_call();
        let mut block = [0];
        (take(self.class, &mut block) == 1).then_some(block[0])
    }

    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(usize)) -> usize {
        auto_trim::note_slow_call();
        let mut buffer = [0; BATCH];
        let mut handed = 0;
        while handed < max {
            let want = (max - handed).min(BATCH);
            let got = take(self.class, &mut buffer[..want]);
            // In reverse: the cache pops a magazine last in, first out, so the blocks go
            // out in the order `take` produced them, a fresh span's at rising addresses.
            // Handed in order, a magazine gave them out descending within each batch and
            // ascending from batch to batch: a saw-tooth that the hardware prefetchers lose
            // track of when the program later walks its data in allocation order (a walk
            // over such blocks ran about twice as slow as over ascending or descending
            // ones; `tests/order.rs` holds the order).
            buffer[..got].iter().rev().for_each(|&block| out(block));
            handed += got;
            if got < want {
                break;
            }
        }
        handed
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = usize>) {
        auto_trim::note_slow_call();
        let mut buffer = [0; BATCH];
        loop {
            let n = buffer
                .iter_mut()
                .zip(&mut *items)
                .fold(0, |n, (slot, block)| {
                    *slot = block;
                    n + 1
                });
            if n == 0 {
                return;
            }
            // SAFETY: the cache gives back only blocks this source handed out, once
            // each (the allocator's callers free each block once: `GlobalAlloc`'s
            // contract).
            unsafe { give(self.class, &buffer[..n]) };
        }
    }
}

/// Takes one block of `class` straight from its spans, past the cache: for an allocation
/// made while the thread is inside the allocator (see the crate docs, "Re-entrancy").
/// Null when the system refuses a new chunk.
pub(crate) fn alloc_one(class: usize) -> *mut u8 {
    ClassSource::new(class)
        .alloc()
        .map_or(ptr::null_mut(), |block| block as *mut u8)
}

/// Gives one block straight back to its class, past the cache: for a block freed while
/// the thread is inside the allocator (see the crate docs, "Re-entrancy").
///
/// # Safety
///
/// `block` is a block of `class` that its caller owns and will not use again.
pub(crate) unsafe fn free_one(class: usize, block: usize) {
    // SAFETY: the caller's contract.
    unsafe { give(class, &[block]) }
}

/// The span kind (`span`) of `class`'s spans.
fn span_kind(class: usize) -> usize {
    (classes::span_shift(class) - span::MIN_SPAN_SHIFT) as usize
}

fn lock(class: usize) -> MutexGuard<'static, Spans> {
    // Nothing panics while a class is locked, so it is never poisoned; if it were, its
    // state would still be whole.
    CENTRAL[class]
        .spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Every class's lock, held across a `fork` (see `fork`).
pub(crate) struct Locked {
    _guards: [Option<MutexGuard<'static, Spans>>; SPAN_CLASSES],
}

/// Takes every span class's lock, in class order (page classes have none). No thread holds
/// two class locks (the source never allocates), and a class lock is taken before a span
/// pool's (`take`), never after.
pub(crate) fn lock_all() -> Locked {
    let mut held = [const { None }; SPAN_CLASSES];
    for (class, guard) in held.iter_mut().enumerate() {
        *guard = Some(lock(class));
    }
    Locked { _guards: held }
}

/// Fills `blocks` with blocks of `class`; returns how many (fewer when the system
/// refuses a new chunk).
fn take(class: usize, blocks: &mut [usize]) -> usize {
    if classes::is_page_class(class) {
        return pages::take(class, blocks);
    }
    let size = classes::class_size(class);
    let capacity = free_blocks::node_capacity(size);
    let kind = span_kind(class);
    let mut spans = lock(class);
    let mut n = 0;
    while n < blocks.len() {
        let span = match NonNull::new(spans.head) {
            Some(span) => span,
            None => {
                let Some(span) = span::take(kind) else {
                    break;
                };
                // SAFETY: a span fresh from the pool is ours alone; it enters our list
                // under our lock.
                unsafe {
                    let fresh = &mut *span.as_ptr();
                    fresh.capacity = (span::span_size(kind) / size) as u32;
                    fresh.carved = 0;
                    fresh.out = 0;
                    fresh.free = 0;
                    // Before any of its blocks is handed out: a free by address finds
                    // the class there.
                    pagemap::mark_span(fresh.start, span::span_size(kind), Some(class));
                    link(&mut spans, fresh);
                }
                CENTRAL[class].held.fetch_add(1, Ordering::Relaxed);
                span
            }
        };
        // SAFETY: spans in our list are ours under the lock we hold.
        let span = unsafe { &mut *span.as_ptr() };
        let before = n;
        while n < blocks.len() {
            let block = if span.free != 0 {
                // SAFETY: the span's stack of given-back blocks of `size` bytes (built by
                // `give`), not empty, ours under the lock.
                unsafe { free_blocks::pop(&mut span.free, capacity) }
            } else if span.carved < span.capacity {
                let index = span.carved as usize;
                span.carved += if cfg!(magazine_mutant = "bump_repeats_last") {
                    // MUTANT: the bump index stays on the last block of a span, which is
                    // then handed out twice.
                    u32::from(span.carved + 1 < span.capacity)
                } else {
                    1
                };
                span.start + index * size
            } else {
                break;
            };
            blocks[n] = block;
            n += 1;
        }
        span.out = span.out.wrapping_add((n - before) as u32);
        if span.free == 0 && span.carved == span.capacity {
            // SAFETY: as above.
            unsafe { unlink(&mut spans, span) };
        }
    }
    CENTRAL[class].out.fetch_add(n, Ordering::Relaxed);
    n
}

/// Takes `blocks` of `class` back; spans whose blocks are all back go to `span::give_back`
/// once the class's lock is released.
///
/// # Safety
///
/// Each block was handed out by [`take`] (or by `reserve::alloc`) for `class` and is
/// given back once.
unsafe fn give(class: usize, blocks: &[usize]) {
    if classes::is_page_class(class) {
        // SAFETY: the caller's contract: blocks `pages::take` handed out for `class`.
        return unsafe { pages::give(class, blocks) };
    }
    let capacity = free_blocks::node_capacity(classes::class_size(class));
    let mut empty: *mut Span = ptr::null_mut();
    let mut reserved = 0;
    {
        let mut spans = lock(class);
        for &block in blocks {
            if reserve::contains(block) {
                // SAFETY: a block of `class` from the reserve (the caller's contract).
                unsafe { reserve::free(class, block) };
                reserved += 1;
                continue;
            }
            // SAFETY: the caller's contract: a block of ours, so its span is in our hands
            // and ours to touch under our lock; the block is free, so ours to write, and
            // of the class's size, as the span's other given-back blocks.
            unsafe {
                let span = &mut *span::span_of(block);
                free_blocks::push(&mut span.free, block, capacity);
                // Wrapping: a double free must not panic here (a panic in the allocator
                // aborts); it leaves the span held for good instead.
                span.out = span.out.wrapping_sub(1);
                if span.out == 0 && !cfg!(magazine_mutant = "spans_never_return") {
                    if span.listed {
                        unlink(&mut spans, span);
                    }
                    span.next = empty;
                    empty = span;
                } else if !span.listed {
                    // A span that had nothing left: the most used spans are served first,
                    // so that the least used ones may empty.
                    link(&mut spans, span);
                }
            }
        }
    }
    let central = &CENTRAL[class];
    central
        .out
        .fetch_sub(blocks.len() - reserved, Ordering::Relaxed);
    let kind = span_kind(class);
    while let Some(span) = NonNull::new(empty) {
        // SAFETY: the span left our list above; nobody else refers to it.
        empty = unsafe { span.as_ref().next };
        central.held.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: all its blocks are back and it is in no list.
        unsafe { span::give_back(kind, span) };
    }
}

/// Links `span` at the head of the list.
///
/// # Safety
///
/// `span` is in no list, ours under the lock that guards `spans`.
unsafe fn link(spans: &mut Spans, span: &mut Span) {
    span.prev = ptr::null_mut();
    span.next = spans.head;
    if let Some(head) = NonNull::new(spans.head) {
        // SAFETY: the head is in the list, ours under the same lock.
        unsafe { (*head.as_ptr()).prev = span };
    }
    spans.head = span;
    span.listed = true;
}

/// Unlinks `span` from the list.
///
/// # Safety
///
/// `span` is in the list, ours under the lock that guards `spans`.
unsafe fn unlink(spans: &mut Spans, span: &mut Span) {
    // SAFETY: its neighbours are in the list too.
    unsafe {
        match NonNull::new(span.prev) {
            Some(prev) => (*prev.as_ptr()).next = span.next,
            None => spans.head = span.next,
        }
        if let Some(next) = NonNull::new(span.next) {
            (*next.as_ptr()).prev = span.prev;
        }
    }
    span.next = ptr::null_mut();
    span.prev = ptr::null_mut();
    span.listed = false;
}

/// A class's span and block counts, for statistics (a page class holds no span).
pub(crate) fn counts(class: usize) -> (usize, usize) {
    if classes::is_page_class(class) {
        return (0, pages::out(class));
    }
    let central = &CENTRAL[class];
    (
        central.held.load(Ordering::Relaxed),
        central.out.load(Ordering::Relaxed),
    )
}
