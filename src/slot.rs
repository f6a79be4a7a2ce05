//! A per-CPU slot: a loaded and a previous magazine that one thread at a time owns.

#[cfg(all(magazine_rseq, not(miri)))]
use crate::magazine::Magazine;
use crate::pair::MagazinePair;
use crate::stats::OwnedCounter;
use crate::sync::{AtomicUsize, Backoff, Ordering, UnsafeCell};

/// A CPU slot.
///
/// Upholds [invariant 3](crate::docs::design#invariant-3-progress) (progress): a thread takes a slot with one
/// compare-and-swap and gives it back with one Release store; it never waits for a slot on the
/// `alloc`/`free` paths (a taken slot is a miss), and it never runs the source while it
/// holds one (`flush_cpu`, `flush`, steals and idle reclaim move the magazines out and
/// give the slot back first). It also carries [invariant 1](crate::docs::design#invariant-1-conservation)
/// locally: the magazines are touched only by the owner (or, in a cache that runs
/// restartable sequences, by a sequence on the slot's CPU while nobody owns it: see `owner`).
#[repr(C)] // `owner`, then the magazines: see `src/rseq.rs`.
pub(crate) struct Slot<T> {
    /// Who may touch `magazines`.
    ///
    /// | value        | meaning | transition                                                        |
    /// |--------------|---------|-------------------------------------------------------------------|
    /// | `FREE`       | free    | any thread: `compare_exchange(FREE, TAKEN, Acquire)` -> it owns it; with restartable sequences, see below |
    /// | `TAKEN`      | owned   | the owner only: `store(FREE, Release)` when it is done           |
    /// | a token: even, >= 2 | claimed by a thread that may run on another CPU (restartable sequences only) | the claimant: `store(FREE, Release)`; a take sequence on the slot's CPU: CAS to `token \| 1` |
    /// | `token \| 1` | claimed, and acknowledged by the slot's CPU | the claimant: `store(FREE, Release)` |
    /// | `PLAIN`      | free, and no sequence has run on it yet (restartable sequences only; the initial value) | any thread: `compare_exchange(PLAIN, TAKEN, Acquire)` -> it owns the whole slot, releases with `store(PLAIN, Release)`, or `store(FREE, Release)` when it *activates* the slot |
    ///
    /// The Release store publishes the owner's writes to the magazines; the Acquire CAS of
    /// the next owner receives them. Every other write is a compare-and-swap from the value
    /// its writer read (`FREE`, or for an acknowledgement the token), so nobody overwrites
    /// an owner's value.
    ///
    /// When the cache runs restartable sequences (`src/rseq.rs`), threads on the slot's
    /// own CPU read this word and change the loaded magazine inside a sequence, without a
    /// read-modify-write, while the word is `FREE`; they take the slot with a sequence
    /// whose commit is a compare-and-swap of `FREE` to `TAKEN`. No sequence touches the
    /// `previous` magazine. Everybody else *claims* the slot
    /// ([`try_claim`](Self::try_claim)): a CAS of `FREE` to a token naming the thread.
    /// The claim owns `previous` at once, but not the loaded magazine: a sequence that read
    /// `FREE` before the CAS may still commit into it. The whole slot is the claimant's
    /// once no such sequence can: when a take sequence on the slot's CPU acknowledges the
    /// claim (`rseq::take` says why that suffices), or after a `membarrier` that aborts or
    /// completes every such sequence there (the *fenced take*: [`try_take`](Self::try_take),
    /// [`SlotClaim::take_whole`]).
    ///
    /// Such a slot starts `PLAIN`: sequences miss on it (`PLAIN` is not `FREE`, and odd,
    /// so the take sequence sees it busy), and any thread takes it whole with a plain
    /// compare-and-swap ([`try_take_plain`](Self::try_take_plain)), no claim, no fence:
    /// while the word is `PLAIN` no sequence has ever read `FREE` in it, so none is in
    /// flight. A thread on the slot's CPU whose sequence missed on `PLAIN` takes it so and
    /// gives it back as `FREE`: it activates the slot, and from then on the protocol above
    /// applies. Only takes from `PLAIN` store `PLAIN`, so the word never returns to it.
    /// Slots that only `_on` calls use (a simulator driving CPUs from one thread) never
    /// activate, and cost no fences.
    owner: AtomicUsize,
    /// The magazines. When the CPU runs restartable sequences, the loaded magazine's
    /// length word also counts their hits while the slot is free (`rseq::POP_STEP`):
    /// whoever takes the whole slot moves them to `alloc_hits` and `free_hits` first
    /// ([`fold_sequence_hits`](Self::fold_sequence_hits)).
    magazines: UnsafeCell<MagazinePair<T>>,
    /// The CPU whose restartable sequences work on this slot without taking it, when
    /// the cache runs them: takes of the slot are fenced against them. `None` otherwise.
    fenced_cpu: Option<usize>,
    /// Hits of the owners, and those of sequences that owners folded; written only while
    /// owned (see [`OwnedCounter`]).
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
    /// Fenced takes of this slot (each a `membarrier` system call that interrupts the
    /// slot's CPU), counted by the taking thread: a read-modify-write, but only beside a
    /// system call. Read Relaxed by `stats`.
    fenced_takes: AtomicUsize,
}

