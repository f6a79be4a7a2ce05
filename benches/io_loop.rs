//! The seed's pattern on real threads, and oversubscription.
//!
//! - `io_loop/S+C`: a closed pool of `POOL` items. `S` submitter threads allocate an item
//!   and pass it through a ring of `DEPTH` slots (the I/Os in flight) to `C` completer
//!   threads, which free it. Items completed per second: the per-CPU `Cache`, a
//!   `LocalCache` per thread, and, as the baseline, the pool kept in an `ArrayQueue`
//!   (submitters pop, completers push); the per-CPU `Cache` with restartable sequences
//!   too, where the platform has them; and the ring alone (made-up items, no pool): the
//!   ceiling of every row, since each item crosses the ring once and the pool once.
//! - `io_loop_spsc/S+C`: the same loop through a device's queues: each submitter has its
//!   own single-producer single-consumer ring, drained by its own completer, as NVMe queue
//!   pairs and io_uring's rings are. An entry costs a few plain loads and stores, so the
//!   pool's cost shows; the shared `ArrayQueue` ring of `io_loop` costs about one pool
//!   operation per item itself.
//! - `io_loop_batched/S+C`: the `ArrayQueue` ring with 16 I/Os per entry.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
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

/// The path from submitters to completers: entries of `B` items (the I/Os of one
/// submission). Threads `0..submitters` submit, the others complete.
trait Ring<const B: usize>: Sync {
    /// One thread's end of the ring.
    type End<'r>: RingEnd<B>
    where
        Self: 'r;

    /// The end that thread `thread` of the loop uses.
    fn end(&self, thread: usize, submitters: usize) -> Self::End<'_>;
}

/// Submits and completes entries; `Err` and `None` mean full and empty.
trait RingEnd<const B: usize> {
    fn submit(&mut self, entry: [u64; B]) -> Result<(), [u64; B]>;
    fn complete(&mut self) -> Option<[u64; B]>;
}

/// One ring shared by every thread: a bounded multi-producer multi-consumer queue.
impl<const B: usize> Ring<B> for ArrayQueue<[u64; B]> {
    type End<'r> = &'r Self;

    fn end(&self, _thread: usize, _submitters: usize) -> &Self {
        self
    }
}

impl<const B: usize> RingEnd<B> for &ArrayQueue<[u64; B]> {
    fn submit(&mut self, entry: [u64; B]) -> Result<(), [u64; B]> {
        self.push(entry)
    }
    fn complete(&mut self) -> Option<[u64; B]> {
        self.pop()
    }
}

/// A device's queues: each submitter has its own single-producer single-consumer ring,
/// drained by one completer (its interrupt), as NVMe submission/completion queue pairs and
/// io_uring's rings are. Each end keeps its own index and a copy of the other end's, and
/// reads the other end's index only when its copy says full (or empty), so that an entry
/// costs two plain stores and a load on the way, not a contended read-modify-write.
struct DeviceQueues<const B: usize> {
    queues: Vec<CachePadded<Spsc<B>>>,
}

/// One single-producer single-consumer ring.
struct Spsc<const B: usize> {
    entries: Box<[[AtomicU64; B]]>,
    /// Entries submitted; written only by the submitter, with `Release` after the entry.
    tail: CachePadded<AtomicUsize>,
    /// Entries completed; written only by the completer, with `Release` after the read.
    head: CachePadded<AtomicUsize>,
}

impl<const B: usize> DeviceQueues<B> {
    /// A queue per submitter, and as many completers.
    fn new(submitters: usize, completers: usize) -> Self {
        assert_eq!(submitters, completers, "a completer per submitter's queue");
        let ring = || Spsc {
            entries: (0..DEPTH.div_ceil(B))
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
        };
        DeviceQueues {
            queues: (0..submitters).map(|_| CachePadded::new(ring())).collect(),
        }
    }
}

/// One end of an [`Spsc`] ring: `own` is this end's index, `seen` its copy of the other's.
struct SpscEnd<'r, const B: usize> {
    ring: &'r Spsc<B>,
    own: usize,
    seen: usize,
}

impl<const B: usize> Ring<B> for DeviceQueues<B> {
    type End<'r> = SpscEnd<'r, B>;

    fn end(&self, thread: usize, submitters: usize) -> SpscEnd<'_, B> {
        assert_eq!(submitters, self.queues.len(), "a queue per submitter");
        let ring = &self.queues[thread % submitters];
        let (own, seen) = if thread < submitters {
            (&ring.tail, &ring.head)
        } else {
            (&ring.head, &ring.tail)
        };
        SpscEnd {
            ring,
            own: own.load(Ordering::Relaxed),
            seen: seen.load(Ordering::Acquire),
        }
    }
}

impl<const B: usize> RingEnd<B> for SpscEnd<'_, B> {
    fn submit(&mut self, entry: [u64; B]) -> Result<(), [u64; B]> {
        let capacity = self.ring.entries.len();
        if self.own - self.seen == capacity {
            self.seen = self.ring.head.load(Ordering::Acquire);
            if self.own - self.seen == capacity {
                return Err(entry);
            }
        }
        let slots = &self.ring.entries[self.own % capacity];
        for (slot, item) in slots.iter().zip(entry) {
            slot.store(item, Ordering::Relaxed);
        }
        self.own += 1;
        self.ring.tail.store(self.own, Ordering::Release);
        Ok(())
    }

    fn complete(&mut self) -> Option<[u64; B]> {
        if self.own == self.seen {
            self.seen = self.ring.tail.load(Ordering::Acquire);
            if self.own == self.seen {
                return None;
            }
        }
        let slots = &self.ring.entries[self.own % self.ring.entries.len()];
        let entry = std::array::from_fn(|i| slots[i].load(Ordering::Relaxed));
        self.own += 1;
        self.ring.head.store(self.own, Ordering::Release);
        Some(entry)
    }
}

