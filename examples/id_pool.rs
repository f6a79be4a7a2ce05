//! An id pool for allocator authors: integer ids (connection ids, file descriptors, ASIDs)
//! from a bitmap allocator behind a lock, with a per-thread `LocalCache` on each worker so
//! that almost no allocation touches the lock.
//!
//! ```text
//! cargo run --release --example id_pool
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// The slow path: the lowest free id from a bitmap, under one lock.
struct IdBitmap {
    words: Mutex<Vec<u64>>,
    capacity: usize,
    lock_taken: AtomicU64,
}

impl IdBitmap {
    fn new(capacity: usize) -> Self {
        Self {
            words: Mutex::new(vec![0; capacity.div_ceil(64)]),
            capacity,
            lock_taken: AtomicU64::new(0),
        }
    }
}

impl Source for IdBitmap {
    type Item = usize;

    fn alloc(&self) -> Option<usize> {
        self.lock_taken.fetch_add(1, Ordering::Relaxed);
        let mut words = self.words.lock().unwrap();
        let (index, word) = words
            .iter_mut()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)?;
        let bit = word.trailing_ones() as usize;
        let id = index * 64 + bit;
        if id >= self.capacity {
            return None;
        }
        *word |= 1 << bit;
        Some(id)
    }

    /// A whole refill under one lock hold: the lowest free ids, up to `max`.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(usize)) -> usize {
        self.lock_taken.fetch_add(1, Ordering::Relaxed);
        let mut words = self.words.lock().unwrap();
        let mut handed = 0;
        for (index, word) in words.iter_mut().enumerate() {
            while handed < max && *word != u64::MAX {
                let bit = word.trailing_ones() as usize;
                let id = index * 64 + bit;
                if id >= self.capacity {
                    return handed;
                }
                *word |= 1 << bit;
                out(id);
                handed += 1;
            }
            if handed == max {
                break;
            }
        }
        handed
    }

    fn free_batch(&self, ids: &mut dyn Iterator<Item = usize>) {
        self.lock_taken.fetch_add(1, Ordering::Relaxed);
        let mut words = self.words.lock().unwrap();
        for id in ids {
            let (index, bit) = (id / 64, id % 64);
            assert!(words[index] & (1 << bit) != 0, "id {id} freed twice");
            words[index] &= !(1 << bit);
        }
    }
}

fn main() {
    let workers = 4;
    let rounds = 200_000;
    let config = Config {
        magazine_size: 64,
        depot: DepotPolicy::Dynamic {
            target: workers,
            trim: Trim::WorkingSet,
        },
        ..Config::default()
    };
    let pool = Cache::with_config(IdBitmap::new(1 << 16), config);

    thread::scope(|s| {
        for worker in 0..workers {
            let pool = &pool;
            s.spawn(move || {
                // A long-lived worker: its own handle, no atomics on a hit.
                let mut ids = pool.local();
                let mut open = Vec::new();
                for round in 0..rounds {
                    // Open a few connections, close the oldest ones.
                    open.push(ids.alloc().expect("65536 ids are enough"));
                    if open.len() > 32 + (round + worker) % 32 {
                        ids.free(open.swap_remove(0));
                    }
                }
                open.into_iter().for_each(|id| ids.free(id));
            });
        }
    });

    let stats = pool.stats();
    let operations = 2 * workers * rounds;
    println!("{workers} workers, {operations} id allocations and frees");
    println!(
        "served without the lock: {:.3}%",
        100.0 * (stats.alloc_hits + stats.free_hits) as f64 / operations as f64
    );
    println!(
        "bitmap lock taken {} times; depot: {} full magazines, peak {}",
        pool.source().lock_taken.load(Ordering::Relaxed),
        stats.depot_full,
        stats.depot_peak
    );
}
