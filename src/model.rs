//! Internals for the model-check suites in `loom-tests/`. Compiled only under `--cfg loom`
//! or the `shuttle` feature; not part of the public API.
//!
//! The raw depot scenarios (push/pop race, ABA shape, growth, shrink, empty recycling)
//! drive [`Depot`] directly; the cache scenarios use [`depot_linked`] to compare `Stats`
//! with the real stack lengths ([invariant 5](crate::docs::design#invariant-5-accounting)).

use alloc::vec::Vec;

use crate::magazine::Magazine;
use crate::{Cache, Config, Options, Source};

/// The crate's depot, with magazines passed as vectors of items.
pub struct Depot<T>(crate::depot::Depot<T>);

impl<T> Depot<T> {
    /// A depot with `config`'s policy and `options`' empty cap.
    pub fn new(config: &Config, options: &Options) -> Self {
        Self(crate::depot::Depot::try_new(config, options).expect("memory for the shelves"))
    }

    /// Pushes a full magazine holding `items`; hands them back when a `Fixed` cap refuses.
    pub fn push_full(&self, items: Vec<T>) -> Result<(), Vec<T>> {
        self.0.push_full(magazine_of(items)).map_err(items_of)
    }

    /// Pops a full magazine's items.
    pub fn pop_full(&self) -> Option<Vec<T>> {
        self.0.pop_full().map(items_of)
    }

    /// Pops a full magazine and keeps it whole, so that the same magazine (and the same
    /// stack node) can be pushed back: the ABA shape.
    pub fn pop_full_held(&self) -> Option<Held<T>> {
        self.0.pop_full().map(Held)
    }

    /// Pushes a held magazine back; hands it back when a `Fixed` cap refuses.
    pub fn push_full_held(&self, held: Held<T>) -> Result<(), Held<T>> {
        self.0.push_full(held.0).map_err(Held)
    }

    /// Pushes an empty magazine of `capacity` (freed when the empty stack is at its cap).
    pub fn push_empty(&self, capacity: usize) {
        self.0.push_empty(Magazine::new(capacity));
    }

    /// Pops an empty magazine; returns its capacity.
    pub fn pop_empty(&self) -> Option<usize> {
        self.0.pop_empty().map(|magazine| magazine.capacity())
    }

    /// One trim step; released magazines' items go to `release`.
    pub fn trim(&self, mut release: impl FnMut(Vec<T>)) -> usize {
        self.0.trim(|| 0, |magazine| release(items_of(magazine)))
    }

    /// `(full, empty)` as counted by the stacks (what `Stats` reports).
    pub fn counted(&self) -> (usize, usize) {
        (self.0.full_len(), self.0.empty_len())
    }

    /// `(full, empty)` by walking the stacks; only meaningful when quiescent.
    pub fn linked(&self) -> (usize, usize) {
        self.0.linked()
    }

    /// The highest full length reached.
    pub fn peak(&self) -> usize {
        self.0.peak()
    }
}

/// A magazine taken from a [`Depot`] whole (see [`Depot::pop_full_held`]).
pub struct Held<T>(Magazine<T>);

impl<T> Held<T> {
    /// The magazine's items; the magazine itself is dropped.
    pub fn into_items(self) -> Vec<T> {
        items_of(self.0)
    }
}

/// `(full, empty)` magazines really linked in `cache`'s depot; only meaningful when
/// quiescent.
pub fn depot_linked<S: Source>(cache: &Cache<S>) -> (usize, usize) {
    cache.depot().linked()
}

fn magazine_of<T>(items: Vec<T>) -> Magazine<T> {
    let mut magazine = Magazine::new(items.len().max(1));
    for item in items {
        assert!(magazine.push(item).is_ok(), "sized to fit");
    }
    magazine
}

fn items_of<T>(mut magazine: Magazine<T>) -> Vec<T> {
    let mut items: Vec<T> = magazine.drain().collect();
    items.reverse();
    items
}
