//! The unwinding contract, call site by call site: a source that panics at its Nth call
//! point (an `alloc`, the entry of a `free_batch`, or an item a `free_batch` takes), N
//! swept over every point of a script that reaches each path that calls the source
//! (misses, a `Fixed` depot's overflow, busy slots, handles, trims, flushes, steals, the
//! exhaustion flush, the cache's drop). After each run: no item lost, none duplicated,
//! the cache kept serving, and a panic outside the cache's drop dropped no item. Under
//! the slot protocol and, where the platform has them, with restartable sequences.
//!
//! Also: a panicking source while the cache is dropped after restartable-sequence hits on
//! several CPUs, and a panicking source on the busy-slot paths under contention.

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use magazine::{Cache, Config, DepotPolicy, Options, Source, Trim};

/// Items dropped instead of returned, per pool (see [`Token`]).
static DROPPED: [AtomicUsize; 4096] = [const { AtomicUsize::new(0) }; 4096];
static NEXT_POOL: AtomicUsize = AtomicUsize::new(0);

/// An item of one word (the sequences move those in a register): the pool's number in
/// the high half, the id in the low one. Dropping one (rather than returning it to its
/// pool) is counted.
#[derive(Debug, PartialEq, Eq)]
struct Token(u64);

impl Drop for Token {
    fn drop(&mut self) {
        DROPPED[(self.0 >> 32) as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// A pool of `capacity` ids that panics once, at its `panic_at`th call point (1-based; 0:
/// never): each `alloc`, each `free_batch` entry and each item a `free_batch` takes is a
/// point.
struct Pool {
    number: usize,
    capacity: u32,
    home: Mutex<Vec<u32>>,
    points: AtomicUsize,
    panic_at: usize,
    /// Also panic at the entry of every `panic_every`th `free_batch` call (0: never).
    panic_every: AtomicUsize,
    free_calls: AtomicUsize,
    duplicates: AtomicUsize,
    /// What the script was doing when the pool panicked.
    panicked_in: Mutex<Option<&'static str>>,
    phase: Mutex<&'static str>,
}

impl Pool {
    fn new(capacity: u32, panic_at: usize) -> Self {
        let number = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
        assert!(number < DROPPED.len(), "more pools than drop counters");
        Self {
            number,
            capacity,
            home: Mutex::new((0..capacity).rev().collect()),
            points: AtomicUsize::new(0),
            panic_at,
            panic_every: AtomicUsize::new(0),
            free_calls: AtomicUsize::new(0),
            duplicates: AtomicUsize::new(0),
            panicked_in: Mutex::new(None),
            phase: Mutex::new("start"),
        }
    }

    fn point(&self) {
        let point = self.points.fetch_add(1, Ordering::Relaxed) + 1;
        if point == self.panic_at {
            *self.panicked_in.lock().unwrap() = Some(*self.phase.lock().unwrap());
            panic!("pool: injected panic at call point {point}");
        }
    }

    fn set_phase(&self, phase: &'static str) {
        *self.phase.lock().unwrap() = phase;
    }

    fn dropped(&self) -> usize {
        DROPPED[self.number].load(Ordering::Relaxed)
    }

    fn at_home(&self) -> usize {
        self.home.lock().unwrap().len()
    }
}

impl Source for Pool {
    type Item = Token;

    fn alloc(&self) -> Option<Token> {
        self.point();
        let id = self.home.lock().unwrap().pop()?;
        Some(Token(((self.number as u64) << 32) | u64::from(id)))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = Token>) {
        self.point();
        let call = self.free_calls.fetch_add(1, Ordering::Relaxed) + 1;
        let every = self.panic_every.load(Ordering::Relaxed);
        if every != 0 && call % every == 0 {
            panic!("pool: injected panic at free_batch call {call}");
        }
        for token in items {
            let id = token.0 as u32;
            assert_eq!(token.0 >> 32, self.number as u64, "a foreign token");
            std::mem::forget(token);
            let mut home = self.home.lock().unwrap();
            if home.contains(&id) {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            home.push(id);
            drop(home);
            self.point();
        }
    }
}

/// Keeps the injected panics out of the test output (the others still print).
fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|message| message.starts_with("pool: injected"));
            if !injected {
                default(info);
            }
        }));
    });
}

