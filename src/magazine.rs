//! A magazine: a fixed-capacity LIFO array of items, owned by exactly one party at a time,
//! and the depot stack node it carries from push to push (the stack itself is `stack.rs`).

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use crate::sync::{self, AtomicPtr, UnsafeCell};

/// A fixed-capacity stack of items with uninitialised storage.
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) (conservation) locally: an item pushed is in exactly one
/// slot of `items[..len]` until it is popped or the magazine is dropped (which drops it).
/// A magazine has one owner at a time (a CPU slot, a `LocalCache`, or a depot stack, in
/// its own node), so it needs no synchronisation of its own; the storage is in facade cells only so that
/// loom can see a second owner racing the first.
#[repr(C)] // The first three fields: see `src/rseq.rs`.
pub(crate) struct Magazine<T> {
    /// The storage: `capacity` cells from a leaked `Box<[Cell<T>]>` (rebuilt and dropped
    /// in `drop`). A thin pointer and a length rather than the box itself so that the
    /// restartable sequences of `src/rseq.rs` can find them at fixed offsets.
    ///
    /// Invariant: `items[..len]` are initialised, `items[len..]` are not.
    items: NonNull<Cell<T>>,
    capacity: usize,
    /// The length; except that, as the loaded magazine of a slot whose CPU runs
    /// restartable sequences, while nobody owns the slot, it also counts the sequences'
    /// hits in its bits 32-63 (`rseq::POP_STEP`; the owner who takes the slot takes them
    /// out).
    len: usize,
    /// The magazine's depot stack node (see [`Link`]): allocated at its first push and
    /// kept from push to push; freed through the epoch when the magazine is dropped.
    pub(crate) link: Link<T>,
}

// SAFETY: a magazine owns its items like a `Vec<T>` does; the cells are never shared.
unsafe impl<T: Send> Send for Magazine<T> {}

impl<T> Magazine<T> {
    /// An empty magazine that holds up to `capacity` items; the error when the allocator
    /// refuses the memory (never a panic or an abort: the caller degrades, see
    /// [`docs::failures`](crate::docs::failures)).
    pub(crate) fn try_new(capacity: usize) -> Result<Self, TryReserveError> {
        debug_assert!(capacity > 0, "a magazine holds at least one item");
        if cfg!(magazine_mutant = "infallible_magazine") {
            // MUTANT: the storage comes from an infallible allocation, which aborts the
            // process when the allocator refuses it.
            let items: Box<[Cell<T>]> = (0..capacity)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect();
            return Ok(Self::from_storage(items));
        }
        let items =
            crate::fallible::boxed_slice(capacity, |_| Ok(UnsafeCell::new(MaybeUninit::uninit())))?;
        Ok(Self::from_storage(items))
    }

    /// An empty magazine that holds up to `capacity` items; aborts as `Vec` does when
    /// the allocator refuses the memory. For tests and the model-checked scenarios.
    #[cfg(any(test, magazine_model))]
    pub(crate) fn new(capacity: usize) -> Self {
        Self::try_new(capacity).unwrap_or_else(|_| {
            alloc::alloc::handle_alloc_error(
                core::alloc::Layout::array::<Cell<T>>(capacity).expect("a magazine's layout"),
            )
        })
    }

