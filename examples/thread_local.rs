//! A `LocalCache` per thread in a `thread_local!`, so that any code can allocate through
//! its thread's handle without passing one around: the pattern of a global allocator's
//! per-thread cache.
//!
//! A handle borrows its cache, and a thread-local lives as long as its thread, so the
//! cache must outlive every thread: a `static` (here a `LazyLock`, built on first use)
//! gives `LocalCache<'static, _>`. A thread's handle is dropped when the thread exits,
//! which gives its magazines to the depot, where the other threads find them. A `static`
//! is never dropped, so what is cached when the process exits is not returned to the
//! source: call `flush()` first if the source must see everything come back.
//!
//! ```text
//! cargo run --release --example thread_local
//! ```

use std::cell::RefCell;
use std::sync::{LazyLock, Mutex};
use std::thread;

use magazine::{Cache, LocalCache, Source};

/// The slow path: connection ids from a free list behind one lock.
struct Ids(Mutex<Vec<u32>>);

impl Source for Ids {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        self.0.lock().unwrap().pop()
    }

    /// A whole refill under one lock hold.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u32)) -> usize {
        let mut free = self.0.lock().unwrap();
        let start = free.len().saturating_sub(max);
        let taken = free.len() - start;
        free.drain(start..).for_each(out);
        taken
    }

    fn free_batch(&self, ids: &mut dyn Iterator<Item = u32>) {
        self.0.lock().unwrap().extend(ids);
    }
}

const IDS: u32 = 100_000;

static CACHE: LazyLock<Cache<Ids>> =
    LazyLock::new(|| Cache::new(Ids(Mutex::new((0..IDS).collect()))));

thread_local! {
    // Built the first time the thread allocates or frees.
    static LOCAL: RefCell<LocalCache<'static, Ids>> = RefCell::new(CACHE.local());
}

/// Allocates an id on the calling thread's handle.
fn alloc_id() -> Option<u32> {
    LOCAL.with(|local| local.borrow_mut().alloc())
}

/// Frees an id on the calling thread's handle (any thread may free any id).
fn free_id(id: u32) {
    LOCAL.with(|local| local.borrow_mut().free(id));
}

fn main() {
    let workers: Vec<_> = (0..4)
        .map(|_| {
            thread::spawn(|| {
                for round in 0..10_000 {
                    let ids: Vec<u32> = (0..1 + round % 64).map(|_| alloc_id().unwrap()).collect();
                    ids.into_iter().for_each(free_id);
                }
                // The thread's handle is dropped as it exits: its magazines go to the depot.
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());

    let stats = CACHE.stats();
    println!("{stats}");
    println!("cached after the threads exited: {} ids", CACHE.cached());
    CACHE.flush(); // the static is never dropped: give everything back explicitly
    let free = CACHE.source().0.lock().unwrap().len();
    assert_eq!(free, IDS as usize, "every id is home");
    println!("after flush(): all {free} ids are back in the free list");
}
