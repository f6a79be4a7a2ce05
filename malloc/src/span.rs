//! Spans and the chunks they live in: where class blocks come from, and how their memory
//! goes back to the system.
//!
//! A *chunk* is 4 MiB of address space mapped 4 MiB-aligned, cut into spans of one size
//! (64, 128 or 256 KiB: a chunk serves one span size, the *kind*). Its first span holds
//! the chunk's header instead of blocks: the span size and a descriptor per span. So the
//! descriptor of any block's span is found from the block's address alone, by masking
//! (the chunk) and shifting (the span's index), with no table and no lock.
//!
//! A span belongs to one class at a time (`source`). When all its blocks are back in the
//! class's free list (after the cache trims or flushes), the class gives it back here, to
//! the free spans of its kind, shared by every class of that span size. Its pages stay
//! resident until it has been free through a whole trim interval ([`decay`], run by every
//! trim): a span taken again before then costs no page faults, and no zeroing of its
//! pages by the kernel. After that they go to the system (`madvise(MADV_DONTNEED)`).
//! Chunks are never unmapped; their spans' pages are resident only while a class uses
//! them and for an interval or two after.

use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::classes;
use crate::os;
use crate::pagemap::{self, Mapping};

/// The log2 of a chunk's size.
const CHUNK_SHIFT: u32 = 22;
/// A chunk's size and alignment: 4 MiB.
pub(crate) const CHUNK: usize = 1 << CHUNK_SHIFT;
/// The log2 of the smallest span size (64 KiB); kind `k` has spans of `64 KiB << k`.
pub(crate) const MIN_SPAN_SHIFT: u32 = 16;
/// Span sizes: 64, 128 and 256 KiB.
pub(crate) const KINDS: usize = 3;
/// The most spans a chunk has (of the smallest size), header span included.
const MAX_SPANS: usize = CHUNK >> MIN_SPAN_SHIFT;

/// A span's descriptor, in its chunk's header.
///
/// Ownership: a span is either in a class's hands (its fields are read and written under
/// that class's lock, `source::Central`), or free (in its kind's [`Pool`], under that
/// pool's lock), or in passage between the two, held by one thread.
#[repr(C)]
pub(crate) struct Span {
    /// The next span in a list: the class's list of spans with blocks to hand out, or the
    /// pool's free list, or a list of spans on their way back.
    pub(crate) next: *mut Span,
    /// The previous span in the class's list.
    pub(crate) prev: *mut Span,
    /// The top node of the blocks given back to the class (`free_blocks`); 0 for none.
    pub(crate) free: usize,
    /// The address of the span's first block.
    pub(crate) start: usize,
    /// Blocks the span holds.
    pub(crate) capacity: u32,
    /// Blocks carved so far (the bump index): blocks at `carved..capacity` were never
    /// handed out, and their pages never touched.
    pub(crate) carved: u32,
    /// Blocks out of the class's hands: in a magazine or with a caller.
    pub(crate) out: u32,
    /// Whether the span is in its class's list.
    pub(crate) listed: bool,
}

/// The first bytes of a chunk.
#[repr(C)]
struct Header {
    /// The log2 of the chunk's span size.
    shift: u32,
    /// A descriptor per span; the first one (the header's own span) is unused.
    spans: [Span; MAX_SPANS],
}

// The header must fit in its span.
const _: () = assert!(core::mem::size_of::<Header>() <= 1 << MIN_SPAN_SHIFT);

/// The free spans of one kind and the chunk being carved. The pointers name descriptors
/// in chunk headers, which are never unmapped. Free spans are in one of three lists,
/// linked by `next`, by how long they have been free: a span enters `fresh`, moves to
/// `aged` at the next trim and goes to the system at the one after ([`decay`]).
struct Pool {
    /// Spans freed since the last trim, their pages resident.
    fresh: *mut Span,
    /// Spans free since before the last trim, their pages resident.
    aged: *mut Span,
    /// Spans whose pages went back to the system.
    free: *mut Span,
    /// The chunk whose spans are handed out in order, or 0.
    chunk: usize,
    /// The next span of `chunk` never handed out.
    next: usize,
}

// SAFETY: the descriptors a pool names are in chunk headers, mapped for the life of the
// process, and are only touched under the pool's lock while in it.
unsafe impl Send for Pool {}

static POOLS: [Mutex<Pool>; KINDS] = [const {
    Mutex::new(Pool {
        fresh: ptr::null_mut(),
        aged: ptr::null_mut(),
        free: ptr::null_mut(),
        chunk: 0,
        next: 0,
    })
}; KINDS];

