//! Behaviour of the cache on one thread (and a few): exchange rules, trimming, the `Fixed`
//! cap, exhaustion, panicking sources, flushes and handles. Conservation is checked with
//! the tracking source after every test.

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use common::Tracking;
use magazine::{Cache, Config, DepotPolicy, Options, Trim};

/// A cache over a tracking source of `capacity` ids that asks the source for one item at a
/// time (`Options::source_batch` of 1), so that the counts below follow single
/// allocations; the batch refills have their own tests (`batch_*`).
fn cache(
    capacity: u32,
    magazine_size: usize,
    cpus: usize,
    depot: DepotPolicy,
) -> (Cache<Arc<Tracking>>, Arc<Tracking>) {
    cache_with(capacity, magazine_size, cpus, depot, |_| {})
}

/// [`cache`] with further options set by `options`.
fn cache_with(
    capacity: u32,
    magazine_size: usize,
    cpus: usize,
    depot: DepotPolicy,
    options: impl FnOnce(&mut Options),
) -> (Cache<Arc<Tracking>>, Arc<Tracking>) {
    let source = Arc::new(Tracking::new(capacity));
    let config = Config {
        magazine_size,
        cpus,
        depot,
    };
    let mut chosen = Options::default();
    chosen.source_batch = Some(1);
    options(&mut chosen);
    let cache = Cache::with_options(Arc::clone(&source), config, chosen);
    (cache, source)
}

const WORKING_SET: DepotPolicy = DepotPolicy::Dynamic {
    target: 2,
    trim: Trim::WorkingSet,
};

/// Allocates `n` ids on `cpu`.
fn alloc_n(cache: &Cache<Arc<Tracking>>, cpu: usize, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| cache.alloc_on(cpu).expect("source has ids"))
        .collect()
}

/// A cache has a hit path exactly when it runs restartable sequences (its hits are
/// checked in `tests/rseq.rs`).
#[test]
fn a_hit_path_exactly_where_sequences_run() {
    let cpus = Config::default().cpus;
    let (cache, source) = cache(100, 4, cpus, WORKING_SET);
    assert_eq!(
        cache.hit_path().is_some(),
        cache.runs_restartable_sequences()
    );
    let (slots, slots_source) = cache_with(100, 4, cpus, WORKING_SET, |options| {
        options.restartable_sequences = false
    });
    assert!(slots.hit_path().is_none(), "no sequences, no hit path");
    drop((cache, slots));
    source.assert_all_home();
    slots_source.assert_all_home();
}

