//! The scenarios, each written once and run by both checkers (see `tests/`). Each names
//! the [invariant](magazine::docs::design#the-invariants) it checks; each ends, when quiescent, by asserting
//! conservation ([invariant 1](magazine::docs::design#invariant-1-conservation): the tracking source gets every item back exactly once) and
//! that the counted depot lengths, which `Stats` reports, equal the linked ones
//! ([invariant 5](magazine::docs::design#invariant-5-accounting)).
//!
//! Configurations are tiny (magazines of 1-2 items, 1-2 slots) so that every magazine
//! exchange, overflow and trim happens within a handful of operations.

use std::sync::Arc;

use magazine::iova::{IovaDomain, IovaError};
use magazine::model::{Depot, Held};
use magazine::{Cache, Config, DepotPolicy, Options, Trim};

use crate::checker::{join_all, spawn, Scale};
use crate::tracker::{assert_conserved, Item, TrackedCache, Tracker};

fn config(magazine_size: usize, cpus: usize, depot: DepotPolicy) -> Config {
    Config {
        magazine_size,
        cpus,
        depot,
        ..Config::default()
    }
}

fn dynamic(target: usize, trim: Trim) -> DepotPolicy {
    DepotPolicy::Dynamic { target, trim }
}

fn cache(tracker: &Arc<Tracker>, config: Config) -> Arc<TrackedCache> {
    Arc::new(Cache::with_config(Arc::clone(tracker), config))
}

/// The quiescent end of a cache scenario: every model thread has joined and returned its
/// items.
fn finish_cache(cache: Arc<TrackedCache>, tracker: &Tracker) {
    let cache = Arc::try_unwrap(cache).unwrap_or_else(|_| panic!("a model thread kept the cache"));
    assert_conserved(cache, tracker);
}

/// The quiescent end of a raw depot scenario: lengths ([invariant 5](magazine::docs::design#invariant-5-accounting)), then every item
/// held or in the depot goes home exactly once ([invariant 1](magazine::docs::design#invariant-1-conservation)).
fn finish_depot(depot: Arc<Depot<Item>>, tracker: &Tracker, held: impl IntoIterator<Item = Item>) {
    assert_eq!(
        depot.counted(),
        depot.linked(),
        "counted != linked (full, empty)"
    );
    tracker.give(held);
    while let Some(items) = depot.pop_full() {
        tracker.give(items);
    }
    tracker.assert_all_home();
}

/// Scenario 1a. Invariants 1, 2, 5. Each thread pushes a full magazine and pops one: in a
/// linearizable stack that pop cannot find the depot empty.
pub fn depot_push_pop(scale: Scale) {
    let tracker = Tracker::new(scale.threads * scale.rounds);
    let depot = Arc::new(Depot::new(
        &config(1, 1, dynamic(0, Trim::WorkingSet)),
        &Options::default(),
    ));
    let handles = (0..scale.threads)
        .map(|_| {
            let depot = Arc::clone(&depot);
            let mut items = tracker.take(scale.rounds);
            spawn(move || {
                let mut held = Vec::new();
                for item in items.drain(..) {
                    depot
                        .push_full(vec![item])
                        .expect("a dynamic depot takes every magazine");
                    held.extend(depot.pop_full().expect("popped after our own push"));
                }
                held
            })
        })
        .collect();
    let held = join_all(handles).into_iter().flatten();
    finish_depot(depot, &tracker, held);
}

