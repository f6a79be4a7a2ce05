//! Size classes: 100 block sizes from 8 B to 1 MiB, and the O(1) map from a request's size
//! and alignment to its class.
//!
//! **Span classes** (the first [`SPAN_CLASSES`], 8 B to 32 KiB) are carved from spans. The
//! spacing is tcmalloc's: multiples of 8 up to 64, then 8 classes per power-of-two
//! doubling (a step of `2^k / 8` between `2^k` and `2^(k+1)`), so a request of 64 bytes or
//! more wastes at most 12.5% of its block. Blocks are carved at `span start + i * size`
//! with span starts aligned to at least 64 KiB, so a block is aligned to every power of
//! two its class size is a multiple of: a request aligned to `align` takes the smallest
//! class that is a multiple of `align` and holds the size rounded up to `align`, and that
//! class is exactly the one of the rounded size (a doubling's step either divides by
//! `align`, or `align` is a multiple of the step, and then every multiple of `align` in
//! the doubling is a class).
//!
//! **Page classes** (above 32 KiB, to [`MAX_SIZE`]) are mappings of their own, cached like
//! every block (`pages`): 4 classes per doubling (40, 48, 56, 64 KiB, then 80 to 128, ...,
//! 640 to 1024 KiB), so a block's tail beyond its request is at most a fifth of it, and that
//! tail's pages stay untouched (not resident) unless the block served a larger request
//! before. They serve alignments up to [`PAGE_ALIGN`]. Larger requests, or more aligned
//! ones, are mapped on their own and unmapped when freed (`large`).
//!
//! ```
//! use std::alloc::Layout;
//! use magazine_malloc::classes;
//!
//! let class = classes::class_of(Layout::from_size_align(100, 8).unwrap()).unwrap();
//! assert_eq!(classes::class_size(class), 104, "between 96 and 128, a step of 8");
//! let aligned = classes::class_of(Layout::from_size_align(100, 64).unwrap()).unwrap();
//! assert_eq!(classes::class_size(aligned), 128, "the smallest multiple of 64 that holds 100");
//! let page = classes::class_of(Layout::from_size_align(40000, 8).unwrap()).unwrap();
//! assert_eq!(classes::class_size(page), 40 << 10, "a page class");
//! assert_eq!(classes::class_of(Layout::from_size_align(2 << 20, 8).unwrap()), None, "large");
//! ```

use std::alloc::Layout;

/// The number of size classes: span classes, then page classes.
pub const CLASSES: usize = SPAN_CLASSES + 20;

/// The number of span classes: classes `0..SPAN_CLASSES` are carved from spans.
pub const SPAN_CLASSES: usize = 80;

/// The largest block of a span class.
pub const SPAN_MAX: usize = 32 << 10;

/// The largest block a class holds; larger requests are mapped on their own.
pub const MAX_SIZE: usize = 1 << 20;

/// The largest alignment a class serves (spans start at multiples of 64 KiB, and the
/// largest span class, 32 KiB, is a multiple of it); more is mapped on its own. Page
/// classes serve up to [`PAGE_ALIGN`].
pub const MAX_ALIGN: usize = SPAN_MAX;

/// The largest alignment a page class serves: its blocks are mappings, aligned to a page
/// (at least 4 KiB on every Linux).
pub const PAGE_ALIGN: usize = 4 << 10;

/// Sizes up to this one are looked up by `size / 8`, larger span classes by `size / 128`
/// (every class above it is a multiple of 128), page classes by `size / 8 KiB`.
const SMALL_MAX: usize = 1024;

/// The block size of every class, ascending.
const SIZES: [u32; CLASSES] = sizes();

/// Class by `(size + 7) / 8`, for sizes up to [`SMALL_MAX`].
static SMALL: [u8; SMALL_MAX / 8 + 1] = index::<{ SMALL_MAX / 8 + 1 }>(8);

/// Class by `(size + 127) / 128`, for sizes up to [`SPAN_MAX`].
static MEDIUM: [u8; SPAN_MAX / 128 + 1] = index::<{ SPAN_MAX / 128 + 1 }>(128);

/// The granularity of page classes: every one is a multiple of 8 KiB.
const PAGE_STEP_SHIFT: u32 = 13;

