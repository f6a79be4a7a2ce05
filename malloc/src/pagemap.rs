//! Which of the allocator's mappings starts at an address: what lets a block be freed by
//! its address alone (C's `free`, [`MagazineMalloc::free`](crate::MagazineMalloc::free)),
//! and a pointer the allocator never handed out be told apart from its own.
//!
//! An entry per 4 KiB of address space, in a two-level table: a root of pointers, in the
//! program's image (untouched entries are never resident), to leaves of 2^18 entries (each
//! leaf covers 1 GiB; mapped at the first mapping of ours in its range, never unmapped).
//! Entries are written when the allocator maps or unmaps (a chunk, a page-class block, a
//! large block), never on a cache hit, and read without a lock: a lookup is two loads.
//!
//! The first page of each mapping has an entry (a chunk, a page-class block, a large
//! block), and so does every 64 KiB of a span that a class holds, naming the class: a
//! span-class block is found from the entry of its 64 KiB (spans are aligned to their
//! size, at least 64 KiB, inside chunks), one load, without touching the span.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::classes::SPAN_CLASSES;
use crate::os;

/// The granule of the map: 4 KiB, the smallest page of every Linux (mapping starts are
/// multiples of the system's page, which is a multiple of it).
const GRANULE_SHIFT: u32 = 12;
/// Address bits the map covers (user space on x86_64 and aarch64 with 4-level tables;
/// the kernel maps nothing above unless asked to).
const ADDRESS_BITS: u32 = 48;
/// The log2 of a leaf's entries.
const LEAF_SHIFT: u32 = 18;
const LEAF_ENTRIES: usize = 1 << LEAF_SHIFT;
const ROOT_ENTRIES: usize = 1 << (ADDRESS_BITS - GRANULE_SHIFT - LEAF_SHIFT);

/// A leaf: an entry per granule of its 1 GiB.
type Leaf = [AtomicU32; LEAF_ENTRIES];

static ROOT: [AtomicPtr<Leaf>; ROOT_ENTRIES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; ROOT_ENTRIES];

/// Entry values: 0 for none, [`CHUNK`], a span class from [`SPAN_CLASS`], a page class
/// from [`PAGE_CLASS`], a large block's length in granules with [`LARGE`] set.
const CHUNK: u32 = 1;
const SPAN_CLASS: u32 = 2;
const PAGE_CLASS: u32 = SPAN_CLASS + SPAN_CLASSES as u32;
const LARGE: u32 = 1 << 31;

/// The log2 of the granule of span entries: the smallest span (`span::MIN_SPAN_SHIFT`).
pub(crate) const SPAN_GRANULE_SHIFT: u32 = 16;

/// What starts at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mapping {
    /// A chunk of spans (`span`), at its first page (its header).
    Chunk,
    /// A span held by this span class (an entry at each 64 KiB of the span).
    SpanClass(usize),
    /// A block of a page class (`pages`).
    PageClass(usize),
    /// A large block (`large`) of this many bytes, a whole number of pages.
    Large(usize),
}

impl Mapping {
    fn encode(self) -> Option<u32> {
        match self {
            Mapping::Chunk => Some(CHUNK),
            Mapping::SpanClass(class) => Some(SPAN_CLASS + class as u32),
            Mapping::PageClass(class) => Some(PAGE_CLASS + (class - SPAN_CLASSES) as u32),
            Mapping::Large(len) => {
                let granules = u32::try_from(len >> GRANULE_SHIFT).ok()?;
                (granules < LARGE).then_some(LARGE | granules)
            }
        }
    }

    fn decode(entry: u32) -> Option<Mapping> {
        match entry {
            0 => None,
            CHUNK => Some(Mapping::Chunk),
            _ if entry < PAGE_CLASS => Some(Mapping::SpanClass((entry - SPAN_CLASS) as usize)),
            _ if entry & LARGE != 0 => {
                Some(Mapping::Large(((entry & !LARGE) as usize) << GRANULE_SHIFT))
            }
            _ => Some(Mapping::PageClass(
                SPAN_CLASSES + (entry - PAGE_CLASS) as usize,
            )),
        }
    }
}

/// The root index and leaf index of `addr`, `None` above the covered addresses.
fn split(addr: usize) -> Option<(usize, usize)> {
    let granule = addr >> GRANULE_SHIFT;
    let root = granule >> LEAF_SHIFT;
    (root < ROOT_ENTRIES).then_some((root, granule & (LEAF_ENTRIES - 1)))
}