/// Scenario 1b, the ABA shape. [Invariant 2](magazine::docs::design#invariant-2-memory-safety) (no ABA), and 1. Three parties around two
/// magazines: A pops (its read of `head` and `head.next` may go stale), B pops twice and
/// pushes its first magazine back (the same magazine, so the same stack node), C pushes a
/// new one. If `head` named the node alone (no tag bumped by every CAS), A's stale CAS
/// would succeed after B's re-push and re-link B's second node, whose magazine B already
/// has. At the shuttle scale, further threads pop a magazine and push it back.
pub fn depot_aba(scale: Scale) {
    let tracker = Tracker::new(3);
    let depot = Arc::new(Depot::new(
        &config(1, 1, dynamic(0, Trim::WorkingSet)),
        &Options::default(),
    ));
    for item in tracker.take(2) {
        depot.push_full(vec![item]).unwrap();
    }
    let pushed = tracker.take(1);
    // The threads keep the magazines they take whole and the main thread empties them
    // after the join: a magazine dropped in a thread would pin once more (its node is
    // freed through the epoch), which adds to full mode's executions (at bound 1: 217052
    // with the drops in the threads, 207530 without). Node frees racing stale pops are
    // covered by `depot_push_pop` and the trim scenarios.
    let a = {
        let depot = Arc::clone(&depot);
        spawn(move || depot.pop_full_held().into_iter().collect::<Vec<_>>())
    };
    let b = {
        let depot = Arc::clone(&depot);
        spawn(move || {
            let first = depot.pop_full_held();
            let second = depot.pop_full_held();
            if let Some(first) = first {
                if depot.push_full_held(first).is_err() {
                    unreachable!("a dynamic depot takes every magazine");
                }
            }
            second.into_iter().collect()
        })
    };
    let c = {
        let depot = Arc::clone(&depot);
        spawn(move || {
            depot.push_full(pushed).unwrap();
            Vec::new()
        })
    };
    let mut handles = vec![a, b, c];
    // At the shuttle scale, more parties pop a magazine and push it back.
    for _ in 3..scale.threads.max(3) {
        let depot = Arc::clone(&depot);
        handles.push(spawn(move || {
            for _ in 0..scale.rounds {
                if let Some(magazine) = depot.pop_full_held() {
                    if depot.push_full_held(magazine).is_err() {
                        unreachable!("a dynamic depot takes every magazine");
                    }
                }
            }
            Vec::new()
        }));
    }
    let held = join_all(handles)
        .into_iter()
        .flatten()
        .flat_map(Held::into_items);
    finish_depot(depot, &tracker, held);
}

/// Scenario 2, growth. Invariants 1, 4 (the peak is real), 5. `threads` pushers give full
/// magazines (of two items) to a `Dynamic` depot while one thread pops.
pub fn depot_growth(scale: Scale) {
    let pushes = scale.threads * scale.rounds;
    let tracker = Tracker::new(2 * pushes);
    let depot = Arc::new(Depot::new(
        &config(2, 1, dynamic(0, Trim::WorkingSet)),
        &Options::default(),
    ));
    let mut handles: Vec<_> = (0..scale.threads)
        .map(|_| {
            let depot = Arc::clone(&depot);
            let mut items = tracker.take(2 * scale.rounds);
            spawn(move || {
                while !items.is_empty() {
                    let magazine: Vec<Item> = items.drain(..2).collect();
                    depot.push_full(magazine).expect("a dynamic depot grows");
                }
                Vec::new()
            })
        })
        .collect();
    let popper = {
        let depot = Arc::clone(&depot);
        spawn(move || {
            let mut held = Vec::new();
            for _ in 0..scale.rounds {
                held.extend(depot.pop_full().unwrap_or_default());
            }
            held
        })
    };
    handles.push(popper);
    let held: Vec<Item> = join_all(handles).into_iter().flatten().collect();
    let (full, _) = depot.linked();
    assert!(depot.peak() >= full, "peak below the final length");
    assert!(
        depot.peak() <= pushes,
        "peak above the magazines ever pushed"
    );
    assert_eq!(
        full * 2 + held.len(),
        2 * pushes,
        "a magazine lost or doubled"
    );
    finish_depot(depot, &tracker, held);
}

/// Scenario 3, shrink: `trim()` (twice) racing with threads that pop a full magazine and
/// push it back. Invariants 1, 4, 5. The depot starts with two full magazines over a
/// target of one, and the cyclers never add a magazine, so no trim may release more than
/// one (a trim re-checks the target before each pop). After the load stops, repeated
/// trims bring the depot to the target.
pub fn depot_shrink(trim: Trim, scale: Scale) {
    const TARGET: usize = 1;
    const PRELOAD: usize = 2;
    let cyclers = scale.threads - 1;
    let tracker = Tracker::new(PRELOAD);
    let depot = Arc::new(Depot::new(
        &config(1, 1, dynamic(TARGET, trim)),
        &Options::default(),
    ));
    for item in tracker.take(PRELOAD) {
        depot.push_full(vec![item]).unwrap();
    }
    depot.push_empty(1);
    if trim == Trim::WorkingSet {
        // Start the working-set interval at the preloaded length.
        assert_eq!(depot.trim(drop), 0, "a first trim only starts the interval");
    }
    let trimmer = {
        let depot = Arc::clone(&depot);
        spawn(move || {
            let mut released = Vec::new();
            for _ in 0..scale.rounds.max(2) {
                depot.trim(|items| released.extend(items));
            }
            released
        })
    };
    let mut handles: Vec<_> = (0..cyclers)
        .map(|_| {
            let depot = Arc::clone(&depot);
            spawn(move || {
                for _ in 0..scale.rounds {
                    if let Some(items) = depot.pop_full() {
                        depot.push_full(items).unwrap();
                    }
                }
                Vec::new()
            })
        })
        .collect();
    handles.insert(0, trimmer);
    let mut results = join_all(handles);
    let released = std::mem::take(&mut results[0]);
    assert!(
        released.len() <= PRELOAD - TARGET,
        "trim released {} magazines, below the target",
        released.len()
    );
    tracker.give(released);
    for _ in 0..3 {
        depot.trim(|items| tracker.give(items));
    }
    assert!(
        depot.counted().0 <= TARGET,
        "repeated trims left the depot above target"
    );
    finish_depot(depot, &tracker, Vec::new());
}

