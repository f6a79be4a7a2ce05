//! A lock-free Treiber stack of magazines, with crossbeam-epoch reclamation.
//!
//! # Why it is ABA-free
//!
//! Every push allocates a fresh node, and a popped node is freed only through
//! `Guard::defer_unchecked`, i.e. after every thread that was pinned when it was unlinked
//! has unpinned. A pop reads `head` and `head.next` while pinned, so the node it read cannot
//! be freed, and therefore its address cannot be handed out again for a new node, before
//! that pop's CAS has either won or failed. If the CAS sees the same pointer in `head`, it
//! is the same node, and its `next` is the value read (a node's `next` is written once,
//! before the node is published, and never again). So no stale `(head, next)` pair can win.
//!
//! Nodes are not recycled on purpose: recycling (re-linking a popped node only after a
//! grace period, or a magazine-as-node stack with a tagged head) would need its own ABA
//! argument. The price is measured in `BENCHMARKS.md`: the node's allocation and deferred
//! free are about 40% of a depot exchange (~76 of ~196 ns), i.e. 0.6 ns per item at
//! magazine size 127 but most of the cost at size 1.

use alloc::boxed::Box;
use core::mem::ManuallyDrop;
use core::ptr;

use crate::level::{Level, MAX_LEN, MAX_PUSHED};
use crate::magazine::Magazine;
use crate::sync::{self, AtomicPtr, AtomicUsize, Backoff, Ordering, UnsafeCell};

/// A stack node. Both fields are facade cells so that loom sees a node written while
/// another thread may still read it (which would be the ABA bug above).
struct Node<T> {
    /// Written once by the pusher before publication; read-only afterwards.
    next: UnsafeCell<*mut Node<T>>,
    /// Moved out exactly once, by the pop that unlinked the node.
    magazine: UnsafeCell<ManuallyDrop<Magazine<T>>>,
}

/// A Treiber stack of magazines with an approximate length.
///
/// Upholds [invariant 2](crate::docs::design#invariant-2-memory-safety) (memory safety, no ABA; see the module docs) and the
/// counting half of [invariant 5](crate::docs::design#invariant-5-accounting): the length is incremented *before* a push links its node
/// and decremented *after* a pop unlinked one, so `len >= linked nodes` at every instant
/// (which is what makes a capacity check on it a hard bound) and `len == linked nodes`
/// whenever no push or pop is in flight. A second count, [`Level`], errs the other way
/// (after the link, before the unlink) and carries the low-water mark for trimming.
pub(crate) struct Stack<T> {
    /// The top node, null when empty. Published by a Release CAS in `push`; every
    /// modification is a CAS (a read-modify-write), so an Acquire load synchronises with
    /// every push that linked a node reachable from the value it reads.
    head: AtomicPtr<Node<T>>,
    /// Reserved or linked magazines: the capacity counter (see the type docs).
    len: AtomicUsize,
    /// Linked magazines not claimed by a pop, and their low-water mark (see [`Level`]).
    level: Level,
}

// SAFETY: the stack owns magazines of `T` and hands each to exactly one thread.
unsafe impl<T: Send> Send for Stack<T> {}
// SAFETY: all shared access goes through atomics; a node's magazine is moved out only by
// the thread whose CAS unlinked it.
unsafe impl<T: Send> Sync for Stack<T> {}

