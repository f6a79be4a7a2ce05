//! A global allocator built on the [`magazine`] crate: the crate's reference adopter.
//!
//! Every size class has a `magazine::Cache` of block addresses: per-CPU magazines (a hit
//! is a restartable sequence on Linux x86_64, no locked instruction) in front of a
//! lock-free depot, in front of the class's central free list, which carves blocks from
//! spans of mapped memory. Memory goes back to the system when the caches are trimmed.
//!
//! # Use
//!
//! ```no_run
//! use std::time::Duration;
//! use magazine_malloc::MagazineMalloc;
//!
//! # #[cfg(not(magazine_test_malloc))] // the lib declares it under this cfg
//! #[global_allocator]
//! static GLOBAL: MagazineMalloc = MagazineMalloc::new();
//! # #[cfg(magazine_test_malloc)]
//! # static GLOBAL: MagazineMalloc = MagazineMalloc::new();
//!
//! fn main() {
//!     // Optional: give idle memory back every 2 s (the allocator starts no thread).
//!     GLOBAL.spawn_trimmer(Duration::from_secs(2)).expect("a thread");
//!     let v: Vec<u64> = (0..1000).collect();
//!     drop(v);
//!     println!("{}", GLOBAL.stats());
//! }
//! ```
//!
//! Every `MagazineMalloc` value is a handle on the same process-wide heap: `trim` and
//! `stats` on any of them see all of it.
//!
//! # Design
//!
//! **Classes** ([`classes`]). 100 block sizes from 8 B to 1 MiB. The 80 *span classes*,
//! up to 32 KiB, are in tcmalloc's spacing (multiples of 8 to 64, then 8 per doubling): a
//! request of 64 B or more wastes at most 12.5% of its block. The 20 *page classes*, above
//! 32 KiB, have 4 per doubling, and each of their blocks is a mapping of its own, whose
//! tail beyond the request is never touched (so not resident). Three small tables map a
//! size to its class in O(1). An alignment up to 32 KiB is served by the smallest span
//! class that is a multiple of it (blocks sit at multiples of their size from 64 KiB-aligned
//! span starts), up to a page by a page class. Larger or more aligned requests get a
//! mapping of their own (`mmap`, over-mapped and trimmed when aligned beyond a page);
//! freed, one aligned to a page is kept for the next large allocation it holds (8 mappings
//! and 32 MiB at most, the oldest unmapped first; trims unmap them), the others are
//! unmapped. `realloc` moves those aligned to a page at most with `mremap`, and copies the
//! others (`mremap` keeps only a page's alignment). Rust passes the layout to
//! `dealloc`, so blocks carry no header.
//!
//! **Blocks by address.** C's `free` has no size: [`MagazineMalloc::free`],
//! [`resize`](MagazineMalloc::resize) and [`usable_size`](MagazineMalloc::usable_size)
//! find a block from its address alone (the `magazine-malloc-preload` library builds C's
//! `malloc` on them). A table with an entry per 4 KiB of address space (two levels, leaves
//! of 1 GiB mapped on first use) records the first page of each of the allocator's
//! mappings (a chunk, a page-class block with its class, a large block with its length)
//! and, at each 64 KiB of a span that a class holds, the class. A span-class block is
//! found with one lookup at its 64 KiB; its offset in its span (spans are aligned to their
//! size) must be a multiple of the class's size (a multiplication by a reciprocal, no
//! division). Entries change only when the allocator maps or unmaps or a span changes
//! hands, never on a cache hit. An address that
//! starts no block (another heap's, inside a block, a chunk's header) is refused.
//!
//! **Caches.** A class's `magazine::Cache` is created at its first allocation (an atomic
//! pointer per class; of two threads that race, the loser drops its cache), so unused
//! classes cost nothing. Configuration: a slot per CPU the system may bring up
//! (`sysconf(_SC_NPROCESSORS_CONF)`, which restartable sequences need), magazines of
//! `16 KiB / size` items clamped to 4..=64 (page classes: `128 KiB / size`, at least 1;
//! [`classes::magazine_size`]), empty magazines kept until trims, and a
//! `Dynamic { target: 0, trim: WorkingSet }` depot (a trim keeps no full magazine: one kept
//! would hold its blocks' spans resident) of at most 64 full magazines per CPU
//! (`Options::max_full`: the overflow of a burst of frees goes back to the spans, whose
//! free lists hand a span's blocks out together, where the depot's magazines would hand
//! them out in the order they were freed).
//!
//! **Spans.** A class's source hands out blocks carved from spans of 64, 128 or 256 KiB
//! (at least 8 blocks each), which live in 4 MiB-aligned chunks whose first span holds
//! their descriptors, so a block's span is found by masking its address. A fresh span is
//! carved with a bump index (pages nobody used are never touched); given-back blocks form
//! a list per span. The cache refills a whole magazine per source call
//! (`Source::alloc_batch`, one lock hold; the batch is handed in reverse, so that the
//! magazine, last in first out, hands fresh blocks out at rising addresses, the order the
//! hardware prefetchers follow) and gives whole magazines back. When all of a
//! span's blocks are back, the span goes to a free list shared by every class of its size,
//! its pages still resident: a span taken again soon (a program that frees and allocates
//! in waves) costs no page faults. Its pages go to the system (`madvise(MADV_DONTNEED)`)
//! at the second trim after it was freed.
//!
//! **Page classes.** A page class's source maps a block when its cache misses and unmaps
//! it when the cache gives it back (trims); in between the block is cached like any
//! other, pages resident, so a program that frees a 200 KiB buffer and asks for another
//! gets the same pages back with no system call and no page fault.
//!
//! **Re-entrancy.** The caches allocate their own metadata (magazines, depot nodes,
//! crossbeam-epoch's records) through the global allocator, that is, through this one. A
//! `const` thread-local state marks a thread *inside* the allocator while it runs a cache,
//! and from its exit marker on (a thread-local destructor registered at the thread's first
//! call past the hits, after the thread's epoch participant, so that it runs before the
//! participant is released); what the thread allocates then comes straight from the class's
//! source, past the cache (a central free list under a lock held for the call only, which
//! never calls a cache). Metadata blocks are ordinary blocks of their class, so memory the
//! caches used for magazines goes back to the system with its spans once trims free those
//! magazines. The sources never allocate. The class caches themselves live in a static
//! array, each at an address known from its class, and a hit does not read its cache: a
//! class's state and a copy of its cache's hit path ([`magazine::HitPath`]) share one cache
//! line, the only metadata a hit reads before the CPU's slot and magazine. While one
//! thread sets a class's cache up, the others are served by the class's source. The rule in full, as an obligation of any allocator built on the cache:
//! [`magazine::docs::obligations`](magazine::docs::obligations#inside-a-global-allocator).
//!
//! **Out of memory.** Every path returns null when the system refuses memory, and frees
//! never fail: user allocations get null; the caches' own allocations may fail too (a class
//! cache that cannot be built leaves the allocation to its source, one that cannot get a
//! magazine hands blocks to and takes them from its source directly). crossbeam-epoch's
//! allocations (a thread's participant record, garbage bags at a depot exchange and at
//! thread exit) cannot fail gracefully: made while inside, they come from the class's
//! source, else from a static reserve of 1 MiB (part of the program's image, so there even
//! when no address space is left; [`MallocStats::reserve_in_use`]) that user allocations
//! never reach. The program goes on, allocates again after freeing, and exits normally
//! (`tests/out_of_memory.rs`, under `RLIMIT_AS`).
//!
//! **Foreign code.** The caches pin an epoch collector of the `magazine` crate's own: no
//! other library's deferred function (crossbeam-epoch's default collector) runs inside
//! an allocation. A panic that the design cannot exclude aborts the process with a
//! message inside the `GlobalAlloc` methods, never unwinds out of them.
//!
//! **Trimming.** [`MagazineMalloc::trim`] trims every class cache: with the working-set
//! rule a trim gives back what nobody used since the previous trim (idle CPU slots
//! included), so memory freed by a workload goes back after two trims an interval apart;
//! a span whose blocks all came back is discarded by the second trim after that. The
//! allocator trims by
//! itself every 100 ms ([`MagazineMalloc::set_auto_trim`]) with no thread: the clock is
//! read only when a call leaves the caches' fast path (a depot ran empty or overflowed, a
//! large block came or went), and a due trim runs in the next such call made from outside
//! the allocator. A program that stops allocating keeps what its caches hold
//! until it allocates again; [`MagazineMalloc::spawn_trimmer`] starts a thread that trims
//! every interval whatever the program does (start it from `main`, never from inside an
//! allocation).
//!
//! **Memory cost.** Per CPU and class used: at most two magazines of blocks in the CPU's
//! slot, 2 x [`classes::magazine_size`] x size (1 KiB for the 8 B class, about 32 KiB from
//! 256 B to 4 KiB, 256 KiB for the 32 KiB class; about 4 MiB if one CPU used every span
//! class). Page classes: at most 256 KiB per CPU for those up to 128 KiB, two blocks above
//! (2 MiB for the 1 MiB class); about 15 MiB if one CPU used every page class. A freed
//! page-class block keeps its mapping (address space and touched pages) until a trim gives
//! it back. Per process: up to 32 MiB of freed large mappings, kept until the second trim
//! after their free, and the pages of the spans emptied since the second trim before (a
//! program's churn of two trim intervals at most, reused before any new span). As
//! metadata: a class's cache itself and its entry, about 1 KiB of static memory
//! ([`MallocStats::metadata_in_use`] counts those), and, in class blocks, per CPU, its
//! slot, shelf and two magazines' arrays of `magazine_size` addresses each. After trims, a
//! class's depot keeps no full magazine. A cached block also costs 8 bytes of metadata (its
//! address in a magazine), which for the smallest classes is the block's own size, until
//! trimmed.
//!
//! # Limits
//!
//! - **Linux only.** On other systems `MagazineMalloc` forwards every call to
//!   [`std::alloc::System`] (and `trim` and `stats` do nothing). Restartable sequences
//!   run on Linux x86_64 with glibc 2.35+; elsewhere (aarch64, musl) a cache hit takes
//!   the CPU slot with a compare-and-swap.
//! - **Fragmentation.** A span goes back only when every block in it is back; one
//!   long-lived block keeps its span's touched pages resident. Chunks (address space) are
//!   never unmapped.
//! - **Blocks above 1 MiB** are kept only while freed ones fit the limits (8 mappings,
//!   32 MiB); beyond them each is an `mmap` and its free a `munmap` (two system calls, and
//!   page faults on first touch), as in glibc above its threshold.
//! - **A mapping per page-class block.** Linux limits a process's mappings
//!   (`vm.max_map_count`, 65,530 by default), and neighbouring blocks merge into one only
//!   sometimes: a program with tens of thousands of live blocks of 32 KiB to 1 MiB can reach
//!   that limit, and then allocations fail (null).
//! - **Few checks.** Through `GlobalAlloc`, a double free or a foreign pointer corrupts the
//!   heap, as with most allocators (the cache cannot see one:
//!   `magazine::docs::obligations`). Freed by address, a pointer that starts no block is
//!   refused; a double free, or a free of a block of a span that was never handed out,
//!   is not seen.
//! - **Not async-signal-safe**, like any allocator with locks: a signal handler must not
//!   allocate.
//! - **`fork`.** A child forked while other threads allocate may allocate, free and trim:
//!   `pthread_atfork` handlers, registered at the first class cache's creation, hold every
//!   lock of the allocator across the fork (a fork waits for a running trim to end). A
//!   CPU slot that a parent thread was using at that instant stays busy in the child,
//!   whose other slots, depot and spans serve it; the blocks in that slot leak there,
//!   and a thread pinned in crossbeam-epoch then keeps what the child retires unfreed.
//!   Other `pthread_atfork` handlers registered before that first setup must not allocate
//!   through this allocator (they run while ours hold the locks).
//! - **Out of memory, limits.** The reserve is shared with the caches' magazines while
//!   the system refuses memory (trims give those back): a program that stays out of
//!   memory through many depot exchanges can use it up, and then an epoch allocation
//!   aborts. A thread's first allocation or free that misses its cache's hit registers
//!   two thread-local destructors, for which glibc allocates from its own heap and aborts
//!   when it cannot; [`MagazineMalloc::register_thread`] does it at a time of the
//!   thread's choosing.
//! - **Thread exit.** From a thread's exit marker on, its allocations and frees go
//!   straight to the class sources (a lock hold each), past the caches.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::alloc::{GlobalAlloc, Layout};
use std::io;
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub mod classes;
mod stats;