/// Scenario 4, `Fixed` overflow. Invariants 1, 4 (the cap is hard), 5. Every thread's
/// slot is full (loaded and previous), so each free spills a full magazine to a depot
/// capped at one: at most one is kept, every other goes to the source exactly once.
pub fn fixed_overflow(scale: Scale) {
    const CAP: usize = 1;
    let cpus = scale.threads;
    let frees = scale.threads * scale.rounds;
    let tracker = Tracker::new(2 * cpus + frees);
    let cache = cache(
        &tracker,
        config(1, cpus, DepotPolicy::Fixed { max_full: CAP }),
    );
    for cpu in 0..cpus {
        for item in tracker.take(2) {
            cache.free_on(cpu, item);
        }
    }
    let handles = (0..scale.threads)
        .map(|cpu| {
            let cache = Arc::clone(&cache);
            let items = tracker.take(scale.rounds);
            spawn(move || {
                for item in items {
                    cache.free_on(cpu, item);
                }
            })
        })
        .collect();
    join_all(handles);
    let stats = cache.stats();
    assert!(
        stats.depot_full <= CAP,
        "depot above its Fixed cap: {stats:?}"
    );
    assert!(
        stats.depot_peak <= CAP,
        "depot peak above its Fixed cap: {stats:?}"
    );
    if scale.rounds == 1 {
        // One spill per slot; with magazines of one item, one item per refused magazine.
        assert_eq!(stats.source_frees as usize, cpus - CAP, "{stats:?}");
    }
    finish_cache(cache, &tracker);
}

/// Scenario 5a: threads share one CPU slot (magazines of two items). Invariants 1, 3: a
/// slot handed from one owner to the next carries its magazines' contents with it (the
/// Release store of the hand-back, the Acquire CAS of the take); a busy slot is a miss.
pub fn slot_shared(scale: Scale) {
    let tracker = Tracker::new(1 + scale.threads);
    let cache = cache(&tracker, config(2, 1, dynamic(0, Trim::WorkingSet)));
    cache.free_on(0, tracker.take(1).pop().unwrap());
    let handles = (0..scale.threads)
        .map(|_| {
            let cache = Arc::clone(&cache);
            spawn(move || {
                for _ in 0..scale.rounds {
                    // `None` is legitimate: the other items may all sit in the slot
                    // while another thread holds it (exhaustion skips a busy slot).
                    if let Some(item) = cache.alloc_on(0) {
                        cache.free_on(0, item);
                    }
                }
            })
        })
        .collect();
    join_all(handles);
    finish_cache(cache, &tracker);
}

/// Scenario 5b: the busy-slot path is a miss, never a wait ([invariant 3](magazine::docs::design#invariant-3-progress)). Thread A holds
/// the only slot inside `alloc_cached_where_on`, whose `accept` does not return until the
/// other threads have each finished an `alloc`/`free` pair on that slot (through the
/// source and the depot's loose path). If the busy path waited for the owner, nobody could
/// finish: loom reports a livelock (its branch limit), shuttle its step limit.
pub fn slot_busy_is_a_miss(scale: Scale) {
    use crate::checker::{yield_now, AtomicUsize, Ordering};

    let workers = scale.threads - 1;
    let tracker = Tracker::new(1 + workers);
    let cache = cache(&tracker, config(1, 1, dynamic(0, Trim::WorkingSet)));
    // One item in the slot, so that `accept` runs; the workers' items stay in the source.
    cache.free_on(0, tracker.take(1).pop().unwrap());
    let done = Arc::new(AtomicUsize::new(0));
    let holder = {
        let cache = Arc::clone(&cache);
        let done = Arc::clone(&done);
        spawn(move || {
            let found = cache.alloc_cached_where_on(0, |_| {
                while done.load(Ordering::Acquire) < workers {
                    yield_now();
                }
                false
            });
            assert!(found.is_none(), "accept took nothing");
        })
    };
    let mut handles: Vec<_> = (0..workers)
        .map(|_| {
            let cache = Arc::clone(&cache);
            let done = Arc::clone(&done);
            spawn(move || {
                let item = cache
                    .alloc_on(0)
                    .expect("the source has an item per worker");
                cache.free_on(0, item);
                done.fetch_add(1, Ordering::Release);
            })
        })
        .collect();
    handles.push(holder);
    join_all(handles);
    finish_cache(cache, &tracker);
}