    fn from_storage(items: Box<[Cell<T>]>) -> Self {
        let capacity = items.len();
        Self {
            // SAFETY: `Box::into_raw` never returns null.
            items: unsafe { NonNull::new_unchecked(Box::into_raw(items).cast()) },
            capacity,
            len: 0,
            link: Link::new(),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The item cells.
    #[inline]
    fn items(&self) -> &[Cell<T>] {
        // SAFETY: `items` points to `capacity` cells that the magazine owns until `drop`.
        unsafe { core::slice::from_raw_parts(self.items.as_ptr(), self.capacity) }
    }

    /// Where the restartable sequences find the storage, the length and the capacity:
    /// the addresses of the three fields.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn field_addresses(&self) -> [usize; 3] {
        [
            ptr::addr_of!(self.items) as usize,
            ptr::addr_of!(self.len) as usize,
            ptr::addr_of!(self.capacity) as usize,
        ]
    }

    /// Takes out the hits that restartable sequences counted in the length word of a
    /// slot's loaded magazine (`rseq::POP_STEP`), leaving the length alone in it: the
    /// magazine's invariant then holds again. For the owner that took the slot whole.
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn take_sequence_hits(&mut self) -> crate::rseq::Hits {
        let (len, hits) = crate::rseq::split(self.len);
        self.len = len;
        hits
    }

    /// The address of the length of the magazine at `magazine`, computed without making a
    /// reference: its owner may be using it on another thread (see `Slot::looks_empty`).
    #[cfg(all(magazine_rseq, not(miri)))]
    pub(crate) fn len_address(magazine: *const Self) -> *const usize {
        // SAFETY: only an address is computed, inside the magazine `magazine` points to.
        unsafe { ptr::addr_of!((*magazine).len) }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    /// Pushes `item`, or hands it back when the magazine is full.
    #[inline]
    pub(crate) fn push(&mut self, item: T) -> Result<(), T> {
        let Some(cell) = self.items().get(self.len) else {
            return Err(item);
        };
        // SAFETY: we own the magazine (`&mut self`), and `items[len]` is uninitialised,
        // so writing does not overwrite a live item.
        cell.with_mut(|slot| unsafe { (*slot).write(item) });
        self.len += 1;
        Ok(())
    }

    /// Pops the most recently pushed item.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        let index = self.len.checked_sub(1)?;
        // SAFETY: `index < len <= items.len()`.
        let cell = unsafe { self.items().get_unchecked(index) };
        // SAFETY: `items[index]` is initialised (index < len) and we own it; lowering `len`
        // below marks it uninitialised, so it is read exactly once.
        let item = cell.with_mut(|slot| unsafe { (*slot).assume_init_read() });
        self.len = index;
        Some(item)
    }

    /// Pops the most recently pushed item that satisfies `accept`, keeping the others in
    /// their order. Used by callers that cannot take just any item (an IOVA above a limit).
    #[inline]
    pub(crate) fn pop_where(&mut self, mut accept: impl FnMut(&T) -> bool) -> Option<T> {
        let index = (0..self.len).rev().find(|&i| {
            // SAFETY: `i < len`, so the item is initialised; we only borrow it.
            self.items()[i].with(|slot| accept(unsafe { (*slot).assume_init_ref() }))
        })?;
        // Move the top item into the hole (Linux's `iova_magazine_pop` does the same):
        // order inside a magazine carries no meaning.
        let top = self.pop()?;
        if index == self.len {
            return Some(top);
        }
        // SAFETY: `index < len`: initialised and owned; we read it out and write `top`
        // back in its place, so every item of `items[..len]` stays initialised once.
        let found = self.items()[index].with_mut(|slot| unsafe {
            let found = (*slot).assume_init_read();
            (*slot).write(top);
            found
        });
        Some(found)
    }

    /// Asks the CPU to bring the item storage that the next pops (`write` false) or pushes
    /// (`write` true) touch into its cache, all lines at once. A magazine that changes
    /// hands (a full one taken from the depot, an empty one to fill) was last touched by
    /// another core: without this its lines arrive one demand miss at a time, which made
    /// a one-to-one hand-off 3x slower on the machine of `BENCHMARKS.md`.
    #[inline]
    pub(crate) fn prefetch(&self, write: bool) {
        match write {
            true => prefetch_lines(&self.items()[self.len..], false),
            false => prefetch_lines(&self.items()[..self.len], true),
        }
    }

    /// An iterator that pops items; items it does not yield stay in the magazine, so a
    /// consumer that panics half way loses nothing.
    pub(crate) fn drain(&mut self) -> Drain<'_, T> {
        Drain { magazine: self }
    }
}

