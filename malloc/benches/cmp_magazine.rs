//! The allocator comparison's workloads (`compare/workloads.rs`) under MagazineMalloc.
//! "One trim interval" here is `trim()`, the interval's sleep, `trim()` again: the class
//! caches give memory back when two trims are an interval apart.
//!
//! `cargo bench -p magazine-malloc --features compare --bench cmp_magazine -- <workload>`;
//! `bash malloc/bench.sh` runs all four allocators.

#[path = "compare/workloads.rs"]
mod workloads;

use magazine_malloc::MagazineMalloc;

#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

fn main() {
    workloads::main("magazine", Some(&|| GLOBAL.trim()));
    // What the allocator holds at the end, for a reader of the RSS columns.
    if std::env::var_os("MALLOC_BENCH_STATS").is_some() {
        eprint!("{}", GLOBAL.stats());
    }
}