/// Scenario 6: `flush_cpu` racing with alloc/free on that slot. Invariants 1, 5: the
/// flush returns what the slot holds when it takes it, the others keep theirs.
pub fn flush_cpu_race(scale: Scale) {
    let workers = scale.threads - 1;
    let tracker = Tracker::new(2 + workers);
    let cache = cache(&tracker, config(2, 1, dynamic(0, Trim::WorkingSet)));
    for item in tracker.take(2) {
        cache.free_on(0, item);
    }
    let mut handles: Vec<_> = (0..workers)
        .map(|_| {
            let cache = Arc::clone(&cache);
            spawn(move || {
                for _ in 0..scale.rounds {
                    // `None` is legitimate: the other items may all sit in the slot
                    // while another thread holds it (exhaustion skips a busy slot).
                    if let Some(item) = cache.alloc_on(0) {
                        cache.free_on(0, item);
                    }
                }
            })
        })
        .collect();
    let flusher = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            for _ in 0..scale.rounds.min(2) {
                cache.flush_cpu(0);
            }
        })
    };
    handles.push(flusher);
    join_all(handles);
    finish_cache(cache, &tracker);
}

/// Scenario 7: a `LocalCache` is dropped, with items in both its loaded and previous
/// magazines, while other threads pop the depot through slot 0. [Invariant 1](magazine::docs::design#invariant-1-conservation) (a handle's
/// magazines go to the depot whole, none forgotten), 5.
pub fn local_drop_race(scale: Scale) {
    let workers = scale.threads - 1;
    let tracker = Tracker::new(2 + workers);
    let cache = cache(&tracker, config(1, 1, dynamic(0, Trim::WorkingSet)));
    let owner = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            let mut local = cache.local();
            // Usually both succeed, and the two frees leave one item in loaded and one in
            // previous; `None` is legitimate when the other items sit in a busy slot.
            let items: Vec<_> = (0..2).filter_map(|_| local.alloc()).collect();
            for item in items {
                local.free(item);
            }
            drop(local);
        })
    };
    let mut handles: Vec<_> = (0..workers)
        .map(|_| {
            let cache = Arc::clone(&cache);
            spawn(move || {
                for _ in 0..scale.rounds {
                    if let Some(item) = cache.alloc_on(0) {
                        cache.free_on(0, item);
                    }
                }
            })
        })
        .collect();
    handles.push(owner);
    join_all(handles);
    finish_cache(cache, &tracker);
}

/// Scenario 8: exhaustion. An `alloc` finds its slot and the depot empty and the source
/// exhausted, so it flushes every slot it can take and retries, while another thread
/// frees into the slot being flushed. Invariants 1, 3 (a busy slot is skipped), 5.
pub fn exhaustion_retry(scale: Scale) {
    let cpus = 2;
    let tracker = Tracker::new(scale.threads);
    let cache = cache(&tracker, config(1, cpus, dynamic(0, Trim::WorkingSet)));
    let mut items = tracker.take(scale.threads);
    // One item cached on slot 1, the others held by the freeing threads; the source is empty.
    cache.free_on(1, items.pop().unwrap());
    let handles: Vec<_> = items
        .into_iter()
        .map(|item| {
            let cache = Arc::clone(&cache);
            spawn(move || cache.free_on(1, item))
        })
        .collect();
    let allocator = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            let mut misses = 0;
            for _ in 0..scale.rounds.min(2) {
                match cache.alloc_on(0) {
                    Some(item) => cache.free_on(1, item),
                    None => misses += 1,
                }
            }
            misses
        })
    };
    let misses = allocator.join().expect("the allocator panicked");
    join_all(handles);
    let flushes = cache.stats().exhaustion_flushes;
    assert!(
        misses == 0 || flushes >= 1,
        "an alloc failed without flushing"
    );
    if scale.threads == 2 {
        // Two items: one in slot 1, one in a freeing thread's hands, whose free fills
        // slot 1 without reaching the depot. The allocator's first alloc must flush.
        assert!(flushes >= 1, "the source and depot were empty: {flushes}");
    }
    // Quiescent: take every item, then two allocations in a row find nothing anywhere.
    // Each must flush and fail, not wait for a flush that is not running.
    let held: Vec<Item> = core::iter::from_fn(|| cache.alloc_on(0)).collect();
    assert_eq!(held.len(), scale.threads, "an item was not found again");
    assert!(cache.alloc_on(0).is_none() && cache.alloc_on(1).is_none());
    for item in held {
        cache.free_on(0, item);
    }
    finish_cache(cache, &tracker);
}

