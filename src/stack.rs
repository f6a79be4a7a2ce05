//! A lock-free Treiber stack of magazines in which every magazine is its own node, with a
//! tagged head against ABA and crossbeam-epoch for the nodes' memory.
//!
//! # The scheme
//!
//! A magazine owns one stack node, its [`Link`]: allocated at the magazine's first push,
//! freed (through the epoch) when the magazine is dropped. A push moves the magazine into its
//! node and links the node; a pop unlinks a node and moves the magazine, node and all, out.
//! Magazines circulate (slots and handles give full ones to the depot and take empty ones
//! back, and the other way round), so in the steady state a depot exchange allocates,
//! frees and defers nothing. A pop still pins: a stale pop may read the `next` of a node
//! whose magazine has been dropped meanwhile (see "Memory" below).
//!
//! Why this and not fresh nodes recycled through a pool after their grace period: that
//! would save the allocation and the free but keep one deferred function per pop (the
//! epoch's bag, its sealing and its collection), most of the ~76 ns per exchange that
//! `BENCHMARKS.md` measured for the node. A tagged head costs nothing on the fast path but
//! the tag's increment.
//!
//! # Why it is ABA-free
//!
//! Nodes are reused: a magazine that pop B took from the top can be pushed back, onto this
//! stack or another, while a pop A that read it at the top still holds its pair
//! `(head, next)`. `head` is therefore a tagged word, the node's address and a
//! [`TAG_BITS`]-bit tag, and every successful compare-and-swap on it (push and pop) adds one
//! to the tag. A pop's CAS compares the whole word, so it wins only if the number of
//! successful pushes and pops on this stack since its load of `head` is a multiple of
//! 2^[`TAG_BITS`], and `head` names the same node again. If that number is zero, the node
//! is still on top and its `next` is the value read: a node's `next` is written only by the
//! pusher that owns the node (its magazine), before the CAS that links it, and a node linked
//! again must have been unlinked first, which is a successful CAS. So no stale pair can win,
//! unless 2^[`TAG_BITS`] successful operations on one stack (4,194,304 on 64-bit targets,
//! 2^38 on 32-bit ones) happen inside one pop's window between its load of `head` and its
//! CAS, a few instructions long unless the thread is preempted there, *and* the last of
//! them leaves the same node on top with a different `next`. That is the bound, stated
//! honestly: the tag wraps.
//!
//! The tag is per stack; a node that moves to another stack and back is covered, because
//! leaving this stack was a pop and coming back a push, both counted.
//!
//! A stale pop reads `next` while the node's new owner may be writing it for a push (onto
//! any stack), so `next` is an atomic: the stale value read is then discarded by the failing
//! CAS. A pop reads the magazine cell only after its CAS unlinked the node; a pusher writes
//! it only while it owns the magazine, before the CAS that links it.
//!
//! # Memory
//!
//! A pop reads `(*head).next` while pinned. A node is freed only when its magazine is
//! dropped, by [`Link`]'s drop, through `Guard::defer_unchecked`: after every thread
//! pinned at that moment has unpinned. A pop that read `head` while pinned therefore reads
//! live memory, even if the magazine was popped, emptied and dropped meanwhile.
//!
//! # Platforms
//!
//! The tagged word is an `AtomicU64`. Nodes are 64-byte aligned, so the address's low
//! [`ALIGN_BITS`] are zero and are not stored.
//!
//! - 64-bit x86_64 and aarch64 (not Android): the address must fit in [`ADDRESS_BITS`] = 48
//!   bits, which leaves a 22-bit tag. User-space addresses on these targets (Linux, macOS,
//!   Windows, the BSDs) are below 2^47 or 2^48; a kernel hands out higher ones (5-level
//!   paging, 52-bit virtual addresses) only to a mapping that asks for one by an address
//!   hint, and an allocator with tagged pointers (memory tagging, hardware-assisted
//!   sanitizers) sets the top byte. Every node's address is checked once, when it is
//!   allocated (before anything is counted): the push of a magazine whose node does not
//!   fit is refused (its items go back to the source, as a `Fixed` depot's overflow
//!   does), never packed wrong, and never a panic, which could strike while unwinding.
//! - 32-bit targets with 64-bit atomics: the whole address fits; a 38-bit tag.
//! - Everywhere else (no 64-bit atomics, e.g. `thumbv7em-none-eabihf`; 64-bit targets
//!   other than x86_64 and aarch64; Android on aarch64, whose allocator tags the top byte
//!   of heap pointers), a compile-time fallback: the head is a pointer-sized word and a pop
//!   detaches the node from the magazine and frees it through the epoch, so every push
//!   links a node that was never linked before (a fresh allocation). There the previous
//!   argument holds: a node cannot be freed, so its address cannot be handed out again, while
//!   a pop that read it is pinned; if a pop's CAS sees the same address, it is the same
//!   node, whose `next` was written once. That costs the allocation and the deferred free per
//!   push of `BENCHMARKS.md`. ([`RECYCLE`] says which scheme a target uses.)

