//! The depot, measured through the public API (its internals are private).
//!
//! - `depot/exchange`: one thread moves items from one `LocalCache` handle to another: the
//!   first frees, the second allocates, so every `magazine_size` items the first gives a
//!   full magazine to the depot (taking an empty one) and the second takes it (giving an
//!   empty one back). One iteration moves one item; the same pair of operations on a
//!   single handle (`hits only`) is the part that is not the depot. Per-CPU slots doing
//!   the same (`free_on(0)` / `alloc_on(1)`) are shown for comparison.
//! - `depot/threads`: 1, 2 and 4 threads doing the `exchange` pattern at once on one
//!   cache (magazine size 127), items per second.
//! - `depot/trim_cycle`: grow the depot by 32 full magazines, then call `trim` until it is
//!   back at its target: `WorkingSet` vs `OnePerTick`.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use magazine::{Cache, Config, LocalCache, Source, Trim};

use common::{Forgetful, FreeList};

/// Items moved per iteration in the threaded benches.
const BATCH: u64 = 4096;

/// Moves one item from `from` to `to` through the depot (when `from` spills / `to` refills).
#[inline]
fn move_one<S: Source<Item = u64>>(to: &mut LocalCache<'_, S>, from: &mut LocalCache<'_, S>) {
    let item = to.alloc().unwrap();
    from.free(black_box(item));
}

fn exchange(c: &mut Criterion) {
    let mut group = c.benchmark_group("depot/exchange");
    group.throughput(Throughput::Elements(1));
    for magazine_size in [1, 16, 127] {
        let cache = Cache::with_config(FreeList::fresh(), common::config(magazine_size));
        let (mut giver, mut taker) = (cache.local(), cache.local());
        group.bench_function(BenchmarkId::new("hits only", magazine_size), |b| {
            b.iter(|| {
                let item = giver.alloc().unwrap();
                giver.free(black_box(item));
            })
        });
        // Warm: the taker allocates from the source until items circulate.
        for _ in 0..4 * magazine_size {
            move_one(&mut taker, &mut giver);
        }
        let before = cache.stats();
        group.bench_function(
            BenchmarkId::new("LocalCache -> depot -> LocalCache", magazine_size),
            |b| b.iter(|| move_one(&mut taker, &mut giver)),
        );
        drop((giver, taker));
        report(&cache, &before, magazine_size);

        if magazine_size == 127 {
            let cache = Cache::with_config(FreeList::fresh(), common::config(magazine_size));
            for _ in 0..4 * magazine_size {
                let item = cache.alloc_on(1).unwrap();
                cache.free_on(0, item);
            }
            let before = cache.stats();
            group.bench_function(
                BenchmarkId::new("slot 0 -> depot -> slot 1", magazine_size),
                |b| {
                    b.iter(|| {
                        let cache = black_box(&cache);
                        let item = cache.alloc_on(1).unwrap();
                        cache.free_on(0, black_box(item));
                    })
                },
            );
            report(&cache, &before, magazine_size);
        }
    }

    // What a per-push node costs, per exchange (two pushes: the full magazine and the
    // empty one): a 32-byte node allocated, and freed through the epoch after the pop. The
    // depot stack no longer pays it where magazines are their own nodes (src/stack.rs),
    // only in its fallback; kept as the reference for that saving. The pin is paid by
    // every pop anyway, so it is timed alone too.
    group.throughput(Throughput::Elements(1));
    group.bench_function("reference: 2x epoch pin (per exchange)", |b| {
        b.iter(|| {
            for _ in 0..2 {
                black_box(crossbeam_epoch::pin());
            }
        })
    });
    group.bench_function(
        "reference: 2x (node alloc + epoch-deferred free), pinned",
        |b| {
            b.iter(|| {
                for _ in 0..2 {
                    let guard = crossbeam_epoch::pin();
                    let node = Box::into_raw(Box::new(black_box([0usize; 4])));
                    // SAFETY: `node` is ours alone (never shared), freed exactly once, here.
                    unsafe { guard.defer_unchecked(move || drop(Box::from_raw(node))) };
                }
            })
        },
    );
    group.finish();
}

/// Prints how many depot exchanges and source calls the timed runs made per item, once.
fn report<S: Source>(cache: &Cache<S>, before: &magazine::Stats, magazine_size: usize) {
    let after = cache.stats();
    let moved = after.alloc_hits - before.alloc_hits + after.depot_pops - before.depot_pops;
    if after.depot_pops == before.depot_pops {
        return; // filtered out
    }
    eprintln!(
        "    magazine size {magazine_size}: {} full magazines popped and {} pushed for ~{moved} items; {} source allocs",
        after.depot_pops - before.depot_pops,
        after.depot_pushes - before.depot_pushes,
        after.source_allocs - before.source_allocs,
    );
}

fn threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("depot/threads");
    group.throughput(Throughput::Elements(BATCH));
    for threads in [1, 2, 4] {
        let cache = Cache::with_config(FreeList::fresh(), common::config(127));
        group.bench_function(BenchmarkId::from_parameter(threads), |b| {
            b.iter_custom(|iters| {
                let each = iters * BATCH / threads as u64;
                common::run_timed(threads, |_, barrier| {
                    let (mut giver, mut taker) = (cache.local(), cache.local());
                    for _ in 0..4 * 127 {
                        move_one(&mut taker, &mut giver);
                    }
                    common::timed(barrier, || {
                        for _ in 0..each {
                            move_one(&mut taker, &mut giver);
                        }
                    })
                })
            })
        });
    }
    group.finish();
}

/// Magazines the depot grows by in one trim cycle.
const GROWTH: usize = 32;
/// The trim target of both policies.
const TARGET: usize = 2;

fn trim_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("depot/trim_cycle");
    group.throughput(Throughput::Elements((GROWTH * 127) as u64));
    for (name, trim) in [
        ("WorkingSet", Trim::WorkingSet),
        ("OnePerTick", Trim::OnePerTick),
    ] {
        let config = Config {
            magazine_size: 127,
            depot: common::dynamic(TARGET, trim),
            ..Config::default()
        };
        let cache = Cache::with_config(Forgetful::default(), config);
        let mut trims = 0;
        let mut cycles = 0;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                trims += grow_then_trim(&cache);
                cycles += 1;
            })
        });
        if cycles == 0 {
            continue; // filtered out
        }
        eprintln!(
            "    {name}: {:.1} trim calls per cycle to go from {} back to {TARGET} full magazines",
            trims as f64 / cycles as f64,
            GROWTH + TARGET,
        );
    }
    group.finish();
}

/// Frees `GROWTH` magazines' worth of new items (the depot grows by `GROWTH` full
/// magazines), then trims until the depot is back at its target; returns the trim calls.
fn grow_then_trim(cache: &Cache<Forgetful>) -> usize {
    {
        let mut local = cache.local();
        for item in 0..(GROWTH * 127) as u64 {
            local.free(black_box(item));
        }
    }
    let mut trims = 0;
    while cache.stats().depot_full > TARGET {
        cache.trim();
        trims += 1;
    }
    trims
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 1500, 30);
    targets = exchange, threads, trim_cycle
}
criterion_main!(benches);
