//! The system calls the allocator makes: mapping, unmapping, giving pages back, and the
//! two numbers it asks the system once (page size, configured CPUs). None allocates,
//! none panics: a failure comes back as `None` or `false`.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The page size, asked once (`sysconf(_SC_PAGESIZE)`; 4096 if that fails).
#[inline]
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: `sysconf` has no preconditions; it returns -1 on failure.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let page = usize::try_from(page)
                .ok()
                .filter(|page| page.is_power_of_two())
                .unwrap_or(4096);
            PAGE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

/// `size` rounded up to whole pages, at least one; `None` when that overflows.
pub(crate) fn whole_pages(size: usize) -> Option<usize> {
    let page = page_size();
    Some(size.max(1).checked_add(page - 1)? & !(page - 1))
}

/// The CPUs the system may bring up (`sysconf(_SC_NPROCESSORS_CONF)`, at least 1), asked
/// once. Not `std::thread::available_parallelism`, which allocates (and counts only the
/// CPUs of the affinity mask: restartable sequences need a slot for every CPU).
pub(crate) fn configured_cpus() -> usize {
    static CPUS: AtomicUsize = AtomicUsize::new(0);
    match CPUS.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: `sysconf` has no preconditions; it returns -1 on failure.
            let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            let cpus = usize::try_from(cpus).unwrap_or(1).max(1);
            CPUS.store(cpus, Ordering::Relaxed);
            cpus
        }
        cpus => cpus,
    }
}

/// `len` bytes of fresh private anonymous read-write memory (zeroed, never touched, so not
/// resident), at an address the kernel picks; `None` when it refuses.
pub(crate) fn map(len: usize) -> Option<usize> {
    // SAFETY: an anonymous private mapping at an address the kernel chooses overlaps
    // nothing of ours; MAP_FAILED (not null) is the failure value, turned into `None`.
    let addr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (addr != libc::MAP_FAILED && !addr.is_null()).then_some(addr as usize)
}

/// `len` bytes of read-write memory aligned to `align` (a power of two): maps
/// `len + align - page`, then unmaps the head and the tail around the aligned part. `len`
/// must be a multiple of the page size.
pub(crate) fn map_aligned(len: usize, align: usize) -> Option<usize> {
    let over = len.checked_add(align.saturating_sub(page_size()))?;
    let raw = map(over)?;
    let start = (raw + align - 1) & !(align - 1);
    // SAFETY: both ranges are parts of the mapping just made, outside `[start, start +
    // len)`, and nobody knows of them yet. A failure leaves them mapped: wasted address
    // space, nothing wrong.
    unsafe {
        unmap(raw, start - raw);
        unmap(start + len, raw + over - (start + len));
    }
    Some(start)
}

/// Unmaps `[addr, addr + len)` (nothing when `len` is 0).
///
/// # Safety
///
/// The range must be mapped memory of the allocator's that nobody uses any more.
pub(crate) unsafe fn unmap(addr: usize, len: usize) {
    if len != 0 {
        // SAFETY: the caller's contract. A failure (which the kernel reports only for a
        // bad range) leaves the memory mapped: a leak, not an error to act on.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
}

/// Gives the pages of `[addr, addr + len)` back to the system: they stay mapped and read
/// as zeroes when touched again. Returns whether the kernel did it.
///
/// # Safety
///
/// The range must be page-aligned memory of the allocator's whose contents nobody needs.
pub(crate) unsafe fn discard(addr: usize, len: usize) -> bool {
    // SAFETY: the caller's contract. On failure the pages just stay resident.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) == 0 }
}

/// Resizes the mapping `[addr, addr + old)` to `new` bytes where it is: a shrink always
/// can, a growth when the pages after it are free. Returns whether the kernel did it (the
/// mapping is untouched when not).
///
/// # Safety
///
/// The range must be a whole mapping of the allocator's, lengths multiples of the page
/// size.
pub(crate) unsafe fn resize_in_place(addr: usize, old: usize, new: usize) -> bool {
    // SAFETY: the caller's contract; without MREMAP_MAYMOVE the mapping stays where it
    // is, and MAP_FAILED leaves it as it was.
    let resized = unsafe { libc::mremap(addr as *mut libc::c_void, old, new, 0) };
    resized != libc::MAP_FAILED
}

/// Moves the pages of the mapping `[addr, addr + old)` onto `[target, target + new)`,
/// which they replace, growing it to `new` bytes (the growth reads as zeroes): the pages
/// move, nothing is copied. Returns whether the kernel did it; when not, both mappings
/// are as they were.
///
/// # Safety
///
/// Both ranges must be whole mappings of the allocator's that do not overlap, `new` at
/// least `old`, lengths multiples of the page size; `target`'s contents are lost.
pub(crate) unsafe fn move_onto(addr: usize, old: usize, target: usize, new: usize) -> bool {
    // SAFETY: the caller's contract; MREMAP_FIXED replaces the target mapping (ours),
    // and MAP_FAILED leaves both as they were.
    let moved = unsafe {
        libc::mremap(
            addr as *mut libc::c_void,
            old,
            new,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            target as *mut libc::c_void,
        )
    };
    moved != libc::MAP_FAILED
}
