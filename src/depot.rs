//! The depot: lock-free stacks of full, partly filled and empty magazines, a shelf per CPU
//! in front of them, and the policy that bounds and trims them.

use alloc::boxed::Box;

use crossbeam_utils::CachePadded;

use crate::magazine::Magazine;
use crate::policy::{Config, DepotPolicy, Options, Trim};
use crate::process_flag::ProcessFlag;
use crate::shelf::Shelf;
use crate::stack::Stack;
use crate::sync::{AtomicUsize, Ordering};

/// The global depot between the per-CPU slots (and per-thread handles) and the source.
///
/// Upholds [invariant 4](crate::docs::design#invariant-4-bounded-memory) (bounded memory: the `Fixed` cap on full magazines, the
/// caps on partly filled and empty ones, and the trimming rules) and [invariant 5](crate::docs::design#invariant-5-accounting) (its
/// lengths are the stacks' own counters, exact when quiescent). Magazines move through it
/// whole, except on the *loose* paths ([`free_loose`](Self::free_loose),
/// [`alloc_loose`](Self::alloc_loose)) that serve a thread which found every CPU slot
/// busy: they move one item in or out of a partly filled magazine that the thread owns
/// between a pop and a push.
///
/// Slots and handles exchange magazines through [`Near`], the depot seen from one CPU:
/// that CPU's [`Shelf`] first (one full and one empty magazine, on a cache line of its
/// own), then the shared stacks. Magazines on a shelf are part of the depot: they are
/// counted in its lengths, offered to refills that find the stacks empty, drained by a
/// flush and trimmed when unused. A `Fixed` depot has no shelves (its cap is on the full
/// stack alone, and must stay hard).
///
/// No statistics counter here is written on the exchange path: callers count the
/// magazines they move (in their slot or handle), and `short` changes only when a
/// magazine that is not full enters or leaves the full stack.
pub(crate) struct Depot<T> {
    /// Non-empty magazines: full ones from spills, partly filled ones from handle drops,
    /// idle-slot reclaims and rescues. The `Fixed` cap applies here.
    ///
    /// Each stack (its head and counters) has a cache line of its own: a refill touches
    /// the full and the empty stack, a spill the same two, and a thread that only reads
    /// statistics should not take either line away from them.
    full: CachePadded<Stack<T>>,
    /// Partly filled magazines (neither empty nor full) left by the loose paths.
    partial: CachePadded<Stack<T>>,
    empty: CachePadded<Stack<T>>,
    /// One per CPU slot (CPU ids map to shelves as they map to slots); none when shelves
    /// are off ([`Options::cpu_shelves`], and always under `Fixed`).
    shelves: Box<[CachePadded<Shelf<T>>]>,
    policy: DepotPolicy,
    magazine_size: usize,
    max_empty: usize,
    /// The cap on the full stack: the policy's, or [`Options::max_full`] below it.
    max_full: usize,
    /// Free places in the magazines of `full`: `magazine_size x full.len() - items`
    /// (statistics only: Relaxed; exact when quiescent). Raised before a magazine that is
    /// not full is linked, lowered after one is unlinked, so it never underflows.
    short: AtomicUsize,
    /// Items in the magazines of `partial` (statistics only: Relaxed; exact when
    /// quiescent). Raised before a link, lowered after an unlink, like `short`; only the
    /// loose paths and a refill that finds no full magazine change it.
    partial_items: AtomicUsize,
    /// Highest `full.len()` ever reached; raised only when a push passes it (a plain load
    /// first, so a push that does not move it writes nothing).
    peak: AtomicUsize,
    /// True while a trim runs. A second concurrent trim returns at once instead of reading
    /// a low-water mark that the first one has just restarted.
    ///
    /// | value | meaning       | transition                                   |
    /// |-------|---------------|----------------------------------------------|
    /// | clear | no trim       | `try_set` (Acquire) by the trimming thread; a forked child takes a flag its parent held over |
    /// | set   | trim running  | `clear` (Release) by the same thread         |
    trimming: ProcessFlag,
}

