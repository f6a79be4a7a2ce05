//! The allocator comparison's workloads (`compare/workloads.rs`) under jemalloc (the
//! `tikv-jemallocator` crate, built from source with its default options: dirty pages
//! decay on jemalloc's own schedule, no call is made during the trim interval).
//!
//! `cargo bench -p magazine-malloc --features compare --bench cmp_jemalloc -- <workload>`;
//! `bash malloc/bench.sh` runs all four allocators.

#[path = "compare/workloads.rs"]
mod workloads;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    workloads::main("jemalloc", None);
}