#[cfg(target_os = "linux")]
mod auto_trim;
#[cfg(target_os = "linux")]
mod caches;
#[cfg(not(target_os = "linux"))]
mod fallback;
#[cfg(target_os = "linux")]
mod fork;
#[cfg(target_os = "linux")]
mod free_blocks;
#[cfg(target_os = "linux")]
mod heap;
#[cfg(target_os = "linux")]
mod large;
#[cfg(target_os = "linux")]
mod os;
#[cfg(target_os = "linux")]
mod pagemap;
#[cfg(target_os = "linux")]
mod pages;
#[cfg(target_os = "linux")]
mod reserve;
#[cfg(target_os = "linux")]
mod source;
#[cfg(target_os = "linux")]
mod span;

#[cfg(not(target_os = "linux"))]
use fallback as imp;
#[cfg(target_os = "linux")]
use heap as imp;

pub use stats::{rss, ClassStats, MallocStats, Rss};

/// The trim interval the cache advises for its working-set rule (see
/// [`magazine::docs::trimming`]).
pub const TRIM_INTERVAL: Duration = Duration::from_secs(2);

/// The allocator: a handle on the process-wide heap (every value shares it).
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// use magazine_malloc::MagazineMalloc;
///
/// let heap = MagazineMalloc::new();
/// let layout = Layout::from_size_align(100, 8).unwrap();
/// // SAFETY: a layout of nonzero size; the block is freed with it, once.
/// unsafe {
///     let block = heap.alloc(layout);
///     assert!(!block.is_null());
///     block.write_bytes(7, 100);
///     heap.dealloc(block, layout);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MagazineMalloc {
    _private: (),
}

