//! `magazine-malloc` as a drop-in C `malloc`: a shared library that exports the C
//! allocation functions, for any program.
//!
//! ```sh
//! cargo build --release -p magazine-malloc-preload
//! LD_PRELOAD=$PWD/target/release/libmagazine_preload.so python3 ...
//! ```
//!
//! or link a program with `-lmagazine_preload`. Every function has C's (and glibc's)
//! semantics: `malloc`, `free`, `calloc`, `realloc`, `reallocarray`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, `pvalloc` and `malloc_usable_size`. A failure
//! returns null with `errno` set to `ENOMEM` (`EINVAL` for a bad alignment); a size that
//! overflows (`calloc`, `reallocarray`, `pvalloc`) is a failure; `realloc(p, 0)` frees `p`
//! and returns null, as glibc's does; a failed `realloc` keeps the block. Blocks of 16 bytes
//! or more are aligned to 16 (`max_align_t`), smaller ones to 8.
//!
//! The heap is [`MagazineMalloc`]'s, which is also the library's own Rust global
//! allocator (the caches allocate their metadata through it, under its re-entrancy rule).
//! `free` finds a block from its address alone ([`MagazineMalloc::free`]): a pointer that
//! is not the start of a block of this heap (another heap's, inside a block, made up) is
//! reported on the standard error and the process aborts, as glibc does for the pointers
//! it detects, instead of corrupting the heap. A double free, or a pointer to a free
//! block, is not detected.
//!
//! **Trimming.** Memory freed by the program stays in the caches until trims give it back
//! (spans whose blocks all come back return to the system at the second trim after;
//! each class's depot holds at most 64 full magazines per CPU). The allocator trims by itself every 100 ms
//! ([`MagazineMalloc::set_auto_trim`]), with no thread: when a call leaves the caches'
//! fast path after the interval, the next such call trims. `MAGAZINE_TRIM_MS=N` in the
//! environment sets the interval to `N` milliseconds, `0` turns the trims off.
//!
//! With `MAGAZINE_STATS` set, the heap's statistics are printed on the standard error at
//! exit.
//!
//! Not exported: glibc's own statistics and tuning (`mallinfo`, `malloc_stats`,
//! `malloc_trim`, `mallopt`), whose glibc versions still answer, about glibc's unused
//! heap. The limits of the allocator itself are in `magazine-malloc`'s documentation.

#![deny(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::ptr;

use magazine_malloc::MagazineMalloc;

/// The heap, which the library's own Rust code allocates from too.
#[global_allocator]
static HEAP: MagazineMalloc = MagazineMalloc::new();

/// Sets the interval of the allocator's own trims from `MAGAZINE_TRIM_MS` when it is set
/// (0 turns them off): run by the dynamic loader when it loads the library
/// (`.init_array`), before the program's `main`.
extern "C" fn configure_trims() {
    // SAFETY: `getenv` with a NUL-terminated name; the result, if not null, is a
    // NUL-terminated string that nobody changes while the loader runs constructors.
    let value = unsafe { libc::getenv(c"MAGAZINE_TRIM_MS".as_ptr()) };
    if value.is_null() {
        return;
    }
    // SAFETY: as above.
    let value = unsafe { std::ffi::CStr::from_ptr(value) };
    if value.is_empty() {
        return; // set to nothing: as if unset
    }
    let interval = value
        .to_str()
        .ok()
        .and_then(|ms| ms.trim().parse::<u64>().ok());
    match interval {
        Some(0) => HEAP.set_auto_trim(None),
        Some(ms) => HEAP.set_auto_trim(Some(std::time::Duration::from_millis(ms))),
        None => {
            let message =
                b"magazine-malloc: MAGAZINE_TRIM_MS is not a number of milliseconds; ignored\n";
            // SAFETY: writes initialised bytes to the standard error.
            unsafe { libc::write(libc::STDERR_FILENO, message.as_ptr().cast(), message.len()) };
        }
    }
}

#[used]
#[link_section = ".init_array"]
static CONFIGURE_TRIMS: extern "C" fn() = configure_trims;

/// Prints the heap's statistics ([`MagazineMalloc::stats`]) on the standard error when the
/// process exits, if `MAGAZINE_STATS` is set: run by the dynamic loader at exit
/// (`.fini_array`).
extern "C" fn print_stats() {
    // SAFETY: `getenv` with a NUL-terminated name.
    if unsafe { libc::getenv(c"MAGAZINE_STATS".as_ptr()) }.is_null() {
        return;
    }
    let text = format!("{}\n", HEAP.stats());
    // SAFETY: writes initialised bytes to the standard error.
    unsafe { libc::write(libc::STDERR_FILENO, text.as_ptr().cast(), text.len()) };
}

