//! Where each call goes, and the re-entrancy rule that makes it safe for the class caches
//! to allocate through the allocator they serve.
//!
//! | call | thread outside the allocator | thread inside, or exiting |
//! |---|---|---|
//! | `alloc`, class-sized | the class's cache | the class's source, past its cache; for a span class, the reserve when the system refuses a chunk |
//! | `alloc`, large | a kept mapping, else its own | a kept mapping, else its own |
//! | `dealloc`, class-sized | the class's cache | the class's source (or the reserve), past its cache |
//! | `dealloc`, large | kept, or unmapped | kept, or unmapped |
//!
//! A call first tries its class cache's hit alone (`HitPath::alloc_if_hit`, `free_if_hit`
//! from the class's entry in `caches`: a restartable sequence on the CPU's loaded
//! magazine, which never allocates, locks or pins), whatever the thread's state; only a
//! miss reads the state and takes the table's routes, in functions of their own
//! (`alloc_miss`, `dealloc_miss`), so that the hit's path saves no register for them. A thread is *inside* while it runs a class cache's code past
//! that hit (an allocation, a free, a trim, the statistics, a cache's creation), and
//! *exiting* once its exit marker's destructor ran. The caches allocate their own metadata
//! (magazines, depot nodes, crossbeam-epoch's per-thread records and garbage bags) through
//! the global allocator; inside, those allocations go straight to the class's source (its
//! central free list, under its lock for the call only), which never calls a cache or
//! allocates, so no chain of calls is longer than two. When the system refuses the source a
//! chunk, they come from the static reserve (`reserve`): crossbeam-epoch aborts on a null.
//! Metadata blocks are otherwise ordinary blocks of their class: when the caches free them
//! (a trim drops the magazines it emptied) their spans go back to the system like any
//! other. The state is a `const`-initialised thread-local `Cell` without a destructor:
//! readable during thread exit.
//!
//! A thread's first call past the hits registers its epoch participant in the `magazine`
//! crate's collector (`magazine::register_thread`), then its exit marker: thread-local
//! destructors run in the reverse order of their registration, so the marker's runs
//! first, and the participant's release (crossbeam-epoch moves the thread's garbage to a
//! global queue node, an allocation) is made while exiting, like every allocation of the
//! destructors that run after it.
//!
//! The epoch frees the crate's garbage later, from any thread and whatever the state
//! says: a metadata block freed from outside goes into its class's cache like any block
//! (it is one). A class block freed while inside (a depot node retired by a trim) goes
//! straight to its source instead of re-entering a cache from inside one.

use std::alloc::Layout;
use std::cell::Cell;
use std::ptr;
use std::sync::MutexGuard;

use crate::classes::{self, CLASSES};
use crate::pagemap::{self, Mapping};
use crate::stats::{ClassStats, MallocStats};
use crate::{auto_trim, caches, fork, large, os, pages, reserve, source, span};

/// Where a thread stands (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// It never allocated: registered at its first allocation.
    New,
    Outside,
    /// It runs a class cache's code.
    Inside,
    /// Its thread-local destructors run: what they allocate or free goes straight to the
    /// sources, as inside (its epoch participant is released among them).
    Exiting,
}

thread_local! {
    /// Where the thread stands. `const`, no destructor: readable during thread exit.
    static STATE: Cell<State> = const { Cell::new(State::New) };
    /// Registered at the thread's first allocation, after the crate's epoch participant:
    /// destructors run in the reverse order of their registration, so this one runs
    /// before the participant's and marks the thread exiting.
    static EXIT: ExitMarker = const { ExitMarker };
}

struct ExitMarker;

impl Drop for ExitMarker {
    fn drop(&mut self) {
        let _ = STATE.try_with(|state| state.set(State::Exiting));
    }
}

/// The thread marked inside the allocator; marked outside again when dropped.
struct Inside(());

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        let _ = STATE.try_with(|state| state.set(State::Outside));
    }
}

/// Marks the thread inside the allocator; `None` when it already was, or is exiting (or,
/// which a `const` thread-local without destructor never is, when its state cannot be
/// read: then it is treated as inside, the path that never re-enters a cache).
#[inline]
fn enter() -> Option<Inside> {
    let was = STATE
        .try_with(|state| {
            let was = state.get();
            if was == State::Outside {
                state.set(State::Inside);
            }
            was
        })
        .unwrap_or(State::Exiting);
    // Not `then_some`: a guard built for nothing would mark the thread outside when dropped.
    match was {
        State::Outside => Some(Inside(())),
        State::New => first_entry(),
        State::Inside | State::Exiting => None,
    }
}