impl MagazineMalloc {
    /// The allocator, for `#[global_allocator] static GLOBAL: MagazineMalloc =
    /// MagazineMalloc::new();`. Nothing is set up until the first allocation.
    pub const fn new() -> Self {
        Self { _private: () }
    }

    /// Registers the calling thread with the allocator now: its epoch participant and the
    /// thread-local destructor that marks its exit, which it otherwise registers at its
    /// first allocation or free that misses its cache's hit. glibc allocates that
    /// destructor's registration from its own heap and aborts when it cannot, so a thread
    /// that may first miss once memory has run out calls this at its start. Does nothing
    /// for a thread registered already, and on other systems.
    ///
    /// ```
    /// use magazine_malloc::MagazineMalloc;
    ///
    /// std::thread::spawn(|| {
    ///     MagazineMalloc::new().register_thread();
    ///     // ... work that may meet an exhausted address space
    /// })
    /// .join()
    /// .unwrap();
    /// ```
    pub fn register_thread(&self) {
        imp::register_thread();
    }

    /// Trims every class cache: with the working-set rule, what nobody used since the
    /// previous trim goes back to the spans (idle CPU slots and every depot magazine
    /// included); spans whose blocks were all back before the previous trim give their
    /// pages to the system. Call it every [`TRIM_INTERVAL`] or so; after a workload, memory is
    /// back after two trims an interval apart. [`MallocStats::spans_returned`] counts what
    /// went back. Trims run one at a time (a second waits for the first), so that none is
    /// half done when the process forks.
    pub fn trim(&self) {
        imp::trim();
    }

