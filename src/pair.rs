//! The loaded and previous magazines of a CPU slot or a thread handle, and Bonwick's rules
//! for moving between them and the depot.

use alloc::collections::TryReserveError;
use core::mem;

use crate::depot::{Near, Overflow};
use crate::magazine::Magazine;

/// A loaded and a previous magazine.
///
/// Allocation pops from `loaded`; freeing pushes to it. When `loaded` cannot serve, the
/// two are swapped if `previous` can; only when neither can does a whole magazine move to
/// or from the depot. Bonwick's invariant "previous is full or empty" holds after every
/// exchange; the swap tests below are written as "previous can serve" so that they stay
/// correct for the partly filled magazines that a handle drop or a panicking source leave.
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) across exchanges: every item stays in exactly one
/// magazine, and the item being freed is stored before the depot is asked to take a
/// magazine (so no item is in flight while a `Fixed` overflow runs the source).
#[repr(C)] // `loaded` first: see `src/rseq.rs`.
pub(crate) struct MagazinePair<T> {
    pub(crate) loaded: Magazine<T>,
    pub(crate) previous: Magazine<T>,
}

impl<T> MagazinePair<T> {
    /// Two empty magazines; the error when the allocator refuses the memory.
    pub(crate) fn try_new(magazine_size: usize) -> Result<Self, TryReserveError> {
        Ok(Self {
            loaded: Magazine::try_new(magazine_size)?,
            previous: Magazine::try_new(magazine_size)?,
        })
    }

    /// Allocation served by the two magazines alone.
    #[inline]
    pub(crate) fn alloc(&mut self) -> Option<T> {
        if let Some(item) = self.loaded.pop() {
            return Some(item);
        }
        if self.previous.is_empty() {
            return None;
        }
        mem::swap(&mut self.loaded, &mut self.previous);
        self.loaded.pop()
    }

    /// Free served by the two magazines alone; hands the item back when both are full.
    #[inline]
    pub(crate) fn free(&mut self, item: T) -> Result<(), T> {
        let item = match self.loaded.push(item) {
            Ok(()) => return Ok(()),
            Err(item) => item,
        };
        if self.previous.is_full() {
            return Err(item);
        }
        mem::swap(&mut self.loaded, &mut self.previous);
        self.loaded.push(item)
    }

    /// Both magazines are empty: take a full (else a partly filled) magazine from the depot
    /// as `loaded` and give the depot the empty `previous`. Returns `false` (changing
    /// nothing) when the depot has no such magazine.
    pub(crate) fn refill(&mut self, depot: &Near<'_, T>) -> bool {
        debug_assert!(self.is_empty());
        let Some(full) = depot.pop_refill() else {
            return false;
        };
        full.prefetch(false);
        depot.push_empty(self.install(full));
        true
    }

    /// Both magazines are empty: `magazine` becomes `loaded`; returns the empty magazine
    /// it replaces (the old `previous`; the old `loaded` becomes `previous`).
    pub(crate) fn install(&mut self, magazine: Magazine<T>) -> Magazine<T> {
        debug_assert!(self.is_empty());
        mem::replace(&mut self.previous, mem::replace(&mut self.loaded, magazine))
    }

    /// Both of our magazines are empty: take both magazines of `victim` (another owner's
    /// pair, e.g. a CPU slot we hold for the moment) and give it our two empty ones.
    /// Both, not the better one: a thief takes a slot only when the source is exhausted,
    /// and each take costs the victim's cache lines (and, with restartable sequences, a
    /// fence that interrupts the victim's CPU), so one take brings everything the slot
    /// holds. Returns `false` (changing nothing) when `victim` holds nothing.
    pub(crate) fn steal_from(&mut self, victim: &mut MagazinePair<T>) -> bool {
        debug_assert!(self.is_empty());
        if victim.is_empty() {
            return false;
        }
        mem::swap(self, victim);
        true
    }

    /// Both of our magazines are empty: take `magazine` (another owner's, e.g. the
    /// `previous` of a CPU slot we claimed) as `loaded` and give it our empty `loaded` in
    /// its place. Returns `false` (changing nothing) when `magazine` is empty.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn steal_magazine(&mut self, magazine: &mut Magazine<T>) -> bool {
        debug_assert!(self.is_empty());
        if magazine.is_empty() {
            return false;
        }
        mem::swap(&mut self.loaded, magazine);
        true
    }

    /// The newest item of either magazine that `accept` takes.
    #[inline]
    pub(crate) fn alloc_where(&mut self, mut accept: impl FnMut(&T) -> bool) -> Option<T> {
        self.loaded
            .pop_where(&mut accept)
            .or_else(|| self.previous.pop_where(accept))
    }

    /// Whether neither magazine holds an item.
    pub(crate) fn is_empty(&self) -> bool {
        self.loaded.is_empty() && self.previous.is_empty()
    }

    /// Both magazines are full: store `item` in an empty magazine (recycled from the depot,
    /// else new) and give the full `previous` to the depot. Returns the full magazine when
    /// a `Fixed` depot refuses it; the caller must return its items to the source. `item`
    /// is stored before the depot is asked, so no item is ever in flight while the source
    /// runs.
    /// Without an empty magazine (the allocator refused one) the pair is left as it was
    /// and the item comes back in [`Overflow::Item`], for the source.
    pub(crate) fn spill(&mut self, item: T, depot: &Near<'_, T>) -> Result<(), Overflow<T>> {
        let Some(empty) = depot.empty_magazine() else {
            return Err(Overflow::Item(item));
        };
        empty.prefetch(true);
        let full = mem::replace(&mut self.previous, mem::replace(&mut self.loaded, empty));
        let stored = self.loaded.push(item);
        debug_assert!(stored.is_ok(), "a fresh magazine has room");
        depot.push_full(full).map_err(Overflow::Magazine)
    }

    /// Moves both magazines out, leaving empty ones (recycled from the depot, else new)
    /// in their place; returns the ones that held items. This is how a flush or a trim
    /// takes a slot's items without running the source while it holds the slot. A
    /// magazine for which no empty one can be had (the allocator refused it) stays.
    pub(crate) fn take_items(&mut self, depot: &Near<'_, T>) -> [Option<Magazine<T>>; 2] {
        [&mut self.loaded, &mut self.previous].map(|magazine| replace_if_holding(magazine, depot))
    }

    /// Items held by both magazines.
    pub(crate) fn len(&self) -> usize {
        self.loaded.len() + self.previous.len()
    }
}

/// Takes `magazine` out if it holds items, leaving an empty one (recycled from the depot,
/// else new) in its place; `None` when it is empty or no empty one can be had.
pub(crate) fn replace_if_holding<T>(
    magazine: &mut Magazine<T>,
    depot: &Near<'_, T>,
) -> Option<Magazine<T>> {
    if magazine.is_empty() {
        return None;
    }
    Some(mem::replace(magazine, depot.empty_magazine()?))
}
