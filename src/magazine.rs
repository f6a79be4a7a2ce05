//! A magazine: a fixed-capacity LIFO array of items, owned by exactly one party at a time.

use alloc::boxed::Box;
use core::fmt;
use core::mem::MaybeUninit;

use crate::stack::Link;
use crate::sync::UnsafeCell;

/// A fixed-capacity stack of items with uninitialised storage.
///
/// Upholds [invariant 1](crate::docs::design#invariant-1-conservation) (conservation) locally: an item pushed is in exactly one
/// slot of `items[..len]` until it is popped or the magazine is dropped (which drops it).
/// A magazine has one owner at a time (a CPU slot, a `LocalCache`, or a depot stack, in its own node), so
/// it needs no synchronisation of its own; the storage is in facade cells only so that
/// loom can see a second owner racing the first.
pub(crate) struct Magazine<T> {
    /// Invariant: `items[..len]` are initialised, `items[len..]` are not.
    items: Box<[UnsafeCell<MaybeUninit<T>>]>,
    len: usize,
    /// The magazine's depot stack node (`src/stack.rs`): allocated at its first push and
    /// kept from push to push; freed through the epoch when the magazine is dropped.
    pub(crate) link: Link<T>,
}

// SAFETY: a magazine owns its items like a `Vec<T>` does; the cells are never shared.
unsafe impl<T: Send> Send for Magazine<T> {}

impl<T> Magazine<T> {
    /// An empty magazine that holds up to `capacity` items.
    pub(crate) fn new(capacity: usize) -> Self {
        debug_assert!(capacity > 0, "a magazine holds at least one item");
        let items = (0..capacity)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        Self {
            items,
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
        self.items.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.items.len()
    }

    /// Pushes `item`, or hands it back when the magazine is full.
    #[inline]
    pub(crate) fn push(&mut self, item: T) -> Result<(), T> {
        let Some(cell) = self.items.get(self.len) else {
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
        let cell = unsafe { self.items.get_unchecked(index) };
        // SAFETY: `items[index]` is initialised (index < len) and we own it; lowering `len`
        // below marks it uninitialised, so it is read exactly once.
        let item = cell.with_mut(|slot| unsafe { (*slot).assume_init_read() });
        self.len = index;
        Some(item)
    }

    /// Pops the most recently pushed item that satisfies `accept`, keeping the others in
    /// their order. Used by callers that cannot take just any item (an IOVA above a limit).
    pub(crate) fn pop_where(&mut self, mut accept: impl FnMut(&T) -> bool) -> Option<T> {
        let index = (0..self.len).rev().find(|&i| {
            // SAFETY: `i < len`, so the item is initialised; we only borrow it.
            self.items[i].with(|slot| accept(unsafe { (*slot).assume_init_ref() }))
        })?;
        // Move the top item into the hole (Linux's `iova_magazine_pop` does the same):
        // order inside a magazine carries no meaning.
        let top = self.pop()?;
        if index == self.len {
            return Some(top);
        }
        // SAFETY: `index < len`: initialised and owned; we read it out and write `top`
        // back in its place, so every item of `items[..len]` stays initialised once.
        let found = self.items[index].with_mut(|slot| unsafe {
            let found = (*slot).assume_init_read();
            (*slot).write(top);
            found
        });
        Some(found)
    }

    /// An iterator that pops items; items it does not yield stay in the magazine, so a
    /// consumer that panics half way loses nothing.
    pub(crate) fn drain(&mut self) -> Drain<'_, T> {
        Drain { magazine: self }
    }
}

impl<T> Drop for Magazine<T> {
    fn drop(&mut self) {
        while let Some(item) = self.pop() {
            drop(item);
        }
    }
}

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