    /// Starts a thread named `magazine-malloc-trim` that calls [`trim`](Self::trim) every
    /// `interval` for the rest of the process. The allocator starts no thread of its own:
    /// call this from the program (after `main` begins), once.
    ///
    /// # Errors
    ///
    /// When the thread cannot be started.
    pub fn spawn_trimmer(&'static self, interval: Duration) -> io::Result<JoinHandle<()>> {
        thread::Builder::new()
            .name("magazine-malloc-trim".into())
            .spawn(move || loop {
                thread::sleep(interval);
                self.trim();
            })
    }

    /// Sets the interval of the trims the allocator runs by itself (100 ms unless set);
    /// `None` turns them off. No thread and no timer: the clock is read when a call leaves
    /// the caches' fast path (a class's depot ran empty or overflowed, a large block was
    /// allocated or freed), and once the interval has passed, the next such call from
    /// outside the allocator runs a [`trim`](Self::trim) (unless another is running:
    /// nobody waits). With the working-set rule, a class in steady use keeps its
    /// magazines, and what a finished phase of the program left in the caches goes back
    /// within about two intervals of its end, provided the program still allocates. It
    /// applies to the whole process, whichever handle sets it.
    pub fn set_auto_trim(&self, interval: Option<Duration>) {
        imp::set_auto_trim(interval);
    }