/// Scenario 9: empty-magazine recycling (pop an empty, push it back, as a spill and a
/// refill do) racing with a trim that frees the empty magazines unused for the interval,
/// and with a full magazine cycling. Invariants 4 (the empty cap), 5, 1.
pub fn depot_empty_recycling(scale: Scale) {
    const MAX_EMPTY: usize = 1;
    let tracker = Tracker::new(1);
    let mut options = Options::default();
    options.max_empty = Some(MAX_EMPTY);
    let depot = Arc::new(Depot::new(
        &config(1, 1, dynamic(0, Trim::WorkingSet)),
        &options,
    ));
    depot.push_empty(1);
    depot.push_empty(1); // refused: over the cap, freed
    depot.push_full(tracker.take(1)).unwrap();
    depot.trim(drop); // starts the interval (releases nothing: the low-water mark was 0)
    let trimmer = {
        let depot = Arc::clone(&depot);
        spawn(move || {
            let mut released = Vec::new();
            depot.trim(|items| released.extend(items));
            released
        })
    };
    let mut handles: Vec<_> = (0..scale.threads - 1)
        .map(|_| {
            let depot = Arc::clone(&depot);
            spawn(move || {
                let mut held = Vec::new();
                for _ in 0..scale.rounds {
                    let capacity = depot.pop_empty().unwrap_or(1);
                    if let Some(items) = depot.pop_full() {
                        held.extend(items);
                    }
                    depot.push_empty(capacity);
                }
                held
            })
        })
        .collect();
    handles.push(trimmer);
    let held: Vec<Item> = join_all(handles).into_iter().flatten().collect();
    assert!(depot.linked().1 <= MAX_EMPTY, "empty stack above its cap");
    finish_depot(depot, &tracker, held);
}

/// Scenario 10: every slot busy. Invariants 1, 3. Thread A frees an item while it holds
/// the only slot (inside `alloc_cached_where_on`'s `accept`), so that free takes the loose
/// path into a partly filled depot magazine; the workers allocate and free on the same
/// slot, and take the loose paths whenever they find it held. A busy slot is never waited
/// for, and no item is lost or doubled on the way through the partial stack.
pub fn busy_slot_loose(scale: Scale) {
    let workers = scale.threads - 1;
    let tracker = Tracker::new(2 + workers);
    let cache = cache(&tracker, config(2, 1, dynamic(0, Trim::WorkingSet)));
    // One item in the slot, so that `accept` runs. Every item is taken from the source
    // before any thread starts: the threads' allocations may reach the source.
    cache.free_on(0, tracker.take(1).pop().unwrap());
    let mut extra = tracker.take(1);
    let mut held: Vec<_> = (0..workers).map(|_| tracker.take(1)).collect();
    let holder = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            let found = cache.alloc_cached_where_on(0, |_| {
                // We hold slot 0: this free must go around it.
                if let Some(item) = extra.pop() {
                    cache.free_on(0, item);
                }
                false
            });
            assert!(found.is_none(), "accept took nothing");
            // `accept` runs only if the slot held an item when we took it.
            if let Some(item) = extra.pop() {
                cache.free_on(0, item);
            }
        })
    };
    let mut handles: Vec<_> = (0..workers)
        .map(|_| {
            let cache = Arc::clone(&cache);
            let mut mine = held.pop().unwrap();
            spawn(move || {
                let item = mine.pop().unwrap();
                cache.free_on(0, item);
                for _ in 0..scale.rounds {
                    // `None` is legitimate: the items may all be in a slot another
                    // thread holds.
                    if let Some(item) = cache.alloc_on(0) {
                        cache.free_on(0, item);
                    }
                }
            })
        })
        .collect();
    handles.push(holder);
    join_all(handles);
    finish_cache(cache, &tracker);
}

