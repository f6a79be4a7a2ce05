//! The depot: lock-free stacks of full and of empty magazines, with the policy that bounds
//! and trims them.

use crate::magazine::Magazine;
use crate::policy::{Config, DepotPolicy, Options, Trim};
use crate::stack::Stack;
use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// The global depot between the per-CPU slots (and per-thread handles) and the source.
///
/// Upholds DESIGN.md invariant 4 (bounded memory: the `Fixed` cap on full magazines, the
/// cap on empty ones, and the trimming rules) and invariant 5 (its lengths are the stacks'
/// own counters, exact when quiescent). Magazines move through it whole; nothing here
/// looks at items.
pub(crate) struct Depot<T> {
    full: Stack<T>,
    empty: Stack<T>,
    policy: DepotPolicy,
    max_empty: usize,
    /// Items in the full magazines (statistics only: Relaxed; exact when quiescent).
    items: AtomicUsize,
    /// Highest `full.len()` ever reached.
    peak: AtomicUsize,
    /// Full magazines taken from / given to the depot (statistics only: Relaxed).
    pops: AtomicUsize,
    pushes: AtomicUsize,
    /// Full magazines released by trim (statistics only: Relaxed).
    trimmed: AtomicUsize,
    /// True while a trim runs. A second concurrent trim returns at once instead of reading
    /// a low-water mark that the first one has just restarted.
    ///
    /// | value | meaning       | transition                                   |
    /// |-------|---------------|----------------------------------------------|
    /// | false | no trim       | `swap(true, Acquire)` by the trimming thread |
    /// | true  | trim running  | `store(false, Release)` by the same thread   |
    trimming: AtomicBool,
}

impl<T> Depot<T> {
    pub(crate) fn new(config: &Config, options: &Options) -> Self {
        Self {
            full: Stack::new(),
            empty: Stack::new(),
            policy: config.depot,
            max_empty: config.empty_cap(options),
            items: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            pops: AtomicUsize::new(0),
            pushes: AtomicUsize::new(0),
            trimmed: AtomicUsize::new(0),
            trimming: AtomicBool::new(false),
        }
    }

    /// Takes a full (non-empty) magazine.
    pub(crate) fn pop_full(&self) -> Option<Magazine<T>> {
        let magazine = self.full.pop()?;
        self.items.fetch_sub(magazine.len(), Ordering::Relaxed);
        self.pops.fetch_add(1, Ordering::Relaxed);
        Some(magazine)
    }

    /// Gives a non-empty magazine to the depot, or hands it back when a `Fixed` depot is at
    /// its cap (the caller then returns its items to the source).
    pub(crate) fn push_full(&self, magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        debug_assert!(!magazine.is_empty());
        // Counted before the magazine is linked, so that the pop of it cannot subtract first.
        let items = magazine.len();
        self.items.fetch_add(items, Ordering::Relaxed);
        let len = match self.full.push_bounded(magazine, self.policy.max_full()) {
            Ok(len) => len,
            Err(magazine) => {
                self.items.fetch_sub(items, Ordering::Relaxed);
                return Err(magazine);
            }
        };
        self.raise_peak(len);
        self.pushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Takes a non-empty magazine in whatever the cap says, because the alternative is
    /// losing its items: used only when a source panicked while the magazine was out.
    pub(crate) fn push_full_unbounded(&self, magazine: Magazine<T>) {
        self.items.fetch_add(magazine.len(), Ordering::Relaxed);
        let len = self.full.push(magazine);
        self.raise_peak(len);
        self.pushes.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes an empty magazine for reuse.
    pub(crate) fn pop_empty(&self) -> Option<Magazine<T>> {
        self.empty.pop()
    }

    /// Keeps an empty magazine for reuse, or frees it when the empty stack is at its cap.
    pub(crate) fn push_empty(&self, magazine: Magazine<T>) {
        debug_assert!(magazine.is_empty());
        // A refused magazine is dropped here: it holds no items, only memory.
        let _ = self.empty.push_bounded(magazine, self.max_empty);
    }

    /// One trim step. Full magazines the policy releases are passed to `release` (which
    /// returns their items to the source); empty magazines unused for the whole interval
    /// are freed. Returns the number of full magazines released.
    pub(crate) fn trim(&self, mut release: impl FnMut(Magazine<T>)) -> usize {
        if self.trimming.swap(true, Ordering::Acquire) {
            return 0;
        }
        let _running = TrimRunning(&self.trimming);

        let released = match self.policy {
            DepotPolicy::Fixed { .. } => 0,
            DepotPolicy::Dynamic {
                target,
                trim: Trim::OnePerTick,
            } => self.release_full(1, target, &mut release),
            DepotPolicy::Dynamic {
                target,
                trim: Trim::WorkingSet,
            } => {
                // The magazines that stayed in the depot during the whole interval (a
                // lower bound, see `Level`).
                let unused = self.full.restart_interval();
                self.release_full(unused, target, &mut release)
            }
        };
        // Empty magazines nobody took during the whole interval.
        let unused_empty = self.empty.restart_interval();
        for _ in 0..unused_empty {
            match self.pop_empty() {
                Some(magazine) => drop(magazine),
                None => break,
            }
        }
        self.trimmed.fetch_add(released, Ordering::Relaxed);
        released
    }

    /// Releases up to `count` full magazines, re-checking before each one that the depot
    /// still holds more than `target` (concurrent allocations may have drained it).
    fn release_full(
        &self,
        count: usize,
        target: usize,
        release: &mut impl FnMut(Magazine<T>),
    ) -> usize {
        let mut released = 0;
        #[cfg(not(magazine_mutant = "trim_no_recheck"))]
        let above_target = || self.full.len() > target;
        // MUTANT: pops `count` magazines without re-checking the target before each.
        #[cfg(magazine_mutant = "trim_no_recheck")]
        let above_target = || target < usize::MAX;
        while released < count && above_target() {
            let Some(magazine) = self.pop_full() else {
                break;
            };
            release(magazine);
            released += 1;
        }
        released
    }

    /// Returns every full magazine, one at a time, to `release`, and frees every empty one.
    pub(crate) fn drain(&self, mut release: impl FnMut(Magazine<T>)) {
        while let Some(magazine) = self.pop_full() {
            release(magazine);
        }
        while let Some(magazine) = self.pop_empty() {
            drop(magazine);
        }
    }

    /// `(full, empty)` nodes linked in the stacks (model checks only, when quiescent).
    #[cfg(any(loom, feature = "shuttle"))]
    pub(crate) fn linked(&self) -> (usize, usize) {
        (self.full.linked(), self.empty.linked())
    }

    pub(crate) fn full_len(&self) -> usize {
        self.full.len()
    }

    pub(crate) fn empty_len(&self) -> usize {
        self.empty.len()
    }

    pub(crate) fn full_items(&self) -> usize {
        self.items.load(Ordering::Relaxed)
    }

    /// Records a new length in `peak`: a plain load first, because the peak rarely moves
    /// and a read-modify-write on every push would contend for nothing.
    fn raise_peak(&self, len: usize) {
        if len > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(len, Ordering::Relaxed);
        }
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub(crate) fn pops(&self) -> usize {
        self.pops.load(Ordering::Relaxed)
    }

    pub(crate) fn pushes(&self) -> usize {
        self.pushes.load(Ordering::Relaxed)
    }

    pub(crate) fn trimmed(&self) -> usize {
        self.trimmed.load(Ordering::Relaxed)
    }
}

/// Clears the `trimming` flag when a trim ends, also by unwinding from a panicking source.
struct TrimRunning<'a>(&'a AtomicBool);

impl Drop for TrimRunning<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