    /// The interval of the automatic trims, `None` when they are off (see
    /// [`set_auto_trim`](Self::set_auto_trim)).
    pub fn auto_trim(&self) -> Option<Duration> {
        imp::auto_trim()
    }

    /// A snapshot of the heap: each used class's cache counters, spans and blocks, and
    /// the bytes mapped for spans, large allocations and metadata.
    pub fn stats(&self) -> MallocStats {
        imp::stats()
    }

    /// The size of the block that starts at `ptr` (at least what it was allocated with:
    /// its class's size, or its mapping's length), or `None` when no block of this
    /// allocator starts there: C's `malloc_usable_size`. Any pointer may be passed;
    /// nothing is read through it.
    ///
    /// A block is found from its address alone: a span class's from its span's descriptor
    /// (the span's chunk is found in a table of the allocator's mappings, by the chunk's
    /// alignment), the other blocks from that table, where each mapping's first page has an
    /// entry. A pointer inside a block, or into memory that is not the allocator's, is not
    /// a block; a free block of a span class is not told apart from a live one.
    ///
    /// ```
    /// use std::alloc::{GlobalAlloc, Layout};
    /// use magazine_malloc::MagazineMalloc;
    ///
    /// let heap = MagazineMalloc::new();
    /// let layout = Layout::from_size_align(100, 8).unwrap();
    /// // SAFETY: a layout of nonzero size; the block is freed once.
    /// unsafe {
    ///     let block = heap.alloc(layout);
    ///     # #[cfg(target_os = "linux")] {
    ///     assert_eq!(heap.usable_size(block), Some(104));
    ///     assert_eq!(heap.usable_size(block.add(8)), None, "inside a block");
    ///     # }
    ///     heap.free(block).unwrap(); // no layout needed
    /// }
    /// ```
    #[inline]
    pub fn usable_size(&self, ptr: *const u8) -> Option<usize> {
        let guard = NoUnwind;
        let size = imp::usable_size(ptr);
        guard.done();
        size
    }

    /// Frees the block that starts at `ptr`, found from its address alone (C's `free`;
    /// see [`usable_size`](Self::usable_size)); [`NotABlock`], with nothing done, when no
    /// block of this allocator starts there.
    ///
    /// # Safety
    ///
    /// If a block of this allocator starts at `ptr`, it is live (allocated and not freed
    /// since) and not used after this call.
    #[inline(always)]
    pub unsafe fn free(&self, ptr: *mut u8) -> Result<(), NotABlock> {
        let guard = NoUnwind;
        // SAFETY: the caller's contract, passed on. A panic inside aborts (`guard`).
        let freed = unsafe { imp::free(ptr) };
        guard.done();
        if freed {
            Ok(())
        } else {
            Err(NotABlock)
        }
    }

