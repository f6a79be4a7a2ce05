//! A flag that one thread holds at a time (the exhaustion flush's, a trim's), and that a
//! forked child can take over.
//!
//! `fork` copies only the calling thread: a flag that another thread held at that moment
//! would stay held in the child for good, where its holder does not exist. So the flag
//! holds its holder's process id: a thread of another process (the child's parent) does
//! not count as holding it, and the child may take it over.

use crate::sync::{self, AtomicUsize, Ordering};

/// 0 when clear; else the id of the process whose thread holds it.
pub(crate) struct ProcessFlag(AtomicUsize);

impl ProcessFlag {
    pub(crate) fn new() -> Self {
        Self(AtomicUsize::new(0))
    }

    /// Sets the flag when it is clear, or held by a thread of another process (one that
    /// does not exist here: the flag was copied by `fork`), with Acquire. Returns whether
    /// this call set it.
    pub(crate) fn try_set(&self) -> bool {
        let here = sync::process_id();
        match self
            .0
            .compare_exchange(0, here, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => true,
            Err(holder) if holder != here && !cfg!(magazine_mutant = "flag_ignores_process") => {
                // MUTANT (flag_ignores_process): a flag copied by `fork` stays held.
                self.0
                    .compare_exchange(holder, here, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            }
            Err(_) => false,
        }
    }

    /// Whether a thread of this process holds the flag (Acquire: after a `false`, what
    /// the holder did before its [`clear`](Self::clear) is visible).
    pub(crate) fn is_set(&self) -> bool {
        match self.0.load(Ordering::Acquire) {
            0 => false,
            holder => {
                holder == sync::process_id() || cfg!(magazine_mutant = "flag_ignores_process")
            }
        }
    }

    /// Clears the flag (Release); for the thread that set it.
    pub(crate) fn clear(&self) {
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(magazine_model)))]
mod tests {
    use super::*;

    #[test]
    fn a_flag_held_in_another_process_is_taken_over() {
        let flag = ProcessFlag::new();
        assert!(flag.try_set());
        assert!(flag.is_set());
        assert!(!flag.try_set(), "held by this process");
        flag.clear();
        assert!(!flag.is_set());
        // As `fork` leaves it in a child: held by the parent's thread.
        let parent = sync::process_id() + 1;
        flag.0.store(parent, Ordering::Relaxed);
        assert!(!flag.is_set(), "the parent's thread does not exist here");
        assert!(flag.try_set(), "taken over");
        assert_eq!(flag.0.load(Ordering::Relaxed), sync::process_id());
    }
}
