//! Handoff: producer threads free items, consumer threads allocate what the producers
//! freed. Items per second, 1 -> 1 and 2 -> 2, 4 -> 4 (4 and 8 threads, oversubscribed on
//! a 2-core machine).
//!
//! Every contender starts empty and moves `iters x BATCH` distinct items per sample; a
//! consumer that finds nothing yields and retries. For the cache, "nothing" is an
//! exhausted source: its `alloc` returns `None` after the cache's flush-and-retry, which
//! also collects what a producer left in its CPU slot. Threads are created and set up
//! before a barrier; only the work after it is timed (see `common::run_timed`).
//!
//! The object pools (`lockfree-object-pool`'s `LinearObjectPool`, `sharded-slab`'s
//! `Pool`) take back only objects they handed out and never run dry (a pull from an empty
//! pool makes a new object), so their rows differ (see [`run_pool`]): a producer pulls its
//! objects before the clock starts and gives them back timed, a consumer pulls as many
//! timed and never waits. So these rows time what the pool costs the two sides, not a
//! hand-off: `sharded-slab` returns an object to the shard of the thread that created it,
//! so the consumers' pulls never see the producers' objects.

mod common;

use std::hint::black_box;
use std::sync::Mutex;
use std::thread;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::{ArrayQueue, SegQueue};
use lockfree_object_pool::{LinearObjectPool, LinearReusable};
use magazine::Cache;

use common::FreeList;

/// Items moved per criterion iteration.
const BATCH: u64 = 4096;

/// One way of handing items from producers to consumers.
trait Channel: Sync {
    fn put(&self, item: u64);
    fn take(&self) -> Option<u64>;
}

impl Channel for Mutex<Vec<u64>> {
    fn put(&self, item: u64) {
        self.lock().unwrap().push(item);
    }
    fn take(&self) -> Option<u64> {
        self.lock().unwrap().pop()
    }
}

impl Channel for SegQueue<u64> {
    fn put(&self, item: u64) {
        self.push(item);
    }
    fn take(&self) -> Option<u64> {
        self.pop()
    }
}

/// Bounded: a full queue makes the producer yield.
impl Channel for ArrayQueue<u64> {
    fn put(&self, mut item: u64) {
        while let Err(back) = self.push(item) {
            item = back;
            thread::yield_now();
        }
    }
    fn take(&self) -> Option<u64> {
        self.pop()
    }
}

/// The per-CPU front end: each thread uses the slot of the CPU it runs on.
impl Channel for Cache<FreeList> {
    fn put(&self, item: u64) {
        self.free(item);
    }
    fn take(&self) -> Option<u64> {
        self.alloc()
    }
}

/// An object pool as a user would put it in place of the cache: objects are pulled and
/// given back through the handles it hands out.
trait ObjectPool: Sync {
    type Handle<'p>
    where
        Self: 'p;
    fn pull(&self) -> Self::Handle<'_>;
    fn give_back<'p>(&'p self, handle: Self::Handle<'p>);
}

/// Dropping the handle returns the object.
impl ObjectPool for LinearObjectPool<u64> {
    type Handle<'p> = LinearReusable<'p, u64>;
    fn pull(&self) -> LinearReusable<'_, u64> {
        LinearObjectPool::pull(self)
    }
    fn give_back<'p>(&'p self, handle: LinearReusable<'p, u64>) {
        drop(handle);
    }
}

/// The handle is the slot's key.
impl ObjectPool for sharded_slab::Pool<Option<u64>> {
    type Handle<'p> = usize;
    fn pull(&self) -> usize {
        self.create_with(|item| *item = Some(1))
            .expect("the slab has room")
    }
    fn give_back(&self, key: usize) {
        assert!(self.clear(key), "a key the pool handed out");
    }
}

/// Objects a pool row moves per timed run (split among the producers), the unit the other
/// rows count in: at most twice as many objects are out at once. That bound matters:
/// `LinearObjectPool` scans its pages of 32 objects from the first for a free one, so each
/// pull costs more with every object out, and that cost is part of its rows.
const POOL_CHUNK: u64 = BATCH;

/// Times `total` items through `pool` in runs of [`POOL_CHUNK`]: in each, a producer pulls
/// its share before the barrier and gives it back timed, a consumer pulls its share timed
/// and gives it back after its clock stopped. Returns the sum of the runs' times.
fn run_pool<P: ObjectPool>(pool: &P, threads: usize, total: u64) -> std::time::Duration {
    let pairs = threads / 2;
    let mut elapsed = std::time::Duration::ZERO;
    let mut left = total;
    while left > 0 {
        let chunk = left.min(POOL_CHUNK);
        left -= chunk;
        elapsed += common::run_timed(threads, |i, barrier| {
            let (role, index) = (i % 2, i / 2);
            let items = share(index, pairs, chunk);
            let count = items.end - items.start;
            if role == 0 {
                let held: Vec<_> = (0..count).map(|_| pool.pull()).collect();
                common::timed(barrier, || {
                    held.into_iter()
                        .for_each(|handle| pool.give_back(black_box(handle)))
                })
            } else {
                let mut got = Vec::with_capacity(count as usize);
                let span = common::timed(barrier, || {
                    (0..count).for_each(|_| got.push(black_box(pool.pull())))
                });
                got.into_iter().for_each(|handle| pool.give_back(handle));
                span
            }
        });
    }
    elapsed
}