/// Class by `(size + 8 KiB - 1) / 8 KiB`, for sizes above [`SPAN_MAX`] up to [`MAX_SIZE`].
static PAGES: [u8; (MAX_SIZE >> PAGE_STEP_SHIFT) + 1] =
    index::<{ (MAX_SIZE >> PAGE_STEP_SHIFT) + 1 }>(1 << PAGE_STEP_SHIFT);

const fn sizes() -> [u32; CLASSES] {
    let mut sizes = [0; CLASSES];
    let mut n = 0;
    while n < 8 {
        sizes[n] = 8 * (n as u32 + 1);
        n += 1;
    }
    let mut base = 64;
    while base < MAX_SIZE as u32 {
        let per_doubling = if base < SPAN_MAX as u32 { 8 } else { 4 };
        let step = base / per_doubling;
        let mut k = 1;
        while k <= per_doubling {
            sizes[n] = base + k * step;
            n += 1;
            k += 1;
        }
        base *= 2;
    }
    assert!(n == CLASSES && sizes[CLASSES - 1] == MAX_SIZE as u32);
    assert!(sizes[SPAN_CLASSES - 1] == SPAN_MAX as u32);
    sizes
}

/// The lookup table whose entry `i` is the smallest class that holds `i * granularity`
/// bytes (entries past [`MAX_SIZE`] are never read).
const fn index<const N: usize>(granularity: usize) -> [u8; N] {
    let mut table = [0; N];
    let mut i = 0;
    let mut class = 0;
    while i < N {
        while class < CLASSES - 1 && (SIZES[class] as usize) < i * granularity {
            class += 1;
        }
        table[i] = class as u8;
        i += 1;
    }
    table
}

/// The class of a request of `size` bytes aligned to `align` (a power of two), `None` for
/// the large path. Two table loads at most; no loop.
#[inline]
pub(crate) fn lookup(size: usize, align: usize) -> Option<usize> {
    let rounded = if align <= 8 {
        size
    } else if align <= MAX_ALIGN {
        // `Layout` keeps `size` rounded up to `align` within `isize::MAX`.
        (size + align - 1) & !(align - 1)
    } else {
        return None;
    };
    if rounded <= SMALL_MAX {
        Some(SMALL[(rounded + 7) >> 3] as usize)
    } else if rounded <= SPAN_MAX {
        Some(MEDIUM[(rounded + 127) >> 7] as usize)
    } else if rounded <= MAX_SIZE && align <= PAGE_ALIGN {
        Some(PAGES[(rounded + (1 << PAGE_STEP_SHIFT) - 1) >> PAGE_STEP_SHIFT] as usize)
    } else {
        None
    }
}

/// What a free by address needs to know of a span class's blocks, in one entry (a third of
/// a cache line) so that the check costs one line of metadata.
#[derive(Clone, Copy)]
#[repr(C)]
struct SpanBlocks {
    /// The span size less one: an address's offset in its span is `addr & span_mask`
    /// (spans are aligned to their size).
    span_mask: u64,
    /// The offset of the span's last block: a block starting further in would end past
    /// the span.
    last: u64,
    /// `ceil(2^40 / size)`: for an offset below 2^22 (a span, at most 256 KiB),
    /// `offset * reciprocal >> 40` is exactly `offset / size` (the rounding error is below
    /// `2^22 / 2^40`, less than the `1 / size` that separates two quotients), without a
    /// division.
    reciprocal: u64,
    /// The block size.
    size: u64,
}

static SPAN_BLOCKS: [SpanBlocks; SPAN_CLASSES] = {
    let mut table = [SpanBlocks {
        span_mask: 0,
        last: 0,
        reciprocal: 0,
        size: 0,
    }; SPAN_CLASSES];
    let mut class = 0;
    while class < SPAN_CLASSES {
        let size = SIZES[class] as u64;
        let span = 1u64 << span_shift(class);
        table[class] = SpanBlocks {
            span_mask: span - 1,
            last: (span / size - 1) * size,
            reciprocal: (1u64 << 40).div_ceil(size),
            size,
        };
        class += 1;
    }
    table
};

/// Whether `addr`, in a span that span class `class` holds, is the start of one of the
/// span's blocks: a multiple of the class's size from the span's start, and not so far
/// in that the block would end past the span.
#[inline]
pub(crate) fn is_block_start(class: usize, addr: usize) -> bool {
    let blocks = &SPAN_BLOCKS[class];
    let offset = addr as u64 & blocks.span_mask;
    let quotient = (offset * blocks.reciprocal) >> 40;
    offset <= blocks.last && quotient * blocks.size == offset
}

