//! The seed's pattern on real threads, and oversubscription.
//!
//! - `io_loop/S+C`: a closed pool of `POOL` items. `S` submitter threads allocate an item
//!   and pass it through a ring of `DEPTH` slots (the I/Os in flight) to `C` completer
//!   threads, which free it. Items completed per second: the per-CPU `Cache`, a
//!   `LocalCache` per thread, and, as the baseline, the pool kept in an `ArrayQueue`
//!   (submitters pop, completers push).
//! - `pairs/8`: 8 threads (on a 2-core machine: oversubscribed) each doing alloc/free
//!   pairs on the per-CPU path, `cpus` = available parallelism; the baseline is an
//!   `ArrayQueue` pool.
//!
//! After the timed runs, each cache configuration runs once more with its statistics read
//! after a warm-up, and the bench prints how many operations went to the source (calls
//! of `alloc` plus items given to `free_batch`) per operation: the slow-path share that
//! the seed report is about.

mod common;

use std::hint::black_box;
use std::thread;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use magazine::{Cache, Stats};

use common::FreeList;

/// Items in the closed pool.
const POOL: u64 = 4096;
/// I/Os in flight: the ring's capacity.
const DEPTH: usize = 256;
/// Items completed per criterion iteration.
const BATCH: u64 = 4096;

/// One front end of the pool, as one thread sees it.
trait Pool {
    fn get(&mut self) -> Option<u64>;
    fn put(&mut self, item: u64);
}

/// The per-CPU path.
struct PerCpu<'a>(&'a Cache<FreeList>);

impl Pool for PerCpu<'_> {
    fn get(&mut self) -> Option<u64> {
        self.0.alloc()
    }
    fn put(&mut self, item: u64) {
        self.0.free(item)
    }
}

impl Pool for magazine::LocalCache<'_, FreeList> {
    fn get(&mut self) -> Option<u64> {
        self.alloc()
    }
    fn put(&mut self, item: u64) {
        self.free(item)
    }
}

/// The baseline: the pool itself is a bounded queue.
impl Pool for &ArrayQueue<u64> {
    fn get(&mut self) -> Option<u64> {
        self.pop()
    }
    fn put(&mut self, item: u64) {
        // The queue holds the whole pool, so it is never full.
        self.push(item).expect("the queue has room for the pool");
    }
}

/// A closed pool of `POOL` items in the source.
fn closed_source() -> FreeList {
    let source = FreeList::empty();
    magazine::Source::free_batch(&source, &mut (0..POOL));
    source
}

/// Moves `total` items from `submitters` to `completers` through a ring; each thread gets
/// its front end from `pool`. Returns the timed duration.
fn run_io<P: Pool>(
    submitters: usize,
    completers: usize,
    total: u64,
    pool: impl Fn() -> P + Sync,
) -> std::time::Duration {
    let ring = ArrayQueue::new(DEPTH);
    let threads = submitters + completers;
    let duration = common::run_timed(threads, |i, barrier| {
        let mut front = pool();
        if i < submitters {
            let share =
                total / submitters as u64 + u64::from((i as u64) < total % submitters as u64);
            common::timed(barrier, || {
                for _ in 0..share {
                    let mut item = loop {
                        match front.get() {
                            Some(item) => break item,
                            None => thread::yield_now(),
                        }
                    };
                    while let Err(back) = ring.push(black_box(item)) {
                        item = back;
                        thread::yield_now();
                    }
                }
            })
        } else {
            let index = (i - submitters) as u64;
            let share = total / completers as u64 + u64::from(index < total % completers as u64);
            common::timed(barrier, || {
                let mut done = 0;
                while done < share {
                    match ring.pop() {
                        Some(item) => {
                            front.put(item);
                            done += 1;
                        }
                        None => thread::yield_now(),
                    }
                }
            })
        }
    });
    duration
}

fn io_loop(c: &mut Criterion) {
    for (submitters, completers) in [(1, 1), (2, 2)] {
        let mut group = c.benchmark_group(format!("io_loop/{submitters}+{completers}"));
        group.throughput(Throughput::Elements(BATCH));

        let cache = Cache::new(closed_source());
        group.bench_function(
            BenchmarkId::from_parameter("magazine Cache (per-CPU)"),
            |b| {
                b.iter_custom(|iters| {
                    run_io(submitters, completers, iters * BATCH, || PerCpu(&cache))
                })
            },
        );
        let cache = Cache::new(closed_source());
        group.bench_function(BenchmarkId::from_parameter("magazine LocalCache"), |b| {
            b.iter_custom(|iters| run_io(submitters, completers, iters * BATCH, || cache.local()))
        });
        let queue = ArrayQueue::new(POOL as usize);
        (0..POOL).for_each(|item| queue.push(item).unwrap());
        group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
            b.iter_custom(|iters| run_io(submitters, completers, iters * BATCH, || &queue))
        });
        group.finish();

        slow_path_share(
            &format!("io_loop/{submitters}+{completers} per-CPU"),
            |cache, total| {
                run_io(submitters, completers, total, || PerCpu(cache));
            },
        );
        slow_path_share(
            &format!("io_loop/{submitters}+{completers} LocalCache"),
            |cache, total| {
                run_io(submitters, completers, total, || cache.local());
            },
        );
    }
}

/// Threads doing alloc/free pairs: 8 on the per-CPU path.
const PAIR_THREADS: usize = 8;

fn run_pairs<P: Pool>(total: u64, pool: impl Fn() -> P + Sync) -> std::time::Duration {
    common::run_timed(PAIR_THREADS, |_, barrier| {
        let mut front = pool();
        common::timed(barrier, || {
            for _ in 0..total / PAIR_THREADS as u64 {
                let item = front.get().expect("the pool has an item per thread");
                front.put(black_box(item));
            }
        })
    })
}

fn pairs(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("pairs/{PAIR_THREADS}"));
    group.throughput(Throughput::Elements(BATCH));
    let cache = Cache::new(closed_source());
    group.bench_function(
        BenchmarkId::from_parameter("magazine Cache (per-CPU)"),
        |b| b.iter_custom(|iters| run_pairs(iters * BATCH, || PerCpu(&cache))),
    );
    let queue = ArrayQueue::new(POOL as usize);
    (0..POOL).for_each(|item| queue.push(item).unwrap());
    group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
        b.iter_custom(|iters| run_pairs(iters * BATCH, || &queue))
    });
    group.finish();

    slow_path_share(&format!("pairs/{PAIR_THREADS} per-CPU"), |cache, total| {
        run_pairs(total, || PerCpu(cache));
    });
}

/// Runs `run` on a new closed-pool cache for a warm-up, then again with the statistics
/// counted, and prints the source's share of the counted operations.
fn slow_path_share(name: &str, run: impl Fn(&Cache<FreeList>, u64)) {
    let total = if common::smoke_test() {
        1 << 16
    } else {
        1 << 22
    };
    let cache = Cache::new(closed_source());
    run(&cache, total / 4);
    let before = cache.stats();
    run(&cache, total);
    report(name, &before, &cache.stats(), total);
}

fn report(name: &str, before: &Stats, after: &Stats, total: u64) {
    let ops = 2 * total;
    let source =
        (after.source_allocs - before.source_allocs) + (after.source_frees - before.source_frees);
    eprintln!(
        "    {name}: {source} source operations in {ops} ({:.4}%); busy misses {}, steals/exhaustions {}",
        100.0 * source as f64 / ops as f64,
        after.busy_misses - before.busy_misses,
        after.exhaustion_flushes - before.exhaustion_flushes,
    );
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 2000, 20);
    targets = io_loop, pairs
}
criterion_main!(benches);
