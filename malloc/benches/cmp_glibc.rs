//! The allocator comparison's workloads (`compare/workloads.rs`) under glibc's malloc
//! (`std::alloc::System`; default tunables: `free` trims the top of a heap past
//! `M_TRIM_THRESHOLD`, no `malloc_trim` call is made during the trim interval).
//!
//! `cargo bench -p magazine-malloc --features compare --bench cmp_glibc -- <workload>`;
//! `bash malloc/bench.sh` runs all four allocators.

#[path = "compare/workloads.rs"]
mod workloads;

#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

fn main() {
    workloads::main("glibc", None);
}