/// Scenario 11: an exhausted allocation takes a magazine from another CPU's slot while
/// that slot's thread works on it. Invariants 1, 3 (the victim's slot is taken with the
/// slot protocol, never waited for). The source is empty and both items sit in slot 1:
/// the allocator on slot 0 either takes slot 1's magazines (its exhaustion flush) or
/// finds the slot busy; it may fail only when the other thread held the slot or the
/// items.
pub fn steal_race(scale: Scale) {
    let tracker = Tracker::new(2);
    let cache = cache(&tracker, config(1, 2, dynamic(0, Trim::WorkingSet)));
    for item in tracker.take(2) {
        cache.free_on(1, item);
    }
    let owner = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            for _ in 0..scale.rounds {
                if let Some(item) = cache.alloc_on(1) {
                    cache.free_on(1, item);
                }
            }
            0
        })
    };
    let thief = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            let mut got = 0;
            for _ in 0..scale.rounds.min(2) {
                if let Some(item) = cache.alloc_on(0) {
                    got += 1;
                    cache.free_on(0, item);
                }
            }
            got
        })
    };
    join_all(vec![owner, thief]);
    finish_cache(cache, &tracker);
}

/// Scenario 12: trim reclaims an idle slot's magazines while a thread starts using the
/// slot again. Invariants 1, 4 (once the load stops, trims bring everything down to the
/// target, the slots included), 5. `WorkingSet` with target 0 reclaims idle slots by
/// default.
pub fn idle_reclaim_race(scale: Scale) {
    let tracker = Tracker::new(2);
    let cache = cache(&tracker, config(1, 1, dynamic(0, Trim::WorkingSet)));
    for item in tracker.take(2) {
        cache.free_on(0, item);
    }
    cache.trim(); // sees the frees: the slot is not idle yet
    let trimmer = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            for _ in 0..scale.rounds.min(2) {
                cache.trim();
            }
        })
    };
    let worker = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            if let Some(item) = cache.alloc_on(0) {
                cache.free_on(0, item);
            }
        })
    };
    join_all(vec![trimmer, worker]);
    // Quiescent and idle: the next trims mark the slot idle, reclaim it and release all.
    for _ in 0..3 {
        cache.trim();
    }
    assert_eq!(cache.cached(), 0, "an idle slot kept its items");
    finish_cache(cache, &tracker);
}

/// The IOVA domain of the fast-path scenarios: pages of 4 KiB, `cpus` slots, magazines of
/// one pfn, a working-set depot with target 0.
fn iova_domain(cpus: usize) -> Arc<IovaDomain> {
    let config = config(1, cpus, dynamic(0, Trim::WorkingSet));
    Arc::new(IovaDomain::with_config(4096, 1, config))
}

/// The limit of the fast-path scenarios: under 4 GiB.
const IOVA_LIMIT: u64 = (1 << 20) - 1;

/// Scenario 13: threads race `free_fast` of one pfn on different slots. Invariant 1 for
/// the IOVA layer: exactly one free succeeds, every other is refused as a double free, and
/// the pfn is cached once (two allocations get two pfns).
pub fn iova_double_free_race(scale: Scale) {
    let domain = iova_domain(2);
    let pfn = domain.alloc_fast_on(0, 1, IOVA_LIMIT).unwrap();
    let handles = (0..scale.threads.min(3))
        .map(|cpu| {
            let domain = Arc::clone(&domain);
            spawn(move || domain.free_fast_on(cpu, pfn, 1))
        })
        .collect();
    let results = join_all(handles);
    let freed = results.iter().filter(|result| result.is_ok()).count();
    assert_eq!(
        freed, 1,
        "exactly one free of {pfn:#x} succeeds: {results:?}"
    );
    assert!(
        results
            .iter()
            .all(|result| matches!(result, Ok(()) | Err(IovaError::DoubleFree { .. }))),
        "{results:?}"
    );
    domain.check().expect("the domain is consistent");
    let first = domain.alloc_fast_on(0, 1, IOVA_LIMIT).unwrap();
    let second = domain.alloc_fast_on(1, 1, IOVA_LIMIT).unwrap();
    assert_ne!(first, second, "a pfn was cached twice");
    domain.check().expect("the domain is consistent");
}

/// Scenario 14: `free_fast` of a pfn races `alloc_fast` of the same size class on the same
/// slot and on another, while a third range is in a caller's hands. Invariant 1 for the
/// IOVA layer: no pfn is in two callers' hands, and when all is freed the domain's
/// `check` (tree = callers' hands + magazines, per class) holds.
pub fn iova_free_alloc_race(scale: Scale) {
    let domain = iova_domain(2);
    let freed = domain.alloc_fast_on(0, 1, IOVA_LIMIT).unwrap();
    let kept = domain.alloc_fast_on(0, 1, IOVA_LIMIT).unwrap();
    let freer = {
        let domain = Arc::clone(&domain);
        spawn(move || {
            domain.free_fast_on(0, freed, 1).unwrap();
            Vec::new()
        })
    };
    let mut handles: Vec<_> = (0..scale.threads.min(3) - 1)
        .map(|cpu| {
            let domain = Arc::clone(&domain);
            spawn(move || vec![domain.alloc_fast_on(cpu, 1, IOVA_LIMIT).unwrap()])
        })
        .collect();
    handles.push(freer);
    let mut held: Vec<u64> = join_all(handles).into_iter().flatten().collect();
    held.push(kept);
    let mut distinct = held.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), held.len(), "a pfn in two hands: {held:?}");
    domain.check().expect("the domain is consistent");
    for pfn in held {
        domain.free_fast_on(1, pfn, 1).unwrap();
    }
    domain.check().expect("the domain is consistent");
    assert_eq!(domain.stats().fast_in_use, 0);
}