#[used]
#[link_section = ".fini_array"]
static PRINT_STATS: extern "C" fn() = print_stats;

/// `malloc`'s alignment: `max_align_t`'s 16 on x86_64 and aarch64, for blocks of 16 bytes
/// or more (smaller ones get 8: no C object of fewer than 16 bytes needs more).
const MALLOC_ALIGN: usize = 16;

/// The layout of a request of `size` bytes aligned to at least `align` (a power of two),
/// with `malloc`'s own alignment; `None` when it is too large for any block.
#[inline]
fn layout(size: usize, align: usize) -> Option<Layout> {
    let fundamental = if size > 8 { MALLOC_ALIGN } else { 8 };
    let align = align.max(fundamental);
    // `malloc(0)` returns a unique block, as glibc's does.
    let size = size.max(1);
    if size <= 1 << 32 && align <= 1 << 16 {
        // SAFETY: `align` is a power of two (the callers' contract, and the maximum of
        // two), and `size` rounded up to it is far below `isize::MAX`.
        return Some(unsafe { Layout::from_size_align_unchecked(size, align) });
    }
    Layout::from_size_align(size, align).ok()
}

fn set_errno(code: i32) {
    // SAFETY: `__errno_location` returns the calling thread's `errno`, always valid.
    unsafe { *libc::__errno_location() = code };
}

/// A block for `size` bytes aligned to `align` (a power of two), or null; `errno` is not
/// touched.
#[inline]
fn allocate(size: usize, align: usize) -> *mut c_void {
    match layout(size, align) {
        // SAFETY: a layout of nonzero size.
        Some(layout) => unsafe { HEAP.alloc(layout) as *mut c_void },
        None => ptr::null_mut(),
    }
}

/// `block`, or null with `errno` set to `ENOMEM`.
#[inline]
fn or_enomem(block: *mut c_void) -> *mut c_void {
    if block.is_null() {
        set_errno(libc::ENOMEM);
    }
    block
}

/// Reports a pointer that is not a block of ours and aborts: using it would corrupt the
/// heap. Writes with `write(2)`, allocating nothing.
#[cold]
#[inline(never)]
fn invalid_pointer(function: &str, ptr: *mut c_void) -> ! {
    let mut line = [0u8; 128];
    let mut len = 0;
    let mut push = |bytes: &[u8]| {
        let n = bytes.len().min(line.len() - len);
        line[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    push(b"magazine-malloc: ");
    push(function.as_bytes());
    push(b"(): invalid pointer 0x");
    let addr = ptr as usize;
    let digits = (usize::BITS - addr.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        push(&[b"0123456789abcdef"[(addr >> (4 * i)) & 0xf]]);
    }
    push(b" (not a block of this heap)\n");
    // SAFETY: writes `len` initialised bytes of `line` to the standard error; a failure
    // changes nothing (the process aborts anyway).
    unsafe { libc::write(libc::STDERR_FILENO, line.as_ptr().cast(), len) };
    std::process::abort();
}

/// C's `malloc`.
///
/// # Safety
///
/// None beyond C's: any size may be asked for.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    or_enomem(allocate(size, 1))
}

/// C's `free`: nothing for null; a pointer that is not a block of ours aborts the
/// process with a message.
///
/// # Safety
///
/// `ptr` is null or a live block of this heap, not used after.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    // SAFETY: the caller's contract.
    unsafe { release(ptr, "free") }
}

/// Frees `ptr` unless null, aborting with a message naming `function` when it is not a
/// block of ours. (The exported functions call each other through this kind of inner
/// function only: a call to an exported symbol from inside the library could reach
/// another library's definition, as it does when the library is loaded with `dlopen`.)
///
/// # Safety
///
/// `ptr` is null or a live block of this heap, not used after.
#[inline]
unsafe fn release(ptr: *mut c_void, function: &str) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: the caller's contract; a pointer that is no block of ours is refused.
    if unsafe { HEAP.free(ptr.cast()) }.is_err() {
        invalid_pointer(function, ptr);
    }
}

