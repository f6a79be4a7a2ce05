//! Refill: what an allocation that finds its magazines and the depot empty costs, with the
//! source asked for a whole magazine per call (`Options::source_batch: None`, the default)
//! against one item per call (`Some(1)`, the path before batches), in the same run.
//!
//! The source is a `Mutex<Vec<u64>>` that implements `alloc_batch` under one lock hold and
//! counts its calls ([`Counted`]).
//!
//! - `refill/handoff 1->1 <depot>`: a closed pool of [`POOL`] items, which starts in the
//!   source. A consumer thread allocates items as fast as it can and passes each through
//!   a ring (an `ArrayQueue` with room for the whole pool, so it never waits on the ring)
//!   to a producer thread, which frees it into the cache. The consumer outruns its
//!   producer: when the cache and the source are both empty it polls the empty cache
//!   (yields and retries), as `benches/handoff.rs`'s consumers do. Items moved per second.
//!   With the default `Dynamic` depot the pool ends up in the cache and stays there (the
//!   source is only asked by the polls of an empty cache); with `Fixed{2}` (Linux <= 6.6,
//!   scaled: two magazines of 127 for a pool of 32 magazines) the producer's overflow goes
//!   back to the source in whole magazines and the consumer takes it out again: the
//!   seed's pattern, in which every item crosses the source.
//! - `refill/cold start`: a new, empty cache in front of a source holding 10^6 items
//!   serves 10^6 allocations on one thread, per-CPU (`Cache::alloc`) and through a
//!   `LocalCache`. Allocations per second; building the cache and filling the source are
//!   not timed.
//!
//! After each benchmark the bench prints (stderr) the source's calls per item the caches
//! allocated: `alloc`/`alloc_batch` calls (and how many of them handed nothing),
//! `free_batch` calls; `benches/summary.py` prints the table with ratios.

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use magazine::{Cache, Config, DepotPolicy, Options, Source};

/// Items in the hand-off's closed pool: 32 magazines of 127 (about).
const POOL: u64 = 4096;
/// Items moved per criterion iteration of the hand-off.
const BATCH: u64 = 4096;
/// Allocations of one cold start.
const COLD: u64 = 1_000_000;

/// The two refill paths measured side by side: (label, `Options::source_batch`).
const MODES: [(&str, Option<usize>); 2] = [("batches", None), ("one at a time", Some(1))];

/// A free list behind a lock that counts the calls the cache makes.
#[derive(Debug, Default)]
struct Counted {
    free: Mutex<Vec<u64>>,
    alloc_calls: AtomicU64,
    empty_calls: AtomicU64,
    allocs: AtomicU64,
    free_calls: AtomicU64,
}

impl Counted {
    fn with_items(items: std::ops::Range<u64>) -> Self {
        let counted = Counted::default();
        counted.free.lock().unwrap().extend(items);
        counted
    }

    fn len(&self) -> u64 {
        self.free.lock().unwrap().len() as u64
    }