/// The entry of `addr`, if its leaf exists.
#[inline]
fn existing(addr: usize) -> Option<&'static AtomicU32> {
    let (root, index) = split(addr)?;
    let leaf = ROOT[root].load(Ordering::Acquire);
    // SAFETY: a leaf, once published, stays mapped for the life of the process; a fresh
    // mapping reads as zeroes, which are valid `AtomicU32`s.
    (!leaf.is_null()).then(|| unsafe { &(*leaf)[index] })
}

/// The entry of `addr`, mapping its leaf if it has none; `None` when that cannot be
/// mapped (or `addr` is beyond the map).
fn entry_or_create(addr: usize) -> Option<&'static AtomicU32> {
    if let Some(entry) = existing(addr) {
        return Some(entry);
    }
    let (root, _) = split(addr)?;
    let len = std::mem::size_of::<Leaf>();
    let fresh = os::map(len)? as *mut Leaf;
    if let Err(_theirs) =
        ROOT[root].compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
    {
        // SAFETY: our fresh mapping, which nobody else saw.
        unsafe { os::unmap(fresh as usize, len) };
    }
    existing(addr)
}

/// Records that `mapping` starts at `addr` (a multiple of the page size); false when the
/// map cannot hold it (its leaf cannot be mapped, the address or the length is beyond
/// what it covers), and then the caller must not hand the memory out.
#[must_use]
pub(crate) fn insert(addr: usize, mapping: Mapping) -> bool {
    let (Some(value), Some(entry)) = (mapping.encode(), entry_or_create(addr)) else {
        return false;
    };
    // Release: whoever finds the entry sees what was written before (a chunk's header).
    entry.store(value, Ordering::Release);
    true
}

/// Records that span class `class` holds the span `[start, start + len)` (`Some`), or
/// that nobody does (`None`): an entry at each 64 KiB. The span is in a chunk already
/// recorded (`insert` of [`Mapping::Chunk`]), so its leaf exists and nothing can fail.
pub(crate) fn mark_span(start: usize, len: usize, class: Option<usize>) {
    let value = class.map_or(0, |class| SPAN_CLASS + class as u32);
    for granule in (start..start + len).step_by(1 << SPAN_GRANULE_SHIFT) {
        if let Some(entry) = existing(granule) {
            // Release: whoever finds the class sees the span set up for it.
            entry.store(value, Ordering::Release);
        }
    }
}

/// The span class whose span holds `addr`, if a class holds one there: one lookup, at
/// `addr`'s 64 KiB.
#[inline]
pub(crate) fn span_class(addr: usize) -> Option<usize> {
    let entry = existing(addr & !((1 << SPAN_GRANULE_SHIFT) - 1))?;
    let value = entry.load(Ordering::Acquire);
    (value.wrapping_sub(SPAN_CLASS) < SPAN_CLASSES as u32).then(|| (value - SPAN_CLASS) as usize)
}

/// Removes the entry of `addr` (the mapping is about to be unmapped or reused).
pub(crate) fn remove(addr: usize) {
    if let Some(entry) = existing(addr) {
        // Relaxed: nothing is published by a removal; whoever maps the address next
        // does so after the kernel's unmap, which follows this store in program order.
        entry.store(0, Ordering::Relaxed);
    }
}

/// What starts at `addr`, if anything of ours does.
#[inline]
pub(crate) fn get(addr: usize) -> Option<Mapping> {
    Mapping::decode(existing(addr)?.load(Ordering::Acquire))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        for mapping in [
            Mapping::Chunk,
            Mapping::SpanClass(0),
            Mapping::SpanClass(SPAN_CLASSES - 1),
            Mapping::PageClass(SPAN_CLASSES),
            Mapping::PageClass(crate::classes::CLASSES - 1),
            Mapping::Large(4096),
            Mapping::Large(((LARGE - 1) as usize) << GRANULE_SHIFT),
        ] {
            assert_eq!(Mapping::decode(mapping.encode().unwrap()), Some(mapping));
        }
        assert_eq!(
            Mapping::Large((LARGE as usize) << GRANULE_SHIFT).encode(),
            None
        );
    }

    #[test]
    fn addresses_beyond_the_map_are_refused() {
        assert!(!insert(1 << ADDRESS_BITS, Mapping::Chunk));
        assert_eq!(get(1 << ADDRESS_BITS), None);
        assert_eq!(get(usize::MAX & !4095), None);
    }
}