/// Moves `total` items from `submitters` to `completers` through `ring`, `B` items per
/// entry: a submitter allocates `B` items and submits them at once; a completer frees a
/// whole entry (an interrupt completing a batch). Each thread gets its front end of the
/// pool from `pool`. Returns the timed duration.
fn run_io<const B: usize, R: Ring<B>, P: Pool>(
    ring: &R,
    submitters: usize,
    completers: usize,
    total: u64,
    pool: impl Fn() -> P + Sync,
) -> std::time::Duration {
    let threads = submitters + completers;
    let entries = total / B as u64;
    let share_of = |index: usize, of: usize| {
        entries / of as u64 + u64::from((index as u64) < entries % of as u64)
    };
    common::run_timed(threads, |i, barrier| {
        let mut front = pool();
        let mut end = ring.end(i, submitters);
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
                    while let Err(back) = end.submit(black_box(entry)) {
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
                    match end.complete() {
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

/// One I/O-loop group: every pool behind the rings that `ring(submitters, completers)`
/// makes (a new one per sample, so that no sample starts with another's entries in
/// flight), `B` items per entry; with `shares`, the source's share of the operations of
/// each cache afterwards.
fn io_loop_group<const B: usize, R: Ring<B>>(
    c: &mut Criterion,
    name: &str,
    ring: impl Fn(usize, usize) -> R,
    shares: bool,
) {
    for threads in [(1, 1), (2, 2)] {
        let (submitters, completers) = threads;
        let group_name = format!("{name}/{submitters}+{completers}");
        let mut group = c.benchmark_group(&group_name);
        group.throughput(Throughput::Elements(BATCH));
        let ring = &ring;
        for (front, cache) in per_cpu_caches() {
            bench_pool(&mut group, front.bench_id(), ring, threads, || {
                PerCpu(&cache)
            });
        }
        let cache = Cache::new(closed_source());
        let handles = Handles::new(&cache, submitters + completers);
        bench_pool(&mut group, "magazine LocalCache", ring, threads, || {
            handles.lend()
        });
        drop(handles);
        let queue = ArrayQueue::new(POOL as usize);
        (0..POOL).for_each(|item| queue.push(item).unwrap());
        bench_pool(&mut group, "crossbeam ArrayQueue", ring, threads, || &queue);
        // The ceiling of every contender: the ring alone, moving made-up items.
        bench_pool(
            &mut group,
            "reference: the ring alone",
            ring,
            threads,
            || Endless(0),
        );
        group.finish();

        if !shares {
            continue;
        }
        for (front, cache) in per_cpu_caches() {
            slow_path_share(
                &format!("{group_name} {}", front.label()),
                cache,
                |cache, total| {
                    run_on_new_ring(ring, threads, total, || PerCpu(cache));
                },
            );
        }
        slow_path_share(
            &format!("{group_name} LocalCache"),
            Cache::new(closed_source()),
            |cache, total| {
                let handles = Handles::new(cache, submitters + completers);
                run_on_new_ring(ring, threads, total, || handles.lend());
            },
        );
    }
}

/// [`run_io`] on a new ring from `ring`.
fn run_on_new_ring<const B: usize, R: Ring<B>, P: Pool>(
    ring: &impl Fn(usize, usize) -> R,
    (submitters, completers): (usize, usize),
    total: u64,
    pool: impl Fn() -> P + Sync,
) -> std::time::Duration {
    run_io(
        &ring(submitters, completers),
        submitters,
        completers,
        total,
        pool,
    )
}

/// One row of an I/O-loop group: `pool` behind a new ring per sample.
fn bench_pool<const B: usize, R: Ring<B>, P: Pool>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    ring: &impl Fn(usize, usize) -> R,
    threads: (usize, usize),
    pool: impl Fn() -> P + Sync,
) {
    group.bench_function(BenchmarkId::from_parameter(id), |b| {
        b.iter_custom(|iters| run_on_new_ring(ring, threads, iters * BATCH, &pool))
    });
}

fn io_loop(c: &mut Criterion) {
    io_loop_group::<1, _>(c, "io_loop", |_, _| ArrayQueue::new(DEPTH), true);
}

/// I/Os per ring entry in `io_loop_batched`.
const RING_BATCH: usize = 16;

/// The same loop with completions in batches of [`RING_BATCH`], so that the ring costs
/// 1/16 as much per item and the pool, not the ring, sets the pace.
fn io_loop_batched(c: &mut Criterion) {
    io_loop_group::<RING_BATCH, _>(
        c,
        "io_loop_batched",
        |_, _| ArrayQueue::new(DEPTH.div_ceil(RING_BATCH)),
        false,
    );
}

/// The same loop through a device's queues ([`DeviceQueues`]), one I/O per entry.
fn io_loop_spsc(c: &mut Criterion) {
    io_loop_group::<1, _>(c, "io_loop_spsc", DeviceQueues::new, true);
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
    let allocs = after.source_allocs - before.source_allocs;
    let frees = after.source_frees - before.source_frees;
    let source = allocs + frees;
    eprintln!(
        "    {name}: {source} source operations in {ops} ({:.4}%: {allocs} allocations, {frees} items freed); busy misses {}, steals/exhaustions {}",
        100.0 * source as f64 / ops as f64,
        after.busy_misses - before.busy_misses,
        after.exhaustion_flushes - before.exhaustion_flushes,
    );
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 2000, 20);
    targets = io_loop, io_loop_spsc, io_loop_batched, pairs
}
criterion_main!(benches);