/// Runs `op`, catching the pool's panic (the script goes on: the cache must keep serving).
fn step<R>(op: impl FnOnce() -> R) -> Option<R> {
    catch_unwind(AssertUnwindSafe(op)).ok()
}

/// The script: each path that calls the source, in turn.
fn script(cache: &Cache<Arc<Pool>>) {
    let pool = cache.source();
    let slots = cache.config().cpus;
    let mut held: Vec<Token> = Vec::new();

    pool.set_phase("misses");
    for cpu in [0, 1] {
        for _ in 0..7 {
            held.extend(step(|| cache.alloc_on(cpu)).flatten());
        }
    }
    for _ in 0..5 {
        held.extend(step(|| cache.alloc()).flatten());
    }

    pool.set_phase("spills");
    for token in held.drain(..10.min(held.len())) {
        step(|| cache.free_on(1, token));
    }
    for token in held.drain(..) {
        step(|| cache.free(token));
    }

    pool.set_phase("busy slots");
    // `accept` runs while the thread holds slot 0: allocations and frees on it from there
    // are busy misses (with one slot, every slot is busy: the depot's loose magazines).
    let inner = RefCell::new(Vec::new());
    step(|| {
        cache.alloc_cached_where_on(0, |_| {
            for _ in 0..4 {
                inner.borrow_mut().extend(cache.alloc_on(0));
            }
            for token in inner.borrow_mut().drain(..2) {
                cache.free_on(0, token);
            }
            false
        })
    })
    .flatten()
    .into_iter()
    .for_each(|token| held.push(token));
    held.append(&mut inner.borrow_mut());

    pool.set_phase("trims");
    for _ in 0..3 {
        step(|| cache.trim());
    }

    pool.set_phase("handle");
    let mut local = cache.local();
    let mut mine = Vec::new();
    for _ in 0..9 {
        mine.extend(step(|| local.alloc()).flatten());
    }
    for token in mine {
        step(|| local.free(token));
    }
    step(|| drop(local));

    pool.set_phase("exhaustion");
    // Everything out (the source runs dry, then flushes and steals find what is cached).
    for _ in 0..pool.capacity + 4 {
        held.extend(step(|| cache.alloc()).flatten());
    }
    // Some back on another slot, then allocations that must steal them.
    let back = held.len() / 3;
    for token in held.drain(..back) {
        step(|| cache.free_on(slots - 1, token));
    }
    for _ in 0..back + 2 {
        held.extend(step(|| cache.alloc_on(0)).flatten());
    }
    for token in held.drain(..held.len() / 2) {
        step(|| cache.free_on(1, token));
    }

    pool.set_phase("flushes");
    step(|| cache.flush_cpu(1));
    step(|| cache.try_flush());
    step(|| cache.flush());
    // A panicking flush leaves items cached: flush again (the pool panics once).
    step(|| cache.flush());
    assert_eq!(cache.cached(), 0, "a flush left items cached");
    assert_eq!(
        pool.at_home() + held.len() + pool.dropped(),
        pool.capacity as usize,
        "items lost or duplicated before the drop"
    );
    assert_eq!(
        pool.dropped(),
        0,
        "a panic at point {} (in {:?}) dropped an item",
        pool.panic_at,
        pool.panicked_in.lock().unwrap()
    );

    pool.set_phase("frees");
    for token in held.drain(..) {
        step(|| cache.free(token));
    }
    pool.set_phase("drop");
}

/// One run of the script on a fresh cache whose pool panics at point `panic_at`;
/// returns the points the run made. Asserts conservation after the cache's drop.
fn run(config: Config, sequences: bool, panic_at: usize) -> usize {
    quiet_injected_panics();
    let mut options = Options::default();
    options.restartable_sequences = sequences;
    let pool = Arc::new(Pool::new(40, panic_at));
    let cache = Cache::with_options(Arc::clone(&pool), config, options);
    script(&cache);
    // The cache's drop returns the rest; a pool that panics there leaves the remaining
    // items to be dropped with the cache (the one documented exception).
    let _ = catch_unwind(AssertUnwindSafe(|| drop(cache)));
    let panicked_in = *pool.panicked_in.lock().unwrap();
    let context = format!("panic at point {panic_at} (in {panicked_in:?})");
    assert_eq!(
        pool.duplicates.load(Ordering::Relaxed),
        0,
        "{context}: an id came back twice"
    );
    assert_eq!(
        pool.at_home() + pool.dropped(),
        pool.capacity as usize,
        "{context}: items lost"
    );
    if panicked_in != Some("drop") {
        assert_eq!(pool.dropped(), 0, "{context}: items dropped");
    }
    pool.points.load(Ordering::Relaxed)
}

