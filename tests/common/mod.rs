//! A tracking source shared by the integration tests: it owns ids `0..capacity`, fails on
//! a duplicated or foreign id, and can be told to panic.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use magazine::Source;

#[cfg(target_os = "linux")]
pub mod cpus;

/// Ids `0..capacity`; `home[id]` says whether the id is in the source.
pub struct Tracking {
    state: Mutex<State>,
    /// Panic in `free_batch` right after taking this many more items, once (`usize::MAX`:
    /// never).
    pub panic_free_after: AtomicUsize,
    /// Panic in this many next calls of `alloc` (`0`: never).
    pub panic_allocs: AtomicUsize,
    /// Sizes of the `free_batch` calls, in order.
    pub batches: Mutex<Vec<usize>>,
}

struct State {
    free: Vec<u32>,
    home: Vec<bool>,
}

impl Tracking {
    pub fn new(capacity: u32) -> Self {
        Self {
            state: Mutex::new(State {
                free: (0..capacity).rev().collect(),
                home: vec![true; capacity as usize],
            }),
            panic_free_after: AtomicUsize::new(usize::MAX),
            panic_allocs: AtomicUsize::new(0),
            batches: Mutex::new(Vec::new()),
        }
    }

    pub fn capacity(&self) -> usize {
        self.state.lock().unwrap().home.len()
    }

    /// Ids currently in the source.
    pub fn at_home(&self) -> usize {
        self.state.lock().unwrap().free.len()
    }

    pub fn assert_all_home(&self) {
        let state = self.state.lock().unwrap();
        let missing: Vec<usize> = (0..state.home.len()).filter(|&i| !state.home[i]).collect();
        assert!(
            missing.is_empty(),
            "ids not returned to the source: {missing:?}"
        );
        assert_eq!(state.free.len(), state.home.len());
    }
}

impl Source for Tracking {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        if self
            .panic_allocs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            panic!("tracking source: injected alloc panic");
        }
        let mut state = self.state.lock().unwrap();
        let id = state.free.pop()?;
        state.home[id as usize] = false;
        Some(id)
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        let mut count = 0;
        for id in items {
            {
                let mut state = self.state.lock().unwrap();
                let slot = state
                    .home
                    .get_mut(id as usize)
                    .unwrap_or_else(|| panic!("foreign id {id}"));
                assert!(!*slot, "id {id} returned twice");
                *slot = true;
                state.free.push(id);
            }
            count += 1;
            let armed = self.panic_free_after.fetch_update(
                Ordering::SeqCst,
                Ordering::SeqCst,
                |n| match n {
                    usize::MAX => None,
                    1 => Some(usize::MAX),
                    n => Some(n - 1),
                },
            );
            if armed == Ok(1) {
                self.batches.lock().unwrap().push(count);
                panic!("tracking source: injected free_batch panic");
            }
        }
        self.batches.lock().unwrap().push(count);
    }
}