// SAFETY: the magazines are accessed only by the thread that owns the slot (see `owner`),
// and items are `Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above; the slot owns its items.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    /// A slot with empty magazines; `fenced_cpu` is the CPU whose restartable sequences
    /// use it, if any; the error when the allocator refuses the memory for its magazines.
    pub(crate) fn try_new(
        magazine_size: usize,
        fenced_cpu: Option<usize>,
    ) -> Result<Self, alloc::collections::TryReserveError> {
        // A slot whose CPU may run sequences starts plain (see `owner`).
        #[cfg(all(magazine_rseq, not(miri)))]
        let owner = match fenced_cpu {
            Some(_) => PLAIN,
            None => FREE,
        };
        #[cfg(not(all(magazine_rseq, not(miri))))]
        let owner = FREE;
        Ok(Self {
            owner: AtomicUsize::new(owner),
            magazines: UnsafeCell::new(MagazinePair::try_new(magazine_size)?),
            fenced_cpu,
            alloc_hits: OwnedCounter::default(),
            free_hits: OwnedCounter::default(),
            depot_pops: OwnedCounter::default(),
            depot_pushes: OwnedCounter::default(),
            idle_mark: AtomicUsize::new(0),
            fenced_takes: AtomicUsize::new(0),
        })
    }

    /// Operations done on this slot (wrapping): hits and exchanges. (A fold moves hits
    /// between the two sums without changing the total.)
    fn activity(&self) -> usize {
        let [alloc, free] = match cfg!(magazine_mutant = "activity_ignores_sequence_hits") {
            // MUTANT: the hits that sequences counted in the length word are left out, so
            // a slot that only sequences use looks idle to trim.
            true => [0, 0],
            false => self.unfolded_hits(),
        };
        [
            &self.alloc_hits,
            &self.free_hits,
            &self.depot_pops,
            &self.depot_pushes,
        ]
        .iter()
        .fold(alloc.wrapping_add(free) as usize, |sum, counter| {
            sum.wrapping_add(counter.get() as usize)
        })
    }

    /// The allocation and free hits that restartable sequences counted in the loaded
    /// magazine's length word and no owner has folded yet: a racy look, as in
    /// [`looks_empty`](Self::looks_empty), so a fold that runs meanwhile may be missed or
    /// counted twice by a snapshot that also reads the owner counters (`Stats` taken while
    /// threads work are approximate). Zero when the CPU runs no sequences.
    pub(crate) fn unfolded_hits(&self) -> [u64; 2] {
        #[cfg(all(magazine_rseq, not(miri)))]
        if self.fenced_cpu.is_some() {
            let pair = self.magazines.with(|pair| pair);
            // SAFETY: an address inside this slot, which outlives the call; a `peek`
            // load, as in `looks_empty`.
            let word = unsafe {
                crate::rseq::peek(Magazine::len_address(core::ptr::addr_of!((*pair).loaded)))
            };
            let (_, hits) = crate::rseq::split(word);
            return [hits.alloc as u64, hits.free as u64];
        }
        [0, 0]
    }

    /// Moves the hits that sequences counted in the loaded magazine's length word to
    /// `alloc_hits` and `free_hits`, leaving a plain length there, as the magazines'
    /// code expects.
    ///
    /// # Safety
    ///
    /// The caller owns the whole slot: no sequence can commit into it (see `owner`).
    #[cfg(all(magazine_rseq, not(miri)))]
    unsafe fn fold_sequence_hits(&self) {
        // SAFETY: the caller's promise: nobody else touches the magazines.
        let hits = self
            .magazines
            .with_mut(|pair| unsafe { (*pair).loaded.take_sequence_hits() });
        self.alloc_hits.add(hits.alloc);
        self.free_hits.add(hits.free);
    }

    /// The guard of a slot whose CPU runs restartable sequences, taken whole (by a take
    /// sequence's commit, or by a claim that its CPU acknowledged or that was fenced),
    /// with the sequences' hits folded.
    ///
    /// # Safety
    ///
    /// As [`SlotGuard::new_unchecked`], and no sequence can commit into the slot.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) unsafe fn guard_after_sequences(&self) -> SlotGuard<'_, T> {
        // SAFETY: the caller's promise.
        unsafe {
            self.fold_sequence_hits();
            SlotGuard::new_unchecked(self)
        }
    }

    /// Whether no owner used the slot since the previous call; starts the next interval.
    /// For trim only (one at a time).
    pub(crate) fn idle_since_last_check(&self) -> bool {
        let activity = self.activity();
        self.idle_mark.swap(activity, Ordering::Relaxed) == activity
    }

    /// Takes the slot if nobody owns it. Never waits (but a fenced take makes a system
    /// call: see `owner`).
    #[inline]
    pub(crate) fn try_take(&self) -> Option<SlotGuard<'_, T>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if self.fenced_cpu.is_some() {
            return self.try_take_with_sequences();
        }
        // A CAS rather than `swap(TAKEN)`: a busy miss then writes nothing. Same semantics
        // (Acquire on success; a miss needs no synchronisation), and loom 0.7 checks it
        // soundly: it lets a plain store slip between the read and the write of a
        // concurrent `swap` (tokio-rs/loom#254), which shows a released slot as taken.
        self.owner
            .compare_exchange(FREE, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            // SAFETY: our compare-and-swap took the slot.
            .map(|_| unsafe { SlotGuard::new_unchecked(self) })
    }

    /// Takes the slot if nobody owns it and the take needs no fence: a plain slot, or any
    /// slot of a cache that runs no sequences. For busy misses, which try other slots.
    #[inline]
    pub(crate) fn try_take_unfenced(&self) -> Option<SlotGuard<'_, T>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if self.fenced_cpu.is_some() {
            return self.try_take_plain(false);
        }
        self.try_take()
    }

    /// Whether the slot's CPU runs restartable sequences on it: the cache runs them and
    /// the slot was activated (takes from elsewhere are fenced, and claims are possible).
    /// A slot seen active stays so; one seen plain may be activated right after.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn runs_sequences(&self) -> bool {
        self.fenced_cpu.is_some() && !self.is_plain()
    }

    /// Whether the owner word is `PLAIN` (see `owner`): a slot of a cache that runs
    /// sequences, none of which has run on it yet. A hint: it may be activated right after.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[inline]
    pub(crate) fn is_plain(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == PLAIN
    }

    /// Takes a plain slot whole with a compare-and-swap from `PLAIN` (see `owner`): no
    /// claim, no fence. The guard gives it back as `PLAIN`, or, when `activate` (a thread
    /// on the slot's CPU whose sequence missed on `PLAIN`), as `FREE`, which lets the
    /// sequences run on it. `None` when the slot is not plain or somebody owns it.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn try_take_plain(&self, activate: bool) -> Option<SlotGuard<'_, T>> {
        // A load first: a busy miss then writes nothing.
        let expected = match self.owner.load(Ordering::Relaxed) {
            PLAIN => PLAIN,
            // MUTANT: an active slot taken by the plain CAS, with no claim or fence.
            FREE if cfg!(magazine_mutant = "plain_take_accepts_free") => FREE,
            _ => return None,
        };
        // Acquire: receives the last owner's writes (its Release store of `PLAIN`).
        self.owner
            .compare_exchange(expected, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let release = match activate {
            true => FREE,
            false => PLAIN,
        };
        // SAFETY: our compare-and-swap took the slot from `PLAIN`, and the word holds `PLAIN`
        // only while no sequence has ever read `FREE` in it (only takes from `PLAIN`, which
        // own the whole slot, store `PLAIN`; a claim gives back `FREE`), so none can commit
        // into the slot.
        Some(unsafe { SlotGuard::new_releasing(self, release) })
    }

    /// [`try_take`](Self::try_take) of a slot whose CPU may run sequences: a plain slot
    /// needs no fence, an active one does (see `owner`). The word never returns to
    /// `PLAIN`, so a slot seen active stays so. Out of line, so that the slot protocol's
    /// `try_take` stays small.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[inline(never)]
    fn try_take_with_sequences(&self) -> Option<SlotGuard<'_, T>> {
        // MUTANT (plain_take_accepts_free): an active slot goes the plain way too.
        match self.is_plain() || cfg!(magazine_mutant = "plain_take_accepts_free") {
            true => self.try_take_plain(false),
            false => self.try_take_fenced(),
        }
    }

    /// Takes the slot for its items: [`try_take`](Self::try_take), except that a slot
    /// whose CPU runs restartable sequences is first looked at without taking it, and
    /// skipped when it [looks empty](Self::looks_empty): a thief that would find nothing
    /// then pays no fence. For steals, the exhaustion flush and idle reclaim, which want
    /// items and skip a slot that has none (or is busy) anyway.
    #[inline]
    pub(crate) fn try_take_for_items(&self) -> Option<SlotGuard<'_, T>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if self.fenced_cpu.is_some() && self.looks_empty() {
            return None;
        }
        self.try_take()
    }

    /// Whether a look at the slot, without taking it, finds it owned or both its
    /// magazines empty. Racy loads of words that sequences on the slot's CPU and owners
    /// write: each reads a value that was there at some point. Skipping the slot is
    /// then what a take at that point would have done: a slot that was owned is busy (a
    /// take misses), and while it is free its `previous` does not change (only owners
    /// change it) and a sequence changes only the loaded magazine's length, one commit
    /// at a time; a free committed after our load comes after our look. (A look while an
    /// owner swaps the magazines may see both empty: the slot was owned then.)
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn looks_empty(&self) -> bool {
        let pair = self.magazines.with(|pair| pair);
        // SAFETY: addresses inside this slot, which outlives the call; the loads are
        // `peek`'s, not reads through references, so they do not race in Rust's model.
        // Owner first: a slot seen free was free before its lengths were read (x86 does
        // not reorder loads with older loads).
        unsafe {
            let owner = crate::rseq::peek(self.owner.as_ptr());
            (owner != FREE && owner != PLAIN)
                // The length is the word's low half (`rseq::POP_STEP`).
                || (crate::rseq::peek(Magazine::len_address(core::ptr::addr_of!((*pair).loaded)))
                    as u32
                    == 0
                    && crate::rseq::peek(Magazine::len_address(core::ptr::addr_of!(
                        (*pair).previous
                    ))) == 0)
        }
    }

    /// Fenced takes of this slot so far.
    pub(crate) fn fenced_takes(&self) -> usize {
        self.fenced_takes.load(Ordering::Relaxed)
    }

    /// The fenced take of a slot whose CPU runs restartable sequences (see `owner`): a
    /// claim, then the fence.
    #[cfg(all(magazine_rseq, not(miri)))]
    #[cold]
    fn try_take_fenced(&self) -> Option<SlotGuard<'_, T>> {
        // A claim whose CPU cannot be fenced goes back (dropped): a busy miss.
        self.try_claim()?.take_whole().ok()
    }

    /// Claims the slot from a thread that may run on another CPU, when its CPU runs
    /// restartable sequences (`None` otherwise, and when somebody owns it): the first half
    /// of the fenced take (see `owner`), with no system call. The claim owns the slot's
    /// `previous` magazine, which no sequence touches, but not its loaded magazine, which
    /// a sequence that read `FREE` before the claim may still change;
    /// [`SlotClaim::take_whole`] makes it a whole take.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn try_claim(&self) -> Option<SlotClaim<'_, T>> {
        let cpu = self.fenced_cpu?;
        // Even: the low bit marks an acknowledgement.
        let token = (crate::sync::thread_index() + 1) << 1;
        // Acquire: receives the last owner's writes (its Release store of `FREE`). Every
        // other writer of the word compare-and-swaps from `FREE` too (take sequences
        // included, `rseq::take`), so the token stays until we store `FREE` (or a take
        // sequence on the slot's CPU acknowledges it).
        self.owner
            .compare_exchange(FREE, token, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(SlotClaim {
            slot: self,
            cpu,
            token,
        })
    }

    /// The address of the owner word and of the loaded magazine's storage pointer,
    /// length and capacity, for the restartable sequences' layout.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn field_addresses(&self) -> crate::rseq::SlotFields {
        // SAFETY: only addresses are computed; nothing is read.
        let loaded = self
            .magazines
            .with(|pair| unsafe { (*pair).loaded.field_addresses() });
        crate::rseq::SlotFields {
            slot: self as *const Self as usize,
            owner: self.owner.as_ptr() as usize,
            items: loaded[0],
            len: loaded[1],
            capacity: loaded[2],
        }
    }

    /// Takes the slot, waiting for its owner to finish. Only for `flush_cpu`, `flush` and
    /// `cached`, which are not on the `alloc`/`free` paths; an owner holds a slot for a
    /// bounded number of steps, so this wait ends. A slot whose CPU runs restartable
    /// sequences comes whole when that CPU can be fenced, else as a claim of its
    /// `previous` magazine alone ([`SlotClaim::take_whole`] says when a fence fails): the
    /// wait never depends on a fence that cannot happen.
    pub(crate) fn take(&self) -> Taken<'_, T> {
        let backoff = Backoff::new();
        loop {
            #[cfg(all(magazine_rseq, not(miri)))]
            if self.runs_sequences() {
                if let Some(claim) = self.try_claim() {
                    return match claim.take_whole() {
                        Ok(guard) => Taken::Whole(guard),
                        Err(claim) => Taken::Previous(claim),
                    };
                }
                backoff.snooze();
                continue;
            }
            // A plain slot (or any slot of a cache without sequences): no fence. One
            // activated meanwhile makes this miss, and the next round claims it.
            if let Some(guard) = self.try_take_unfenced() {
                return Taken::Whole(guard);
            }
            backoff.snooze();
        }
    }

    /// The magazines, through exclusive access to the slot (with the sequences' hits
    /// folded).
    pub(crate) fn get_mut(&mut self) -> &mut MagazinePair<T> {
        // SAFETY: `&mut self` excludes every other access, sequences included (they run
        // only on a slot that a live cache lends them).
        #[cfg(all(magazine_rseq, not(miri)))]
        unsafe {
            self.fold_sequence_hits()
        };
        // SAFETY: `&mut self` excludes every other access.
        self.magazines.with_mut(|pair| unsafe { &mut *pair })
    }
}