/// Sweeps the panic over every call point of the script, for one configuration.
fn sweep(config: Config, sequences: bool) {
    let points = run(config.clone(), sequences, 0);
    assert!(points > 50, "the script reached only {points} call points");
    // Under Miri (slow, and it checks each run for undefined behaviour), every 53rd point.
    let stride = if cfg!(miri) { 53 } else { 1 };
    for panic_at in (1..=points).step_by(stride) {
        run(config.clone(), sequences, panic_at);
    }
}

fn configs() -> [Config; 3] {
    let fixed = DepotPolicy::Fixed { max_full: 1 };
    let dynamic = DepotPolicy::Dynamic {
        target: 1,
        trim: Trim::WorkingSet,
    };
    // Every slot of the machine (so that sequences can run), and one slot (every busy
    // miss finds all slots busy).
    let cpus = thread::available_parallelism()
        .map_or(1, |n| n.get())
        .max(configured_cpus());
    [
        Config {
            magazine_size: 2,
            cpus: cpus.max(2),
            depot: fixed,
        },
        Config {
            magazine_size: 3,
            cpus: cpus.max(2),
            depot: dynamic,
        },
        Config {
            magazine_size: 2,
            cpus: 1,
            depot: fixed,
        },
    ]
}

/// The CPUs the system may bring up (at least one).
fn configured_cpus() -> usize {
    #[cfg(target_os = "linux")]
    return common::cpus::configured_cpus();
    #[cfg(not(target_os = "linux"))]
    1
}

#[test]
fn every_source_call_may_panic_under_the_slot_protocol() {
    for config in configs() {
        sweep(config, false);
    }
}

#[test]
fn every_source_call_may_panic_with_restartable_sequences() {
    for config in configs() {
        sweep(config, true);
    }
}

/// Busy slots under contention (one slot, four threads): the loose paths, and exhaustion
/// flushes with nowhere to keep what they find, run while other threads push, so a
/// `Fixed` depot refuses magazines out of them; the source panics on every third
/// `free_batch`. An item the cache held while the refused magazine went to the source must
/// survive the panic: nothing is dropped, nothing lost.
#[test]
fn a_panicking_source_on_the_busy_paths_loses_no_item() {
    quiet_injected_panics();
    let mut options = Options::default();
    options.max_empty = Some(0);
    let config = Config {
        magazine_size: 2,
        cpus: 1,
        depot: DepotPolicy::Fixed { max_full: 1 },
    };
    let rounds = if cfg!(miri) { 100 } else { 20_000 };
    for sequences in [false, true] {
        options.restartable_sequences = sequences;
        let pool = Arc::new(Pool::new(24, 0));
        pool.panic_every.store(3, Ordering::Relaxed);
        let cache = Cache::with_options(Arc::clone(&pool), config.clone(), options.clone());
        let leftovers = Mutex::new(Vec::new());
        thread::scope(|s| {
            for seed in 0..4u64 {
                let (cache, leftovers) = (&cache, &leftovers);
                s.spawn(move || {
                    let mut held: Vec<Token> = Vec::new();
                    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    for _ in 0..rounds {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        if state % 2 == 0 || held.is_empty() {
                            held.extend(step(|| cache.alloc()).flatten());
                        } else {
                            let token = held.swap_remove(state as usize / 2 % held.len());
                            step(|| cache.free(token));
                        }
                    }
                    leftovers.lock().unwrap().extend(held);
                });
            }
        });
        assert_eq!(
            pool.dropped(),
            0,
            "an item unwound away (sequences: {sequences})"
        );
        // Panics off: every free_batch from here returns its items.
        pool.panic_every.store(0, Ordering::Relaxed);
        for token in leftovers.into_inner().unwrap() {
            cache.free(token);
        }
        drop(cache);
        assert_eq!(pool.duplicates.load(Ordering::Relaxed), 0);
        assert_eq!(pool.dropped(), 0, "items dropped (sequences: {sequences})");
        assert_eq!(
            pool.at_home(),
            pool.capacity as usize,
            "items lost (sequences: {sequences})"
        );
    }
}