    /// Resizes the block that starts at `ptr`, found from its address alone, to a block for
    /// `new` (C's `realloc`): in place when `new` is served by the block's class, by moving
    /// its pages (`mremap`) when it is large and stays so, else by a copy of its contents
    /// up to the smaller size. `Ok(null)`, the block untouched, when the system refuses
    /// memory; [`NotABlock`], with nothing done, when no block of this allocator starts at
    /// `ptr`. The old block's alignment is not kept: `new`'s is.
    ///
    /// # Safety
    ///
    /// If a block of this allocator starts at `ptr`, it is live, and when the result is
    /// not null the old block is not used after this call. `new`'s size is not 0.
    #[inline]
    pub unsafe fn resize(&self, ptr: *mut u8, new: Layout) -> Result<*mut u8, NotABlock> {
        let guard = NoUnwind;
        // SAFETY: the caller's contract, passed on. A panic inside aborts (`guard`).
        let resized = unsafe { imp::resize(ptr, new) };
        guard.done();
        resized.map_err(|()| NotABlock)
    }
}

/// No block of the allocator starts at the pointer given to [`MagazineMalloc::free`] or
/// [`MagazineMalloc::resize`]: a pointer into another heap, inside a block, or made up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotABlock;

impl std::fmt::Display for NotABlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no block of the allocator starts at this address")
    }
}

impl std::error::Error for NotABlock {}

// SAFETY: blocks are never handed out twice while live: class blocks are handed out by
// their source once until they come back (the cache keeps each in exactly one place),
// mappings likewise. Each block is at least `layout.size()` bytes and
// aligned to `layout.align()` (see `classes`). Nothing unwinds out of these methods: every
// path returns null on failure, the locks inside never poison, and a panic the design
// cannot exclude (another library's epoch garbage, run by a pin inside a class cache)
// aborts the process in `NoUnwind`'s drop instead of unwinding into the caller.
unsafe impl GlobalAlloc for MagazineMalloc {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let guard = NoUnwind;
        let block = imp::alloc(layout);
        guard.done();
        block
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let guard = NoUnwind;
        let block = imp::alloc_zeroed(layout);
        guard.done();
        block
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let guard = NoUnwind;
        // SAFETY: the caller's contract, passed on. A panic inside aborts (`guard`).
        unsafe { imp::dealloc(ptr, layout) };
        guard.done();
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let guard = NoUnwind;
        // SAFETY: the caller's contract, passed on. A panic inside aborts (`guard`).
        let block = unsafe { imp::realloc(ptr, layout, new_size) };
        guard.done();
        block
    }
}

/// Aborts the process, with a message, when dropped: only a panic unwinding out of a
/// `GlobalAlloc` method drops it (unwinding into the allocator's caller is undefined
/// behaviour); the normal path forgets it, which costs nothing. Not
/// `std::thread::panicking()`: `dealloc` is rightly called by destructors while another
/// panic unwinds.
struct NoUnwind;

impl NoUnwind {
    /// The call returned: nothing to do.
    #[inline(always)]
    fn done(self) {
        std::mem::forget(self);
    }
}

impl Drop for NoUnwind {
    #[cold]
    fn drop(&mut self) {
        // Unbuffered and without allocating: the heap may be in the middle of a change.
        let _ = io::Write::write_all(
            &mut io::stderr(),
            b"magazine-malloc: a panic inside the allocator; aborting (unwinding out of \
              GlobalAlloc is undefined behaviour)\n",
        );
        std::process::abort();
    }
}

/// The allocator of this crate's own builds with `--cfg magazine_test_malloc`, which the
/// `magazine` crate's test suite links to run on it.
#[cfg(magazine_test_malloc)]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();