#[test]
fn a_freed_item_is_reused_from_the_magazine() {
    let (cache, source) = cache(100, 4, 1, WORKING_SET);
    let id = cache.alloc_on(0).unwrap();
    cache.free_on(0, id);
    assert_eq!(cache.alloc_on(0), Some(id));
    let stats = cache.stats();
    assert_eq!(
        (stats.source_allocs, stats.alloc_hits, stats.free_hits),
        (1, 1, 1)
    );
    cache.free_on(0, id);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn full_magazines_go_to_the_depot_whole() {
    // Magazines of 4 on one slot: frees 1-8 fill loaded and previous; free 9 sends the
    // full previous to the depot, and so does every 4th free after it (13, 17, ..., 97).
    let (cache, source) = cache(1000, 4, 1, WORKING_SET);
    let ids = alloc_n(&cache, 0, 100);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    let stats = cache.stats();
    assert_eq!(stats.depot_full, 23);
    assert_eq!(stats.depot_pushes, 23);
    assert_eq!(stats.depot_peak, 23);
    assert_eq!(cache.cached(), 100);
    assert_eq!(source.at_home(), 900);
    // Allocating on another CPU takes whole magazines back.
    let again = alloc_n(&cache, 0, 100);
    assert_eq!(cache.stats().source_allocs, 100, "no new source allocation");
    again.into_iter().for_each(|id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
fn working_set_reaches_target_in_two_trims_and_releases_the_surplus_in_one() {
    let (cache, source) = cache(1000, 4, 1, WORKING_SET);
    let ids = alloc_n(&cache, 0, 100);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    let full = cache.stats().depot_full;
    assert_eq!(full, 23);

    // The first interval began with an empty depot: nothing stayed unused all along.
    let first = cache.trim();
    assert_eq!(first, 0);
    let home = source.at_home();
    // No activity during the second interval: everything above target goes at once,
    // including slot 0's two full magazines, which the idle slot gives back.
    let second = cache.trim();
    assert_eq!(second, full);
    assert_eq!(cache.stats().depot_full, 2);
    assert_eq!(cache.stats().trimmed, full as u64);
    assert_eq!(cache.cached(), 2 * 4, "target x magazine size");
    assert_eq!(
        source.at_home() - home,
        second * 4,
        "released items reach the source"
    );
    assert_eq!(cache.trim(), 0, "nothing to release at target");
    drop(cache);
    source.assert_all_home();
}

#[test]
fn working_set_keeps_what_the_interval_used() {
    let (cache, source) = cache(1000, 4, 1, WORKING_SET);
    let ids = alloc_n(&cache, 0, 100);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    cache.trim(); // start an interval at 23 full magazines
                  // Take 10 magazines' worth (slot holds 8, then 8 magazines from the depot) ...
    let taken = alloc_n(&cache, 0, 40);
    assert_eq!(cache.stats().depot_full, 15);
    // ... and give them back: the depot is at 23 again, but it went down to 15.
    taken.into_iter().for_each(|id| cache.free_on(0, id));
    let full = cache.stats().depot_full;
    // Only the 15 magazines unused for the whole interval go (min(low water 15,
    // 23 - target 2)); the 8 that were used stay.
    assert_eq!(cache.trim(), 15);
    assert_eq!(cache.stats().depot_full, full - 15);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn one_per_tick_releases_exactly_one_per_call() {
    let depot = DepotPolicy::Dynamic {
        target: 3,
        trim: Trim::OnePerTick,
    };
    let (cache, source) = cache(1000, 4, 1, depot);
    let ids = alloc_n(&cache, 0, 40);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    let mut full = cache.stats().depot_full;
    assert_eq!(full, 8);
    while full > 3 {
        let home = source.at_home();
        assert_eq!(cache.trim(), 1);
        assert_eq!(cache.stats().depot_full, full - 1);
        assert_eq!(source.at_home(), home + 4);
        full -= 1;
    }
    assert_eq!(cache.trim(), 0);
    assert_eq!(cache.stats().depot_full, 3);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn fixed_depot_never_exceeds_its_cap_and_overflows_in_batches() {
    let (cache, source) = cache(1000, 4, 2, DepotPolicy::Fixed { max_full: 3 });
    let ids = alloc_n(&cache, 0, 200);
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    let stats = cache.stats();
    assert_eq!(stats.depot_full, 3);
    assert_eq!(stats.depot_peak, 3);
    let batches = source.batches.lock().unwrap().clone();
    assert!(!batches.is_empty());
    assert!(
        batches.iter().all(|&b| b == 4),
        "whole magazines only: {batches:?}"
    );
    assert_eq!(stats.source_frees, (batches.len() * 4) as u64);
    // 200 = 8 in the slot + 3 magazines in the depot + the overflow.
    assert_eq!(stats.source_frees, 200 - 8 - 12);
    assert_eq!(cache.trim(), 0, "Fixed never trims full magazines");
    drop(cache);
    source.assert_all_home();
}

#[test]
fn an_exhausted_cpu_takes_what_the_others_cache_and_hands_out_each_item_once() {
    let (cache, source) = cache(10, 2, 2, WORKING_SET);
    let ids = alloc_n(&cache, 0, 10);
    assert_eq!(cache.alloc_on(0), None, "all ten are out");
    // Freed on CPU 1: its slot keeps 4, the depot gets 3 magazines of 2.
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    assert_eq!(source.at_home(), 0);
    // CPU 0 drains the depot, then finds the source empty and takes CPU 1's magazines.
    let mut again = alloc_n(&cache, 0, 10);
    assert!(cache.stats().exhaustion_flushes >= 1);
    assert_eq!(cache.alloc_on(0), None);
    again.sort();
    assert_eq!(again, (0..10).collect::<Vec<_>>(), "each id exactly once");
    again.into_iter().for_each(|id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
fn a_source_panicking_in_free_batch_loses_nothing() {
    // With a cap of 0 every spilled magazine overflows to the source.
    let (cache, source) = cache(100, 4, 1, DepotPolicy::Fixed { max_full: 0 });
    let ids = alloc_n(&cache, 0, 20);
    let mut ids = ids.into_iter();
    for id in ids.by_ref().take(8) {
        cache.free_on(0, id);
    }
    source
        .panic_free_after
        .store(2, std::sync::atomic::Ordering::SeqCst);
    let id = ids.next().unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| cache.free_on(0, id)));
    assert!(result.is_err(), "the source panicked");
    // The magazine the source was draining went to the depot with its 2 other items.
    assert_eq!(cache.stats().depot_full, 1);
    assert_eq!(cache.cached(), 9 - 2);
    // The slot was given back: the cache keeps serving.
    for id in ids {
        cache.free_on(0, id);
    }
    let back = alloc_n(&cache, 0, 50);
    back.into_iter().for_each(|id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
fn a_source_panicking_in_alloc_leaves_no_slot_taken() {
    let (cache, source) = cache(100, 4, 1, WORKING_SET);
    source
        .panic_allocs
        .store(1, std::sync::atomic::Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| cache.alloc_on(0))).is_err());
    let id = cache.alloc_on(0).unwrap();
    cache.free_on(0, id);
    assert_eq!(
        cache.alloc_on(0),
        Some(id),
        "served by the slot, so it was given back"
    );
    assert_eq!(cache.stats().busy_misses, 0);
    cache.free_on(0, id);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn a_source_panicking_in_flush_keeps_the_rest_cached() {
    let (cache, source) = cache(100, 4, 2, WORKING_SET);
    let ids = alloc_n(&cache, 0, 6);
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    source
        .panic_free_after
        .store(3, std::sync::atomic::Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| cache.flush_cpu(1))).is_err());
    assert_eq!(
        cache.cached(),
        3,
        "the items the source did not take are still cached"
    );
    // The flush moved the slot's magazines out before calling the source: what it did
    // not take went to the depot.
    cache.flush();
    assert_eq!(cache.cached(), 0);
    assert_eq!(source.at_home(), 100);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn flush_cpu_returns_that_slot_only() {
    let (cache, source) = cache(100, 4, 2, WORKING_SET);
    let ids = alloc_n(&cache, 0, 10);
    ids[..5].iter().for_each(|&id| cache.free_on(1, id));
    ids[5..].iter().for_each(|&id| cache.free_on(0, id));
    cache.flush_cpu(1);
    assert_eq!(source.at_home(), 95);
    assert_eq!(cache.stats().source_frees, 5);
    assert_eq!(cache.cached(), 5, "CPU 0 keeps its items");
    cache.flush();
    assert_eq!(cache.cached(), 0);
    source.assert_all_home();
    let stats = cache.stats();
    assert_eq!((stats.depot_full, stats.depot_empty), (0, 0));
}

#[test]
fn local_handles_dropped_on_other_threads_lose_nothing() {
    // 622 ids at most are out at once; under Miri building a 10^4-id source costs more
    // than the test itself.
    let capacity = if cfg!(miri) { 1_000 } else { 10_000 };
    let (cache, source) = cache(capacity, 8, 2, WORKING_SET);
    let handles: Vec<_> = (0..4).map(|_| cache.local()).collect();
    std::thread::scope(|s| {
        for (i, mut local) in handles.into_iter().enumerate() {
            s.spawn(move || {
                let ids: Vec<_> = (0..100 + i * 37).map(|_| local.alloc().unwrap()).collect();
                ids.into_iter().for_each(|id| local.free(id));
                // Moved to yet another thread before it is dropped.
                std::thread::scope(|inner| {
                    inner.spawn(move || drop(local));
                });
            });
        }
    });
    assert!(
        cache.stats().depot_full > 0,
        "partial magazines went to the depot"
    );
    assert!(cache.stats().alloc_hits > 0 && cache.stats().free_hits > 0);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn a_local_handle_over_a_full_fixed_depot_returns_to_the_source() {
    let (cache, source) = cache(100, 4, 1, DepotPolicy::Fixed { max_full: 0 });
    let mut local = cache.local();
    let ids: Vec<_> = (0..6).map(|_| local.alloc().unwrap()).collect();
    ids.into_iter().for_each(|id| local.free(id));
    drop(local);
    assert_eq!(source.at_home(), 100, "no room in the depot: all went home");
    drop(cache);
    source.assert_all_home();
}

#[test]
fn alloc_cached_where_takes_only_matching_cached_items() {
    let (cache, source) = cache(100, 8, 1, WORKING_SET);
    let ids = alloc_n(&cache, 0, 8);
    ids.iter().for_each(|&id| cache.free_on(0, id));
    let low = cache.alloc_cached_where_on(0, |&id| id < 3).unwrap();
    assert!(low < 3);
    assert_eq!(cache.alloc_cached_where_on(0, |&id| id > 1000), None);
    assert_eq!(cache.stats().source_allocs, 8, "the source is never asked");
    cache.free_on(0, low);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn trim_frees_empty_magazines_unused_for_an_interval() {
    let (cache, source) = cache(1000, 4, 2, WORKING_SET);
    // Free on CPU 1, allocate on CPU 0: CPU 0 leaves empty magazines in the depot.
    let ids = alloc_n(&cache, 0, 60);
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    let back = alloc_n(&cache, 0, 60);
    assert!(cache.stats().depot_empty > 0);
    cache.trim();
    cache.trim();
    assert_eq!(cache.stats().depot_empty, 0);
    back.into_iter().for_each(|id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
#[should_panic(expected = "magazine_size")]
fn a_zero_magazine_size_is_refused() {
    let config = Config {
        magazine_size: 0,
        ..Config::default()
    };
    let _ = Cache::with_config(Tracking::new(1), config);
}

// The shared paths: busy slots, exhaustion, idle slots.

#[test]
fn a_free_that_finds_every_slot_busy_goes_into_a_depot_magazine_not_the_source() {
    let (cache, source) = cache(10, 4, 1, WORKING_SET);
    let ids = alloc_n(&cache, 0, 3);
    cache.free_on(0, ids[0]);
    let mut pending = vec![ids[1], ids[2]];
    // `accept` runs while this thread holds the only slot: both frees find it busy.
    let found = cache.alloc_cached_where_on(0, |_| {
        for id in pending.drain(..) {
            cache.free_on(0, id);
        }
        false
    });
    assert_eq!(found, None);
    let stats = cache.stats();
    assert_eq!(stats.busy_misses, 2, "{stats:?}");
    assert_eq!(
        stats.source_frees, 0,
        "a busy miss reached the source: {stats:?}"
    );
    assert_eq!(stats.depot_full, 1, "one partly filled magazine: {stats:?}");
    assert_eq!(cache.cached(), 3);
    // An allocation that finds the slot busy takes from that magazine.
    let mut got = None;
    let found = cache.alloc_cached_where_on(0, |_| {
        got = cache.alloc_on(0);
        false
    });
    assert_eq!(found, None);
    assert!(
        matches!(got, Some(id) if id == ids[1] || id == ids[2]),
        "{got:?}"
    );
    assert_eq!(cache.stats().source_allocs, 3, "no source allocation");
    cache.free_on(0, got.unwrap());
    drop(cache);
    source.assert_all_home();
}

#[test]
fn an_exhausted_alloc_takes_another_slots_magazine_instead_of_flushing() {
    let (cache, source) = cache(6, 4, 2, WORKING_SET);
    let ids = alloc_n(&cache, 0, 6);
    // Slot 1 holds all six (a full previous and a loaded of two); the source is empty.
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    let id = cache.alloc_on(0).expect("slot 1 has items");
    let stats = cache.stats();
    assert_eq!(
        stats.source_frees, 0,
        "nothing went back to the source: {stats:?}"
    );
    assert_eq!(stats.source_allocs, 6, "{stats:?}");
    // The whole full magazine moved to slot 0: the next three allocations there are hits.
    let hits = stats.alloc_hits;
    let more = alloc_n(&cache, 0, 3);
    assert_eq!(cache.stats().alloc_hits, hits + 3);
    cache.free_on(0, id);
    more.into_iter().for_each(|id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
fn an_exhausted_alloc_returns_none_only_when_nothing_is_cached() {
    let (cache, source) = cache(5, 4, 3, WORKING_SET);
    let ids = alloc_n(&cache, 0, 5);
    cache.free_on(2, ids[0]);
    assert_eq!(cache.alloc_on(1), Some(ids[0]), "taken from slot 2");
    assert_eq!(cache.alloc_on(1), None, "every item is in our hands");
    assert!(cache.stats().exhaustion_flushes >= 2);
    cache.free_on(1, ids[0]);
    ids[1..].iter().for_each(|&id| cache.free_on(0, id));
    drop(cache);
    source.assert_all_home();
}

#[test]
fn trim_reclaims_a_slot_idle_for_a_whole_interval_unless_told_not_to() {
    for reclaim in [None, Some(false)] {
        let depot = DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::WorkingSet,
        };
        let (cache, source) = cache_with(100, 4, 2, depot, |options| {
            options.reclaim_idle_slots = reclaim;
        });
        let ids = alloc_n(&cache, 1, 6);
        ids.into_iter().for_each(|id| cache.free_on(1, id));
        assert_eq!(cache.trim(), 0, "the slot was used during this interval");
        let released = cache.trim();
        match reclaim {
            None => {
                assert_eq!(released, 2, "both of the idle slot's magazines");
                assert_eq!(cache.cached(), 0);
            }
            _ => {
                assert_eq!(released, 0);
                assert_eq!(cache.cached(), 6, "the slot keeps its items");
            }
        }
        drop(cache);
        source.assert_all_home();
    }
}

#[test]
fn one_per_tick_does_not_reclaim_idle_slots_by_default() {
    let (cache, source) = cache(
        100,
        4,
        1,
        DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::OnePerTick,
        },
    );
    let ids = alloc_n(&cache, 0, 8);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    for _ in 0..4 {
        cache.trim();
    }
    assert_eq!(
        cache.cached(),
        8,
        "Linux's rule leaves the CPU caches alone"
    );
    drop(cache);
    source.assert_all_home();
}

/// A pool of ids that counts its `alloc_batch` calls and can misbehave in them: panic
/// after handing `panic_after` items, or hand `extra` items more than asked.
struct Batches {
    free: std::sync::Mutex<Vec<u32>>,
    capacity: u32,
    calls: std::sync::atomic::AtomicUsize,
    panic_after: Option<usize>,
    extra: usize,
}

impl Batches {
    fn new(capacity: u32) -> Self {
        Self {
            free: std::sync::Mutex::new((0..capacity).rev().collect()),
            capacity,
            calls: Default::default(),
            panic_after: None,
            extra: 0,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn assert_all_home(&self) {
        let mut home = self.free.lock().unwrap().clone();
        home.sort_unstable();
        assert_eq!(home, (0..self.capacity).collect::<Vec<_>>());
    }
}

impl magazine::Source for Batches {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        self.free.lock().unwrap().pop()
    }

    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u32)) -> usize {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut handed = 0;
        while handed < max + self.extra {
            if self.panic_after == Some(handed) {
                panic!("batches: injected panic");
            }
            // Taken one at a time, so that a panic leaves the rest here.
            let Some(id) = self.free.lock().unwrap().pop() else {
                break;
            };
            out(id);
            handed += 1;
        }
        handed
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        let mut free = self.free.lock().unwrap();
        for id in items {
            assert!(!free.contains(&id), "id {id} returned twice");
            free.push(id);
        }
    }
}

fn batch_cache(source: Batches, magazine_size: usize, cpus: usize) -> Cache<Batches> {
    let config = Config {
        magazine_size,
        cpus,
        depot: WORKING_SET,
    };
    Cache::with_config(source, config)
}

#[test]
fn batch_refill_fills_a_magazine_in_one_source_call() {
    let cache = batch_cache(Batches::new(100), 8, 2);
    let ids = alloc_n_from(&cache, 0, 8);
    assert_eq!(cache.source().calls(), 1, "one call for the whole magazine");
    let stats = cache.stats();
    assert_eq!((stats.source_alloc_calls, stats.source_allocs), (1, 8));
    assert_eq!(stats.alloc_hits, 7, "the rest of the batch served as hits");
    assert_eq!(cache.cached(), 0);
    // The ninth: another call.
    let ninth = cache.alloc_on(0).unwrap();
    assert_eq!(cache.source().calls(), 2);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    cache.free_on(0, ninth);
    cache.flush();
    assert_eq!(cache.stats().source_frees, 16);
    cache.source().assert_all_home();
}

#[test]
fn batch_refill_of_a_handle_fills_its_loaded_magazine() {
    let cache = batch_cache(Batches::new(100), 8, 1);
    let mut local = cache.local();
    let ids: Vec<u32> = (0..8).map(|_| local.alloc().unwrap()).collect();
    assert_eq!(cache.source().calls(), 1);
    ids.into_iter().for_each(|id| local.free(id));
    drop(local);
    cache.flush();
    cache.source().assert_all_home();
}

#[test]
fn a_short_batch_is_kept_and_an_empty_one_is_exhaustion() {
    let cache = batch_cache(Batches::new(3), 8, 2);
    let ids = alloc_n_from(&cache, 0, 3);
    assert_eq!(cache.stats().source_allocs, 3);
    assert_eq!(
        cache.alloc_on(0),
        None,
        "the pool is empty and nothing is cached"
    );
    let stats = cache.stats();
    assert_eq!(
        stats.source_alloc_calls, 1,
        "a call that handed nothing is not counted"
    );
    assert_eq!(stats.exhaustion_flushes, 1);
    // What another slot caches is found by the exhaustion flush.
    ids.into_iter().for_each(|id| cache.free_on(1, id));
    assert_eq!(alloc_n_from(&cache, 0, 3).len(), 3);
    assert_eq!(cache.source().at_home_count(), 0);
}

#[test]
fn a_source_panicking_in_the_middle_of_a_batch_loses_nothing() {
    for after in [0, 1, 5] {
        let mut source = Batches::new(20);
        source.panic_after = Some(after);
        let cache = batch_cache(source, 8, 1);
        let result = catch_unwind(AssertUnwindSafe(|| cache.alloc_on(0)));
        assert!(result.is_err(), "the source panicked");
        assert_eq!(cache.cached(), after, "the items it handed are kept");
        assert_eq!(cache.source().at_home_count(), 20 - after);
        // They serve the next allocations; the slot was not left taken.
        for _ in 0..after {
            assert!(cache.alloc_on(0).is_some());
        }
        drop(cache);
    }
}

#[test]
fn a_source_that_hands_more_than_asked_loses_nothing() {
    let mut source = Batches::new(40);
    source.extra = 5;
    let cache = batch_cache(source, 4, 1);
    let id = cache.alloc_on(0).unwrap();
    assert_eq!(
        cache.stats().source_allocs,
        9,
        "four asked for, nine handed"
    );
    assert_eq!(cache.cached(), 8, "every one cached");
    cache.free_on(0, id);
    cache.flush();
    cache.source().assert_all_home();
}

#[test]
fn a_batch_of_one_calls_alloc_not_alloc_batch() {
    let source = Batches::new(10);
    let config = Config {
        magazine_size: 8,
        cpus: 1,
        depot: WORKING_SET,
    };
    let mut options = Options::default();
    options.source_batch = Some(1);
    let cache = Cache::with_options(source, config, options);
    let id = cache.alloc_on(0).unwrap();
    assert_eq!(cache.source().calls(), 0);
    let stats = cache.stats();
    assert_eq!((stats.source_alloc_calls, stats.source_allocs), (1, 1));
    cache.free_on(0, id);
}

/// Allocates `n` ids on `cpu` of a cache over `Batches`.
fn alloc_n_from(cache: &Cache<Batches>, cpu: usize, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| cache.alloc_on(cpu).expect("source has ids"))
        .collect()
}

impl Batches {
    fn at_home_count(&self) -> usize {
        self.free.lock().unwrap().len()
    }
}

#[test]
fn a_dynamic_depot_with_max_full_returns_the_overflow_to_the_source() {
    let depot = DepotPolicy::Dynamic {
        target: 0,
        trim: Trim::WorkingSet,
    };
    let (cache, source) = cache_with(100, 4, 1, depot, |options| {
        options.cpu_shelves = Some(false); // every full magazine goes to the capped stack
        options.max_full = Some(2);
    });
    let ids = alloc_n(&cache, 0, 24);
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    // The slot holds two magazines (8 ids), the depot two (8 ids), the other 8 went back.
    let stats = cache.stats();
    assert_eq!((stats.depot_full, stats.source_frees), (2, 8), "{stats:?}");
    assert_eq!(source.at_home(), 100 - 16);
    // The working-set rule still trims it: two trims with nothing used between them.
    cache.trim();
    cache.trim();
    assert_eq!(cache.stats().depot_full, 0);
    drop(cache);
    source.assert_all_home();
}
