//! The seed's pattern on real threads, and oversubscription.
//!
//! - `io_loop/S+C`: a closed pool of `POOL` items. `S` submitter threads allocate an item
//!   and pass it through a ring of `DEPTH` slots (the I/Os in flight) to `C` completer
//!   threads, which free it. Items completed per second: the per-CPU `Cache`, a
//!   `LocalCache` per thread, and, as the baseline, the pool kept in an `ArrayQueue`
//!   (submitters pop, completers push); the per-CPU `Cache` with restartable sequences
//!   too, where the platform has them.
//! - `pairs/8`: 8 threads (on a 2-core machine: oversubscribed) each doing alloc/free
//!   pairs on the per-CPU path (with and without restartable sequences), `cpus` =
//!   available parallelism; the baseline is an `ArrayQueue` pool.
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

/// No pool at all: made-up items, for the ring-only reference.
struct Endless(u64);

impl Pool for Endless {
    fn get(&mut self) -> Option<u64> {
        self.0 += 1;
        Some(self.0)
    }
    fn put(&mut self, item: u64) {
        black_box(item);
    }
}

/// `LocalCache` handles that outlive the threads of one sample, as a worker thread's handle
/// outlives its requests: each thread borrows one for the sample and gives it back.
struct Handles<'a> {
    idle: std::sync::Mutex<Vec<magazine::LocalCache<'a, FreeList>>>,
}

impl<'a> Handles<'a> {
    fn new(cache: &'a Cache<FreeList>, count: usize) -> Self {
        let idle = (0..count).map(|_| cache.local()).collect();
        Handles {
            idle: std::sync::Mutex::new(idle),
        }
    }

    fn lend(&self) -> Lent<'_, 'a> {
        let handle = self
            .idle
            .lock()
            .unwrap()
            .pop()
            .expect("a handle per thread");
        Lent {
            handle: Some(handle),
            home: self,
        }
    }
}

/// A borrowed handle; goes back to the pool on drop.
struct Lent<'h, 'a> {
    handle: Option<magazine::LocalCache<'a, FreeList>>,
    home: &'h Handles<'a>,
}

impl Pool for Lent<'_, '_> {
    fn get(&mut self) -> Option<u64> {
        self.handle.as_mut().unwrap().alloc()
    }
    fn put(&mut self, item: u64) {
        self.handle.as_mut().unwrap().free(item)
    }
}

impl Drop for Lent<'_, '_> {
    fn drop(&mut self) {
        let handle = self.handle.take().unwrap();
        self.home.idle.lock().unwrap().push(handle);
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
    run_io_batched::<1, P>(submitters, completers, total, pool)
}

/// [`run_io`] with `B` items per ring entry: a submitter allocates `B` items and submits
/// them at once; a completer frees a whole entry (an interrupt completing a batch).
fn run_io_batched<const B: usize, P: Pool>(
    submitters: usize,
    completers: usize,
    total: u64,
    pool: impl Fn() -> P + Sync,
) -> std::time::Duration {
    let ring = ArrayQueue::<[u64; B]>::new(DEPTH.div_ceil(B));
    let threads = submitters + completers;
    let entries = total / B as u64;
    let share_of = |index: usize, of: usize| {
        entries / of as u64 + u64::from((index as u64) < entries % of as u64)
    };
    common::run_timed(threads, |i, barrier| {
        let mut front = pool();
        if i < submitters {
            let share = share_of(i, submitters);
            common::timed(barrier, || {
                for _ in 0..share {
                    let mut entry = [0; B];
                    for slot in &mut entry {
                        *slot = loop {
                            match front.get() {
                                Some(item) => break item,
                                None => thread::yield_now(),
                            }
                        };
                    }
                    while let Err(back) = ring.push(black_box(entry)) {
                        entry = back;
                        thread::yield_now();
                    }
                }
            })
        } else {
            let share = share_of(i - submitters, completers);
            common::timed(barrier, || {
                let mut done = 0;
                while done < share {
                    match ring.pop() {
                        Some(entry) => {
                            entry.into_iter().for_each(|item| front.put(item));
                            done += 1;
                        }
                        None => thread::yield_now(),
                    }
                }
            })
        }
    })
}

/// I/Os per ring entry in `io_loop_batched`.
const RING_BATCH: usize = 16;

/// The same loop with completions in batches of [`RING_BATCH`], so that the ring costs
/// 1/16 as much per item and the pool, not the ring, sets the pace.
fn io_loop_batched(c: &mut Criterion) {
    for (submitters, completers) in [(1, 1), (2, 2)] {
        let mut group = c.benchmark_group(format!("io_loop_batched/{submitters}+{completers}"));
        group.throughput(Throughput::Elements(BATCH));
        for (front, cache) in per_cpu_caches() {
            group.bench_function(BenchmarkId::from_parameter(front.bench_id()), |b| {
                b.iter_custom(|iters| {
                    run_io_batched::<RING_BATCH, _>(submitters, completers, iters * BATCH, || {
                        PerCpu(&cache)
                    })
                })
            });
        }
        let cache = Cache::new(closed_source());
        let handles = Handles::new(&cache, submitters + completers);
        group.bench_function(BenchmarkId::from_parameter("magazine LocalCache"), |b| {
            b.iter_custom(|iters| {
                run_io_batched::<RING_BATCH, _>(submitters, completers, iters * BATCH, || {
                    handles.lend()
                })
            })
        });
        let queue = ArrayQueue::new(POOL as usize);
        (0..POOL).for_each(|item| queue.push(item).unwrap());
        group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
            b.iter_custom(|iters| {
                run_io_batched::<RING_BATCH, _>(submitters, completers, iters * BATCH, || &queue)
            })
        });
        group.bench_function(
            BenchmarkId::from_parameter("reference: the ring alone"),
            |b| {
                b.iter_custom(|iters| {
                    run_io_batched::<RING_BATCH, _>(submitters, completers, iters * BATCH, || {
                        Endless(0)
                    })
                })
            },
        );
        group.finish();
    }
}