/// Scenario 15: a CPU shelf shared by racing threads. Invariants 1, 3, 5. Every handle
/// runs on CPU 0 (so all use one shelf) with magazines of one item. Each frees the three
/// items it holds (the third free spills a full magazine, onto the shelf or, when another
/// handle's is there, onto the full stack), then allocates three (the third refills from
/// the shelf or the stack), `rounds` times. At the shuttle scale a trim races with them
/// and moves the magazines of a shelf it finds unused to the stacks. Exactly one putter
/// gets a free place and exactly one taker gets a shelved magazine: nothing lost or
/// doubled.
pub fn shelf_race(scale: Scale) {
    let tracker = Tracker::new(3 * scale.threads);
    let mut options = Options::default();
    options.current_cpu = Some(|| 0);
    let config = config(1, 1, dynamic(0, Trim::WorkingSet));
    let cache = Arc::new(Cache::with_options(Arc::clone(&tracker), config, options));
    cache.trim(); // starts an interval: the shelf is unused so far
    let mut handles: Vec<_> = (0..scale.threads)
        .map(|_| {
            let cache = Arc::clone(&cache);
            let mut items = tracker.take(3);
            spawn(move || {
                let mut local = cache.local();
                for _ in 0..scale.rounds {
                    items.drain(..).for_each(|item| local.free(item));
                    // An allocation may find nothing while a racing trim has items on
                    // their way to the source; what it finds is counted either way.
                    items.extend((0..3).filter_map(|_| local.alloc()));
                }
                items
            })
        })
        .collect();
    if scale.threads > 2 {
        let cache = Arc::clone(&cache);
        handles.push(spawn(move || {
            cache.trim();
            Vec::new()
        }));
    }
    let held: Vec<Item> = join_all(handles).into_iter().flatten().collect();
    tracker.give(held);
    // Quiescent: the shelf is unused from now on, so two trims empty the depot (target 0).
    for _ in 0..2 {
        cache.trim();
    }
    let stats = cache.stats();
    assert_eq!(
        stats.depot_full, 0,
        "a shelved magazine escaped the trims: {stats:?}"
    );
    finish_cache(cache, &tracker);
}

