//! A per-CPU slot: a loaded and a previous magazine that one thread at a time owns.

use crate::pair::MagazinePair;
use crate::stats::OwnedCounter;
use crate::sync::{AtomicBool, AtomicUsize, Backoff, Ordering, UnsafeCell};

/// A CPU slot.
///
/// Upholds [invariant 3](crate::docs::design#invariant-3-progress) (progress): a thread takes a slot with one
/// compare-and-swap and gives it back with one Release store; it never waits for a slot on the
/// `alloc`/`free` paths (a taken slot is a miss), and it never runs the source while it
/// holds one (`flush_cpu`, `flush`, steals and idle reclaim move the magazines out and
/// give the slot back first). It also carries [invariant 1](crate::docs::design#invariant-1-conservation)
/// locally: the magazines are touched only by the owner.
pub(crate) struct Slot<T> {
    /// Who may touch `magazines`.
    ///
    /// | value | meaning | transition                                                        |
    /// |-------|---------|-------------------------------------------------------------------|
    /// | false | free    | any thread: `compare_exchange(false, true, Acquire)` -> it owns it |
    /// | true  | owned   | the owner only: `store(false, Release)` when it is done           |
    ///
    /// The Release store publishes the owner's writes to the magazines; the Acquire CAS of
    /// the next owner receives them.
    owned: AtomicBool,
    magazines: UnsafeCell<MagazinePair<T>>,
    /// Hits of the owner; written only while owned (see [`OwnedCounter`]).
    pub(crate) alloc_hits: OwnedCounter,
    pub(crate) free_hits: OwnedCounter,
    /// Magazines the owner took from / gave to the depot; written only while owned.
    pub(crate) depot_pops: OwnedCounter,
    pub(crate) depot_pushes: OwnedCounter,
    /// [`activity`](Self::activity) as the last trim saw it: a slot whose activity has
    /// not moved for a whole trim interval is idle. Only trims write it, one at a time
    /// (the depot's `trimming` flag), so Relaxed suffices: it is a heuristic, and a wrong
    /// guess costs a reclaim or a missed one, never an item.
    idle_mark: AtomicUsize,
}

// SAFETY: the magazines are accessed only by the thread that owns the slot (see `owned`),
// and items are `Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above; the slot owns its items.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(crate) fn new(magazine_size: usize) -> Self {
        Self {
            owned: AtomicBool::new(false),
            magazines: UnsafeCell::new(MagazinePair::new(magazine_size)),
            alloc_hits: OwnedCounter::default(),
            free_hits: OwnedCounter::default(),
            depot_pops: OwnedCounter::default(),
            depot_pushes: OwnedCounter::default(),
            idle_mark: AtomicUsize::new(0),
        }
    }

    /// Operations the owners have done on this slot (wrapping): hits and exchanges.
    fn activity(&self) -> usize {
        [
            &self.alloc_hits,
            &self.free_hits,
            &self.depot_pops,
            &self.depot_pushes,
        ]
        .iter()
        .fold(0usize, |sum, counter| {
            sum.wrapping_add(counter.get() as usize)
        })
    }

    /// Whether no owner used the slot since the previous call; starts the next interval.
    /// For trim only (one at a time).
    pub(crate) fn idle_since_last_check(&self) -> bool {
        let activity = self.activity();
        self.idle_mark.swap(activity, Ordering::Relaxed) == activity
    }

    /// Takes the slot if nobody owns it. Never waits.
    #[inline]
    pub(crate) fn try_take(&self) -> Option<SlotGuard<'_, T>> {
        // A CAS rather than `swap(true)`: a busy miss then writes nothing. Same semantics
        // (Acquire on success; a miss needs no synchronisation), and loom 0.7 checks it
        // soundly: it lets a plain store slip between the read and the write of a
        // concurrent `swap` (tokio-rs/loom#254), which shows a released slot as taken.
        self.owned
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            // SAFETY: our compare-and-swap took the slot.
            .map(|_| unsafe { SlotGuard::new_unchecked(self) })
    }

    /// Takes the slot, waiting for its owner to finish. Only for `flush_cpu` and `flush`,
    /// which are not on the `alloc`/`free` paths; an owner holds a slot for a bounded
    /// number of steps, so this wait ends.
    pub(crate) fn take(&self) -> SlotGuard<'_, T> {
        let backoff = Backoff::new();
        loop {
            if let Some(guard) = self.try_take() {
                return guard;
            }
            backoff.snooze();
        }
    }

    /// The magazines, through exclusive access to the slot.
    pub(crate) fn get_mut(&mut self) -> &mut MagazinePair<T> {
        // SAFETY: `&mut self` excludes every other access.
        self.magazines.with_mut(|pair| unsafe { &mut *pair })
    }
}

/// Ownership of a slot; gives it back on drop, also when unwinding.
pub(crate) struct SlotGuard<'a, T> {
    slot: &'a Slot<T>,
}

impl<'a, T> SlotGuard<'a, T> {
    /// The guard of a slot the caller has taken.
    ///
    /// # Safety
    ///
    /// The caller set `owned` from `false` to `true` with an Acquire read-modify-write,
    /// and no other guard of the slot exists.
    #[inline]
    pub(crate) unsafe fn new_unchecked(slot: &'a Slot<T>) -> Self {
        Self { slot }
    }

    /// Runs `f` on the slot's magazines.
    #[inline]
    pub(crate) fn with<R>(&mut self, f: impl FnOnce(&mut MagazinePair<T>) -> R) -> R {
        // SAFETY: we own the slot (the guard exists only after a successful take, and
        // `&mut self` keeps this the only access through it), so nobody else touches the
        // magazines until our Release store in `drop`.
        self.slot
            .magazines
            .with_mut(|pair| f(unsafe { &mut *pair }))
    }

    /// The slot (for its counters, which only the owner writes).
    pub(crate) fn slot(&self) -> &'a Slot<T> {
        self.slot
    }
}

impl<T> Drop for SlotGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let release = if cfg!(magazine_mutant = "slot_release_relaxed") {
            Ordering::Relaxed // MUTANT: the hand-back publishes nothing.
        } else {
            Ordering::Release
        };
        self.slot.owned.store(false, release);
    }
}