/// Folds the hits that sequences counted into the counters before the magazines drop, so
/// that the loaded magazine's length word is a plain length again whatever drops the slot:
/// the cache's drop, or the unwinding of one whose source panicked half way through
/// returning the slots' items (`Magazine`'s drop pops `len` items).
#[cfg(all(magazine_rseq, not(miri)))]
impl<T> Drop for Slot<T> {
    fn drop(&mut self) {
        if cfg!(magazine_mutant = "slot_drop_skips_fold") {
            // MUTANT: the magazine drops with hits in its length word.
            return;
        }
        // `get_mut` folds; `&mut self` excludes every sequence (they run only on the slots
        // of a live cache).
        let _ = self.get_mut();
    }
}

/// `Slot::owner` of a free slot.
pub(crate) const FREE: usize = 0;
/// `Slot::owner` of a slot taken by a CAS or by a restartable sequence's commit.
pub(crate) const TAKEN: usize = 1;
/// `Slot::owner` of a free slot that no restartable sequence has run on yet. Odd, so the
/// take sequence sees it busy, and no claim's token (small even numbers) or acknowledged
/// token.
#[cfg(all(magazine_rseq, not(miri)))]
pub(crate) const PLAIN: usize = usize::MAX;

/// What a thread that waits for a slot ([`Slot::take`]) or wants its items holds of it.
pub(crate) enum Taken<'a, T> {
    /// The whole slot.
    Whole(SlotGuard<'a, T>),
    /// A claim of a slot whose CPU runs restartable sequences: its `previous` magazine is
    /// ours, its loaded one is not (see [`SlotClaim`]).
    #[cfg(all(magazine_rseq, not(miri)))]
    Previous(SlotClaim<'a, T>),
}

/// Ownership of a slot; gives it back on drop, also when unwinding.
pub(crate) struct SlotGuard<'a, T> {
    slot: &'a Slot<T>,
    /// What the drop stores in the owner word: `FREE`, or `PLAIN` for a plain slot taken
    /// whole without activating it (see `Slot::owner`).
    #[cfg(all(magazine_rseq, not(miri)))]
    release: usize,
}

