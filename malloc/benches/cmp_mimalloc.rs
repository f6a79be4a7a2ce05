//! The allocator comparison's workloads (`compare/workloads.rs`) under mimalloc (the
//! `mimalloc` crate, built from source with its default options: freed memory is purged
//! on mimalloc's own delay, no call is made during the trim interval).
//!
//! `cargo bench -p magazine-malloc --features compare --bench cmp_mimalloc -- <workload>`;
//! `bash malloc/bench.sh` runs all four allocators.

#[path = "compare/workloads.rs"]
mod workloads;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    workloads::main("mimalloc", None);
}
