//! Reusing large buffers: 64 KiB I/O buffers cached in magazines. A burst makes the depot
//! grow; once the burst is over, `trim()` hands the buffers nobody needed back to the
//! source (here: frees their memory) while the working set stays cached.
//!
//! ```text
//! cargo run --release --example buffers
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

const BUFFER: usize = 64 * 1024;

/// Allocates buffers from the heap and frees them; counts the bytes it has out.
#[derive(Default)]
struct Heap {
    bytes_out: AtomicUsize,
}

impl Source for Heap {
    type Item = Vec<u8>;

    fn alloc(&self) -> Option<Vec<u8>> {
        self.bytes_out.fetch_add(BUFFER, Ordering::Relaxed);
        Some(vec![0; BUFFER])
    }

    fn free_batch(&self, buffers: &mut dyn Iterator<Item = Vec<u8>>) {
        for buffer in buffers {
            self.bytes_out.fetch_sub(buffer.len(), Ordering::Relaxed);
        }
    }
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let config = Config {
        magazine_size: 16,
        cpus: 4,
        depot: DepotPolicy::Dynamic {
            target: 2,
            trim: Trim::WorkingSet,
        },
    };
    let cache = Cache::with_config(Heap::default(), config);
    let held = |cache: &Cache<Heap>| mib(cache.source().bytes_out.load(Ordering::Relaxed));

    // Steady state: 8 buffers in use at a time.
    for _ in 0..1000 {
        let buffers: Vec<_> = (0..8).map(|_| cache.alloc_on(0).unwrap()).collect();
        buffers.into_iter().for_each(|b| cache.free_on(0, b));
    }
    cache.trim();
    println!("steady state        : {:7.1} MiB allocated", held(&cache));

    // A burst: 2000 buffers at once, freed on another CPU (as completions are).
    let burst: Vec<_> = (0..2000).map(|_| cache.alloc_on(0).unwrap()).collect();
    burst.into_iter().for_each(|b| cache.free_on(1, b));
    println!(
        "after the burst     : {:7.1} MiB allocated, {} full magazines in the depot",
        held(&cache),
        cache.stats().depot_full
    );

    // Back to the steady state; trim every "tick" (in a real program every 2 s, the
    // interval for a WorkingSet depot: its working-set window). The first trim releases
    // nothing: the burst arrived during its interval, so no magazine sat unused for a whole
    // interval. The second releases everything above the target that the steady state
    // never touched.
    for tick in 1..=3 {
        for _ in 0..1000 {
            let buffers: Vec<_> = (0..8).map(|_| cache.alloc_on(0).unwrap()).collect();
            buffers.into_iter().for_each(|b| cache.free_on(0, b));
        }
        let released = cache.trim();
        println!(
            "trim {tick}              : {:7.1} MiB allocated ({released} magazines = {} buffers released)",
            held(&cache),
            released * 16
        );
    }
    drop(cache);
}
