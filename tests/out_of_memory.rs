//! A cache whose allocator refuses memory degrades and never aborts: a constructor
//! returns the error, and a cache that cannot get a magazine hands items to and takes
//! them from the source directly, losing none and handing none out twice.
//!
//! The test binary's global allocator refuses, while a thread-local switch is on, every
//! allocation below 1 KiB made on that thread: the cache's own (magazine storage, depot
//! nodes, slots, shelves), not crossbeam-epoch's (a participant record and a garbage bag
//! are over 2 KiB each; those cannot fail gracefully, and an allocator serves them from a
//! reserve: `magazine-malloc` does). Mutant `infallible_magazine` allocates magazine
//! storage the infallible way, and this binary aborts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// The system allocator, refusing small allocations on a thread that asks it to.
struct Refusing;

thread_local! {
    static REFUSE: Cell<bool> = const { Cell::new(false) };
}

/// Allocations refused so far (any thread).
static REFUSED: AtomicUsize = AtomicUsize::new(0);

fn refusing() -> bool {
    REFUSE.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards to `System`, or returns null (a refusal), which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() < 1024 && refusing() {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Refusing = Refusing;

/// Runs `f` with this thread's small allocations refused.
fn refused<R>(f: impl FnOnce() -> R) -> R {
    REFUSE.with(|refuse| refuse.set(true));
    let result = f();
    REFUSE.with(|refuse| refuse.set(false));
    result
}

const IDS: usize = 4096;

/// A pool of ids with a flag per id (no allocation in the source: it runs while the
/// allocator refuses). Panics on a double free or a foreign id; counts the ids out.
struct Pool {
    next: AtomicU32,
    out: [AtomicBool; IDS],
    free: std::sync::Mutex<[u32; IDS]>,
    free_len: AtomicUsize,
}

impl Pool {
    fn new() -> Self {
        Self {
            next: AtomicU32::new(0),
            out: [const { AtomicBool::new(false) }; IDS],
            free: std::sync::Mutex::new([0; IDS]),
            free_len: AtomicUsize::new(0),
        }
    }

    fn out(&self) -> usize {
        self.out
            .iter()
            .filter(|out| out.load(Ordering::Relaxed))
            .count()
    }
}

impl Source for Pool {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        let free = self.free.lock().unwrap();
        let len = self.free_len.load(Ordering::Relaxed);
        let id = if len > 0 {
            self.free_len.store(len - 1, Ordering::Relaxed);
            free[len - 1]
        } else {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            if id as usize >= IDS {
                self.next.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            id
        };
        assert!(
            !self.out[id as usize].swap(true, Ordering::Relaxed),
            "id {id} handed out twice"
        );
        Some(id)
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        let mut free = self.free.lock().unwrap();
        for id in items {
            assert!(
                self.out[id as usize].swap(false, Ordering::Relaxed),
                "id {id} freed twice"
            );
            let len = self.free_len.load(Ordering::Relaxed);
            free[len] = id;
            self.free_len.store(len + 1, Ordering::Relaxed);
        }
    }
}

fn config(depot: DepotPolicy) -> Config {
    Config {
        magazine_size: 8,
        cpus: 2,
        depot,
    }
}

#[test]
fn constructors_return_the_error() {
    let pool = Pool::new();
    let config = config(Config::default().depot);
    assert!(refused(|| Cache::try_with_config(&pool, config.clone())).is_err());
    let cache = Cache::try_with_config(&pool, config).expect("memory now");
    assert!(refused(|| cache.try_local()).is_err());
    assert!(cache.try_local().is_ok());
    assert!(REFUSED.load(Ordering::Relaxed) > 0);
}

/// Every path that needs a magazine or a depot node, with none to be had: misses
/// (refills), frees into full magazines (spills), busy-free paths through the depot,
/// trims and flushes; then the same cache with memory again.
fn degrade(depot: DepotPolicy) {
    magazine::register_thread(); // crossbeam-epoch's record: not the cache's to refuse
    let pool = Pool::new();
    let cache = Cache::with_config(&pool, config(depot));
    let mut held = Vec::with_capacity(IDS);
    let before = REFUSED.load(Ordering::Relaxed);
    refused(|| {
        for round in 0..50 {
            for _ in 0..(round % 40 + 1) {
                held.push(cache.alloc_on(round % 2).expect("ids left"));
            }
            for (n, id) in held.drain(..).enumerate() {
                cache.free_on(n % 2, id);
            }
            if round % 10 == 0 {
                cache.trim();
            }
        }
        cache.flush();
    });
    assert!(
        REFUSED.load(Ordering::Relaxed) > before,
        "the cache asked for memory"
    );
    assert_eq!(pool.out(), cache.cached(), "every id is cached or home");
    // With memory again, the cache works as before.
    for _ in 0..3 {
        held.extend((0..100).map(|_| cache.alloc().expect("ids left")));
        held.drain(..).for_each(|id| cache.free(id));
    }
    // Then it runs dry: every id out, none twice, and back.
    refused(|| {
        while let Some(id) = cache.alloc_on(held.len() % 2) {
            held.push(id);
        }
    });
    assert_eq!(held.len(), IDS, "every id handed out once");
    refused(|| held.drain(..).for_each(|id| cache.free_on(0, id)));
    drop(cache);
    assert_eq!(pool.out(), 0, "every id home after the drop");
}

#[test]
fn a_cache_without_memory_for_magazines_degrades_to_its_source() {
    degrade(Config::default().depot);
}

#[test]
fn a_fixed_depot_without_memory_for_magazines_degrades_to_its_source() {
    degrade(DepotPolicy::Fixed { max_full: 2 });
}

#[test]
fn a_one_per_tick_depot_without_memory_for_magazines_degrades_to_its_source() {
    degrade(DepotPolicy::Dynamic {
        target: 0,
        trim: Trim::OnePerTick,
    });
}
