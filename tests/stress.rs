//! Conservation under load: threads that only allocate hand their items over channels to
//! threads that only free them (the seed problem's imbalance), while another thread trims.
//! The tracking source panics on a duplicated or foreign id; after the cache is dropped it
//! must hold exactly the ids it started with ([invariant 1](magazine::docs::design#invariant-1-conservation)).
//!
//! `MAGAZINE_STRESS_OPS` sets the allocations per test (default 10^6, 500 under Miri; CI's
//! valgrind and sanitizer runs use smaller numbers).

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use common::Tracking;
use magazine::{Cache, Config, DepotPolicy, Trim};

fn ops() -> usize {
    std::env::var("MAGAZINE_STRESS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        // Miri runs about 10^5 times slower: a few hundred still move magazines through
        // the depot, trim and the source on every test.
        .unwrap_or(if cfg!(miri) { 500 } else { 1_000_000 })
}

#[derive(Clone, Copy)]
enum Front {
    PerCpu,
    Local,
}

fn imbalanced(config: Config, producers: usize, consumers: usize, front: Front) {
    let source = Arc::new(Tracking::new(4096));
    let cache = Cache::with_config(Arc::clone(&source), config);
    let per_producer = ops() / producers;
    let (tx, rx) = mpsc::sync_channel::<Vec<u32>>(16);
    let rx = Mutex::new(rx);
    let done = AtomicBool::new(false);

    thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                cache.trim();
                thread::yield_now();
            }
        });
        let consumer_threads: Vec<_> = (0..consumers)
            .map(|_| {
                s.spawn(|| {
                    let mut local = matches!(front, Front::Local).then(|| cache.local());
                    loop {
                        let batch = rx.lock().unwrap().recv();
                        let Ok(batch) = batch else { break };
                        for id in batch {
                            match &mut local {
                                Some(local) => local.free(id),
                                None => cache.free(id),
                            }
                        }
                    }
                })
            })
            .collect();
        let producer_threads: Vec<_> = (0..producers)
            .map(|_| {
                let tx = tx.clone();
                let cache = &cache;
                s.spawn(move || {
                    let mut local = matches!(front, Front::Local).then(|| cache.local());
                    let mut batch = Vec::with_capacity(32);
                    for _ in 0..per_producer {
                        let mut misses = 0u64;
                        let id = loop {
                            let id = match &mut local {
                                Some(local) => local.alloc(),
                                None => cache.alloc(),
                            };
                            if let Some(id) = id {
                                break id;
                            }
                            // Every id is in flight: wait for a consumer to free some.
                            misses += 1;
                            assert!(misses < 10_000_000, "the source never got its ids back");
                            thread::yield_now();
                        };
                        batch.push(id);
                        if batch.len() == 32 {
                            tx.send(std::mem::take(&mut batch)).unwrap();
                        }
                    }
                    tx.send(batch).unwrap();
                })
            })
            .collect();
        drop(tx);
        for t in producer_threads.into_iter().chain(consumer_threads) {
            t.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });

    let stats = cache.stats();
    let total = (per_producer * producers) as u64;
    assert!(
        stats.alloc_hits + stats.source_allocs >= total / 2,
        "allocations must be served: {stats:?}"
    );
    drop(cache);
    source.assert_all_home();
}

fn small(magazine_size: usize, cpus: usize, depot: DepotPolicy) -> Config {
    Config {
        magazine_size,
        cpus,
        depot,
    }
}

#[test]
fn per_cpu_working_set_three_producers_one_consumer() {
    let depot = DepotPolicy::Dynamic {
        target: 2,
        trim: Trim::WorkingSet,
    };
    imbalanced(small(8, 2, depot), 3, 1, Front::PerCpu);
}

#[test]
fn per_cpu_one_per_tick_two_and_two() {
    let depot = DepotPolicy::Dynamic {
        target: 1,
        trim: Trim::OnePerTick,
    };
    imbalanced(small(4, 2, depot), 2, 2, Front::PerCpu);
}

#[test]
fn per_cpu_fixed_overflow_four_and_four() {
    imbalanced(
        small(3, 3, DepotPolicy::Fixed { max_full: 2 }),
        4,
        4,
        Front::PerCpu,
    );
}

#[test]
fn local_handles_working_set_one_producer_one_consumer() {
    let depot = DepotPolicy::Dynamic {
        target: 0,
        trim: Trim::WorkingSet,
    };
    imbalanced(small(16, 1, depot), 1, 1, Front::Local);
}

#[test]
fn local_handles_fixed_two_and_two() {
    imbalanced(
        small(5, 2, DepotPolicy::Fixed { max_full: 1 }),
        2,
        2,
        Front::Local,
    );
}

