//! The checker shim: the only place that names loom or shuttle in the scenarios. A
//! scenario spawns model threads, yields in its wait loops and uses model atomics for the
//! flags it waits on, all through these names.

#[cfg(all(loom, feature = "shuttle"))]
compile_error!("`--cfg loom` and the `shuttle` feature are mutually exclusive");

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(loom)]
pub use loom::thread::{current, spawn, yield_now, JoinHandle, ThreadId};

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(feature = "shuttle")]
pub use shuttle::thread::{current, spawn, yield_now, JoinHandle, ThreadId};

/// How big a scenario runs: loom explores every interleaving (up to its preemption
/// bound), so it gets the smallest shape; shuttle samples schedules, so it gets more
/// threads and more operations.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Worker threads of the scenario's main role (its other roles keep their own count).
    pub threads: usize,
    /// Operations (or operation cycles) per worker.
    pub rounds: usize,
}

impl Scale {
    /// The loom shape: two workers, one cycle each (the depot scenarios).
    pub const LOOM: Scale = Scale {
        threads: 2,
        rounds: 1,
    };
    /// The loom shape of the cache scenarios: two workers, two cycles each.
    pub const LOOM_CACHE: Scale = Scale {
        threads: 2,
        rounds: 2,
    };
    /// The loom shape of the cache scenarios: three workers, one cycle each.
    pub const LOOM_WIDE: Scale = Scale {
        threads: 3,
        rounds: 1,
    };
    /// The shuttle shape: six or seven threads in all, four cycles each.
    pub const SHUTTLE: Scale = Scale {
        threads: 6,
        rounds: 4,
    };
}

/// Joins every handle, propagating a model thread's panic, and returns their results.
pub fn join_all<T>(handles: Vec<JoinHandle<T>>) -> Vec<T> {
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a model thread panicked"))
        .collect()
}