/// A thread's first call past the hits: registers its epoch participant, then the
/// destructor that marks it exiting (see [`EXIT`]); what they allocate comes from the
/// sources.
#[cold]
#[inline(never)]
fn first_entry() -> Option<Inside> {
    let _ = STATE.try_with(|state| state.set(State::Inside));
    magazine::register_thread();
    if !cfg!(magazine_mutant = "no_exit_marker") {
        let _ = EXIT.try_with(|_| ());
    }
    Some(Inside(()))
}

/// Registers the calling thread now if it never went past the hits (see [`first_entry`]).
pub(crate) fn register_thread() {
    drop(enter());
}

/// A block of `class` for the caches' own use (the thread is inside): from the class's
/// source, else, when the system refuses it a chunk, from the reserve.
pub(crate) fn alloc_metadata(class: usize) -> *mut u8 {
    let block = source::alloc_one(class);
    if !block.is_null() || cfg!(magazine_mutant = "no_reserve") {
        return block;
    }
    reserve::alloc(class)
}

#[inline(always)]
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    let Some(class) = classes::lookup(layout.size(), layout.align()) else {
        return alloc_large(layout);
    };
    // A hit first, whatever the thread's state: it neither allocates nor calls anything.
    if let Some(block) = caches::hits(class).and_then(|hits| hits.alloc_if_hit()) {
        return block as *mut u8;
    }
    alloc_miss(class)
}

/// An allocation of `class` past the hit. Never inlined: the hit's path then saves no
/// register for it.
#[inline(never)]
fn alloc_miss(class: usize) -> *mut u8 {
    match enter() {
        Some(inside) => {
            let block = match caches::get(class) {
                Some(cache) => cache
                    .alloc()
                    .map_or(ptr::null_mut(), |block| block as *mut u8),
                // MUTANT: no block while another thread builds the cache.
                None if cfg!(magazine_mutant = "null_while_building") => ptr::null_mut(),
                // Another thread builds the cache, or the system refused the memory.
                None => source::alloc_one(class),
            };
            drop(inside);
            // Outside again, no lock held: where an automatic trim may run.
            auto_trim::run_if_due();
            block
        }
        None => alloc_metadata(class),
    }
}

/// An allocation for the large path (a mapping of its own), out of the hit's line.
#[inline(never)]
fn alloc_large(layout: Layout) -> *mut u8 {
    let block = large::alloc(layout);
    trim_if_due();
    block
}

#[inline]
pub(crate) fn alloc_zeroed(layout: Layout) -> *mut u8 {
    if classes::lookup(layout.size(), layout.align()).is_none() {
        return large::alloc_zeroed(layout); // a fresh mapping reads as zeroes
    }
    let block = alloc(layout);
    if !block.is_null() {
        // SAFETY: a block of at least `layout.size()` bytes, ours.
        unsafe { ptr::write_bytes(block, 0, layout.size()) };
    }
    block
}

/// # Safety
///
/// `GlobalAlloc::dealloc`'s contract.
#[inline]
pub(crate) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    match classes::lookup(layout.size(), layout.align()) {
        // SAFETY: the caller's contract: a block of `class` that the caller gives up.
        Some(class) => unsafe { dealloc_class(class, ptr) },
        None => {
            // SAFETY: large by its layout: one of our mappings.
            unsafe { large::dealloc(ptr, layout) };
            trim_if_due();
        }
    }
}

/// Frees a block of `class`.
///
/// # Safety
///
/// `ptr` is a block of `class`, allocated here, that its owner gives up.
#[inline(always)]
unsafe fn dealloc_class(class: usize, ptr: *mut u8) {
    // A hit first, whatever the thread's state, as in `alloc`.
    let Err(ptr) =
        caches::hits(class).map_or(Err(ptr as usize), |hits| hits.free_if_hit(ptr as usize))
    else {
        return;
    };
    // SAFETY: the caller's contract.
    unsafe { dealloc_miss(class, ptr as *mut u8) }
}