/// The soak: `MAGAZINE_SOAK_OPS` operations (default 10^8) on a 2-slot cache by 10
/// workers (oversubscribed on a 2-core machine), each doing an equal share: 4 producers
/// hand items to 2 consumers over a channel (the seed's imbalance; an item counts twice,
/// its alloc and its free), 4 threads do alloc/free pairs holding up to 16 items at a time
/// (so that every few pairs a magazine moves). Half of each kind use the per-CPU path and
/// half `LocalCache` handles; a trimmer and a flusher (`flush_cpu`, `try_flush`) race with
/// all of them. The tracking source panics on a duplicated or foreign id, and every id must
/// be home at the end. Run with `cargo test --release --test stress -- --ignored soak`.
#[test]
#[ignore = "long: 10^8 operations; run it with --ignored in release mode"]
fn soak() {
    let target: u64 = std::env::var("MAGAZINE_SOAK_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    const WORKERS: u64 = 8;
    let share = target.div_ceil(WORKERS);
    let source = Arc::new(Tracking::new(8192));
    let depot = DepotPolicy::Dynamic {
        target: 1,
        trim: Trim::WorkingSet,
    };
    let cache = Cache::with_config(Arc::clone(&source), small(8, 2, depot));
    let done = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<Vec<u32>>(64);
    let rx = Mutex::new(rx);
    let start = std::time::Instant::now();

    let ops: u64 = thread::scope(|s| {
        // The racers: trim and flushes, until the workers are done.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                cache.trim();
                thread::yield_now();
            }
        });
        s.spawn(|| {
            let mut round = 0usize;
            while !done.load(Ordering::Relaxed) {
                round += 1;
                if round % 64 == 0 {
                    cache.try_flush();
                } else {
                    cache.flush_cpu(round);
                }
                thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let consumers: Vec<_> = (0..2)
            .map(|c| {
                let (cache, rx) = (&cache, &rx);
                s.spawn(move || {
                    let mut local = (c == 1).then(|| cache.local());
                    let mut freed = 0u64;
                    loop {
                        let batch = rx.lock().unwrap().recv();
                        let Ok(batch) = batch else { break freed };
                        freed += batch.len() as u64;
                        for id in batch {
                            match &mut local {
                                Some(local) => local.free(id),
                                None => cache.free(id),
                            }
                        }
                    }
                })
            })
            .collect();
        let mut workers = Vec::new();
        for p in 0..4 {
            let tx = tx.clone();
            let cache = &cache;
            workers.push(s.spawn(move || {
                let mut local = (p % 2 == 1).then(|| cache.local());
                let mut batch = Vec::with_capacity(32);
                let items = share / 2;
                for _ in 0..items {
                    let id = alloc_waiting(|| match &mut local {
                        Some(local) => local.alloc(),
                        None => cache.alloc(),
                    });
                    batch.push(id);
                    if batch.len() == 32 {
                        tx.send(std::mem::take(&mut batch)).unwrap();
                    }
                }
                tx.send(batch).unwrap();
                items
            }));
        }
        drop(tx);
        for t in 0..4u64 {
            let cache = &cache;
            workers.push(s.spawn(move || {
                let mut local = (t % 2 == 1).then(|| cache.local());
                let mut held = Vec::with_capacity(16);
                let pairs = share / 2;
                for n in 0..pairs {
                    let id = alloc_waiting(|| match &mut local {
                        Some(local) => local.alloc(),
                        None => cache.alloc(),
                    });
                    held.push(id);
                    if held.len() > (n.wrapping_mul(7) % 17) as usize {
                        for id in held.drain(..) {
                            match &mut local {
                                Some(local) => local.free(id),
                                None => cache.free(id),
                            }
                        }
                    }
                }
                for id in held {
                    match &mut local {
                        Some(local) => local.free(id),
                        None => cache.free(id),
                    }
                }
                2 * pairs
            }));
        }
        let worked: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let freed: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        worked + freed
    });

    let stats = cache.stats();
    eprintln!(
        "soak: {ops} operations in {:.1} s; {stats}",
        start.elapsed().as_secs_f64()
    );
    assert!(ops >= target, "stopped early: {ops} < {target}");
    drop(cache);
    source.assert_all_home();
}

/// Allocates, yielding while every id is in flight (another thread will free some).
fn alloc_waiting(mut alloc: impl FnMut() -> Option<u32>) -> u32 {
    for _ in 0..100_000_000u64 {
        if let Some(id) = alloc() {
            return id;
        }
        thread::yield_now();
    }
    panic!("the source never got its ids back");
}

/// Under `--cfg magazine_test_malloc` (`.ci/run`) every test binary of the suite runs on
/// `magazine_malloc::MagazineMalloc`: the allocations of this one must reach its caches.
#[cfg(magazine_test_malloc)]
#[test]
fn the_suite_runs_on_magazine_malloc() {
    let served = || {
        let stats = magazine_malloc::MagazineMalloc::new().stats();
        let classes = stats.classes.iter();
        classes
            .map(|class| class.cache.alloc_hits + class.cache.source_allocs)
            .sum::<u64>()
    };
    let before = served();
    let boxes: Vec<Box<[u8; 48]>> = (0..1000).map(|_| Box::new([7; 48])).collect();
    assert!(boxes
        .iter()
        .all(|block| block.iter().all(|&byte| byte == 7)));
    drop(boxes);
    assert!(
        served() >= before + 1000,
        "the boxes came from another allocator"
    );
}
