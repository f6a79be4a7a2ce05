//! A CPU's shelf in the depot: room for one full and one empty magazine beside the shared
//! stacks, so that a CPU that both gives and takes magazines exchanges them without touching
//! a cache line that other CPUs write.
//!
//! # Why
//!
//! Every push or pop of a depot stack is three read-modify-writes on the stack's line (the
//! capacity counter, the head, the working-set level) and a pin. One thread does that at
//! full speed; two CPUs doing it at once pass the line back and forth on every operation,
//! and the depot exchange stopped scaling (`BENCHMARKS.md`: 1.01x the items per second with
//! two threads as with one). A CPU that spills a full magazine and soon refills from the
//! depot (a thread allocating and freeing in bursts, a handle pair, a slot whose working
//! set straddles two magazines) finds its own magazine on its shelf instead: one swap or
//! one compare-and-swap on a line that stays in that CPU's cache, and no pin.
//!
//! # The protocol
//!
//! A place on the shelf is one pointer: null, or the node of the magazine it holds (the
//! magazine's own depot node, see [`Link`](crate::magazine::Link), with the magazine moved
//! into it).
//!
//! - **put**: if the place looks empty (a plain load, so that a full place costs no
//!   read-modify-write), move the magazine into its node, then `compare_exchange(null,
//!   node)` (Release: publishes the magazine and its items). On failure the node was never
//!   published, so the magazine is moved back out and handed back.
//! - **take**: if the place looks occupied, `swap(null)` (Acquire); a non-null result is
//!   the taker's alone: nobody else can have read that pointer out of the place, so it
//!   moves the magazine out of the node.
//!
//! Only the winner of a swap ever dereferences a node it read from a place, so there is no
//! stale reader, no ABA (a put compares with null only; a take does not compare at all)
//! and nothing to defer through the epoch. The node stays the magazine's, as in a stack.
//!
//! Any thread may put on or take from any shelf: a CPU's own shelf comes first, and the
//! depot looks at the other shelves only where it would otherwise call the source (a
//! refill that found the shared stacks empty, the busy-slot path, a flush, a trim).

use core::marker::PhantomData;
use core::ptr;

use crate::magazine::{Magazine, Node};
use crate::stack::NODE_ADDRESS_BITS;
use crate::sync::{AtomicBool, AtomicPtr, Ordering};