/// C's `calloc`: `count * size` zeroed bytes; null with `ENOMEM` when the product
/// overflows.
///
/// # Safety
///
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    // MUTANT: no overflow check: the product wraps, and a short block is handed out.
    let total = if cfg!(magazine_mutant = "calloc_wraps") {
        Some(count.wrapping_mul(size))
    } else {
        count.checked_mul(size)
    };
    let block = match total.and_then(|total| layout(total, 1)) {
        // MUTANT: a reused block handed out as it was left, not zeroed.
        // SAFETY: a layout of nonzero size.
        Some(layout) if cfg!(magazine_mutant = "calloc_not_zeroed") => unsafe {
            HEAP.alloc(layout) as *mut c_void
        },
        // SAFETY: a layout of nonzero size.
        Some(layout) => unsafe { HEAP.alloc_zeroed(layout) as *mut c_void },
        None => ptr::null_mut(),
    };
    or_enomem(block)
}

/// C's `realloc`: `malloc` for null, `free` (returning null) for a size of 0, else the
/// block resized, its contents kept up to the smaller size; null with `ENOMEM` and the
/// block untouched when memory is refused.
///
/// # Safety
///
/// `ptr` is null or a live block of this heap, not used after when the result is not
/// null (or the size is 0).
#[no_mangle]
pub unsafe extern "C" fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { resize(ptr, size, "realloc") }
}

/// `realloc`, naming `function` in the report of a pointer that is not a block of ours.
///
/// # Safety
///
/// As [`realloc`].
unsafe fn resize(ptr: *mut c_void, size: usize, function: &str) -> *mut c_void {
    if ptr.is_null() {
        return or_enomem(allocate(size, 1));
    }
    if size == 0 {
        // SAFETY: the caller's contract.
        unsafe { release(ptr, function) };
        return ptr::null_mut();
    }
    let Some(layout) = layout(size, 1) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    // SAFETY: the caller's contract; a pointer that is no block of ours is refused.
    match unsafe { HEAP.resize(ptr.cast(), layout) } {
        Ok(block) => or_enomem(block.cast()),
        Err(_) => invalid_pointer(function, ptr),
    }
}

/// glibc's `reallocarray`: `realloc` to `count * size` bytes, null with `ENOMEM` (the
/// block untouched) when the product overflows.
///
/// # Safety
///
/// As [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: the caller's contract.
        Some(total) => unsafe { resize(ptr, total, "reallocarray") },
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// POSIX's `posix_memalign`: `EINVAL` (and `*out` untouched) unless `align` is a power of
/// two and a multiple of the size of a pointer, `ENOMEM` when memory is refused, else 0
/// with the block in `*out`. `errno` is not touched.
///
/// # Safety
///
/// `out` is valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || align % size_of::<*mut c_void>() != 0 {
        return libc::EINVAL;
    }
    let block = allocate(size, align);
    if block.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(block) };
    0
}

/// C's `aligned_alloc`: null with `EINVAL` unless `align` is a power of two (glibc's
/// rule; any size is taken).
///
/// # Safety
///
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    or_enomem(allocate(size, align))
}

/// glibc's `memalign`: an alignment that is not a power of two is rounded up to one; null
/// with `EINVAL` when none is that large.
///
/// # Safety
///
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    or_enomem(allocate(size, align))
}

/// The page size.
fn page_size() -> usize {
    // SAFETY: `sysconf` has no preconditions; it returns -1 on failure.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|page| page.is_power_of_two())
        .unwrap_or(4096)
}

/// The obsolete `valloc`: `size` bytes aligned to a page.
///
/// # Safety
///
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    or_enomem(allocate(size, page_size()))
}

/// The obsolete `pvalloc`: `size` rounded up to whole pages (one page for 0), aligned to
/// a page; null with `ENOMEM` when the rounding overflows.
///
/// # Safety
///
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    match size.max(1).checked_next_multiple_of(page) {
        Some(rounded) => or_enomem(allocate(rounded, page)),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// glibc's `malloc_usable_size`: the bytes the block at `ptr` may hold, 0 for null; a
/// pointer that is not a block of ours aborts the process with a message.
///
/// # Safety
///
/// `ptr` is null or a live block of this heap.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(ptr: *mut c_void) -> usize {
    if ptr.is_null() {
        return 0;
    }
    match HEAP.usable_size(ptr.cast()) {
        // MUTANT: the usable size one byte short of the block's.
        Some(size) if cfg!(magazine_mutant = "usable_size_short") => size - 1,
        Some(size) => size,
        None => invalid_pointer("malloc_usable_size", ptr),
    }
}