impl<T> Stack<T> {
    pub(crate) fn new() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
            level: Level::new(),
        }
    }

    /// Magazines in the stack (exact when quiescent, see the type docs).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }

    /// Ends the trim interval; returns how many magazines stayed in the stack all of it
    /// (a lower bound, see [`Level`]).
    pub(crate) fn restart_interval(&self) -> usize {
        self.level.restart_interval()
    }

    /// Pushes into the [`RESCUE_RESERVE`](crate::level::RESCUE_RESERVE) too, up to the most
    /// the stack can count ([`MAX_LEN`]); hands the magazine back beyond that. For rescues
    /// only.
    pub(crate) fn push_rescue(&self, magazine: Magazine<T>) -> Result<usize, Magazine<T>> {
        self.reserve_then_link(magazine, MAX_LEN)
    }

    /// Pushes if fewer than `cap` (and than [`MAX_PUSHED`]) magazines are in or entering
    /// the stack; otherwise hands the magazine back. The check and the reservation are one
    /// atomic step, so concurrent pushers can never overshoot `cap`. Returns the length
    /// including this magazine.
    pub(crate) fn push_bounded(
        &self,
        magazine: Magazine<T>,
        cap: usize,
    ) -> Result<usize, Magazine<T>> {
        self.reserve_then_link(magazine, cap.min(MAX_PUSHED))
    }

    fn reserve_then_link(&self, magazine: Magazine<T>, cap: usize) -> Result<usize, Magazine<T>> {
        // SeqCst on the counters: the working-set argument (see `Level`) needs one total
        // order of counter changes and links; it is paid once per magazine, not per item.
        let reserved = if cfg!(magazine_mutant = "fixed_cap_load_then_push") {
            // MUTANT: check, then reserve: two pushers can both pass the check.
            match self.len() < cap {
                true => Ok(self.len.fetch_add(1, Ordering::SeqCst)),
                false => Err(cap),
            }
        } else {
            self.len
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |len| {
                    (len < cap).then_some(len + 1)
                })
        };
        match reserved {
            Ok(previous) => {
                self.link(magazine);
                self.level.add();
                Ok(previous + 1)
            }
            Err(_) => Err(magazine),
        }
    }

    fn link(&self, magazine: Magazine<T>) {
        let node = Box::into_raw(Box::new(Node {
            next: UnsafeCell::new(ptr::null_mut()),
            magazine: UnsafeCell::new(ManuallyDrop::new(magazine)),
        }));
        let backoff = Backoff::new();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours alone until the CAS below publishes it.
            unsafe { (*node).next.with_mut(|next| *next = head) };
            // Release: publishes the node's fields (and the magazine's items) to the
            // Acquire load of whoever pops it.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(current) => {
                    head = current;
                    backoff.spin();
                }
            }
        }
    }

    /// Pops the top magazine.
    ///
    /// While pushes and pops are in flight, `None` can mean "every linked magazine is
    /// claimed by a pop in progress" rather than "empty": a pop that claims, then takes the
    /// node a racing push has just linked, leaves an older magazine in place uncounted until
    /// that push counts its own (`proofs/README.md` has the interleaving). Nothing is lost;
    /// the next pop sees it. When no push or pop is in flight, `None` means empty.
    pub(crate) fn pop(&self) -> Option<Magazine<T>> {
        // Claim a counted magazine first (see `Level`): a claim stands for a linked node
        // that no other pop has claimed, so the loop below always finds one.
        if !self.level.claim() {
            return None;
        }
        let guard = sync::pin();
        let backoff = Backoff::new();
        // Acquire: makes the node's `next` and magazine, written before its publishing
        // CAS, visible here.
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if head.is_null() {
                // Unreachable while claims never outnumber linked nodes; give the claim
                // back rather than wait.
                debug_assert!(false, "a claimed pop found the stack empty");
                self.level.add();
                return None;
            }
            // SAFETY: `head` was read while we are pinned; a node is freed only by a
            // deferred function that runs after every thread pinned at its unlinking has
            // unpinned, so it is still allocated. `next` is never written after publication.
            let next = unsafe { (*head).next.with(|next| *next) };
            match self
                .head
                .compare_exchange_weak(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(current) => {
                    head = current;
                    backoff.spin();
                }
            }
        }
        // SAFETY: our CAS unlinked `head`, so no other thread will move its magazine out;
        // other pinned threads may still read `next`, a different cell.
        let magazine = unsafe {
            (*head)
                .magazine
                .with_mut(|magazine| ManuallyDrop::take(&mut *magazine))
        };
        self.len.fetch_sub(1, Ordering::SeqCst);
        retire(head, &guard);
        Some(magazine)
    }

    /// Nodes reachable from `head`, counted by walking the list; only meaningful when
    /// quiescent. The model checks compare it with `len` ([invariant 5](crate::docs::design#invariant-5-accounting)).
    #[cfg(magazine_model)]
    pub(crate) fn linked(&self) -> usize {
        let mut count = 0;
        let mut node = self.head.load(Ordering::Acquire);
        while !node.is_null() {
            count += 1;
            // SAFETY: quiescent (the caller's contract): every linked node is live.
            node = unsafe { (*node).next.with(|next| *next) };
        }
        count
    }
}

/// Frees an unlinked node once no thread can read it any more: after every thread pinned
/// now has unpinned. The node's magazine has been moved out (it is `ManuallyDrop`), so this
/// frees memory only.
fn retire<T>(node: *mut Node<T>, guard: &sync::Guard) {
    if cfg!(magazine_mutant = "pop_frees_without_epoch") {
        // MUTANT: frees the node at once. The allocator hands its address to the next
        // push, so a popper that read it before can win its CAS with a stale `next`: the
        // ABA bug of the module docs.
        // SAFETY: none; this is the bug the model checkers must find.
        drop(unsafe { Box::from_raw(node) });
        return;
    }
    // SAFETY: the node is unlinked and can no longer be reached from `head`; threads that
    // read it are pinned, and the epoch runs this only after they all unpin.
    unsafe { guard.defer_unchecked(move || drop(Box::from_raw(node))) };
}

impl<T> Drop for Stack<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread can read the nodes any more.
        let mut node = self.head.load(Ordering::Relaxed);
        while !node.is_null() {
            // SAFETY: every linked node came from `Box::into_raw` and is owned by the stack.
            let boxed = unsafe { Box::from_raw(node) };
            // SAFETY: `next` is a plain pointer inside a node we own.
            node = boxed.next.with(|next| unsafe { *next });
            // SAFETY: a linked node still owns its magazine; drop it with its items.
            boxed
                .magazine
                .with_mut(|magazine| unsafe { ManuallyDrop::drop(&mut *magazine) });
        }
    }
}