/// Prefetches every cache line of `items`, the last one first when `items` are about to
/// be popped (a pop takes the top item). A hint: no effect on what the program does.
#[inline]
fn prefetch_lines<C>(items: &[C], for_pops: bool) {
    #[cfg(all(target_arch = "x86_64", not(any(miri, magazine_model))))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let start = items.as_ptr() as usize & !(LINE - 1);
        let end = items.as_ptr() as usize + core::mem::size_of_val(items);
        let prefetch = |line: usize| {
            // SAFETY: `sse`, which the intrinsic needs, is part of every x86_64 target; a
            // prefetch never faults and changes no memory, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) }
        };
        let lines = (start..end).step_by(LINE);
        match for_pops {
            true => lines.rev().for_each(prefetch),
            false => lines.for_each(prefetch),
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(miri, magazine_model)))))]
    let _ = (items, for_pops);
}

impl<T> Drop for Magazine<T> {
    fn drop(&mut self) {
        while let Some(item) = self.pop() {
            drop(item);
        }
        let items = ptr::slice_from_raw_parts_mut(self.items.as_ptr(), self.capacity);
        // SAFETY: `items` came from `Box::into_raw` of a boxed slice of `capacity` cells
        // (`new`), and this is the only place that turns it back; every item has been
        // popped, so the cells hold nothing to drop.
        drop(unsafe { Box::from_raw(items) });
    }
}

/// A magazine's storage cell.
type Cell<T> = UnsafeCell<MaybeUninit<T>>;

impl<T> fmt::Debug for Magazine<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Magazine")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .finish()
    }
}

/// Pops items out of a magazine, most recent first.
pub(crate) struct Drain<'a, T> {
    magazine: &'a mut Magazine<T>,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        self.magazine.pop()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.magazine.len, Some(self.magazine.len))
    }
}

/// A stack node: the magazine's own (see [`Link`]). 64-byte aligned, for the tag's low bits
/// (and so that no two nodes share a cache line).
#[repr(align(64))]
pub(crate) struct Node<T> {
    /// The node below, while linked. Written (Relaxed) only by the thread that owns the
    /// node's magazine, before the Release CAS that links the node; read (Relaxed) by pops
    /// after an Acquire load of `head`. Atomic because a stale pop may read it while the
    /// owner writes it for a later push; that pop's CAS then fails (see the `stack` module
    /// docs).
    pub(crate) next: AtomicPtr<Node<T>>,
    /// The magazine, while the node is linked: written by the pusher before the CAS that
    /// links the node, moved out by the pop whose CAS unlinked it; uninitialised otherwise.
    pub(crate) magazine: UnsafeCell<MaybeUninit<Magazine<T>>>,
}

impl<T> Node<T> {
    /// A fresh, unlinked node; `None` when the allocator refuses the memory. Freed with
    /// `Box::from_raw` (the same layout a `Box<Node<T>>` has).
    fn allocate() -> Option<*mut Self> {
        let layout = core::alloc::Layout::new::<Self>();
        // SAFETY: `Node` is not zero-sized (it holds a pointer). A null result is the
        // allocator's refusal, returned as `None`; nothing here can panic.
        let node = unsafe { alloc::alloc::alloc(layout) }.cast::<Self>();
        if node.is_null() {
            return None;
        }
        // SAFETY: fresh memory of `Node`'s layout, ours alone.
        unsafe {
            node.write(Node {
                next: AtomicPtr::new(ptr::null_mut()),
                magazine: UnsafeCell::new(MaybeUninit::uninit()),
            })
        };
        Some(node)
    }
}

/// A magazine's stack node, owned by the magazine: null until its first push, then kept
/// from push to push (where the stack recycles nodes; otherwise a pop frees it and the
/// next push allocates another). Dropping the link frees the node through the epoch, because a stale
/// pop may still read its `next`.
pub(crate) struct Link<T> {
    /// Not shared state: it moves with the magazine (and is inside the node while the
    /// magazine is linked).
    ///
    /// | value    | meaning                        | transition                                         |
    /// |----------|--------------------------------|----------------------------------------------------|
    /// | null     | no node yet                    | `Link::node` allocates one at the first push        |
    /// | non-null | the magazine's node, unlinked while the magazine is outside it | `Stack::pop` resets it to null in the fallback; `Link::drop` frees it through the epoch |
    pub(crate) node: *mut Node<T>,
}

