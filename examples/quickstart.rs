//! Drives a cache from several threads with the imbalanced pattern of the seed problem
//! (some threads only allocate, others only free what they receive), trims it while the
//! load runs, and prints the statistics.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```

use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// The slow path: a free list of ids behind one lock.
struct IdAllocator {
    free: Mutex<Vec<u32>>,
}

impl Source for IdAllocator {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        self.free.lock().unwrap().pop()
    }

    /// A whole refill under one lock hold.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u32)) -> usize {
        let mut free = self.free.lock().unwrap();
        let start = free.len().saturating_sub(max);
        let taken = free.len() - start;
        free.drain(start..).for_each(out);
        taken
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        self.free.lock().unwrap().extend(items);
    }
}

fn main() {
    const IDS: u32 = 100_000;
    const PER_PRODUCER: usize = 1_000_000;
    // One thread per core: a per-CPU slot is held for a few instructions at a time, but a
    // thread preempted while holding one turns its CPU's slot into misses until it runs
    // again. With more threads than cores, give each thread a `cache.local()` handle.
    let cores = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let producers = cores - 1;
    let consumers = 1;

    let source = IdAllocator {
        free: Mutex::new((0..IDS).collect()),
    };
    let config = Config {
        depot: DepotPolicy::Dynamic {
            target: 4,
            trim: Trim::WorkingSet,
        },
        ..Config::default()
    };
    let cache = Cache::with_config(source, config);

    let (tx, rx) = mpsc::sync_channel::<Vec<u32>>(64);
    let rx = Mutex::new(rx);
    thread::scope(|s| {
        for _ in 0..producers {
            let tx = tx.clone();
            let cache = &cache;
            s.spawn(move || {
                let mut batch = Vec::with_capacity(64);
                for _ in 0..PER_PRODUCER {
                    batch.push(
                        cache
                            .alloc()
                            .expect("ids are freed as fast as they are used"),
                    );
                    if batch.len() == 64 {
                        tx.send(std::mem::take(&mut batch)).unwrap();
                    }
                }
                tx.send(batch).unwrap();
            });
        }
        drop(tx);
        for _ in 0..consumers {
            let (rx, cache) = (&rx, &cache);
            s.spawn(move || {
                // Completions are freed on the consumer's CPU, allocated on the producers'.
                while let Ok(batch) = rx.lock().unwrap().recv() {
                    batch.into_iter().for_each(|id| cache.free(id));
                }
            });
        }
    });
    let trimmed = (0..3).map(|_| cache.trim()).sum::<usize>();

    let stats = cache.stats();
    let ops = (producers * PER_PRODUCER) as f64;
    println!(
        "{} producers, {} consumer, {} allocations",
        producers, consumers, ops
    );
    println!(
        "served by magazines : {:>10} allocs {:>10} frees",
        stats.alloc_hits, stats.free_hits
    );
    println!(
        "depot magazines     : {:>10} popped {:>10} pushed (peak {} full)",
        stats.depot_pops, stats.depot_pushes, stats.depot_peak
    );
    println!(
        "slow path (source)  : {:>10} allocs {:>10} frees  ({:.2} allocs per 1000)",
        stats.source_allocs,
        stats.source_frees,
        stats.source_allocs as f64 * 1000.0 / ops
    );
    println!(
        "trim released       : {:>10} magazines; depot now {} full, {} empty",
        trimmed, stats.depot_full, stats.depot_empty
    );
    println!("busy slot misses    : {:>10}", stats.busy_misses);
    // The same counters as one log line (`Stats` implements `Display`).
    println!("log line            : {stats}");
    drop(cache);
}