/// Whether `class` is a page class (its blocks are mappings of their own, `pages`).
#[inline]
pub(crate) const fn is_page_class(class: usize) -> bool {
    class >= SPAN_CLASSES
}

/// The class that serves `layout`, or `None` when it is mapped on its own (more than
/// [`MAX_SIZE`] bytes once rounded up to its alignment, aligned to more than
/// [`MAX_ALIGN`], or more than [`SPAN_MAX`] bytes aligned to more than [`PAGE_ALIGN`]).
///
/// ```
/// use std::alloc::Layout;
/// use magazine_malloc::classes::{class_of, class_size};
///
/// let layout = Layout::from_size_align(4097, 4096).unwrap();
/// assert_eq!(class_size(class_of(layout).unwrap()), 8192);
/// ```
pub fn class_of(layout: Layout) -> Option<usize> {
    lookup(layout.size(), layout.align())
}

/// The block size of `class`.
///
/// # Panics
///
/// If `class` is not below [`CLASSES`].
pub const fn class_size(class: usize) -> usize {
    SIZES[class] as usize
}

/// Items in a magazine of `class`: for span classes `16 KiB / size`, clamped to 4..=64;
/// for page classes `128 KiB / size`, at least 1.
///
/// A CPU slot holds two magazines, so this bounds what one CPU caches per class: about
/// 32 KiB of blocks for classes from 256 B to 4 KiB, less below (64 items, so 1 KiB for
/// 8-byte blocks), and 8 blocks above 4 KiB (256 KiB for the 32 KiB class). The floor
/// keeps at least 4 allocations per source call (one lock hold) for the largest span
/// classes; the cap keeps a magazine's own metadata at 512 bytes and the source's batch
/// short. A page class's source call is a system call per block anyway, and its blocks are
/// large: at most 256 KiB per CPU for those up to 128 KiB, two blocks (up to 2 MiB) above.
///
/// # Panics
///
/// If `class` is not below [`CLASSES`].
pub const fn magazine_size(class: usize) -> usize {
    if is_page_class(class) {
        let items = (128 << 10) / class_size(class);
        return if items < 1 { 1 } else { items };
    }
    let items = (16 << 10) / class_size(class);
    if items < 4 {
        4
    } else if items > 64 {
        64
    } else {
        items
    }
}

/// The log2 of the span size of span class `class`: 64 KiB spans for classes up to 8 KiB,
/// 128 KiB up to 16 KiB, 256 KiB above, so that every span holds at least 8 blocks and
/// the tail a span cannot use stays under 12.5% of it.
pub(crate) const fn span_shift(class: usize) -> u32 {
    let size = class_size(class);
    if size <= 8 << 10 {
        16
    } else if size <= 16 << 10 {
        17
    } else {
        18
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_agree_with_a_search() {
        for size in 1..=MAX_SIZE {
            let searched = SIZES.iter().position(|&s| s as usize >= size).unwrap();
            assert_eq!(lookup(size, 1), Some(searched), "size {size}");
        }
        assert_eq!(lookup(MAX_SIZE + 1, 1), None);
    }

    #[test]
    fn page_classes_serve_a_page_alignment_only() {
        assert_eq!(lookup(SPAN_MAX + 1, PAGE_ALIGN), Some(SPAN_CLASSES));
        assert_eq!(lookup(SPAN_MAX + 1, PAGE_ALIGN * 2), None);
        assert_eq!(lookup(SPAN_MAX, MAX_ALIGN), Some(SPAN_CLASSES - 1));
    }

    #[test]
    fn block_starts_are_the_multiples_of_the_class_size_that_fit_the_span() {
        for class in 0..SPAN_CLASSES {
            let size = class_size(class);
            let span = 1usize << span_shift(class);
            // Two spans, at an address aligned to the largest span size.
            let base = 1 << 30;
            for offset in 0..2 * span {
                let in_span = offset % span;
                assert_eq!(
                    is_block_start(class, base + offset),
                    in_span % size == 0 && in_span + size <= span,
                    "{class} {offset}"
                );
            }
        }
    }

    #[test]
    fn spans_hold_at_least_eight_blocks() {
        for class in 0..SPAN_CLASSES {
            let span = 1usize << span_shift(class);
            assert!(span / class_size(class) >= 8, "class {class}");
        }
    }
}
