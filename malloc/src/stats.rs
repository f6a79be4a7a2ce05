//! Statistics: what the class caches served, what the spans hold, and the
//! process's resident set.

use std::fmt;

/// A snapshot of the allocator, from [`MagazineMalloc::stats`](crate::MagazineMalloc::stats).
/// Counters are read without stopping anyone, so a snapshot taken while threads allocate
/// is approximate; the heap is shared by every `MagazineMalloc` value of the process.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MallocStats {
    /// The classes whose cache exists (those used so far), by ascending size.
    pub classes: Vec<ClassStats>,
    /// Spans that classes hold now (each 64, 128 or 256 KiB of address space, resident as
    /// far as its blocks were touched).
    pub spans_held: usize,
    /// Spans free for any class of their size: those of `spans_free_resident`, and those
    /// whose pages went back to the system.
    pub spans_free: usize,
    /// Free spans whose pages are still resident: freed since the second trim before
    /// (their pages go back to the system at the second trim after they were freed).
    pub spans_free_resident: usize,
    /// Spans whose pages were given back to the system so far (`madvise(MADV_DONTNEED)`
    /// once they had been free through a trim interval), a running count.
    pub spans_returned: usize,
    /// Bytes of address space mapped for spans (4 MiB chunks, never unmapped; resident
    /// only where spans are in use).
    pub chunk_bytes: usize,
    /// Bytes mapped for page-class blocks now (above 32 KiB, each a mapping of its own,
    /// cached or in use; unmapped when a trim gives them back).
    pub page_bytes: usize,
    /// Bytes mapped for large allocations in use now.
    pub large_bytes: usize,
    /// Bytes of freed large mappings kept for reuse now (at most 32 MiB; unmapped by
    /// trims).
    pub large_kept_bytes: usize,
    /// Bytes of the class caches themselves, in static memory, for the classes used so
    /// far (their magazines, depot nodes and epoch records are ordinary class blocks,
    /// counted with the spans).
    pub metadata_in_use: usize,
    /// Bytes of the static reserve in use: metadata blocks (crossbeam-epoch's records and
    /// garbage bags, magazines) that the caches needed while the system refused memory.
    pub reserve_in_use: usize,
    /// Trims the allocator ran by itself so far
    /// ([`MagazineMalloc::set_auto_trim`](crate::MagazineMalloc::set_auto_trim)).
    pub auto_trims: u64,
}

impl MallocStats {
    /// Bytes mapped readable and writable: chunks, page-class blocks and large
    /// allocations.
    pub fn bytes_mapped(&self) -> usize {
        self.chunk_bytes + self.page_bytes + self.large_bytes + self.large_kept_bytes
    }

    /// The sum of every class's cache counters that a program watches: (allocation hits,
    /// free hits, source calls that allocated, magazines trimmed).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        self.classes
            .iter()
            .fold((0, 0, 0, 0), |(a, f, s, t), class| {
                (
                    a + class.cache.alloc_hits,
                    f + class.cache.free_hits,
                    s + class.cache.source_alloc_calls,
                    t + class.cache.trimmed,
                )
            })
    }
}

/// One class's figures.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClassStats {
    /// The class's index (see [`classes`](crate::classes)).
    pub class: usize,
    /// Its block size in bytes.
    pub size: usize,
    /// Items per magazine of its cache.
    pub magazine_size: usize,
    /// Its cache's counters: hits, source calls and items (`source_alloc_calls`,
    /// `source_allocs`, `source_free_calls`, `source_frees`), magazines `trimmed`, depot.
    pub cache: magazine::Stats,
    /// Spans the class holds now (0 for a page class).
    pub spans: usize,
    /// Blocks out of the class's source now: cached in magazines or in use (for a page
    /// class, its blocks mapped now).
    pub blocks_out: usize,
}