/// Items of producer `p` of `producers` when `total` items move.
fn share(p: usize, producers: usize, total: u64) -> std::ops::Range<u64> {
    let each = total / producers as u64;
    p as u64 * each..(p as u64 + 1) * each
}

/// Consumes `count` items through `take`, yielding whenever it finds nothing.
fn consume(count: u64, mut take: impl FnMut() -> Option<u64>) {
    let mut got = 0;
    while got < count {
        match take() {
            Some(item) => {
                black_box(item);
                got += 1;
            }
            None => thread::yield_now(),
        }
    }
}

/// Times one sample of `threads` threads (even indices produce, odd ones consume).
fn run_channel<C: Channel>(channel: &C, threads: usize, total: u64) -> std::time::Duration {
    let pairs = threads / 2;
    common::run_timed(threads, |i, barrier| {
        let (role, index) = (i % 2, i / 2);
        let items = share(index, pairs, total);
        if role == 0 {
            common::timed(barrier, || {
                items.for_each(|item| channel.put(black_box(item)))
            })
        } else {
            common::timed(barrier, || {
                consume(items.end - items.start, || channel.take())
            })
        }
    })
}

/// The same with a `LocalCache` handle per thread. A producer drops its handle when done,
/// which gives its partly filled magazines to the depot for the consumers.
fn run_local(cache: &Cache<FreeList>, threads: usize, total: u64) -> std::time::Duration {
    let pairs = threads / 2;
    common::run_timed(threads, |i, barrier| {
        let (role, index) = (i % 2, i / 2);
        let items = share(index, pairs, total);
        let mut local = cache.local();
        if role == 0 {
            common::timed(barrier, move || {
                items.for_each(|item| local.free(black_box(item)));
                drop(local);
            })
        } else {
            common::timed(barrier, || {
                consume(items.end - items.start, || local.alloc());
            })
        }
    })
}

fn handoff(c: &mut Criterion) {
    for threads in [2, 4, 8] {
        let pairs = threads / 2;
        let mut group = c.benchmark_group(format!("handoff/{pairs}->{pairs}"));
        group.throughput(Throughput::Elements(BATCH));

        let cache = Cache::new(FreeList::empty());
        group.bench_function(BenchmarkId::from_parameter("magazine LocalCache"), |b| {
            b.iter_custom(|iters| run_local(&cache, threads, iters * BATCH))
        });
        report_leftovers(&cache);

        // The slot protocol (restartable sequences off).
        let cache = common::per_cpu_on(FreeList::empty(), false);
        group.bench_function(
            BenchmarkId::from_parameter("magazine Cache (per-CPU)"),
            |b| b.iter_custom(|iters| run_channel(&cache, threads, iters * BATCH)),
        );
        report_leftovers(&cache);

        // Restartable sequences (`Options::restartable_sequences`, the default), where
        // available.
        let cache = common::per_cpu_on(FreeList::empty(), true);
        if cache.runs_restartable_sequences() {
            group.bench_function(
                BenchmarkId::from_parameter("magazine Cache (per-CPU, rseq)"),
                |b| b.iter_custom(|iters| run_channel(&cache, threads, iters * BATCH)),
            );
            report_leftovers(&cache);
        }

        let array = ArrayQueue::new(4096);
        group.bench_function(BenchmarkId::from_parameter("crossbeam ArrayQueue"), |b| {
            b.iter_custom(|iters| run_channel(&array, threads, iters * BATCH))
        });

        let seg = SegQueue::new();
        group.bench_function(BenchmarkId::from_parameter("crossbeam SegQueue"), |b| {
            b.iter_custom(|iters| run_channel(&seg, threads, iters * BATCH))
        });

        let locked = Mutex::new(Vec::new());
        group.bench_function(BenchmarkId::from_parameter("Mutex<Vec>"), |b| {
            b.iter_custom(|iters| run_channel(&locked, threads, iters * BATCH))
        });

        let linear = LinearObjectPool::<u64>::new(|| 0, |item| *item = 0);
        group.bench_function(
            BenchmarkId::from_parameter("lockfree-object-pool LinearObjectPool"),
            |b| b.iter_custom(|iters| run_pool(&linear, threads, iters * BATCH)),
        );

        let slab = sharded_slab::Pool::<Option<u64>>::new();
        group.bench_function(BenchmarkId::from_parameter("sharded-slab Pool"), |b| {
            b.iter_custom(|iters| run_pool(&slab, threads, iters * BATCH))
        });

        group.finish();
    }
}

/// Every item a producer freed was consumed: the cache must hold nothing at the end.
fn report_leftovers(cache: &Cache<FreeList>) {
    let stats = cache.stats();
    assert_eq!(cache.cached(), 0, "a handoff left items behind: {stats:?}");
    if stats.alloc_hits == 0 {
        return; // filtered out
    }
    eprintln!("    stats: {stats}");
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 2000, 20);
    targets = handoff
}
criterion_main!(benches);
