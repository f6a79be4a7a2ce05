//! The tracking source: a pool of numbered, non-`Clone` items that panics on a
//! duplicated or foreign item and, at the end, on a lost one ([invariant 1](magazine::docs::design#invariant-1-conservation)).

use std::sync::{Arc, Mutex};

use magazine::{Cache, Source};

use crate::checker::{current, ThreadId};

/// A cached item. Neither `Clone` nor `Copy`, so a duplicate can only come from a bug
/// that copies it out of a magazine twice.
#[derive(Debug, PartialEq, Eq)]
pub struct Item(u32);

impl Item {
    /// The item's number.
    pub fn id(&self) -> u32 {
        self.0
    }
}

/// A source of `size` items that checks every item returned to it.
///
/// The bookkeeping sits behind a std `Mutex` that the checkers do not see: it adds no
/// synchronisation to the model, and it is never held across a model operation.
#[derive(Debug)]
pub struct Tracker {
    size: usize,
    state: Mutex<State>,
    /// The model thread of each `alloc` that found the source empty, in order.
    refused: Mutex<Vec<ThreadId>>,
}

#[derive(Debug)]
struct State {
    /// Items in the source, handed out from the top.
    home: Vec<u32>,
    /// Whether item `i` is out of the source.
    out: Vec<bool>,
    /// Whether item `i` was ever handed out.
    handed: Vec<bool>,
}

impl Tracker {
    /// A source of `size` items, numbered `0..size`.
    pub fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            size,
            state: Mutex::new(State {
                home: (0..size as u32).rev().collect(),
                out: vec![false; size],
                handed: vec![false; size],
            }),
            refused: Mutex::new(Vec::new()),
        })
    }

    /// How many times the source answered `None` to the calling model thread so far.
    pub fn refusals(&self) -> usize {
        let me = current().id();
        let refused = self.refused.lock().unwrap();
        refused.iter().filter(|&&thread| thread == me).count()
    }

    /// Items now out of the source.
    pub fn out(&self) -> usize {
        let state = self.state.lock().unwrap();
        state.out.iter().filter(|&&out| out).count()
    }

    /// Takes `n` items for a scenario to hold (as if a caller had allocated them).
    pub fn take(&self, n: usize) -> Vec<Item> {
        (0..n)
            .map(|_| self.alloc().expect("the scenario sized the pool"))
            .collect()
    }

    /// Gives items back, checking each (for scenarios that hold items themselves).
    pub fn give(&self, items: impl IntoIterator<Item = Item>) {
        self.receive(items.into_iter().collect());
    }

    /// Asserts that every item is home: none lost ([invariant 1](magazine::docs::design#invariant-1-conservation)).
    pub fn assert_all_home(&self) {
        let state = self.state.lock().unwrap();
        let lost: Vec<usize> = (0..self.size).filter(|&i| state.out[i]).collect();
        assert!(lost.is_empty(), "lost items (never returned): {lost:?}");
        assert_eq!(state.home.len(), self.size);
    }

    fn receive(&self, items: Vec<Item>) {
        let mut state = self.state.lock().unwrap();
        for Item(id) in items {
            let i = id as usize;
            assert!(
                i < self.size && state.handed[i],
                "foreign item {id}: never handed out"
            );
            assert!(state.out[i], "duplicated item {id}: returned twice");
            state.out[i] = false;
            state.home.push(id);
        }
    }
}

impl Source for Tracker {
    type Item = Item;

    fn alloc(&self) -> Option<Item> {
        let mut state = self.state.lock().unwrap();
        let Some(id) = state.home.pop() else {
            drop(state);
            self.refused.lock().unwrap().push(current().id());
            return None;
        };
        state.out[id as usize] = true;
        state.handed[id as usize] = true;
        Some(Item(id))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = Item>) {
        // Take the items first: the iterator pops magazine cells, which are model accesses.
        let items: Vec<Item> = items.collect();
        self.receive(items);
    }
}

/// The cache type of the scenarios.
pub type TrackedCache = Cache<Arc<Tracker>>;

/// The end of every cache scenario, when quiescent: `Stats` depot lengths equal the real
/// ones ([invariant 5](magazine::docs::design#invariant-5-accounting)); the items out of the source are exactly the cached ones (invariant
/// 1, the scenario's threads hold none); dropping the cache brings every item home.
pub fn assert_conserved(cache: TrackedCache, tracker: &Tracker) {
    let stats = cache.stats();
    let (full, empty) = magazine::model::depot_linked(&cache);
    assert_eq!(
        stats.depot_full, full,
        "Stats::depot_full != linked full magazines"
    );
    assert_eq!(
        stats.depot_empty, empty,
        "Stats::depot_empty != linked empty magazines"
    );
    assert_eq!(
        cache.cached(),
        tracker.out(),
        "items out of the source != items cached: {stats:?}"
    );
    drop(cache);
    tracker.assert_all_home();
}