impl<T> Depot<T> {
    /// A depot for `config`; the error when the allocator refuses the memory for its
    /// shelves.
    pub(crate) fn try_new(
        config: &Config,
        options: &Options,
    ) -> Result<Self, alloc::collections::TryReserveError> {
        Ok(Self {
            full: CachePadded::new(Stack::new()),
            partial: CachePadded::new(Stack::new()),
            empty: CachePadded::new(Stack::new()),
            shelves: crate::fallible::boxed_slice(config.shelf_count(options), |_| {
                Ok(CachePadded::new(Shelf::new()))
            })?,
            policy: config.depot,
            magazine_size: config.magazine_size,
            max_empty: config.empty_cap(options),
            max_full: config.full_cap(options),
            short: AtomicUsize::new(0),
            partial_items: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            trimming: ProcessFlag::new(),
        })
    }

    /// The depot as seen from `cpu` (a slot index or a CPU id): its shelf first.
    #[inline]
    pub(crate) fn near(&self, cpu: usize) -> Near<'_, T> {
        let n = self.shelves.len();
        let shelf = match n {
            0 => None,
            _ => Some(&*self.shelves[if cpu < n { cpu } else { cpu % n }]),
        };
        Near { depot: self, shelf }
    }

    /// The depot without shelves: its shared stacks (for trims, which should not mark a
    /// shelf used).
    pub(crate) fn stacks(&self) -> Near<'_, T> {
        Near {
            depot: self,
            shelf: None,
        }
    }

    /// Takes a non-empty magazine from the full stack.
    pub(crate) fn pop_full(&self) -> Option<Magazine<T>> {
        let magazine = self.full.pop()?;
        self.uncount_short(&magazine);
        Some(magazine)
    }

    /// Takes a magazine to refill a slot or handle with: a full one, else a partly filled
    /// one, else a full one from any CPU's shelf.
    pub(crate) fn pop_refill(&self) -> Option<Magazine<T>> {
        self.pop_full()
            .or_else(|| self.pop_partial())
            .or_else(|| self.take_shelved())
    }

    /// A full magazine from the first shelf that holds one. Only where the caller would
    /// otherwise go to the source: it reads every shelf's line.
    #[cold]
    fn take_shelved(&self) -> Option<Magazine<T>> {
        self.shelves.iter().find_map(|shelf| {
            let magazine = shelf.full.take()?;
            shelf.mark_used();
            Some(magazine)
        })
    }

    fn pop_partial(&self) -> Option<Magazine<T>> {
        let magazine = self.partial.pop()?;
        self.partial_items
            .fetch_sub(magazine.len(), Ordering::Relaxed);
        Some(magazine)
    }

    fn push_partial(&self, magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        let items = magazine.len();
        self.partial_items.fetch_add(items, Ordering::Relaxed);
        self.partial
            .push_bounded(magazine, self.max_empty)
            .map(drop)
            .inspect_err(|_| {
                self.partial_items.fetch_sub(items, Ordering::Relaxed);
            })
    }

    /// Gives a non-empty magazine to the depot, or hands it back when the full stack is at
    /// its cap (a `Fixed` depot's, or `Options::max_full`; the caller then returns its
    /// items to the source).
    pub(crate) fn push_full(&self, magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        debug_assert!(!magazine.is_empty());
        // Counted before the magazine is linked, so that the pop of it cannot subtract first.
        let short = self.count_short(&magazine);
        match self.full.push_bounded(magazine, self.max_full) {
            Ok(len) => {
                self.raise_peak(len);
                Ok(())
            }
            Err(magazine) => {
                self.sub_short(short);
                Err(magazine)
            }
        }
    }

    /// Takes a non-empty magazine whatever the policy's cap says, because the alternative
    /// is losing its items: used only while unwinding from a source that panicked with the
    /// magazine out of every slot and stack. Never panics (a panic while unwinding aborts):
    /// in the one case where even the stack's rescue reserve is full (more than 65279
    /// magazines on a 32-bit target and 256 rescues at once), the magazine is leaked,
    /// items and all, rather than dropped or pushed.
    pub(crate) fn push_full_unbounded(&self, magazine: Magazine<T>) {
        let short = self.count_short(&magazine);
        match self.full.push_rescue(magazine) {
            Ok(len) => self.raise_peak(len),
            Err(magazine) => {
                self.sub_short(short);
                core::mem::forget(magazine);
            }
        }
    }

    /// Takes an empty magazine for reuse.
    pub(crate) fn pop_empty(&self) -> Option<Magazine<T>> {
        self.empty.pop()
    }

    /// An empty magazine: a recycled one, else a new one; `None` when the allocator
    /// refuses the memory for one.
    pub(crate) fn empty_magazine(&self) -> Option<Magazine<T>> {
        self.pop_empty()
            .or_else(|| Magazine::try_new(self.magazine_size).ok())
    }

    /// Keeps an empty magazine for reuse, or frees it when the empty stack is at its cap.
    pub(crate) fn push_empty(&self, magazine: Magazine<T>) {
        debug_assert!(magazine.is_empty());
        // A refused magazine is dropped here: it holds no items, only memory.
        let _ = self.empty.push_bounded(magazine, self.max_empty);
    }

    /// Puts a magazine back where its fill level says: the empty stack, the partial stack
    /// (capped like the empty one), else the full stack. Hands it back when a `Fixed` depot
    /// refuses it; the caller returns its items to the source.
    pub(crate) fn push_any(&self, magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        if magazine.is_empty() {
            self.push_empty(magazine);
            return Ok(());
        }
        if magazine.is_full() {
            return self.push_full(magazine);
        }
        self.push_partial(magazine)
            .or_else(|magazine| self.push_full(magazine))
    }

    /// Stores `item` for a thread that found every CPU slot busy: in a partly filled
    /// magazine (or an empty one) taken from the depot for the moment, which then goes
    /// back. Hands back a magazine that a `Fixed` depot refused (full, holding `item`), or
    /// `item` itself when there was no magazine to put it in (the allocator refused one).
    pub(crate) fn free_loose(&self, item: T) -> Result<(), Overflow<T>> {
        let Some(mut magazine) = self.pop_partial().or_else(|| self.empty_magazine()) else {
            return Err(Overflow::Item(item));
        };
        let stored = magazine.push(item);
        debug_assert!(stored.is_ok(), "a partial or empty magazine has room");
        self.push_any(magazine).map_err(Overflow::Magazine)
    }

    /// Takes one item for a thread that found every CPU slot busy, from a partly filled
    /// magazine, else from a full one; the rest goes back. `Err` hands back a magazine
    /// that a `Fixed` depot refused to take back (it cannot refuse one it just gave, but a
    /// racing push may have taken its place): the caller returns its items to the source.
    pub(crate) fn alloc_loose(&self) -> Option<(T, Option<Magazine<T>>)> {
        let mut magazine = self
            .pop_partial()
            .or_else(|| self.pop_full())
            .or_else(|| self.take_shelved())?;
        let item = magazine.pop().expect("depot magazines are not empty");
        if cfg!(magazine_mutant = "alloc_loose_forgets_rest") {
            // MUTANT: the rest of the magazine is freed with it instead of going back.
            if let Some(empty) = self.empty_magazine() {
                magazine = empty;
            }
        }
        Some((item, self.push_any(magazine).err()))
    }

    /// One trim step. First `reclaim` runs (with the trim's exclusion) and returns how many
    /// magazines it pushed to the full stack that were unused for the whole interval (an
    /// idle CPU slot's). Then the shelves that saw no put or take during the interval give
    /// their magazines up: full ones join the full stack as unused, empty ones are freed.
    /// Then full magazines the policy releases, and partly filled ones unused for the whole
    /// interval, are passed to `release` (which returns their items to the source); empty
    /// magazines unused for the whole interval are freed. Returns the number of full
    /// magazines released.
    ///
    /// The target is checked against the full stack alone: shelves in use are not counted,
    /// so a trim may keep up to one full magazine per busy CPU above the target, and never
    /// releases below it because of them. Once the load stops, the next trim but one finds
    /// every shelf unused and brings the whole depot to the target.
    pub(crate) fn trim(
        &self,
        reclaim: impl FnOnce() -> usize,
        mut release: impl FnMut(Magazine<T>),
    ) -> usize {
        if !self.trimming.try_set() {
            return 0;
        }
        let _running = TrimRunning(&self.trimming);
        let reclaimed = reclaim() + self.reclaim_unused_shelves(&mut release);

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
                // lower bound, see `Level`), and those just reclaimed from idle slots,
                // which nobody used either. LIFO: the reclaimed ones go first.
                let unused = self.full.restart_interval() + reclaimed;
                self.release_full(unused, target, &mut release)
            }
        };
        // Partly filled magazines nobody took during the whole interval: the loose paths
        // no longer need them.
        let unused_partial = self.partial.restart_interval();
        for _ in 0..unused_partial {
            match self.pop_partial() {
                Some(magazine) => release(magazine),
                None => break,
            }
        }
        // Empty magazines nobody took during the whole interval.
        let unused_empty = self.empty.restart_interval();
        for _ in 0..unused_empty {
            match self.pop_empty() {
                Some(magazine) => drop(magazine),
                None => break,
            }
        }
        released
    }

    /// Moves the magazines of every shelf unused since the previous trim off it: a full one
    /// to the full stack (one the stack refuses goes to `release`), an empty one is freed.
    /// Returns how many full magazines it pushed that were unused for the whole interval
    /// (one that a racing put has just shelved is pushed, but not counted).
    fn reclaim_unused_shelves(&self, release: &mut impl FnMut(Magazine<T>)) -> usize {
        let mut unused = 0;
        for shelf in self.shelves.iter() {
            if shelf.used_since_last_check() {
                continue;
            }
            drop(shelf.empty.take());
            let Some(magazine) = shelf.full.take() else {
                continue;
            };
            let fresh = shelf.used_lately();
            match self.push_full(magazine) {
                Ok(()) => unused += usize::from(!fresh),
                Err(magazine) => release(magazine),
            }
        }
        unused
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
        // MUTANT (`trim_no_recheck`): pops `count` magazines without re-checking the target.
        let recheck = !cfg!(magazine_mutant = "trim_no_recheck");
        let above_target = || !recheck || self.full.len() > target;
        while released < count && above_target() {
            let Some(magazine) = self.pop_full() else {
                break;
            };
            release(magazine);
            released += 1;
        }
        released
    }

    /// Returns every non-empty magazine (the shelves' too), one at a time, to `release`,
    /// and frees every empty one. Returns how many were passed to `release`.
    pub(crate) fn drain(&self, release: impl FnMut(Magazine<T>)) -> usize {
        self.drain_at_most(usize::MAX, release)
    }

    /// [`drain`](Self::drain), passing at most `limit` non-empty magazines to `release`:
    /// for a flush while other threads keep pushing, which would otherwise chase them
    /// without end.
    pub(crate) fn drain_at_most(
        &self,
        limit: usize,
        mut release: impl FnMut(Magazine<T>),
    ) -> usize {
        let mut released = 0;
        while released < limit {
            let Some(magazine) = self.pop_refill() else {
                break;
            };
            release(magazine);
            released += 1;
        }
        while let Some(magazine) = self.pop_empty() {
            drop(magazine);
        }
        for shelf in self.shelves.iter() {
            drop(shelf.empty.take());
        }
        released
    }

    /// `(full + partial, empty)` magazines really in the depot: nodes linked in the stacks
    /// and magazines on shelves (model checks only, when quiescent).
    #[cfg(magazine_model)]
    pub(crate) fn linked(&self) -> (usize, usize) {
        let (full, empty) = self.shelved();
        (
            self.full.linked() + self.partial.linked() + full,
            self.empty.linked() + empty,
        )
    }

    /// `(full, empty)` magazines on the shelves (a snapshot of each place).
    fn shelved(&self) -> (usize, usize) {
        self.shelves.iter().fold((0, 0), |(full, empty), shelf| {
            (
                full + usize::from(shelf.full.is_occupied()),
                empty + usize::from(shelf.empty.is_occupied()),
            )
        })
    }

    /// Non-empty magazines: full and partly filled, on the stacks and shelves.
    pub(crate) fn full_len(&self) -> usize {
        self.full.len() + self.partial.len() + self.shelved().0
    }

    pub(crate) fn empty_len(&self) -> usize {
        self.empty.len() + self.shelved().1
    }

    /// Items in the depot (exact when quiescent). Shelves hold full magazines only.
    pub(crate) fn full_items(&self) -> usize {
        let full = (self.magazine_size * (self.full.len() + self.shelved().0))
            .saturating_sub(self.short.load(Ordering::Relaxed));
        full + self.partial_items.load(Ordering::Relaxed)
    }

    /// Counts the free places of a magazine that is not full; returns them.
    fn count_short(&self, magazine: &Magazine<T>) -> usize {
        let short = self.magazine_size.saturating_sub(magazine.len());
        if short != 0 {
            self.short.fetch_add(short, Ordering::Relaxed);
        }
        short
    }

    fn uncount_short(&self, magazine: &Magazine<T>) {
        self.sub_short(self.magazine_size.saturating_sub(magazine.len()));
    }

    fn sub_short(&self, short: usize) {
        if short != 0 {
            self.short.fetch_sub(short, Ordering::Relaxed);
        }
    }

    /// Records a new length in `peak`: a plain load first, because the peak rarely moves
    /// and a read-modify-write on every push would contend for nothing.
    fn raise_peak(&self, len: usize) {
        if len > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(len, Ordering::Relaxed);
        }
    }

    /// The peak full length: the highest the full stack reached when a push onto it
    /// counted, raised here to the current length of the whole depot, so that the peak
    /// is never below a length that `Stats` reports. Magazines on shelves (at most one per
    /// CPU) count in it only when a call sees them: a shelf put counts nothing, so that it
    /// stays one compare-and-swap on the CPU's own line.
    pub(crate) fn peak(&self) -> usize {
        self.raise_peak(self.full_len());
        self.peak.load(Ordering::Relaxed)
    }
}

