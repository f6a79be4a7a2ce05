//! Size classes: 80 block sizes from 8 B to 32 KiB, and the O(1) map from a request's size
//! and alignment to its class.
//!
//! The spacing is tcmalloc's: multiples of 8 up to 64, then 8 classes per power-of-two
//! doubling (a step of `2^k / 8` between `2^k` and `2^(k+1)`), so a request of 64 bytes or
//! more wastes at most 12.5% of its block. Blocks are carved at `span start + i * size`
//! with span starts aligned to at least 64 KiB, so a block is aligned to every power of
//! two its class size is a multiple of: a request aligned to `align` takes the smallest
//! class that is a multiple of `align` and holds the size rounded up to `align`, and that
//! class is exactly the one of the rounded size (a doubling's step either divides by
//! `align`, or `align` is a multiple of the step, and then every multiple of `align` in
//! the doubling is a class). Requests larger than 32 KiB, or aligned to more, are mapped
//! on their own (`large`).
//!
//! ```
//! use std::alloc::Layout;
//! use magazine_malloc::classes;
//!
//! let class = classes::class_of(Layout::from_size_align(100, 8).unwrap()).unwrap();
//! assert_eq!(classes::class_size(class), 104, "between 96 and 128, a step of 8");
//! let aligned = classes::class_of(Layout::from_size_align(100, 64).unwrap()).unwrap();
//! assert_eq!(classes::class_size(aligned), 128, "the smallest multiple of 64 that holds 100");
//! assert_eq!(classes::class_of(Layout::from_size_align(40000, 8).unwrap()), None, "large");
//! ```

use std::alloc::Layout;

/// The number of size classes.
pub const CLASSES: usize = 80;

/// The largest block a class holds; larger requests are mapped on their own.
pub const MAX_SIZE: usize = 32 << 10;

/// The largest alignment a class serves (spans start at multiples of 64 KiB, and the
/// largest class, 32 KiB, is a multiple of it); more is mapped on its own.
pub const MAX_ALIGN: usize = MAX_SIZE;

/// Sizes up to this one are looked up by `size / 8`, larger ones by `size / 128` (every
/// class above it is a multiple of 128).
const SMALL_MAX: usize = 1024;

/// The block size of every class, ascending.
const SIZES: [u32; CLASSES] = sizes();

/// Class by `(size + 7) / 8`, for sizes up to [`SMALL_MAX`].
static SMALL: [u8; SMALL_MAX / 8 + 1] = index::<{ SMALL_MAX / 8 + 1 }>(8);

/// Class by `(size + 127) / 128`, for sizes up to [`MAX_SIZE`].
static LARGE: [u8; MAX_SIZE / 128 + 1] = index::<{ MAX_SIZE / 128 + 1 }>(128);

const fn sizes() -> [u32; CLASSES] {
    let mut sizes = [0; CLASSES];
    let mut n = 0;
    while n < 8 {
        sizes[n] = 8 * (n as u32 + 1);
        n += 1;
    }
    let mut base = 64;
    while base < MAX_SIZE as u32 {
        let step = base / 8;
        let mut k = 1;
        while k <= 8 {
            sizes[n] = base + k * step;
            n += 1;
            k += 1;
        }
        base *= 2;
    }
    assert!(n == CLASSES && sizes[CLASSES - 1] == MAX_SIZE as u32);
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
    } else if rounded <= MAX_SIZE {
        Some(LARGE[(rounded + 127) >> 7] as usize)
    } else {
        None
    }
}

/// The class that serves `layout`, or `None` when it is mapped on its own (more than
/// [`MAX_SIZE`] bytes once rounded up to its alignment, or aligned to more than
/// [`MAX_ALIGN`]).
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

/// Items in a magazine of `class`: `16 KiB / size`, clamped to 4..=64.
///
/// A CPU slot holds two magazines, so this bounds what one CPU caches per class: about
/// 32 KiB of blocks for classes from 256 B to 4 KiB, less below (64 items, so 1 KiB for
/// 8-byte blocks), and 8 blocks above 4 KiB (256 KiB for the 32 KiB class). The floor
/// keeps at least 4 allocations per source call (one lock hold) for the largest classes;
/// the cap keeps a magazine's own metadata at 512 bytes and the source's batch short.
///
/// # Panics
///
/// If `class` is not below [`CLASSES`].
pub const fn magazine_size(class: usize) -> usize {
    let items = (16 << 10) / class_size(class);
    if items < 4 {
        4
    } else if items > 64 {
        64
    } else {
        items
    }
}

/// The log2 of the span size of `class`: 64 KiB spans for classes up to 8 KiB, 128 KiB up
/// to 16 KiB, 256 KiB above, so that every span holds at least 8 blocks and the tail a
/// span cannot use stays under 12.5% of it.
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
    fn spans_hold_at_least_eight_blocks() {
        for class in 0..CLASSES {
            let span = 1usize << span_shift(class);
            assert!(span / class_size(class) >= 8, "class {class}");
        }
    }
}
