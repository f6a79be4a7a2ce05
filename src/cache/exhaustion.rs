//! The slow path of an allocation: the source, then what is cached elsewhere (the depot,
//! other CPUs' slots), then Linux's flush-and-retry when the source is exhausted (see
//! [the exhaustion rule](crate::docs::design#the-exhaustion-rule)). Nothing here holds
//! a slot while the source runs.

use crate::magazine::Magazine;
use crate::pair::MagazinePair;
use crate::process_flag::ProcessFlag;
use crate::slot::{Slot, SlotGuard, Taken};
use crate::source::Source;
use crate::sync::{Backoff, Ordering};

use super::release::{KeepItem, Rescue};
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
            if let Some(item) = self.source_refill(&mut home) {
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
        if self.flushing.try_set() {
            let flushing = ClearOnDrop(&self.flushing);
            let (item, refused) = self.flush_until_found(&mut home);
            if cfg!(magazine_mutant = "flush_flag_stays_set") {
                // MUTANT: the flag is never cleared; the next exhausted allocation waits.
                core::mem::forget(flushing);
            } else {
                // Cleared before the source runs: a source whose `free_batch` allocates
                // from this cache must not wait for its own flush.
                drop(flushing);
            }
            if let Some(item) = item {
                return Some(self.release_all_holding(refused, item));
            }
        } else {
            // Meanwhile, steal: the flush takes one slot at a time, thieves take others.
            let backoff = Backoff::new();
            while self.flushing.is_set() {
                if let Some(item) = self.take_cached(&mut home, true) {
                    return Some(item);
                }
                backoff.snooze();
            }
            if cfg!(magazine_mutant = "waiter_gives_up") {
                // MUTANT: a waiter gives up when the flush it waited for is over, without
                // looking again or asking the source.
                return None;
            }
            // One more look once the flush is over: what it did not keep is in the depot
            // now (the Acquire load above saw its Release), and the source may be empty.
            if !cfg!(magazine_mutant = "waiter_skips_last_look") {
                if let Some(item) = self.take_cached(&mut home, true) {
                    return Some(item);
                }
            }
        }
        self.source_refill(&mut home)
    }

    /// Returns the magazines a `Fixed` depot refused (`[found, rest]` of an exhaustion
    /// flush) to the source while holding `item`, the allocation's (see
    /// [`release_holding`](Self::release_holding)); returns the item.
    fn release_all_holding(
        &self,
        refused: [Option<Magazine<S::Item>>; 2],
        item: S::Item,
    ) -> S::Item {
        match refused {
            [None, None] => item,
            [first, second] => {
                let held = KeepItem::new(self.depot(), item);
                self.release_each([first, second]);
                held.into_inner()
            }
        }
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
    fn flush_until_found(&self, home: &mut Home<'_, S::Item>) -> Kept<S::Item> {
        for (index, slot) in self.slots.iter().enumerate() {
            let near = self.depot.near(index);
            // Each magazine that holds items, replaced by an empty one; the slot is given
            // back at the end of the statement, before the depot or the source runs.
            let [first, second] = match Self::take_for_items(slot) {
                None => continue,
                #[cfg(all(magazine_rseq, not(miri)))]
                Some(Taken::Previous(mut claim)) => {
                    let previous = claim.previous();
                    [crate::pair::replace_if_holding(previous, &near), None]
                }
                Some(Taken::Whole(mut slot)) => slot.with(|magazines| magazines.take_items(&near)),
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
        let Some(found) = self.depot.pop_refill() else {
            return (None, [None, None]);
        };
        self.counters.depot_pops.add(1);
        self.keep_found(found, None, home)
    }

    /// Takes an item of `found` (a magazine holding items that the flush of an exhausted
    /// allocation took out of a slot or the depot, with `rest`, the slot's other one when
    /// it held items too) and keeps the rest where the caller allocates next: as the
    /// loaded and previous magazines of its handle or slot when both of theirs are empty
    /// (so that one take of a slot brings all it held), else in the depot. Returns the
    /// item, and the magazines a `Fixed` depot refused, which the caller returns to the
    /// source once the flush is over (calls no source itself).
    fn keep_found(
        &self,
        mut found: Magazine<S::Item>,
        rest: Option<Magazine<S::Item>>,
        home: &mut Home<'_, S::Item>,
    ) -> Kept<S::Item> {
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
        let refused = match kept {
            Ok(empties) => {
                empties
                    .into_iter()
                    .flatten()
                    .for_each(|empty| self.depot.push_empty(empty));
                [None, None]
            }
            Err((found, rest)) => {
                [Some(found), rest].map(|magazine| self.depot.push_any(magazine?).err())
            }
        };
        (item, refused)
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
            return Some(match refused {
                Some(refused) => self.release_holding(refused, item),
                None => item,
            });
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
            Some(Taken::Previous(mut claim)) => thief.steal_magazine(claim.previous()),
            Some(Taken::Whole(mut victim)) => victim.with(|victim| thief.steal_from(victim)),
        }
    }

    /// Takes `slot` for a thread that wants its items (a steal, the exhaustion flush);
    /// `None` when it is busy. Never waits. On a CPU that runs restartable sequences, a
    /// slot that looks empty is skipped, and a slot whose `previous` magazine holds items
    /// is only claimed ([`Taken::Previous`]: no sequence touches `previous`), without
    /// what taking its loaded magazine costs: the slot CPU's acknowledgement, else a fence
    /// (a system call and an interrupt of that CPU), which a consumer that outruns a
    /// producer would otherwise pay on most polls.
    fn take_for_items(slot: &Slot<S::Item>) -> Option<Taken<'_, S::Item>> {
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
                return Some(Taken::Whole(unsafe { slot.guard_after_sequences() }));
            }
            return Some(match claim.previous().is_empty() {
                false => Taken::Previous(claim),
                // When its CPU cannot be fenced, the claim of an empty `previous`: nothing.
                true => claim
                    .take_whole()
                    .map_or_else(Taken::Previous, Taken::Whole),
            });
        }
        Self::take_victim(slot).map(Taken::Whole)
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

    /// An item from the source, with the rest of a batch (see
    /// [`Options::source_batch`](crate::Options::source_batch)) kept where the caller
    /// allocates next, as the exhaustion flush keeps what it finds
    /// ([`keep_found`](Self::keep_found)). `None` when the source handed nothing. No slot
    /// is held while the source runs; the items it hands go straight into a magazine out
    /// of every slot and stack, held by a [`Rescue`], so that a source that panics half
    /// way loses none of them (they go to the depot).
    fn source_refill(&self, home: &mut Home<'_, S::Item>) -> Option<S::Item> {
        let batch = self.options.items_per_refill(&self.config);
        // Without an empty magazine to fill (the allocator refused one), one item.
        let empty = match batch {
            1 => None,
            _ => self.depot.empty_magazine(),
        };
        let item = match empty {
            None => self.source.alloc(),
            Some(empty) => {
                let mut rescue = Rescue::new(&self.depot, Some(empty));
                // MUTANT (refill_unguarded): the magazine filled outside the rescue, so a
                // source that panics half way drops what it handed.
                let mut unguarded = match cfg!(magazine_mutant = "refill_unguarded") {
                    true => rescue.take(),
                    false => None,
                };
                let filling = match unguarded.as_mut() {
                    Some(magazine) => magazine,
                    None => rescue.magazine_mut().expect("set above"),
                };
                let mut handed = 0;
                self.source.alloc_batch(batch, &mut |item| {
                    handed += 1;
                    if let Err(item) = filling.push(item) {
                        // More than asked for: a full magazine goes to the depot
                        // (past a `Fixed` cap: its items must not be lost either).
                        let Some(empty) = self.depot.empty_magazine() else {
                            // And no magazine for the extra item (the allocator refused
                            // one): leaked, never handed out twice.
                            core::mem::forget(item);
                            return;
                        };
                        let full = core::mem::replace(filling, empty);
                        self.depot.push_full_unbounded(full);
                        let pushed = filling.push(item);
                        debug_assert!(pushed.is_ok(), "an empty magazine has room");
                    }
                });
                let filled = unguarded.or_else(|| rescue.take()).expect("set above");
                self.counters.source_allocs.add(handed);
                if filled.is_empty() {
                    self.depot.push_empty(filled);
                    return None;
                }
                self.counters.source_alloc_calls.add(1);
                self.mark_wet();
                if filled.len() == 1 {
                    // One item (a source near exhaustion): nothing to keep.
                    let mut filled = filled;
                    let item = filled.pop();
                    self.depot.push_empty(filled);
                    return item;
                }
                if cfg!(magazine_mutant = "refill_replaces_loaded") {
                    // MUTANT: the slot was empty when the allocation missed, so the batch
                    // replaces its loaded magazine, no re-check after the source call; the
                    // one replaced (a concurrent free may have filled it) is dropped.
                    if let Home::Slot(index) = home {
                        if let Some(mut slot) = self.retake(*index) {
                            let mut filled = filled;
                            let item = filled.pop();
                            let replaced = slot.with(|magazines| {
                                core::mem::replace(&mut magazines.loaded, filled)
                            });
                            drop((slot, replaced));
                            return item;
                        }
                    }
                }
                let (item, refused) = self.keep_found(filled, None, home);
                return item.map(|item| self.release_all_holding(refused, item));
            }
        };
        if item.is_some() {
            self.counters.source_allocs.add(1);
            self.counters.source_alloc_calls.add(1);
            self.mark_wet();
        }
        item
    }

    /// The source handed out an item: it is not dry (see `Cache::source_dry`).
    fn mark_wet(&self) {
        if self.source_dry.load(Ordering::Relaxed) {
            self.source_dry.store(false, Ordering::Relaxed);
        }
    }
}

/// What the exhaustion flush found and kept ([`Cache::keep_found`]): an item for the
/// allocation, and the magazines a `Fixed` depot refused, for the source.
type Kept<T> = (Option<T>, [Option<Magazine<T>>; 2]);

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
struct ClearOnDrop<'a>(&'a ProcessFlag);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.clear();
    }
}