impl<'a, T> SlotGuard<'a, T> {
    /// The guard of a slot the caller has taken.
    ///
    /// # Safety
    ///
    /// The caller took the slot by `owner`'s protocol (a CAS from `FREE`, or a
    /// restartable sequence's commit of `TAKEN`), and no other guard of the slot exists.
    #[inline]
    pub(crate) unsafe fn new_unchecked(slot: &'a Slot<T>) -> Self {
        Self {
            slot,
            #[cfg(all(magazine_rseq, not(miri)))]
            release: FREE,
        }
    }

    /// The guard of a slot the caller took from `PLAIN`, which its drop gives back as
    /// `release`.
    ///
    /// # Safety
    ///
    /// The caller took the slot by a CAS from `PLAIN`, and no other guard of it exists.
    #[cfg(all(magazine_rseq, not(miri)))]
    unsafe fn new_releasing(slot: &'a Slot<T>, release: usize) -> Self {
        Self { slot, release }
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

/// A claim of a slot whose CPU runs restartable sequences ([`Slot::try_claim`]): the
/// slot's `previous` magazine is ours, its loaded one is not (a sequence in flight may
/// still commit into it). Gives the slot back on drop, with the same Release store as a
/// [`SlotGuard`].
#[cfg(all(magazine_rseq, not(miri)))]
pub(crate) struct SlotClaim<'a, T> {
    slot: &'a Slot<T>,
    /// The slot's CPU, the one to fence.
    cpu: usize,
    /// Our token in the owner word (even; `token | 1` once acknowledged).
    token: usize,
}

#[cfg(all(magazine_rseq, not(miri)))]
impl<'a, T> SlotClaim<'a, T> {
    /// The slot's `previous` magazine.
    pub(crate) fn previous(&mut self) -> &mut Magazine<T> {
        // SAFETY: our token in the owner word keeps out every other owner (all of them
        // compare-and-swap from `FREE`), and no sequence touches `previous`. The
        // reference covers `previous` alone: none is made to the loaded magazine, which
        // sequences may still change, nor to the pair.
        self.slot
            .magazines
            .with_mut(|pair| unsafe { &mut *core::ptr::addr_of_mut!((*pair).previous) })
    }