/// A free of `class` past the hit; never inlined, as [`alloc_miss`].
///
/// # Safety
///
/// As [`dealloc_class`].
#[inline(never)]
unsafe fn dealloc_miss(class: usize, ptr: *mut u8) {
    let inside = match enter() {
        Some(inside) => inside,
        None => {
            // SAFETY: a block of `class` that the caller gives up.
            return unsafe { source::free_one(class, ptr as usize) };
        }
    };
    match caches::existing(class) {
        Some(cache) => cache.free(ptr as usize),
        None => {
            // SAFETY: a block of `class` that the source handed out while another thread
            // built the cache (or the cache's memory was refused); it takes it back.
            unsafe { source::free_one(class, ptr as usize) }
        }
    }
    drop(inside);
    // Outside again, no lock held: where an automatic trim may run.
    auto_trim::run_if_due();
}

/// Runs a due automatic trim if the thread is outside the allocator (for the paths that
/// do not mark it: the large blocks').
#[inline]
fn trim_if_due() {
    if auto_trim::is_due() {
        trim_if_outside();
    }
}

#[cold]
#[inline(never)]
fn trim_if_outside() {
    if let Some(inside) = enter() {
        drop(inside);
        auto_trim::run();
    }
}

/// A block as found from its address alone.
#[derive(Clone, Copy)]
enum Block {
    /// A block of this class (a span class, from a span or the reserve, or a page class).
    Class(usize),
    /// A large block: a mapping of this many bytes.
    Large(usize),
}

/// What starts at `addr`, if it is the start of a block of ours: from the map's entry
/// (`pagemap`) of its 64 KiB for a span class, the reserve's books, or the map's entry of
/// its first page for the blocks that are mappings of their own. Never dereferences
/// `addr`.
#[inline]
fn block_at(addr: usize) -> Option<Block> {
    if let Some(class) = span::class_of(addr) {
        return Some(Block::Class(class));
    }
    if reserve::contains(addr) {
        return reserve::class_of(addr).map(Block::Class);
    }
    if addr & (os::page_size() - 1) != 0 {
        return None;
    }
    match pagemap::get(addr)? {
        Mapping::PageClass(class) => Some(Block::Class(class)),
        Mapping::Large(len) => Some(Block::Large(len)),
        // A chunk's header, or inside a span (its blocks were looked up above).
        Mapping::Chunk | Mapping::SpanClass(_) => None,
    }
}

/// The usable size of the block at `ptr`, `None` when no block of ours starts there.
#[inline]
pub(crate) fn usable_size(ptr: *const u8) -> Option<usize> {
    match block_at(ptr as usize)? {
        Block::Class(class) => Some(classes::class_size(class)),
        Block::Large(len) => Some(len),
    }
}

/// Frees the block at `ptr` found from its address; false (nothing done) when no block of
/// ours starts there.
///
/// # Safety
///
/// If a block of ours starts at `ptr`, it is live and its owner gives it up.
#[inline(always)]
pub(crate) unsafe fn free(ptr: *mut u8) -> bool {
    // A block of a span class first (most blocks), with nothing else on the hit's path.
    if let Some(class) = span::class_of(ptr as usize) {
        // SAFETY: the caller's contract: a live block of `class`, given up.
        unsafe { dealloc_class(class, ptr) };
        return true;
    }
    // SAFETY: the caller's contract.
    unsafe { free_other(ptr) }
}

/// [`free`] of a block that is not in a span class's span (or of an address that is no
/// block of ours).
///
/// # Safety
///
/// As [`free`].
#[inline(never)]
unsafe fn free_other(ptr: *mut u8) -> bool {
    let Some(block) = block_at(ptr as usize) else {
        return false;
    };
    // SAFETY: the caller's contract: a live block of ours, given up.
    unsafe { free_block(block, ptr) };
    true
}

/// Frees `block`, found at `ptr`.
///
/// # Safety
///
/// `block` is what [`block_at`] found at `ptr`, a live block given up by its owner.
unsafe fn free_block(block: Block, ptr: *mut u8) {
    match block {
        // SAFETY: the caller's contract: a live block of `class`, given up.
        Block::Class(class) => unsafe { dealloc_class(class, ptr) },
        Block::Large(len) => {
            // SAFETY: as above: a whole large mapping of ours, described as it was
            // recorded.
            unsafe { large::dealloc(ptr, large::page_aligned(len)) };
            trim_if_due();
        }
    }
}