impl<T> Link<T> {
    pub(crate) const fn new() -> Self {
        Self {
            node: ptr::null_mut(),
        }
    }

    /// The node, allocated at the first call; `None` (keeping no node) when the allocator
    /// refuses the memory, or if its address does not fit in `address_bits` bits, what the
    /// stack's head word stores (see "Platforms" in the `stack` module docs). Not a panic: a push that cannot link the magazine
    /// hands it back, and its caller returns the items to the source, or, while unwinding
    /// from a panicking source, keeps them ([`Depot::push_full_unbounded`]).
    ///
    /// [`Depot::push_full_unbounded`]: crate::depot::Depot::push_full_unbounded
    pub(crate) fn node(&mut self, address_bits: u32) -> Option<*mut Node<T>> {
        if self.node.is_null() {
            let node = Node::allocate()?;
            if (node as usize).checked_shr(address_bits).unwrap_or(0) != 0 {
                // SAFETY: just allocated, never shared.
                drop(unsafe { Box::from_raw(node) });
                if cfg!(magazine_mutant = "node_check_panics") {
                    // MUTANT: the failed check panics with the magazine out of its place.
                    panic!("magazine: a depot node's address does not fit in {address_bits} bits");
                }
                return None;
            }
            self.node = node;
        }
        Some(self.node)
    }
}

impl<T> Drop for Link<T> {
    fn drop(&mut self) {
        let node = self.node;
        if node.is_null() {
            return;
        }
        if cfg!(magazine_mutant = "link_frees_without_epoch") {
            // MUTANT: the node is freed at once, while a stale pop may still read its `next`.
            // SAFETY: none: this is the use-after-free that Miri must find.
            unsafe { drop(Box::from_raw(node)) };
            return;
        }
        let guard = sync::pin();
        // SAFETY: the magazine that owned the node is being dropped, so the node is not
        // linked (a linked node's magazine is in it) and nobody will link it again; its
        // magazine cell is uninitialised (nothing to drop). Pops that read `head` naming it
        // are pinned, and the epoch runs this only after every thread pinned now unpins.
        unsafe { guard.defer_unchecked(move || drop(Box::from_raw(node))) };
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;
    use alloc::rc::Rc;

    #[test]
    fn push_pop_is_lifo_and_bounded() {
        let mut m = Magazine::new(3);
        assert!(m.is_empty());
        for i in 0..3 {
            assert_eq!(m.push(i), Ok(()));
        }
        assert!(m.is_full());
        assert_eq!(m.push(9), Err(9));
        assert_eq!(m.pop(), Some(2));
        assert_eq!(m.pop(), Some(1));
        assert_eq!(m.pop(), Some(0));
        assert_eq!(m.pop(), None);
    }

    #[test]
    fn pop_where_takes_the_newest_match_and_keeps_the_rest() {
        let mut m = Magazine::new(5);
        for i in [10, 3, 12, 4, 20] {
            m.push(i).unwrap();
        }
        assert_eq!(m.pop_where(|&x| x < 5), Some(4));
        assert_eq!(m.pop_where(|&x| x > 100), None);
        assert_eq!(m.len(), 4);
        let mut rest: Vec<_> = m.drain().collect();
        rest.sort();
        assert_eq!(rest, [3, 10, 12, 20]);
    }

    #[test]
    fn drop_and_partial_drain_keep_every_item_accounted() {
        let token = Rc::new(());
        let mut m = Magazine::new(4);
        for _ in 0..4 {
            m.push(token.clone()).unwrap();
        }
        let taken: Vec<_> = m.drain().take(1).collect();
        assert_eq!(m.len(), 3, "undrained items stay in the magazine");
        assert_eq!(Rc::strong_count(&token), 5);
        drop(taken);
        drop(m);
        assert_eq!(Rc::strong_count(&token), 1);
    }
}