    /// The loaded magazine's length as a look without taking it (as in
    /// [`Slot::looks_empty`]): a value it had at some point, which sequences may change.
    pub(crate) fn loaded_len(&self) -> usize {
        let pair = self.slot.magazines.with(|pair| pair);
        // SAFETY: an address inside the slot, which outlives the claim; a `peek` load.
        let word = unsafe {
            crate::rseq::peek(Magazine::len_address(core::ptr::addr_of!((*pair).loaded)))
        };
        crate::rseq::split(word).0
    }

    /// Makes the claim a take of the whole slot: once the slot's CPU has acknowledged it
    /// (we wait [`ACKNOWLEDGEMENT_WAIT`] for that: a thread that runs sequences there
    /// acknowledges at its next miss, and every hit there misses while we hold the
    /// claim), else after a fence of the slot's CPU (`rseq::fence_cpu`). Either way every
    /// sequence that read `FREE` before the claim has then been aborted or has committed,
    /// with its stores visible to us, and every later one sees our token and misses.
    ///
    /// When no fence is possible (`membarrier` denied, by a seccomp filter for one, and
    /// the thread cannot run on that CPU either), hands the claim back: it still owns
    /// `previous`, and dropping it gives the slot back. Nothing here panics, so the claim
    /// is never left in the owner word.
    pub(crate) fn take_whole(self) -> Result<SlotGuard<'a, T>, Self> {
        if !self.acknowledged() {
            if !cfg!(magazine_mutant = "fence_skipped") && !crate::rseq::fence_cpu(self.cpu) {
                if cfg!(magazine_mutant = "failed_fence_keeps_claim") {
                    // MUTANT: a failed fence panics with the claim out of its guard, which
                    // leaves the token in the owner word for ever.
                    core::mem::forget(self);
                    panic!("magazine: membarrier failed after it was registered");
                }
                return Err(self);
            }
            // MUTANT (fence_skipped): a sequence that read `FREE` commits while we own it.
            self.slot.fenced_takes.fetch_add(1, Ordering::Relaxed);
        }
        let claim = core::mem::ManuallyDrop::new(self);
        // SAFETY: our claim's token is in the owner word and stays there (see `try_claim`;
        // the `ManuallyDrop` keeps it: the guard stores `FREE` instead), and after the
        // acknowledgement or the fence no sequence that read `FREE` can still commit.
        // Nothing between the fence and the guard can panic.
        Ok(unsafe { claim.slot.guard_after_sequences() })
    }