use core::marker::PhantomData;

use crate::level::{Level, MAX_LEN, MAX_PUSHED};
use crate::magazine::{Link, Magazine, Node};
use crate::sync::{self, AtomicUsize, Backoff, Ordering};

/// The tagged head's word on targets where nodes are recycled (see "Platforms";
/// `build.rs` sets the cfg).
#[cfg(magazine_tagged_head)]
mod word {
    pub(super) use crate::sync::AtomicU64 as AtomicWord;
    pub(super) type Word = u64;
    /// A magazine keeps its node from one push to the next.
    pub(super) const RECYCLE: bool = true;
    /// Bits of a node's address that may be non-zero.
    pub(super) const ADDRESS_BITS: u32 = if usize::BITS == 64 { 48 } else { usize::BITS };
}

/// The fallback (see "Platforms"): a fresh node per push, a pointer-sized head.
#[cfg(not(magazine_tagged_head))]
mod word {
    pub(super) use crate::sync::AtomicUsize as AtomicWord;
    pub(super) type Word = usize;
    /// A pop frees the node (through the epoch); the next push allocates a fresh one.
    pub(super) const RECYCLE: bool = false;
    /// Bits of a node's address that may be non-zero.
    pub(super) const ADDRESS_BITS: u32 = usize::BITS;
}

use word::{AtomicWord, Word};
use word::{ADDRESS_BITS, RECYCLE};

/// The address check every magazine node passes when it is allocated (see "Platforms"),
/// wherever its first use is: a stack push or a CPU shelf (`shelf.rs`), which never packs
/// the address but hands the node to a stack later.
pub(crate) const NODE_ADDRESS_BITS: u32 = ADDRESS_BITS;

/// Low bits of a node's address that its alignment makes zero (`Node` is
/// `repr(align(64))`).
const ALIGN_BITS: u32 = 6;
/// Bits of the tag in the head word: 22 on 64-bit targets, 38 on 32-bit ones (with the
/// fallback's pointer-sized word, 6, and unused for soundness).
const TAG_BITS: u32 = Word::BITS - (ADDRESS_BITS - ALIGN_BITS);
const TAG_MASK: Word = (1 << TAG_BITS) - 1;

const _: () = assert!(core::mem::align_of::<Node<()>>() == 1 << ALIGN_BITS);

// (`Word` is `usize` in the fallback, where the casts below are no-ops.)

/// The head word for `node` (null or 64-byte aligned, below 2^[`ADDRESS_BITS`]) and `tag`.
#[allow(clippy::unnecessary_cast)]
fn pack<T>(node: *mut Node<T>, tag: Word) -> Word {
    ((node as usize as Word) >> ALIGN_BITS << TAG_BITS) | (tag & TAG_MASK)
}

/// The node a head word names (null when the stack is empty).
#[allow(clippy::unnecessary_cast)]
fn node_of<T>(word: Word) -> *mut Node<T> {
    ((word >> TAG_BITS) << ALIGN_BITS) as usize as *mut Node<T>
}

/// The tag for the word that replaces `word`: one more, modulo 2^[`TAG_BITS`].
fn bumped(word: Word) -> Word {
    // MUTANT: the tag never moves, so the head is a bare pointer to recycled nodes: the ABA bug.
    if cfg!(magazine_mutant = "tag_not_bumped") {
        word
    } else {
        word.wrapping_add(1)
    }
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
    /// The top node and a tag, packed (see the module docs):
    ///
    /// | bits                          | meaning                                          |
    /// |-------------------------------|--------------------------------------------------|
    /// | high `Word::BITS - TAG_BITS`  | the top node's address without its `ALIGN_BITS` zero bits; 0 when empty |
    /// | low `TAG_BITS`                | successful CASes on `head` so far, modulo 2^`TAG_BITS` |
    ///
    /// Every modification is a CAS that adds one to the tag: `push` (Release: publishes the
    /// node's `next` and magazine, and the magazine's items) and `pop` (Acquire). As every
    /// modification is a read-modify-write, an Acquire load synchronises with every push
    /// that linked a node reachable from the value it reads.
    head: AtomicWord,
    /// Reserved or linked magazines: the capacity counter (see the type docs).
    len: AtomicUsize,
    /// Linked magazines not claimed by a pop, and their low-water mark (see [`Level`]).
    level: Level,
    /// The stack owns the magazines of its nodes.
    _magazines: PhantomData<Magazine<T>>,
}