/// The depot seen from one CPU (see [`Depot::near`]): the exchanges of a slot or a handle
/// try that CPU's shelf before the shared stacks.
pub(crate) struct Near<'d, T> {
    depot: &'d Depot<T>,
    shelf: Option<&'d Shelf<T>>,
}

impl<T> Near<'_, T> {
    /// A magazine to refill with: the shelf's full one, else [`Depot::pop_refill`].
    #[inline]
    pub(crate) fn pop_refill(&self) -> Option<Magazine<T>> {
        if let Some(shelf) = self.shelf {
            if let Some(magazine) = shelf.full.take() {
                shelf.mark_used();
                return Some(magazine);
            }
        }
        self.depot.pop_refill()
    }

    /// Gives a non-empty magazine to the depot: a full one onto the shelf when its place
    /// is free, else [`Depot::push_full`] (which may refuse it).
    #[inline]
    pub(crate) fn push_full(&self, magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        let magazine = match self.shelf {
            Some(shelf) if magazine.is_full() => match shelf.full.put(magazine) {
                Ok(()) => {
                    shelf.mark_used();
                    return Ok(());
                }
                Err(magazine) => magazine,
            },
            _ => magazine,
        };
        self.depot.push_full(magazine)
    }

    /// An empty magazine: the shelf's, else [`Depot::empty_magazine`] (`None` when the
    /// allocator refuses the memory for one).
    #[inline]
    pub(crate) fn empty_magazine(&self) -> Option<Magazine<T>> {
        if let Some(shelf) = self.shelf {
            if let Some(magazine) = shelf.empty.take() {
                shelf.mark_used();
                return Some(magazine);
            }
        }
        self.depot.empty_magazine()
    }

    /// Keeps an empty magazine: on the shelf when its place is free, else
    /// [`Depot::push_empty`].
    #[inline]
    pub(crate) fn push_empty(&self, magazine: Magazine<T>) {
        let magazine = match self.shelf {
            Some(shelf) => match shelf.empty.put(magazine) {
                Ok(()) => {
                    shelf.mark_used();
                    return;
                }
                Err(magazine) => magazine,
            },
            None => magazine,
        };
        self.depot.push_empty(magazine);
    }
}

/// Clears the `trimming` flag when a trim ends, also by unwinding from a panicking source.
struct TrimRunning<'a>(&'a ProcessFlag);

impl Drop for TrimRunning<'_> {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// What a free could not cache, for the source: a whole magazine a `Fixed` depot refused,
/// or the item itself when no empty magazine could be had.
pub(crate) enum Overflow<T> {
    Magazine(Magazine<T>),
    Item(T),
}