    fn counted(&self, handed: usize) {
        self.alloc_calls.fetch_add(1, Ordering::Relaxed);
        self.allocs.fetch_add(handed as u64, Ordering::Relaxed);
        if handed == 0 {
            self.empty_calls.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters, then zeroed: (alloc calls, empty ones, items, free calls).
    fn take_counts(&self) -> [u64; 4] {
        [
            &self.alloc_calls,
            &self.empty_calls,
            &self.allocs,
            &self.free_calls,
        ]
        .map(|counter| counter.swap(0, Ordering::Relaxed))
    }
}

impl Source for Counted {
    type Item = u64;

    fn alloc(&self) -> Option<u64> {
        let item = self.free.lock().unwrap().pop();
        self.counted(item.is_some() as usize);
        item
    }

    /// One lock hold for the whole batch.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u64)) -> usize {
        let handed = {
            let mut free = self.free.lock().unwrap();
            let take = max.min(free.len());
            let start = free.len() - take;
            free.drain(start..).for_each(&mut *out);
            take
        };
        self.counted(handed);
        handed
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        self.free_calls.fetch_add(1, Ordering::Relaxed);
        self.free.lock().unwrap().extend(items);
    }
}

/// A per-CPU cache (the default options: restartable sequences where the platform has
/// them) with `source_batch`, over `source`.
fn cache_over<S: Source>(source: S, depot: DepotPolicy, source_batch: Option<usize>) -> Cache<S> {
    let mut options = Options::default();
    options.source_batch = source_batch;
    let config = Config {
        depot,
        ..Config::default()
    };
    Cache::with_options(source, config, options)
}

/// Prints the source's calls per item allocated since the last report.
fn report(id: &str, source: &Counted, items: u64) {
    let [alloc_calls, empty_calls, allocs, free_calls] = source.take_counts();
    if items == 0 {
        return; // filtered out
    }
    let per_item = |calls: u64| calls as f64 / items as f64;
    eprintln!(
        "    source calls per item, {id}: {:.5} alloc calls ({:.5} of them empty; {:.1} items \
         per call that handed any), {:.5} free calls ({items} items allocated)",
        per_item(alloc_calls),
        per_item(empty_calls),
        allocs as f64 / (alloc_calls - empty_calls).max(1) as f64,
        per_item(free_calls),
    );
}

/// One sample of the hand-off: `total` items allocated by the consumer, each passed to
/// the producer through `ring` and freed by it.
fn run_handoff(cache: &Cache<Counted>, ring: &ArrayQueue<u64>, total: u64) -> Duration {
    common::run_timed(2, |i, barrier| {
        if i == 0 {
            common::timed(barrier, || {
                let mut got = 0;
                while got < total {
                    match cache.alloc() {
                        Some(item) => {
                            ring.push(black_box(item)).expect("the ring holds the pool");
                            got += 1;
                        }
                        None => thread::yield_now(),
                    }
                }
            })
        } else {
            common::timed(barrier, || {
                let mut freed = 0;
                while freed < total {
                    match ring.pop() {
                        Some(item) => {
                            cache.free(black_box(item));
                            freed += 1;
                        }
                        None => thread::yield_now(),
                    }
                }
            })
        }
    })
}

fn handoff(c: &mut Criterion) {
    let depots = [
        ("Dynamic (default)", Config::default().depot),
        ("Fixed{2}", DepotPolicy::Fixed { max_full: 2 }),
    ];
    for (depot_name, depot) in depots {
        let mut group = c.benchmark_group(format!("refill/handoff 1->1 {depot_name}"));
        group.throughput(Throughput::Elements(BATCH));
        for (mode, source_batch) in MODES {
            let cache = cache_over(Counted::with_items(0..POOL), depot, source_batch);
            let ring = ArrayQueue::new(POOL as usize);
            let mut moved = 0;
            group.bench_function(BenchmarkId::from_parameter(mode), |b| {
                b.iter_custom(|iters| {
                    moved += iters * BATCH;
                    run_handoff(&cache, &ring, iters * BATCH)
                })
            });
            let source = cache.source();
            assert_eq!(
                cache.cached() as u64 + source.len(),
                POOL,
                "the closed pool lost or made up items: {:?}",
                cache.stats()
            );
            report(&format!("handoff 1->1 {depot_name}, {mode}"), source, moved);
        }
        group.finish();
    }
}

/// The two front ends of the cold start.
#[derive(Clone, Copy)]
enum Front {
    PerCpu,
    Local,
}

/// `iters` cold starts over `source` (refilled before each, untimed); returns the time
/// the allocations took.
fn run_cold(source: &Counted, front: Front, source_batch: Option<usize>, iters: u64) -> Duration {
    let mut elapsed = Duration::ZERO;
    for _ in 0..iters {
        {
            let mut free = source.free.lock().unwrap();
            free.clear();
            free.extend(0..COLD);
        }
        let cache = cache_over(source, Config::default().depot, source_batch);
        let start = Instant::now();
        match front {
            Front::PerCpu => {
                for _ in 0..COLD {
                    black_box(cache.alloc().expect("the source holds enough"));
                }
            }
            Front::Local => {
                let mut local = cache.local();
                for _ in 0..COLD {
                    black_box(local.alloc().expect("the source holds enough"));
                }
            }
        }
        elapsed += start.elapsed();
    }
    elapsed
}

fn cold_start(c: &mut Criterion) {
    let mut group = c.benchmark_group("refill/cold start");
    group.throughput(Throughput::Elements(COLD));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    let fronts = [
        ("magazine Cache (per-CPU)", Front::PerCpu),
        ("magazine LocalCache", Front::Local),
    ];
    for (front_name, front) in fronts {
        for (mode, source_batch) in MODES {
            let source = Counted::default();
            let mut allocated = 0;
            group.bench_function(BenchmarkId::new(front_name, mode), |b| {
                b.iter_custom(|iters| {
                    allocated += iters * COLD;
                    run_cold(&source, front, source_batch, iters)
                })
            });
            report(
                &format!("cold start {front_name}, {mode}"),
                &source,
                allocated,
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 2000, 20);
    targets = handoff, cold_start
}
criterion_main!(benches);
