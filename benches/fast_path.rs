//! One alloc+free pair on one thread, served from a warm cache: the crate's two front
//! ends against what a user would write instead.
//!
//! Every routine allocates one item, passes it through `black_box`, and frees it, so each
//! measures a hit on both operations. The owned `Vec` pop+push is the floor: no sharing,
//! no atomics, no lookup. Besides the queues, two object pools a user might pick instead:
//! `lockfree-object-pool`'s `LinearObjectPool` (a pull and the drop of its handle) and
//! `sharded-slab`'s `Pool` (a `create_with` and a `clear` of its key, on the thread that
//! created it).

mod common;

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use criterion::{criterion_group, criterion_main, Criterion};
use crossbeam_queue::{ArrayQueue, SegQueue};
use lockfree_object_pool::LinearObjectPool;

/// Items each pool starts with: enough that neither operation ever misses.
const WARM: u64 = 64;

fn fast_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("fast_path");

    let mut owned: Vec<u64> = (0..WARM).collect();
    group.bench_function("vec_owned (floor)", |b| {
        b.iter(|| {
            let pool = black_box(&mut owned);
            let item = pool.pop().unwrap();
            pool.push(black_box(item));
        })
    });

    let cache = common::cache();
    {
        let mut local = cache.local();
        warm_local(&mut local);
        group.bench_function("magazine LocalCache", |b| {
            b.iter(|| {
                let local = black_box(&mut local);
                let item = local.alloc().unwrap();
                local.free(black_box(item));
            })
        });
    }

    // The slot protocol (restartable sequences off).
    let cache = common::per_cpu_on(common::FreeList::fresh(), false);
    warm_per_cpu(&cache);
    group.bench_function("magazine Cache (per-CPU)", |b| {
        b.iter(|| {
            let cache = black_box(&cache);
            let item = cache.alloc().unwrap();
            cache.free(black_box(item));
        })
    });
    // The same without the CPU lookup: the cost of the slot protocol alone.
    group.bench_function("magazine Cache alloc_on/free_on(0)", |b| {
        b.iter(|| {
            let cache = black_box(&cache);
            let item = cache.alloc_on(0).unwrap();
            cache.free_on(0, black_box(item));
        })
    });
    // Restartable sequences (`Options::restartable_sequences`, the default), where the
    // platform has them.
    let cache = common::per_cpu_on(common::FreeList::fresh(), true);
    if cache.runs_restartable_sequences() {
        warm_per_cpu(&cache);
        group.bench_function("magazine Cache (per-CPU, rseq)", |b| {
            b.iter(|| {
                let cache = black_box(&cache);
                let item = cache.alloc().unwrap();
                cache.free(black_box(item));
            })
        });
    }

    thread_local! {
        static POOL: RefCell<Vec<u64>> = RefCell::new((0..WARM).collect());
    }
    group.bench_function("thread_local RefCell<Vec>", |b| {
        b.iter(|| {
            let item = POOL.with(|pool| pool.borrow_mut().pop()).unwrap();
            POOL.with(|pool| pool.borrow_mut().push(black_box(item)));
        })
    });

    let locked = Mutex::new((0..WARM).collect::<Vec<u64>>());
    group.bench_function("Mutex<Vec>", |b| {
        b.iter(|| {
            let locked = black_box(&locked);
            let item = locked.lock().unwrap().pop().unwrap();
            locked.lock().unwrap().push(black_box(item));
        })
    });

    let array = ArrayQueue::new(1024);
    (0..WARM).for_each(|i| array.push(i).unwrap());
    group.bench_function("crossbeam ArrayQueue", |b| {
        b.iter(|| {
            let array = black_box(&array);
            let item = array.pop().unwrap();
            array.push(black_box(item)).unwrap();
        })
    });

    let seg = SegQueue::new();
    (0..WARM).for_each(|i| seg.push(i));
    group.bench_function("crossbeam SegQueue", |b| {
        b.iter(|| {
            let seg = black_box(&seg);
            let item = seg.pop().unwrap();
            seg.push(black_box(item));
        })
    });

    let linear = LinearObjectPool::<u64>::new(|| 0, |item| *item = 0);
    drop(linear.pull()); // warm: the object exists, a pull reuses it
    group.bench_function("lockfree-object-pool LinearObjectPool", |b| {
        b.iter(|| {
            let item = black_box(&linear).pull();
            black_box(&*item);
            drop(item);
        })
    });

    let slab = sharded_slab::Pool::<Option<u64>>::new();
    let warm = slab.create_with(|item| *item = Some(0)).unwrap();
    slab.clear(warm);
    group.bench_function("sharded-slab Pool", |b| {
        b.iter(|| {
            let slab = black_box(&slab);
            let key = slab.create_with(|item| *item = Some(1)).unwrap();
            slab.clear(black_box(key));
        })
    });

    // What the per-CPU pair cannot avoid: taking and giving back a slot twice (the
    // protocol of `src/slot.rs`, uncontended), and looking up the CPU twice.
    let owned = AtomicBool::new(false);
    group.bench_function(
        "reference: 2x slot take+give back (CAS + Release store)",
        |b| {
            b.iter(|| {
                for _ in 0..2 {
                    let owned = black_box(&owned);
                    let taken =
                        owned.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed);
                    black_box(taken.is_ok());
                    owned.store(false, Ordering::Release);
                }
            })
        },
    );
    // The floor for a structure found at each operation, as a per-CPU one must find its
    // CPU's slot: the owned `Vec`'s pair, the `Vec` picked from a slice by an index the
    // compiler cannot see (`black_box`) before the pop and again before the push.
    let mut indexed: Vec<Vec<u64>> = vec![(0..WARM).collect()];
    group.bench_function(
        "reference: owned Vec found by an index at each operation",
        |b| {
            b.iter(|| {
                let pools = black_box(&mut indexed);
                let item = pools[black_box(0)].pop().unwrap();
                pools[black_box(0)].push(black_box(item));
            })
        },
    );
    group.bench_function("reference: 2x magazine::cpu::current()", |b| {
        b.iter(|| {
            black_box(magazine::cpu::current());
            black_box(magazine::cpu::current());
        })
    });

    group.finish();
}

/// Fills the handle's loaded magazine part way, so that both alloc and free hit it.
fn warm_local<S: magazine::Source>(local: &mut magazine::LocalCache<'_, S>) {
    let items: Vec<_> = (0..WARM).map(|_| local.alloc().unwrap()).collect();
    items.into_iter().for_each(|item| local.free(item));
}

/// The same for every CPU slot (the benchmark thread may migrate).
fn warm_per_cpu<S: magazine::Source>(cache: &magazine::Cache<S>) {
    for cpu in 0..cache.config().cpus {
        let items: Vec<_> = (0..WARM).map(|_| cache.alloc_on(cpu).unwrap()).collect();
        items.into_iter().for_each(|item| cache.free_on(cpu, item));
    }
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 1500, 50);
    targets = fast_path
}
criterion_main!(benches);
