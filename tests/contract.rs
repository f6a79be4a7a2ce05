//! The public contract of the crate (its design is in `magazine::docs::design`), written
//! exactly as a user outside the crate would.

use magazine::{Cache, Config, DepotPolicy, LocalCache, Source, Stats, Trim};
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

struct Counter(std::sync::atomic::AtomicU64);

impl Source for Counter {
    type Item = u64;
    fn alloc(&self) -> Option<u64> {
        Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        items.for_each(drop);
    }
}

#[test]
fn the_contract_compiles_as_written() {
    let mut config = Config::default();
    assert_eq!(config.magazine_size, 127);
    assert!(config.cpus >= 1);
    assert_eq!(
        config.depot,
        DepotPolicy::Dynamic {
            target: config.cpus,
            trim: Trim::WorkingSet
        }
    );
    config.magazine_size = 2;
    config.cpus = 2;
    config.depot = DepotPolicy::Fixed { max_full: 32 };
    let _ = DepotPolicy::Dynamic {
        target: 1,
        trim: Trim::OnePerTick,
    };

    let cache: Cache<Counter> = Cache::with_config(Counter(Default::default()), config);
    let default_cache = Cache::new(Counter(Default::default()));
    let a: Option<u64> = cache.alloc();
    cache.free(a.unwrap());
    let b = cache.alloc_on(1).unwrap();
    cache.free_on(1, b);
    {
        let mut local: LocalCache<'_, Counter> = cache.local();
        let c: Option<u64> = local.alloc();
        local.free(c.unwrap());
    }
    let released: usize = cache.trim();
    assert_eq!(released, 0);
    cache.flush_cpu(0);
    cache.flush();
    let stats: Stats = cache.stats();
    let Stats {
        alloc_hits,
        free_hits,
        depot_pops,
        depot_pushes,
        source_allocs,
        source_frees,
        trimmed,
        depot_full,
        depot_empty,
        depot_peak,
        ..
    } = stats.clone();
    let _ = (
        alloc_hits,
        free_hits,
        depot_pops,
        depot_pushes,
        source_allocs,
    );
    let _ = (source_frees, trimmed, depot_full, depot_empty, depot_peak);
    let _ = format!("{:?}", Stats::default());
    let _: &Counter = cache.source();
    drop(default_cache);
}

#[test]
fn caches_and_handles_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Cache<Counter>>();
    assert_send::<LocalCache<'static, Counter>>();
}
