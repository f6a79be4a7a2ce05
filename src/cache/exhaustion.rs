//! The slow path of an allocation: the source, then what is cached elsewhere (the depot,
//! other CPUs' slots), then Linux's flush-and-retry when the source is exhausted (see
//! [the exhaustion rule](crate::docs::design#the-exhaustion-rule)). Nothing here holds
//! a slot while the source runs.

use crate::magazine::Magazine;
use crate::pair::MagazinePair;
#[cfg(all(magazine_rseq, not(miri)))]
use crate::slot::SlotClaim;
use crate::slot::{Slot, SlotGuard};
use crate::source::Source;
use crate::sync::{AtomicBool, Backoff, Ordering};

use super::Cache;

impl<S: Source> Cache<S> {
    /// The slow path of an allocation that found its magazines and the depot empty: the
    /// source (unless it was found exhausted and got nothing since), then the depot, then
    /// Linux's flush-and-retry, one flush at a time (the others steal while they wait).
    /// No slot is held while the source runs.
    #[cold]
    pub(crate) fn alloc_slow(&self, mut home: Home<'_, S::Item>) -> Option<S::Item> {
        // A source found exhausted since it last received items is not asked first (the
        // last step below asks it in any case).
        if !self.source_dry.load(Ordering::Relaxed) {
            if let Some(item) = self.source_alloc() {
                return Some(item);
            }
            self.source_dry.store(true, Ordering::Relaxed);
        }
        self.counters.exhaustion_flushes.add(1);
        // The depot, but not the other slots yet: the flush below takes each of them once,
        // so that a poll of an empty cache takes another CPU's slot once, not once more
        // per step (each take pulls the slot's line away from its CPU).
        if let Some(item) = self.take_cached(&mut home, false) {
            return Some(item);
        }
        // Nothing cached that we could reach: offer back what is left (slots that were
        // busy a moment ago, magazines pushed meanwhile), one flush at a time.
        if self
            .flushing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let flushing = ClearOnDrop(&self.flushing);
            let found = self.flush_until_found(&mut home);
            if cfg!(magazine_mutant = "flush_flag_stays_set") {
                // MUTANT: the flag is never cleared; the next exhausted allocation waits.
                core::mem::forget(flushing);
            }
            if found.is_some() {
                return found;
            }
        } else {
            // Meanwhile, steal: the flush takes one slot at a time, thieves take others.
            let backoff = Backoff::new();
            while self.flushing.load(Ordering::Acquire) {
                if let Some(item) = self.take_cached(&mut home, true) {
                    return Some(item);
                }
                backoff.snooze();
            }
        }
        self.source_alloc()
    }

    /// The flush of an exhausted allocation (see [the exhaustion
    /// rule](crate::docs::design#the-exhaustion-rule)): the CPU slots that are free are
    /// taken in turn, then one depot magazine popped, until a magazine holding an item
    /// turns up. The caller keeps that magazine, with the slot's other one if it held items
    /// too ([`keep_found`](Self::keep_found)), and the flush ends there: the slots it took
    /// before held nothing, so it sends no items to the source that the caller would take
    /// back from it one at a time (only what `keep_found` cannot keep and a `Fixed` depot
    /// at its cap refuses goes there), and it cannot chase producers that push into the
    /// depot as fast as it drains. `None`: nothing was cached anywhere it could reach.
    fn flush_until_found(&self, home: &mut Home<'_, S::Item>) -> Option<S::Item> {
        for (index, slot) in self.slots.iter().enumerate() {
            let near = self.depot.near(index);
            // Each magazine that holds items, replaced by an empty one; the slot is given
            // back at the end of the statement, before the depot or the source runs.
            let [first, second] = match Self::take_for_items(slot) {
                None => continue,
                #[cfg(all(magazine_rseq, not(miri)))]
                Some(Victim::Previous(mut claim)) => [
                    Some(core::mem::replace(claim.previous(), near.empty_magazine())),
                    None,
                ],
                Some(Victim::Whole(mut slot)) => slot.with(|magazines| magazines.take_items(&near)),
            };
            let (found, rest) = match (first, second) {
                (Some(found), rest) => (found, rest),
                (None, Some(found)) => (found, None),
                (None, None) => continue,
            };
            let rest = match cfg!(magazine_mutant = "flush_drops_rest") {
                // MUTANT: the slot's second magazine is dropped, items and all.
                true => rest.and_then(|rest| {
                    drop(rest);
                    None
                }),
                false => rest,
            };
            self.counters.steals.add(1);
            return self.keep_found(found, rest, home);
        }
        let found = self.depot.pop_refill()?;
        self.counters.depot_pops.add(1);
        self.keep_found(found, None, home)
    }

    /// Takes an item of `found` (a magazine holding items that the flush of an exhausted
    /// allocation took out of a slot or the depot, with `rest`, the slot's other one when
    /// it held items too) and keeps the rest where the caller allocates next: as the
    /// loaded and previous magazines of its handle or slot when both of theirs are empty
    /// (so that one take of a slot brings all it held), else in the depot.
    fn keep_found(
        &self,
        mut found: Magazine<S::Item>,
        rest: Option<Magazine<S::Item>>,
        home: &mut Home<'_, S::Item>,
    ) -> Option<S::Item> {
        let item = found.pop();
        debug_assert!(item.is_some(), "a found magazine holds items");
        // The two empty magazines they replace, or both back when the caller's are not empty.
        let install = |magazines: &mut MagazinePair<S::Item>, found, rest: Option<_>| {
            if !magazines.is_empty() {
                return Err((found, rest));
            }
            let empty = magazines.install(found);
            let second = rest.map(|rest| core::mem::replace(&mut magazines.previous, rest));
            Ok([Some(empty), second])
        };
        let kept = match home {
            Home::Handle(magazines) => install(magazines, found, rest),
            Home::Slot(index) => match self.retake(*index) {
                Some(mut slot) => slot.with(|magazines| install(magazines, found, rest)),
                None => Err((found, rest)),
            },
            Home::Busy => Err((found, rest)),
        };
        match kept {
            Ok(empties) => empties
                .into_iter()
                .flatten()
                .for_each(|empty| self.depot.push_empty(empty)),
            Err((found, rest)) => [Some(found), rest]
                .into_iter()
                .flatten()
                .for_each(|magazine| self.give_to_depot(magazine)),
        }
        item
    }

    /// A magazine out of every slot and stack goes back to the depot (the empty stack when
    /// it is empty); one that a `Fixed` depot refuses goes to the source.
    fn give_to_depot(&self, magazine: Magazine<S::Item>) {
        if let Err(refused) = self.depot.push_any(magazine) {
            self.release_to_source(refused);
        }
    }

    /// An item from what is cached outside the caller's own magazines: the depot, else,
    /// when `steal`, a magazine taken from another CPU's slot, kept in the caller's
    /// magazines (a handle's, or its slot's, taken again for this). When the caller has
    /// none (its slot is busy), one item from wherever one is found.
    fn take_cached(&self, home: &mut Home<'_, S::Item>, steal: bool) -> Option<S::Item> {
        let skip = match home {
            Home::Slot(index) => Some(*index),
            _ => None,
        };
        let near = self.depot.near(skip.unwrap_or_else(|| self.current_cpu()));
        let in_pair = |magazines: &mut MagazinePair<S::Item>| {
            if let Some(item) = magazines.alloc() {
                return Some(item);
            }
            if magazines.refill(&near) {
                self.counters.depot_pops.add(1);
                return magazines.alloc();
            }
            steal.then(|| self.steal(magazines, skip))?
        };
        match home {
            Home::Handle(magazines) => return in_pair(magazines),
            Home::Slot(index) => {
                if let Some(mut slot) = self.retake(*index) {
                    return slot.with(in_pair);
                }
            }
            Home::Busy => {}
        }
        if let Some((item, refused)) = self.depot.alloc_loose() {
            self.counters.depot_pops.add(1);
            if let Some(refused) = refused {
                self.release_to_source(refused);
            }
            return Some(item);
        }
        if !steal {
            return None;
        }
        self.slots.iter().find_map(|slot| {
            slot.try_take_for_items()?
                .with(|magazines| magazines.alloc())
        })
    }

    /// Takes the magazines of the first other CPU slot that is free and holds items into
    /// `thief` (both of whose magazines are empty; see
    /// [`MagazinePair::steal_from`]); returns an item of them. Never waits: busy slots are
    /// skipped, and so is `home`, the slot `thief` belongs to.
    fn steal(&self, thief: &mut MagazinePair<S::Item>, home: Option<usize>) -> Option<S::Item> {
        // Start after the thief's slot, so that thieves spread out.
        let n = self.slots.len();
        let start = home.unwrap_or_else(|| self.current_cpu()) + 1;
        let others = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&index| Some(index) != home);
        let stolen = others
            .map(|index| &self.slots[index])
            .any(|slot| Self::steal_from_slot(slot, thief));
        if !stolen {
            return None;
        }
        self.counters.steals.add(1);
        thief.alloc()
    }

    /// Moves the magazines of `slot` that hold items into `thief` (see
    /// [`MagazinePair::steal_from`]; just its `previous` when that is all a claim gives:
    /// see [`take_for_items`](Self::take_for_items)); `false` when it is busy or holds
    /// nothing. Never waits.
    fn steal_from_slot(slot: &Slot<S::Item>, thief: &mut MagazinePair<S::Item>) -> bool {
        match Self::take_for_items(slot) {
            None => false,
            #[cfg(all(magazine_rseq, not(miri)))]
            Some(Victim::Previous(mut claim)) => thief.steal_magazine(claim.previous()),
            Some(Victim::Whole(mut victim)) => victim.with(|victim| thief.steal_from(victim)),
        }
    }

    /// Takes `slot` for a thread that wants its items (a steal, the exhaustion flush);
    /// `None` when it is busy. Never waits. On a CPU that runs restartable sequences, a
    /// slot that looks empty is skipped, and a slot whose `previous` magazine holds items
    /// is only claimed ([`Victim::Previous`]: no sequence touches `previous`), without
    /// what taking its loaded magazine costs: the slot CPU's acknowledgement, else a fence
    /// (a system call and an interrupt of that CPU), which a consumer that outruns a
    /// producer would otherwise pay on most polls.
    fn take_for_items(slot: &Slot<S::Item>) -> Option<Victim<'_, S::Item>> {
        #[cfg(all(magazine_rseq, not(miri)))]
        if slot.runs_sequences() {
            if slot.looks_empty() {
                return None;
            }
            let mut claim = slot.try_claim()?;
            if cfg!(magazine_mutant = "claim_takes_loaded") {
                // MUTANT: the claim moves the loaded magazine too, with no fence.
                core::mem::forget(claim);
                // SAFETY: none; a sequence that read `FREE` before the claim may commit
                // into the loaded magazine: the bug the stress test must find.
                return Some(Victim::Whole(unsafe { slot.guard_after_sequences() }));
            }
            return Some(match claim.previous().is_empty() {
                false => Victim::Previous(claim),
                true => Victim::Whole(claim.take_whole()),
            });
        }
        Self::take_victim(slot).map(Victim::Whole)
    }

    /// Takes a slot whose magazines another thread wants (a steal, an exhaustion flush, an
    /// idle reclaim); never waits.
    pub(super) fn take_victim(slot: &Slot<S::Item>) -> Option<SlotGuard<'_, S::Item>> {
        if cfg!(magazine_mutant = "steal_unowned") {
            // MUTANT: touches the victim's magazines without taking its slot.
            // SAFETY: none; this is the bug the model checkers must find.
            return Some(unsafe { SlotGuard::new_unchecked(slot) });
        }
        slot.try_take_for_items()
    }

    fn source_alloc(&self) -> Option<S::Item> {
        let item = self.source.alloc();
        if item.is_some() {
            self.counters.source_allocs.add(1);
            if self.source_dry.load(Ordering::Relaxed) {
                self.source_dry.store(false, Ordering::Relaxed);
            }
        }
        item
    }
}

/// What a thread that wants another CPU slot's items holds of it
/// ([`Cache::take_for_items`]).
enum Victim<'a, T> {
    /// A claim of a slot whose CPU runs restartable sequences, whose `previous` magazine
    /// holds items: that magazine is ours, the loaded one is not.
    #[cfg(all(magazine_rseq, not(miri)))]
    Previous(SlotClaim<'a, T>),
    /// The whole slot.
    Whole(SlotGuard<'a, T>),
}

/// Where an allocation on the slow path keeps a magazine it finds.
pub(crate) enum Home<'p, T> {
    /// The per-CPU path: the slot it used (given back while the source runs).
    Slot(usize),
    /// A `LocalCache`'s magazines.
    Handle(&'p mut MagazinePair<T>),
    /// The per-CPU path found every slot busy: it keeps nothing.
    Busy,
}

/// Clears a flag when dropped, also when unwinding from a panicking source.
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
