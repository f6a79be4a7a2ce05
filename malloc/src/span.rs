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
//! class's free list (after the cache trims or flushes), the class gives it back here: its
//! pages go to the system (`madvise(MADV_DONTNEED)`), its descriptor onto the free list
//! of its kind, shared by every class of that span size. Chunks are never unmapped; their
//! spans' pages are resident only while a class uses them.

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
    /// The first of the blocks given back to the class, each holding the next one's
    /// address in its first word; 0 for none.
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
/// in chunk headers, which are never unmapped.
struct Pool {
    /// Free spans (their pages discarded), linked by `next`.
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
        free: ptr::null_mut(),
        chunk: 0,
        next: 0,
    })
}; KINDS];

/// Chunks mapped so far (they stay mapped).
static CHUNKS: AtomicUsize = AtomicUsize::new(0);
/// Spans in classes' hands now.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// Spans in the pools' free lists now.
static FREE: AtomicUsize = AtomicUsize::new(0);
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

/// A span of `kind` for a class: a free one, else the next one of the chunk being carved,
/// else the first of a new chunk; `None` when the system refuses the memory. The caller
/// sets the span up (every field but `start` holds whatever it held last).
pub(crate) fn take(kind: usize) -> Option<NonNull<Span>> {
    let mut pool = lock(kind);
    let span = if let Some(span) = NonNull::new(pool.free) {
        // SAFETY: `span` is a descriptor in a chunk header, free, so ours under the lock.
        pool.free = unsafe { span.as_ref().next };
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

/// Gives back a span whose blocks are all back: its pages to the system, its descriptor
/// to its kind's free list.
///
/// # Safety
///
/// `span` came from [`take`] for `kind`, is in no list, and nobody uses its blocks.
pub(crate) unsafe fn give_back(kind: usize, span: NonNull<Span>) {
    // SAFETY: the caller's contract: the span and its memory are ours alone. Outside the
    // lock: a system call. If `madvise` fails the pages just stay resident until reuse.
    let returned = unsafe { os::discard(span.as_ref().start, span_size(kind)) };
    if returned {
        RETURNED.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: as above.
    pagemap::mark_span(unsafe { span.as_ref().start }, span_size(kind), None);
    let mut pool = lock(kind);
    // SAFETY: as above; the descriptor enters the list under its lock.
    unsafe { (*span.as_ptr()).next = pool.free };
    pool.free = span.as_ptr();
    FREE.fetch_add(1, Ordering::Relaxed);
    HELD.fetch_sub(1, Ordering::Relaxed);
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
    // Spans are aligned to their size (chunks are, and spans are cut at multiples of it).
    let span = 1usize << classes::span_shift(class);
    let offset = block & (span - 1);
    // MUTANT: any address in a held span is taken for a block of its class.
    if cfg!(magazine_mutant = "block_offset_unchecked") {
        return Some(class);
    }
    let fits = offset + classes::class_size(class) <= span;
    (fits && classes::is_block_offset(class, offset)).then_some(class)
}

/// Span and chunk counts for statistics.
pub(crate) struct Counts {
    pub(crate) chunks: usize,
    pub(crate) held: usize,
    pub(crate) free: usize,
    pub(crate) returned: usize,
}

pub(crate) fn counts() -> Counts {
    Counts {
        chunks: CHUNKS.load(Ordering::Relaxed),
        held: HELD.load(Ordering::Relaxed),
        free: FREE.load(Ordering::Relaxed),
        returned: RETURNED.load(Ordering::Relaxed),
    }
}
