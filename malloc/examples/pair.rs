//! A quick, informal timing: one thread allocating and freeing a block in a loop, through
//! `MagazineMalloc` (the global allocator here) and through the system allocator
//! (glibc's malloc) called directly, for a few sizes. Then the heap's statistics.
//!
//! `cargo run --release -p magazine-malloc --example pair [-- PAIRS]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;

use magazine_malloc::MagazineMalloc;

// The lib declares it itself under `--cfg magazine_test_malloc`.
#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();
#[cfg(magazine_test_malloc)]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// Nanoseconds per alloc + free pair of `size` bytes through `allocator`, best of 5.
fn pair_ns(allocator: &dyn GlobalAlloc, size: usize, pairs: u64) -> f64 {
    let layout = Layout::from_size_align(size, 8).unwrap();
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..pairs {
                // SAFETY: a nonzero size; freed at once with the same layout.
                unsafe {
                    let block = allocator.alloc(black_box(layout));
                    black_box(block).write(1);
                    allocator.dealloc(block, layout);
                }
            }
            start.elapsed().as_nanos() as f64 / pairs as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let pairs: u64 = std::env::args()
        .nth(1)
        .map_or(10_000_000, |n| n.parse().expect("PAIRS: a number"));
    println!("alloc + free pairs, one thread, best of 5 runs of {pairs}:");
    for size in [16, 64, 256, 1024, 4096] {
        let magazine = pair_ns(&GLOBAL, size, pairs);
        let system = pair_ns(&System, size, pairs);
        println!(
            "{size:>6} B: MagazineMalloc {magazine:6.2} ns, system {system:6.2} ns ({:.2}x)",
            magazine / system
        );
    }
    print!("{}", GLOBAL.stats());
}