/// Scenario 16: allocators race an exhausted source. Invariants 1, 3, and the exhaustion
/// rule (module `magazine::docs::design`). Two (shuttle: six) allocators, each on its own
/// empty slot, allocate once; the source has nothing left and has said so (an earlier
/// allocation found it exhausted with nothing cached, so no allocation asks it first);
/// as many items as allocators sit in one more slot, in its two magazines; nobody frees
/// during the race. So each allocation flushes, or steals while another one flushes.
///
/// What it asserts, and why not more:
/// - `None` comes from the source: an allocation that returns `None` asked the source
///   after it had found the source exhausted, and the source said `None` to it (the
///   rule's step 3, "it asks the source once more"; the earlier allocation made sure no
///   allocation asks it first). An allocation that waited for another one's flush and
///   gave up when it ended would return `None` without asking.
/// - At least one allocator gets an item: a thread that takes the items' slot while
///   they are in it takes one of them (a flush keeps what it finds, a steal too), so for
///   every allocation to miss them nobody could ever have held that slot.
/// - Not that every allocator gets one, although there are enough items and nobody
///   frees: the code does not guarantee it. Loom's counterexample (preemption bound 1):
///   A (slot 0) finds everything empty and starts the flush, whose scan finds slots 0
///   and 1 empty; A is preempted; B (slot 1) finds the flush running and steals
///   meanwhile: it moves slot 2's two magazines into its own slot 1 and takes an item;
///   A's scan finds slot 2 empty, the depot too, asks the source and returns `None`, with
///   an item cached in slot 1, which the scan had found empty. (The scan also skips a
///   slot B holds while it steals: it never waits for a slot.) "Nothing reachable is
///   cached" holds only as "every slot was empty or held by another thread when the
///   flush looked at it": the scan is not a snapshot.
/// - Conservation, and, once quiescent, every item still cached is found again.
pub fn exhaustion_race(scale: Scale) {
    let allocators = scale.threads;
    // Slots 0..allocators are the allocators'; the last one holds the items.
    let cpus = allocators + 1;
    let tracker = Tracker::new(allocators);
    let cache = cache(
        &tracker,
        config(allocators.div_ceil(2), cpus, dynamic(0, Trim::WorkingSet)),
    );
    let items = tracker.take(allocators);
    // Nothing cached, the source empty: this allocation finds it exhausted (it asks it,
    // flushes, finds nothing and asks it again), and no item reaches the source after it.
    assert!(cache.alloc_on(0).is_none());
    for item in items {
        cache.free_on(cpus - 1, item);
    }
    let handles: Vec<_> = (0..allocators)
        .map(|cpu| {
            let (cache, tracker) = (Arc::clone(&cache), Arc::clone(&tracker));
            spawn(move || {
                let refused = tracker.refusals();
                let item = cache.alloc_on(cpu);
                if item.is_none() {
                    assert!(
                        tracker.refusals() > refused,
                        "an allocation returned None without asking the source again"
                    );
                }
                item
            })
        })
        .collect();
    let got = join_all(handles);
    assert!(
        got.iter().any(Option::is_some),
        "no allocation found the items: {:?}",
        cache.stats()
    );
    // Quiescent: whatever is still cached is found again.
    let held: Vec<Item> = got.into_iter().flatten().collect();
    let cached = cache.cached();
    let found: Vec<Item> = core::iter::from_fn(|| cache.alloc_on(0)).collect();
    assert_eq!(found.len(), cached, "an item was not found again");
    for item in held.into_iter().chain(found) {
        cache.free_on(0, item);
    }
    finish_cache(cache, &tracker);
}

/// Scenario 17: a batch refill races a flush and a trim. Invariants 1, 5, and the refill's
/// keep (module `magazine::docs::design`, the exhaustion rule: the refill keeps its batch
/// as the exhaustion flush keeps what it finds). Magazines of 2, so a refill asks the
/// source for a batch of 2 (`Options::source_batch` at its default: a whole magazine;
/// the tracker's `alloc_batch` is the default loop of `alloc`). Each refiller allocates
/// on its own empty slot (the first on slot 0), so its allocation misses, finds the depot
/// empty and fills a magazine from the source with no slot held, then takes its slot
/// again to keep the batch there. Meanwhile the flusher frees an item into slot 0 (so
/// slot 0 may hold items by the time its refiller takes it again) and flushes slot 0, and
/// the trimmer trims (`WorkingSet`, target 0: it releases the depot's unused magazines and
/// reclaims idle slots). At the shuttle scale the flusher then flushes every slot, and
/// each worker repeats its operations.
///
/// What it asserts: conservation, and, once quiescent, every item (cached or in the
/// source) is found again. Not that every refill gets an item: a flush or a trim may
/// return the batch's rest to the source, and another refiller may take it.
pub fn refill_race(scale: Scale) {
    let refillers = (scale.threads - 1).max(1);
    let rounds = if scale.threads > 2 { scale.rounds } else { 1 };
    let tracker = Tracker::new(2 * refillers + 1);
    let cache = cache(&tracker, config(2, refillers, dynamic(0, Trim::WorkingSet)));
    let mut held = tracker.take(1);
    let mut handles: Vec<_> = (0..refillers)
        .map(|cpu| {
            let cache = Arc::clone(&cache);
            spawn(move || {
                for _ in 0..rounds {
                    // `None` is legitimate: the items may all sit in a slot another thread
                    // holds, or be on their way back to the source.
                    if let Some(item) = cache.alloc_on(cpu) {
                        cache.free_on(cpu, item);
                    }
                }
            })
        })
        .collect();
    let flusher = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            cache.free_on(0, held.pop().unwrap());
            for round in 0..rounds {
                cache.flush_cpu(round % refillers);
            }
        })
    };
    let trimmer = {
        let cache = Arc::clone(&cache);
        spawn(move || {
            for _ in 0..rounds {
                cache.trim();
            }
        })
    };
    handles.push(flusher);
    handles.push(trimmer);
    join_all(handles);
    // Quiescent: every item, cached or back in the source, is found again.
    let found: Vec<Item> = core::iter::from_fn(|| cache.alloc_on(0)).collect();
    assert_eq!(
        found.len(),
        2 * refillers + 1,
        "an item was not found again"
    );
    for item in found {
        cache.free_on(0, item);
    }
    finish_cache(cache, &tracker);
}