/// Resizes the block at `ptr` found from its address to `new` (its alignment is the new
/// block's, the old one's is not kept): in place when `new` is served by the block's
/// class, by `mremap` for a large block that stays large, else by a copy. `Ok(null)`
/// (the block untouched) when the system refuses memory; `Err` (nothing done) when no
/// block of ours starts at `ptr`.
///
/// # Safety
///
/// If a block of ours starts at `ptr`, it is live and its owner gives it up when the
/// result is not null.
pub(crate) unsafe fn resize(ptr: *mut u8, new: Layout) -> Result<*mut u8, ()> {
    let block = block_at(ptr as usize).ok_or(())?;
    let to = classes::lookup(new.size(), new.align());
    let old_size = match block {
        Block::Class(class) if to == Some(class) => return Ok(ptr),
        Block::Large(len) if to.is_none() && new.align() <= os::page_size() => {
            // SAFETY: a whole large mapping of ours, aligned to a page; `large::realloc`
            // does not panic, and on failure returns null with the block untouched.
            return Ok(unsafe { large::realloc(ptr, large::page_aligned(len), new.size()) });
        }
        Block::Class(class) => classes::class_size(class),
        Block::Large(len) => len,
    };
    let moved = alloc(new);
    if !moved.is_null() {
        // SAFETY: two distinct live blocks, each of at least the length copied; the old
        // one is ours to free (the caller's contract), as found above (no second lookup).
        unsafe {
            ptr::copy_nonoverlapping(ptr, moved, old_size.min(new.size()));
            free_block(block, ptr);
        }
    }
    Ok(moved)
}

/// # Safety
///
/// `GlobalAlloc::realloc`'s contract.
pub(crate) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: `realloc`'s contract: `new_size` is not 0 and, rounded up to the
    // alignment, does not overflow `isize`.
    let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
    let old_class = classes::lookup(layout.size(), layout.align());
    match (old_class, classes::lookup(new_size, layout.align())) {
        // In place only within its class: freed with the new layout, a block kept in a
        // smaller class would go back to that class's books, which never handed it out.
        (Some(from), Some(to))
            if from == to
                // MUTANT: a block that shrinks into a smaller class stays in place.
                || (cfg!(magazine_mutant = "realloc_shrinks_in_place") && from > to) =>
        {
            return ptr
        }
        // `mremap` keeps a page's alignment, no more: a block aligned beyond moves by copy.
        (None, None)
            if layout.align() <= os::page_size()
                // MUTANT: a block aligned beyond a page goes through `mremap` too.
                || cfg!(magazine_mutant = "large_realloc_ignores_alignment") =>
        {
            // SAFETY: a large block of ours with `layout`, aligned to a page at most (the
            // mutant breaks exactly this). `large::realloc` does not panic; on failure it
            // returns null with the old block untouched.
            return unsafe { large::realloc(ptr, layout, new_size) };
        }
        _ => {}
    }
    let moved = alloc(new);
    if !moved.is_null() {
        // SAFETY: two distinct live blocks, each of at least the length copied; the old
        // one is ours to free (the caller's contract).
        unsafe {
            ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
            dealloc(ptr, layout);
        }
    }
    moved
}

pub(crate) fn trim() {
    // Held first: no cache's trim may be half done at a `fork` (see `fork`).
    trim_holding(&fork::trimming());
}

/// Trims every class cache, the free spans and the kept large mappings; the caller holds
/// the trim lock.
pub(crate) fn trim_holding(_trimming: &MutexGuard<'static, ()>) {
    let _inside = enter();
    for class in 0..CLASSES {
        if let Some(cache) = caches::existing(class) {
            cache.trim();
        }
    }
    span::decay();
    large::trim();
}

pub(crate) use auto_trim::{interval as auto_trim, set_interval as set_auto_trim};

pub(crate) fn stats() -> MallocStats {
    let mut per_class = Vec::with_capacity(CLASSES); // before entering: a class block
    {
        let _inside = enter();
        for class in 0..CLASSES {
            let Some(cache) = caches::existing(class) else {
                continue;
            };
            let (spans, blocks_out) = source::counts(class);
            per_class.push(ClassStats {
                class,
                size: classes::class_size(class),
                magazine_size: classes::magazine_size(class),
                cache: cache.stats(),
                spans,
                blocks_out,
            });
        }
    }
    let spans = span::counts();
    MallocStats {
        classes: per_class,
        spans_held: spans.held,
        spans_free: spans.free,
        spans_free_resident: spans.resident_free,
        spans_returned: spans.returned,
        chunk_bytes: spans.chunks * span::CHUNK,
        page_bytes: pages::mapped(),
        large_bytes: large::mapped(),
        large_kept_bytes: large::kept(),
        metadata_in_use: caches::cache_bytes(),
        reserve_in_use: reserve::in_use(),
        auto_trims: auto_trim::runs(),
    }
}