impl fmt::Display for MallocStats {
    /// A summary line, then a line per class.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (allocs, frees, calls, trimmed) = self.totals();
        writeln!(
            f,
            "{} classes: {allocs} alloc hits, {frees} free hits, {calls} source calls, \
             {trimmed} magazines trimmed ({} automatic trims); spans {} held {} free ({} resident) {} returned; \
             mapped {} KiB \
             (chunks {} KiB, page classes {} KiB, large {} KiB, kept {} KiB; the caches \
             themselves {} KiB)",
            self.classes.len(),
            self.auto_trims,
            self.spans_held,
            self.spans_free,
            self.spans_free_resident,
            self.spans_returned,
            self.bytes_mapped() >> 10,
            self.chunk_bytes >> 10,
            self.page_bytes >> 10,
            self.large_bytes >> 10,
            self.large_kept_bytes >> 10,
            self.metadata_in_use >> 10,
        )?;
        for class in &self.classes {
            writeln!(
                f,
                "  {:>5} B: {} spans, {} blocks out; {}",
                class.size, class.spans, class.blocks_out, class.cache
            )?;
        }
        Ok(())
    }
}

/// The process's resident set, from [`rss`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rss {
    /// Resident bytes now (`VmRSS`).
    pub current: usize,
    /// The most resident bytes so far (`VmHWM`).
    pub peak: usize,
}

/// The process's resident set now and at its peak, read from `/proc/self/status`
/// without allocating (so it may be called from anywhere, also inside an allocator);
/// `None` where that file cannot be read or lacks the fields (always, off Linux).
///
/// ```
/// let rss = magazine_malloc::rss().expect("Linux has /proc/self/status");
/// assert!(rss.current > 0 && rss.peak >= rss.current);
/// ```
pub fn rss() -> Option<Rss> {
    let mut buffer = [0u8; 8192];
    let len = read_status(&mut buffer)?;
    let text = &buffer[..len];
    Some(Rss {
        current: field_kb(text, b"VmRSS:")? * 1024,
        peak: field_kb(text, b"VmHWM:")? * 1024,
    })
}

/// Reads `/proc/self/status` into `buffer`; returns the length read.
#[cfg(not(target_os = "linux"))]
fn read_status(_buffer: &mut [u8]) -> Option<usize> {
    None
}

/// Reads `/proc/self/status` into `buffer`; returns the length read.
#[cfg(target_os = "linux")]
fn read_status(buffer: &mut [u8]) -> Option<usize> {
    // SAFETY: a NUL-terminated path; `open` returns -1 on failure.
    let fd = unsafe { libc::open(c"/proc/self/status".as_ptr(), libc::O_RDONLY) };
    if fd < 0 {
        return None;
    }
    let mut len = 0;
    while len < buffer.len() {
        // SAFETY: `buffer[len..]` is writable for its length; `read` writes at most that
        // and returns -1 on failure, 0 at the end.
        let n = unsafe { libc::read(fd, buffer[len..].as_mut_ptr().cast(), buffer.len() - len) };
        match usize::try_from(n) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    // SAFETY: `fd` is ours, opened above; closing it cannot fail in a way to act on.
    unsafe { libc::close(fd) };
    Some(len)
}

/// The number after `name` at the start of a line of `text` (a `kB` figure).
fn field_kb(text: &[u8], name: &[u8]) -> Option<usize> {
    let line = text
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(name))?;
    let digits = line.iter().skip_while(|b| !b.is_ascii_digit());
    let mut value: usize = 0;
    let mut any = false;
    for &b in digits.take_while(|b| b.is_ascii_digit()) {
        value = value.checked_mul(10)?.checked_add(usize::from(b - b'0'))?;
        any = true;
    }
    any.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::field_kb;

    #[test]
    fn fields_are_parsed() {
        let text = b"Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(field_kb(text, b"VmRSS:"), Some(1024));
        assert_eq!(field_kb(text, b"VmHWM:"), Some(2048));
        assert_eq!(field_kb(text, b"VmSwap:"), None);
    }
}