// SAFETY: the stack owns magazines of `T` and hands each to exactly one thread.
unsafe impl<T: Send> Send for Stack<T> {}
// SAFETY: all shared access goes through atomics; a node's magazine is moved out only by
// the thread whose CAS unlinked it.
unsafe impl<T: Send> Sync for Stack<T> {}

impl<T> Stack<T> {
    pub(crate) fn new() -> Self {
        Self {
            head: AtomicWord::new(0),
            len: AtomicUsize::new(0),
            level: Level::new(),
            _magazines: PhantomData,
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
    /// only. Like every push, it allocates the magazine's node if it has none yet (its
    /// first push), and hands the magazine back where the address check of "Platforms"
    /// (module docs) fails.
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
        self.reserve_then_link_within(magazine, cap, ADDRESS_BITS)
    }

    /// [`reserve_then_link`](Self::reserve_then_link) of a magazine whose node must fit in
    /// `address_bits` (a parameter so that a test can make the check fail).
    fn reserve_then_link_within(
        &self,
        mut magazine: Magazine<T>,
        cap: usize,
        address_bits: u32,
    ) -> Result<usize, Magazine<T>> {
        // Before anything is counted: the only allocation (once per magazine), and the only
        // refusal that is not the cap's (an address the head word cannot hold).
        let Some(node) = magazine.link.node(address_bits) else {
            return Err(magazine);
        };
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
                self.link(node, magazine);
                self.level.add();
                Ok(previous + 1)
            }
            Err(_) => Err(magazine),
        }
    }

    /// Links `node`, the magazine's own, with the magazine in it.
    fn link(&self, node: *mut Node<T>, magazine: Magazine<T>) {
        // SAFETY: `node` is the magazine's, and we own the magazine, so the node is not
        // linked and no pop reads its magazine cell (pops read it only after unlinking it).
        unsafe { (*node).magazine.with_mut(|cell| (*cell).write(magazine)) };
        let backoff = Backoff::new();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below. A stale pop may read it meanwhile;
            // its CAS then fails on the tag (see the module docs).
            // SAFETY: the node is allocated: its magazine (now in it) is ours.
            unsafe { (*node).next.store(node_of(head), Ordering::Relaxed) };
            // Release: publishes `next`, the magazine and its items to the Acquire load of
            // whoever pops the node.
            match self.head.compare_exchange_weak(
                head,
                pack(node, bumped(head)),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
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
        // MUTANT (pop_reads_after_unpin): the pin ends with the load of `head`, so the
        // reads of a node's `next` below run outside it: a node whose magazine is dropped
        // meanwhile may be freed under them.
        let guard = (!cfg!(magazine_mutant = "pop_reads_after_unpin")).then_some(guard);
        let node = loop {
            let node = node_of::<T>(head);
            if node.is_null() {
                // Unreachable while claims never outnumber linked nodes; give the claim
                // back rather than wait.
                debug_assert!(false, "a claimed pop found the stack empty");
                self.level.add();
                return None;
            }
            // SAFETY: `head` was read while we are pinned; a node is freed only by a
            // deferred function that runs after every thread pinned when its magazine was
            // dropped has unpinned, so it is still allocated. The value may be stale (the
            // node relinked since); then the CAS below fails on the tag.
            let next = unsafe { (*node).next.load(Ordering::Relaxed) };
            match self.head.compare_exchange_weak(
                head,
                pack(next, bumped(head)),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break node,
                Err(current) => {
                    head = current;
                    backoff.spin();
                }
            }
        };
        // SAFETY: our CAS unlinked `node`, so no other thread will move its magazine out,
        // and nobody writes the cell before the magazine (which owns the node) is pushed
        // again; other pinned threads may still read `next`, a different field.
        let mut magazine = unsafe { (*node).magazine.with_mut(|cell| (*cell).assume_init_read()) };
        debug_assert_eq!(magazine.link.node, node, "a magazine is in its own node");
        if !RECYCLE {
            // The fallback: the node goes (through the epoch, by `Link`'s drop); the next
            // push allocates a fresh one.
            magazine.link = Link::new();
        }
        drop(guard);
        self.len.fetch_sub(1, Ordering::SeqCst);
        Some(magazine)
    }

    /// Nodes reachable from `head`, counted by walking the list; only meaningful when
    /// quiescent. The model checks compare it with `len` ([invariant 5](crate::docs::design#invariant-5-accounting)).
    #[cfg(magazine_model)]
    pub(crate) fn linked(&self) -> usize {
        let mut count = 0;
        let mut node = node_of::<T>(self.head.load(Ordering::Acquire));
        while !node.is_null() {
            count += 1;
            // SAFETY: quiescent (the caller's contract): every linked node is live.
            node = unsafe { (*node).next.load(Ordering::Acquire) };
        }
        count
    }
}