    /// Whether the slot's CPU acknowledges the claim within [`ACKNOWLEDGEMENT_WAIT`]. Not
    /// when we run on that CPU ourselves: its other threads cannot run while we wait, and
    /// running there is the fence (`rseq::fence_cpu` makes no system call then).
    fn acknowledged(&self) -> bool {
        let acknowledged = self.token | 1;
        if crate::rseq::current_cpu() == Some(self.cpu) {
            return self.slot.owner.load(Ordering::Acquire) == acknowledged;
        }
        let start = std::time::Instant::now();
        loop {
            // Acquire: the acknowledgement is a compare-and-swap on the slot's CPU after
            // every commit of the sequences that ran there before it.
            if self.slot.owner.load(Ordering::Acquire) == acknowledged {
                return true;
            }
            if start.elapsed() >= ACKNOWLEDGEMENT_WAIT {
                return false;
            }
            core::hint::spin_loop();
        }
    }
}

/// How long a claimant waits for the slot's CPU to acknowledge its claim before it
/// fences that CPU instead. A thread running sequences there acknowledges at its next
/// operation (every hit misses while the claim holds); a fence costs 9 us on the guest of
/// `BENCHMARKS.md`, 0.4 us when it is the caller's own CPU.
#[cfg(all(magazine_rseq, not(miri)))]
const ACKNOWLEDGEMENT_WAIT: std::time::Duration = std::time::Duration::from_micros(2);

#[cfg(all(magazine_rseq, not(miri)))]
impl<T> Drop for SlotClaim<'_, T> {
    fn drop(&mut self) {
        // Release: publishes what we did to `previous` to the next owner.
        self.slot.owner.store(FREE, Ordering::Release);
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
        #[cfg(all(magazine_rseq, not(miri)))]
        let value = self.release;
        #[cfg(not(all(magazine_rseq, not(miri))))]
        let value = FREE;
        self.slot.owner.store(value, release);
    }
}