/// Chunks mapped so far (they stay mapped).
static CHUNKS: AtomicUsize = AtomicUsize::new(0);
/// Spans in classes' hands now.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// Spans in the pools' free lists now (resident or not).
static FREE: AtomicUsize = AtomicUsize::new(0);
/// Free spans whose pages are still resident now (`fresh` and `aged`).
static RESIDENT_FREE: AtomicUsize = AtomicUsize::new(0);
/// Spans given back to the system so far.
static RETURNED: AtomicUsize = AtomicUsize::new(0);

fn lock(kind: usize) -> MutexGuard<'static, Pool> {
    // Nothing panics while a pool is locked, so it is never poisoned; if it were, its
    // state would still be whole.
    POOLS[kind].lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every pool's lock, held across a `fork` (see `fork`).
pub(crate) struct Locked {
    _guards: [Option<MutexGuard<'static, Pool>>; KINDS],
}

/// Takes every pool's lock, in kind order; after the class locks (a class lock is held
/// while a pool's is taken, never the other way). No thread holds two pool locks.
pub(crate) fn lock_all() -> Locked {
    let mut held = [const { None }; KINDS];
    for (kind, guard) in held.iter_mut().enumerate() {
        *guard = Some(lock(kind));
    }
    Locked { _guards: held }
}

/// The span size of `kind`.
pub(crate) const fn span_size(kind: usize) -> usize {
    1 << (MIN_SPAN_SHIFT as usize + kind)
}

/// Pops the first span of a pool's list.
///
/// # Safety
///
/// The caller holds the list's pool lock; the list links free descriptors.
unsafe fn pop(list: &mut *mut Span) -> Option<NonNull<Span>> {
    let span = NonNull::new(*list)?;
    // SAFETY: the caller's contract: a free descriptor, ours under the lock.
    *list = unsafe { span.as_ref().next };
    Some(span)
}

/// A span of `kind` for a class: a free one (the most recently freed first, whose pages
/// are most likely resident and in the processor's caches), else the next one of the
/// chunk being carved, else the first of a new chunk; `None` when the system refuses the
/// memory. The caller sets the span up (every field but `start` holds whatever it held
/// last; a reused span's blocks hold whatever they held).
pub(crate) fn take(kind: usize) -> Option<NonNull<Span>> {
    let mut pool = lock(kind);
    let pool = &mut *pool;
    // SAFETY: we hold the pool's lock, and its lists link free descriptors.
    let resident = unsafe { pop(&mut pool.fresh).or_else(|| pop(&mut pool.aged)) };
    if resident.is_some() {
        RESIDENT_FREE.fetch_sub(1, Ordering::Relaxed);
    }
    // SAFETY: as above.
    let span = if let Some(span) = resident.or_else(|| unsafe { pop(&mut pool.free) }) {
        FREE.fetch_sub(1, Ordering::Relaxed);
        span
    } else {
        let shift = MIN_SPAN_SHIFT + kind as u32;
        let spans = CHUNK >> shift;
        if pool.chunk == 0 || pool.next == spans {
            let chunk = os::map_aligned(CHUNK, CHUNK)?;
            // SAFETY: a fresh mapping of `CHUNK` bytes, zeroed, aligned for `Header`: a
            // zeroed descriptor is a valid one (null links, no blocks).
            unsafe { ptr::addr_of_mut!((*(chunk as *mut Header)).shift).write(shift) };
            // The chunk's leaf in the map exists from here on: its spans' entries
            // (`pagemap::mark_span`) cannot fail.
            if !pagemap::insert(chunk, Mapping::Chunk) {
                // SAFETY: our fresh mapping, which nobody else knows of.
                unsafe { os::unmap(chunk, CHUNK) };
                return None;
            }
            CHUNKS.fetch_add(1, Ordering::Relaxed);
            pool.chunk = chunk;
            pool.next = 1;
        }
        let index = pool.next;
        pool.next += 1;
        // SAFETY: `index` is below the chunk's span count; the descriptor was never
        // handed out, so nobody else refers to it.
        unsafe {
            let span = ptr::addr_of_mut!((*(pool.chunk as *mut Header)).spans[index]);
            (*span).start = pool.chunk + (index << shift);
            NonNull::new_unchecked(span)
        }
    };
    HELD.fetch_add(1, Ordering::Relaxed);
    Some(span)
}

/// Gives back a span whose blocks are all back: its descriptor to its kind's `fresh`
/// list, its pages still resident (see [`decay`]).
///
/// # Safety
///
/// `span` came from [`take`] for `kind`, is in no list, and nobody uses its blocks.
pub(crate) unsafe fn give_back(kind: usize, span: NonNull<Span>) {
    // SAFETY: the caller's contract: the span is ours alone.
    pagemap::mark_span(unsafe { span.as_ref().start }, span_size(kind), None);
    let mut pool = lock(kind);
    // SAFETY: as above; the descriptor enters the list under its lock.
    unsafe { (*span.as_ptr()).next = pool.fresh };
    pool.fresh = span.as_ptr();
    FREE.fetch_add(1, Ordering::Relaxed);
    RESIDENT_FREE.fetch_add(1, Ordering::Relaxed);
    HELD.fetch_sub(1, Ordering::Relaxed);
}

/// The trims' part: gives the pages of every span that has been free since before the
/// previous call back to the system, and ages the spans freed since. So a span freed
/// between two trims is resident until the second trim after it, at most two trim
/// intervals: long enough that a program which frees and allocates in waves takes its
/// spans back without page faults, short enough that memory a program stopped using goes
/// back as its blocks do (the caches' working set, `magazine::Trim::WorkingSet`, counts
/// trims the same way).
pub(crate) fn decay() {
    if cfg!(magazine_mutant = "free_spans_kept_for_ever") {
        // MUTANT: no free span's pages go back to the system.
        return;
    }
    for kind in 0..KINDS {
        let aged = {
            let mut pool = lock(kind);
            let aged = std::mem::replace(&mut pool.aged, ptr::null_mut());
            pool.aged = std::mem::replace(&mut pool.fresh, ptr::null_mut());
            aged
        };
        // Outside the lock: system calls. The spans are ours meanwhile (in no list).
        let (mut first, mut last, mut count) = (aged, ptr::null_mut::<Span>(), 0);
        while let Some(span) = NonNull::new(first) {
            // SAFETY: a free descriptor that we took out of its list; its pages are
            // nobody's. If `madvise` fails they stay resident until the span's reuse.
            unsafe {
                if os::discard(span.as_ref().start, span_size(kind)) {
                    RETURNED.fetch_add(1, Ordering::Relaxed);
                }
                last = span.as_ptr();
                first = span.as_ref().next;
            }
            count += 1;
        }
        if count == 0 {
            continue;
        }
        RESIDENT_FREE.fetch_sub(count, Ordering::Relaxed);
        let mut pool = lock(kind);
        // SAFETY: `last` ends the list we took out, whose descriptors are ours; they
        // enter the list of spans given back under its lock.
        unsafe { (*last).next = pool.free };
        pool.free = aged;
    }
}

/// The descriptor of the span that holds `block`.
///
/// # Safety
///
/// `block` must be a block of a span handed out by [`take`] (a class block). The
/// descriptor may only be touched under the lock of the class that holds the span.
#[inline]
pub(crate) unsafe fn span_of(block: usize) -> *mut Span {
    let chunk = block & !(CHUNK - 1);
    let header = chunk as *mut Header;
    // SAFETY: the caller's contract: `block` is in a chunk, whose header is mapped and
    // whose `shift` was written before any of its spans was handed out (under the pool's
    // lock, which the class's taking of the span acquired after).
    unsafe {
        let shift = ptr::addr_of!((*header).shift).read();
        ptr::addr_of_mut!((*header).spans[(block - chunk) >> shift])
    }
}

/// The span class of `block` when it is the start of a block in a span that a class
/// holds; `None` for any other address (outside every such span, or between two blocks).
/// A block that was never handed out, or is free again, in a span a class holds is not
/// told apart from a live one. Any address may be passed: nothing is dereferenced.
#[inline]
pub(crate) fn class_of(block: usize) -> Option<usize> {
    let class = pagemap::span_class(block)?;
    // MUTANT: any address in a held span is taken for a block of its class.
    if cfg!(magazine_mutant = "block_offset_unchecked") {
        return Some(class);
    }
    classes::is_block_start(class, block).then_some(class)
}

/// Span and chunk counts for statistics.
pub(crate) struct Counts {
    pub(crate) chunks: usize,
    pub(crate) held: usize,
    pub(crate) free: usize,
    pub(crate) resident_free: usize,
    pub(crate) returned: usize,
}

pub(crate) fn counts() -> Counts {
    Counts {
        chunks: CHUNKS.load(Ordering::Relaxed),
        held: HELD.load(Ordering::Relaxed),
        free: FREE.load(Ordering::Relaxed),
        resident_free: RESIDENT_FREE.load(Ordering::Relaxed),
        returned: RETURNED.load(Ordering::Relaxed),
    }
}