impl<T> Drop for Stack<T> {
    fn drop(&mut self) {
        // `&mut self`: no push or pop of this stack is in flight. Stale pops of other
        // stacks may still read a node's `next`, so nodes are freed through the epoch, by
        // their magazines' links.
        let mut node = node_of::<T>(self.head.load(Ordering::Relaxed));
        while !node.is_null() {
            // SAFETY: a linked node is live, and `next` is a plain read.
            let next = unsafe { (*node).next.load(Ordering::Relaxed) };
            // SAFETY: a linked node holds its magazine; we move it out once and drop it with
            // its items (its link then retires the node).
            drop(unsafe { (*node).magazine.with_mut(|cell| (*cell).assume_init_read()) });
            node = next;
        }
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;

    /// A node whose address does not fit is no panic: the push hands the magazine back,
    /// items and all, and the link keeps no node.
    #[test]
    fn a_node_that_does_not_fit_refuses_the_push() {
        let mut link = Link::<u32>::new();
        assert_eq!(link.node(0), None, "every heap address has a bit set");
        assert!(link.node.is_null());
        let mut magazine = Magazine::new(2);
        assert!(magazine.push(7u32).is_ok());
        let stack = Stack::new();
        let mut refused = stack
            .reserve_then_link_within(magazine, usize::MAX, 0)
            .expect_err("no node fits in 0 bits");
        assert_eq!((refused.pop(), stack.len()), (Some(7), 0));
    }

    #[test]
    fn a_word_keeps_the_node_and_the_tag() {
        let mut link = Link::<u32>::new();
        let node = link.node(ADDRESS_BITS).unwrap();
        for tag in [0, 1, TAG_MASK - 1, TAG_MASK] {
            let word = pack(node, tag);
            assert_eq!(node_of::<u32>(word), node);
            assert_eq!(word & TAG_MASK, tag);
        }
        assert!(node_of::<u32>(pack::<u32>(core::ptr::null_mut(), 5)).is_null());
        // The tag wraps within its bits and leaves the address alone.
        let wrapped = pack(node, bumped(pack(node, TAG_MASK)));
        assert_eq!((node_of::<u32>(wrapped), wrapped & TAG_MASK), (node, 0));
        assert_eq!(pack(node, bumped(pack(node, 7))) & TAG_MASK, 8);
    }

    #[test]
    fn tag_bits_per_target() {
        if RECYCLE && usize::BITS == 64 {
            assert_eq!(TAG_BITS, 22);
        }
        if RECYCLE && usize::BITS == 32 {
            assert_eq!(TAG_BITS, 38);
        }
    }

    #[test]
    fn a_magazine_keeps_its_node_from_push_to_push() {
        let stack = Stack::new();
        let mut magazine = Magazine::new(1);
        assert!(magazine.push(7u32).is_ok());
        stack.push_bounded(magazine, 8).unwrap();
        let magazine = stack.pop().unwrap();
        let node = magazine.link.node;
        assert_eq!(
            node.is_null(),
            !RECYCLE,
            "kept where RECYCLE, freed otherwise"
        );
        stack.push_bounded(magazine, 8).unwrap();
        let mut other = Magazine::new(1);
        assert!(other.push(8).is_ok());
        stack.push_bounded(other, 8).unwrap();
        let mut popped: alloc::vec::Vec<_> = (0..2)
            .map(|_| {
                let mut magazine = stack.pop().unwrap();
                (magazine.link.node, magazine.pop().unwrap())
            })
            .collect();
        assert!(stack.pop().is_none());
        popped.sort_by_key(|&(_, item)| item);
        if RECYCLE {
            assert_eq!(popped[0].0, node, "the same node, linked again");
        }
        assert_eq!(
            popped
                .iter()
                .map(|&(_, item)| item)
                .collect::<alloc::vec::Vec<_>>(),
            [7, 8]
        );
    }
}
