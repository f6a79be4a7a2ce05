//! Returning items to the source: from magazines that are out of every slot and stack,
//! with a guard ([`Rescue`]) that puts a magazine into the depot if the source panics,
//! so that nothing is lost ([invariant 1](crate::docs::design#invariant-1-conservation)).

use crate::depot::Depot;
use crate::depot::Overflow;
use crate::magazine::Magazine;
use crate::pair::MagazinePair;
use crate::source::Source;
use crate::sync::Ordering;

use super::Cache;

impl<S: Source> Cache<S> {
    /// Returns a magazine's items to the source and keeps the emptied magazine for reuse.
    pub(crate) fn release_to_source(&self, magazine: Magazine<S::Item>) {
        let empty = self.release(magazine);
        self.depot.push_empty(empty);
    }

    /// Returns what a free could not cache to the source: a magazine a `Fixed` depot
    /// refused, or, when no empty magazine could be had, the item alone (an item the
    /// source panics on before taking it unwinds away with the caller: it was the caller's
    /// to free).
    pub(crate) fn release_overflow(&self, overflow: Overflow<S::Item>) {
        match overflow {
            Overflow::Magazine(magazine) => self.release_to_source(magazine),
            Overflow::Item(item) => {
                self.source.free_batch(&mut core::iter::once(item));
                self.counters.source_free_calls.add(1);
                self.counters.source_frees.add(1);
            }
        }
    }

    /// [`release_to_source`](Self::release_to_source) for magazines that are all out of
    /// every slot and stack: if the source panics on one, the others (and what it did not
    /// take) go to the depot.
    pub(crate) fn release_each<const N: usize>(&self, magazines: [Option<Magazine<S::Item>>; N]) {
        let mut pending = magazines.map(|magazine| Rescue::new(&self.depot, magazine));
        for rescue in &mut pending {
            if let Some(magazine) = rescue.take() {
                self.release_to_source(magazine);
            }
        }
    }

    /// Returns a magazine's items to the source; returns the magazine, now empty.
    ///
    /// If the source panics, the items it has not taken stay in the magazine and the
    /// magazine goes into the depot (past a `Fixed` cap if need be): nothing is lost.
    fn release(&self, magazine: Magazine<S::Item>) -> Magazine<S::Item> {
        let mut rescue = Rescue::new(&self.depot, Some(magazine));
        let magazine = rescue.magazine.as_mut().expect("set above");
        self.free_to_source(magazine);
        rescue.take().expect("set above")
    }

    /// Hands every item of `magazine` to the source (see [`Source::free_batch`] for a
    /// source that stops early).
    fn free_to_source(&self, magazine: &mut Magazine<S::Item>) {
        while !magazine.is_empty() {
            let before = magazine.len();
            self.source.free_batch(&mut magazine.drain());
            self.counters.source_free_calls.add(1);
            let taken = before - magazine.len();
            self.counters.source_frees.add(taken);
            if taken == 0 {
                magazine.drain().for_each(drop);
            }
        }
        if self.source_dry.load(Ordering::Relaxed) {
            self.source_dry.store(false, Ordering::Relaxed);
        }
    }

    /// [`release_to_source`](Self::release_to_source) of `refused` while the caller holds
    /// `item`, which it took from the cache: if the source panics, a [`KeepItem`] puts the
    /// item into the depot instead of letting it unwind away. Returns the item.
    pub(crate) fn release_holding(&self, refused: Magazine<S::Item>, item: S::Item) -> S::Item {
        let held = KeepItem::new(&self.depot, item);
        self.release_to_source(refused);
        held.into_inner()
    }

    pub(super) fn drain_magazines(&self, magazines: &mut MagazinePair<S::Item>) {
        self.free_to_source(&mut magazines.loaded);
        self.free_to_source(&mut magazines.previous);
    }

    /// Returns every non-empty depot magazine to the source and frees the empty ones.
    pub(super) fn drain_depot(&self) {
        let popped = self.depot.drain(|magazine| drop(self.release(magazine)));
        self.counters.depot_pops.add(popped);
    }

    /// [`drain_depot`](Self::drain_depot) for a flush while other threads may work: as
    /// many non-empty magazines as the depot held when it started, so that a flush ends
    /// while producers keep pushing (when quiescent, that is all of them).
    pub(super) fn drain_depot_once(&self) {
        let limit = match cfg!(magazine_mutant = "flush_drains_unbounded") {
            // MUTANT: the flush drains until the depot is empty, chasing the producers.
            true => usize::MAX,
            false => self.depot.full_len(),
        };
        let popped = self
            .depot
            .drain_at_most(limit, |magazine| drop(self.release(magazine)));
        self.counters.depot_pops.add(popped);
    }
}

/// Holds a magazine that is out of every slot and stack while the source runs; if the
/// source panics, the guard puts the magazine (with the items the source did not take)
/// into the depot, past a `Fixed` cap if need be.
pub(crate) struct Rescue<'a, T> {
    depot: &'a Depot<T>,
    magazine: Option<Magazine<T>>,
}

impl<'a, T> Rescue<'a, T> {
    pub(crate) fn new(depot: &'a Depot<T>, magazine: Option<Magazine<T>>) -> Self {
        Self { depot, magazine }
    }

    /// Takes the magazine back: the danger is over.
    pub(crate) fn take(&mut self) -> Option<Magazine<T>> {
        self.magazine.take()
    }

    /// The magazine held, to fill or drain while the danger lasts.
    pub(crate) fn magazine_mut(&mut self) -> Option<&mut Magazine<T>> {
        self.magazine.as_mut()
    }
}

impl<T> Drop for Rescue<'_, T> {
    fn drop(&mut self) {
        if let Some(magazine) = self.magazine.take() {
            if !magazine.is_empty() {
                self.depot.push_full_unbounded(magazine);
            }
        }
    }
}

/// Holds an item that the caller took out of the cache while a call that may panic (the
/// source, for a magazine a `Fixed` depot refused) runs; if it panics, the guard puts the
/// item into the depot, in a magazine of its own, past a `Fixed` cap if need be, so that
/// the item is not dropped with the unwinding caller.
pub(crate) struct KeepItem<'a, T> {
    depot: &'a Depot<T>,
    item: Option<T>,
}

impl<'a, T> KeepItem<'a, T> {
    pub(crate) fn new(depot: &'a Depot<T>, item: T) -> Self {
        Self {
            depot,
            item: Some(item),
        }
    }

    /// Takes the item back: the danger is over.
    pub(crate) fn into_inner(mut self) -> T {
        self.item.take().expect("held until now")
    }
}

impl<T> Drop for KeepItem<'_, T> {
    fn drop(&mut self) {
        let Some(item) = self.item.take() else {
            return;
        };
        if cfg!(magazine_mutant = "held_item_dropped") {
            // MUTANT: the item unwinds away with the caller.
            drop(item);
            return;
        }
        // Without a magazine (the allocator refused one while the source panicked) the
        // item is leaked, not dropped: never handed out twice, never lost into the source.
        let Some(mut magazine) = self.depot.empty_magazine() else {
            core::mem::forget(item);
            return;
        };
        if magazine.push(item).is_ok() {
            self.depot.push_full_unbounded(magazine);
        }
    }
}