fn io_loop(c: &mut Criterion) {
    for (submitters, completers) in [(1, 1), (2, 2)] {
        let mut group = c.benchmark_group(format!("io_loop/{submitters}+{completers}"));
        group.throughput(Throughput::Elements(BATCH));

        for (front, cache) in per_cpu_caches() {
            group.bench_function(BenchmarkId::from_parameter(front.bench_id()), |b| {
                b.iter_custom(|iters| {
                    run_io(submitters, completers, iters * BATCH, || PerCpu(&cache))
                })
            });
        }
        let cache = Cache::new(closed_source());
        let handles = Handles::new(&cache, submitters + completers);
        group.bench_function(BenchmarkId::from_parameter("magazine LocalCache"), |b| {
            b.iter_custom(|iters| run_io(submitters, completers, iters * BATCH, || handles.lend()))
        });
        drop(handles);
        let queue = ArrayQueue::new(POOL as usize);
        (0..POOL).for_each(|item| queue.push(item).unwrap());
        group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
            b.iter_custom(|iters| run_io(submitters, completers, iters * BATCH, || &queue))
        });
        // The ceiling of every contender: the ring alone, moving made-up items.
        group.bench_function(
            BenchmarkId::from_parameter("reference: the ring alone"),
            |b| b.iter_custom(|iters| run_io(submitters, completers, iters * BATCH, || Endless(0))),
        );
        group.finish();

        for (front, cache) in per_cpu_caches() {
            slow_path_share(
                &format!("io_loop/{submitters}+{completers} {}", front.label()),
                cache,
                |cache, total| {
                    run_io(submitters, completers, total, || PerCpu(cache));
                },
            );
        }
        slow_path_share(
            &format!("io_loop/{submitters}+{completers} LocalCache"),
            Cache::new(closed_source()),
            |cache, total| {
                let handles = Handles::new(cache, submitters + completers);
                run_io(submitters, completers, total, || handles.lend());
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
    for (front, cache) in per_cpu_caches() {
        group.bench_function(BenchmarkId::from_parameter(front.bench_id()), |b| {
            b.iter_custom(|iters| run_pairs(iters * BATCH, || PerCpu(&cache)))
        });
    }
    let queue = ArrayQueue::new(POOL as usize);
    (0..POOL).for_each(|item| queue.push(item).unwrap());
    group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
        b.iter_custom(|iters| run_pairs(iters * BATCH, || &queue))
    });
    group.finish();

    for (front, cache) in per_cpu_caches() {
        slow_path_share(
            &format!("pairs/{PAIR_THREADS} {}", front.label()),
            cache,
            |cache, total| {
                run_pairs(total, || PerCpu(cache));
            },
        );
    }
}

/// How a per-CPU cache takes its slots.
#[derive(Clone, Copy)]
enum PerCpuFront {
    /// The slot protocol (a compare-and-swap per operation; restartable sequences off).
    Slots,
    /// Restartable sequences (`Options::restartable_sequences`, the default).
    Sequences,
}

impl PerCpuFront {
    fn bench_id(self) -> &'static str {
        match self {
            PerCpuFront::Slots => "magazine Cache (per-CPU)",
            PerCpuFront::Sequences => "magazine Cache (per-CPU, rseq)",
        }
    }

    fn label(self) -> &'static str {
        match self {
            PerCpuFront::Slots => "per-CPU",
            PerCpuFront::Sequences => "per-CPU, rseq",
        }
    }
}

/// New closed-pool caches for the per-CPU path: the slot protocol, and restartable
/// sequences where the platform has them.
fn per_cpu_caches() -> Vec<(PerCpuFront, Cache<FreeList>)> {
    let mut caches = vec![(
        PerCpuFront::Slots,
        common::per_cpu_on(closed_source(), false),
    )];
    let sequences = common::per_cpu_on(closed_source(), true);
    if sequences.runs_restartable_sequences() {
        caches.push((PerCpuFront::Sequences, sequences));
    }
    caches
}

/// Runs `run` on `cache` (new, over a closed pool) for a warm-up, then again with the
/// statistics counted, and prints the source's share of the counted operations.
fn slow_path_share(name: &str, cache: Cache<FreeList>, run: impl Fn(&Cache<FreeList>, u64)) {
    let total = if common::smoke_test() {
        1 << 16
    } else {
        1 << 22
    };
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
    targets = io_loop, io_loop_batched, pairs
}
criterion_main!(benches);
