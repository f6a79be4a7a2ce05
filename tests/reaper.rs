//! The optional reaper thread trims on its own and stops cleanly.

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Tracking;
use magazine::{Cache, Config, DepotPolicy, Trim};

fn surplus_cache() -> (Arc<Cache<Arc<Tracking>>>, Arc<Tracking>) {
    let source = Arc::new(Tracking::new(1000));
    let config = Config {
        magazine_size: 4,
        cpus: 1,
        depot: DepotPolicy::Dynamic {
            target: 1,
            trim: Trim::WorkingSet,
        },
    };
    let cache = Arc::new(Cache::with_config(Arc::clone(&source), config));
    let ids: Vec<_> = (0..100).map(|_| cache.alloc_on(0).unwrap()).collect();
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    assert!(cache.stats().depot_full > 1);
    (cache, source)
}

#[test]
fn the_reaper_trims_the_idle_depot_to_target() {
    let (cache, source) = surplus_cache();
    let reaper = cache.start_reaper(Duration::from_millis(1));
    // Two intervals suffice; the deadline only guards against a reaper that never runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cache.stats().depot_full > 1 {
        assert!(Instant::now() < deadline, "the reaper never trimmed");
        std::thread::sleep(Duration::from_millis(1));
    }
    reaper.stop();
    assert_eq!(cache.stats().depot_full, 1);
    assert!(cache.stats().trimmed > 0);
    drop(cache);
    source.assert_all_home();
}

#[test]
fn the_reaper_does_not_keep_the_cache_alive() {
    let (cache, source) = surplus_cache();
    let reaper = cache.start_reaper(Duration::from_millis(1));
    drop(cache);
    // The reaper may be inside a trim with a temporary strong reference; it then drops
    // the cache itself when that trim ends (see `Reaper`, "Lifetime"). Either way the
    // cache is gone once the source's only owner is this test.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Arc::strong_count(&source) > 1 {
        assert!(Instant::now() < deadline, "the reaper kept the cache alive");
        std::thread::sleep(Duration::from_millis(1));
    }
    source.assert_all_home();
    drop(reaper);
}