/// One CPU's shelf: a place for a full magazine and one for an empty magazine.
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) (a magazine on a
/// shelf is in exactly one place, and exactly one taker gets it) and
/// [invariant 3](crate::docs::design#invariant-3-progress) (a put or take is one atomic
/// step that never waits: an occupied place refuses a put, an empty one refuses a take).
/// Its share of [invariant 4](crate::docs::design#invariant-4-bounded-memory): at most one
/// full and one empty magazine per CPU, and a trim takes what stayed unused for a whole
/// interval (see [`Depot::trim`](crate::depot::Depot::trim)).
pub(crate) struct Shelf<T> {
    /// A full magazine (never a partly filled one: the depot counts items as
    /// `magazine_size` per magazine here).
    pub(crate) full: Place<T>,
    /// An empty magazine.
    pub(crate) empty: Place<T>,
    /// Whether a put or take succeeded on this shelf since the last trim looked.
    ///
    /// | value | meaning                      | transition                                      |
    /// |-------|------------------------------|-------------------------------------------------|
    /// | false | unused since the last trim   | `store(true)` after a successful put or take    |
    /// | true  | used                         | `swap(false)` by the trim (one at a time)       |
    ///
    /// Relaxed: a heuristic, like a slot's idle mark; a wrong guess costs a magazine
    /// released early or kept one interval longer, never an item.
    used: AtomicBool,
}

impl<T> Shelf<T> {
    pub(crate) fn new() -> Self {
        Self {
            full: Place::new(),
            empty: Place::new(),
            used: AtomicBool::new(false),
        }
    }

    /// Records a successful put or take (a plain load first: the flag is usually set).
    #[inline]
    pub(crate) fn mark_used(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the shelf was used since the previous call; starts a new interval.
    pub(crate) fn used_since_last_check(&self) -> bool {
        self.used.swap(false, Ordering::Relaxed)
    }

    /// Whether the shelf was used since the last
    /// [`used_since_last_check`](Self::used_since_last_check), without starting a new
    /// interval.
    pub(crate) fn used_lately(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }
}

/// A place for one magazine.
pub(crate) struct Place<T> {
    /// The node of the magazine held here, or null.
    ///
    /// | value    | meaning                          | transition                                  |
    /// |----------|----------------------------------|---------------------------------------------|
    /// | null     | empty                            | put: `compare_exchange(null, node, Release)` |
    /// | non-null | holds the magazine in that node  | take: `swap(null, Acquire)`                  |
    ///
    /// The magazine in a held node is written only by the putter before its CAS and moved
    /// out only by the taker whose swap returned the node.
    node: AtomicPtr<Node<T>>,
    /// The place owns the magazine of its node.
    _magazine: PhantomData<Magazine<T>>,
}

// SAFETY: a place owns at most one magazine of `T` and hands it to exactly one taker.
unsafe impl<T: Send> Send for Place<T> {}
// SAFETY: all shared access goes through the atomic pointer; the magazine is written only
// by the putter before publishing it and moved out only by the taker whose swap won it.
unsafe impl<T: Send> Sync for Place<T> {}

impl<T> Place<T> {
    fn new() -> Self {
        Self {
            node: AtomicPtr::new(ptr::null_mut()),
            _magazine: PhantomData,
        }
    }

    /// Whether a magazine is here (a snapshot).
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        !self.node.load(Ordering::Relaxed).is_null()
    }

    /// Puts `magazine` here, or hands it back when the place is occupied. Like a stack
    /// push, it allocates the magazine's node at its first use.
    #[inline]
    pub(crate) fn put(&self, mut magazine: Magazine<T>) -> Result<(), Magazine<T>> {
        if self.is_occupied() {
            return Err(magazine);
        }
        let Some(node) = magazine.link.node(NODE_ADDRESS_BITS) else {
            return Err(magazine);
        };
        // SAFETY: `node` is the magazine's and we own the magazine, so the node is in no
        // place and no stack: nobody else reads or writes its magazine cell.
        unsafe { (*node).magazine.with_mut(|cell| (*cell).write(magazine)) };
        if cfg!(magazine_mutant = "shelf_put_load_then_store") {
            // MUTANT: the emptiness check above, then a plain store: two putters can both
            // pass it, and the second overwrites the first one's magazine.
            self.node.store(node, Ordering::Release);
            return Ok(());
        }
        // Release: publishes the magazine (and its items) to the Acquire swap that takes it.
        match self.node.compare_exchange(
            ptr::null_mut(),
            node,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(()),
            // SAFETY: the CAS failed, so the node was never published: the magazine we
            // wrote is still ours alone, moved out once.
            Err(_) => Err(unsafe { read_magazine(node) }),
        }
    }

    /// Takes the magazine held here, if any.
    #[inline]
    pub(crate) fn take(&self) -> Option<Magazine<T>> {
        if !self.is_occupied() {
            return None;
        }
        let node = if cfg!(magazine_mutant = "shelf_take_load_then_store") {
            // MUTANT: load, then clear: two takers can both read the same node.
            let node = self.node.load(Ordering::Acquire);
            self.node.store(ptr::null_mut(), Ordering::Relaxed);
            node
        } else {
            // Acquire: receives the magazine the putter's Release CAS published.
            self.node.swap(ptr::null_mut(), Ordering::Acquire)
        };
        if node.is_null() {
            return None;
        }
        // SAFETY: our swap took the node out of the place, and a put publishes a node only
        // once per take, so no other thread holds this pointer: the magazine is ours.
        let magazine = unsafe { read_magazine(node) };
        debug_assert_eq!(magazine.link.node, node, "a magazine is in its own node");
        Some(magazine)
    }
}

/// Moves the magazine out of `node`.
///
/// # Safety
///
/// The caller owns `node` (it holds it in no place or stack that another thread can reach)
/// and its magazine cell is initialised; it is moved out once.
unsafe fn read_magazine<T>(node: *mut Node<T>) -> Magazine<T> {
    // SAFETY: the caller's contract.
    unsafe { (*node).magazine.with_mut(|cell| (*cell).assume_init_read()) }
}

impl<T> Drop for Place<T> {
    fn drop(&mut self) {
        // `&mut self`: no put or take is in flight; the magazine goes with its items (its
        // link then retires the node through the epoch).
        drop(self.take());
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;

    fn magazine_with(item: u32) -> Magazine<u32> {
        let mut magazine = Magazine::new(1);
        assert!(magazine.push(item).is_ok());
        magazine
    }

    #[test]
    fn a_place_holds_one_magazine() {
        let place = Place::new();
        assert!(place.take().is_none());
        place.put(magazine_with(1)).unwrap();
        let refused = place.put(magazine_with(2)).unwrap_err();
        assert_eq!(
            refused.len(),
            1,
            "an occupied place hands the magazine back whole"
        );
        let mut taken = place.take().unwrap();
        assert_eq!(taken.pop(), Some(1));
        assert!(place.take().is_none(), "taken once");
    }

    #[test]
    fn a_magazine_keeps_its_node_on_the_shelf() {
        let place = Place::new();
        let mut magazine = magazine_with(3);
        let node = magazine.link.node(NODE_ADDRESS_BITS).unwrap();
        place.put(magazine).unwrap();
        assert_eq!(place.take().unwrap().link.node, node);
    }

    #[test]
    fn dropping_a_place_drops_its_magazine_and_items() {
        let token = alloc::rc::Rc::new(());
        let mut magazine = Magazine::new(2);
        assert!(magazine.push(token.clone()).is_ok());
        let place = Place::new();
        place.put(magazine).unwrap();
        assert_eq!(alloc::rc::Rc::strong_count(&token), 2);
        drop(place);
        assert_eq!(alloc::rc::Rc::strong_count(&token), 1);
    }

    #[test]
    fn the_used_flag_covers_one_interval() {
        let shelf = Shelf::<u32>::new();
        assert!(!shelf.used_since_last_check());
        shelf.mark_used();
        assert!(shelf.used_lately());
        assert!(shelf.used_since_last_check());
        assert!(
            !shelf.used_since_last_check(),
            "a new interval starts unused"
        );
    }
}
