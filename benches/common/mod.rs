//! What the benches share: the sources behind the caches under test, the criterion
//! configuration, and a harness that times threads between a barrier and their last
//! operation.
//!
//! Every bench binary uses a subset of this module.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::Criterion;
use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// The slow path of the benches: a free list behind a lock (the crate docs' toy id
/// allocator). With `fresh` set it makes up new ids once the list is empty, so it is never
/// exhausted; without, an empty list is an exhausted source.
#[derive(Debug, Default)]
pub struct FreeList {
    free: Mutex<Vec<u64>>,
    next: AtomicU64,
    fresh: bool,
}

impl FreeList {
    /// A source that is never exhausted.
    pub fn fresh() -> Self {
        FreeList {
            fresh: true,
            ..FreeList::default()
        }
    }

    /// A source that starts (and stays, until items are freed to it) exhausted.
    pub fn empty() -> Self {
        FreeList::default()
    }
}

impl Source for FreeList {
    type Item = u64;

    fn alloc(&self) -> Option<u64> {
        if let Some(item) = self.free.lock().unwrap().pop() {
            return Some(item);
        }
        self.fresh
            .then(|| self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// One lock hold for the whole batch: freed ids first, then fresh ones.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u64)) -> usize {
        let mut free = self.free.lock().unwrap();
        let reused = max.min(free.len());
        let start = free.len() - reused;
        free.drain(start..).for_each(&mut *out);
        drop(free);
        if !self.fresh {
            return reused;
        }
        let fresh = (max - reused) as u64;
        let first = self.next.fetch_add(fresh, Ordering::Relaxed);
        (first..first + fresh).for_each(out);
        max
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        self.free.lock().unwrap().extend(items);
    }
}

/// A source that makes up ids and forgets freed ones: for benches in which the source
/// must cost next to nothing (trim releases whole magazines to it).
#[derive(Debug, Default)]
pub struct Forgetful {
    next: AtomicU64,
    pub freed: AtomicU64,
}

impl Source for Forgetful {
    type Item = u64;

    fn alloc(&self) -> Option<u64> {
        Some(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        let count = items.count() as u64;
        self.freed.fetch_add(count, Ordering::Relaxed);
    }
}

/// The cache configuration of the benches: `Config::default()` (magazines of 127, a slot
/// per CPU, `Dynamic { target: cpus, trim: WorkingSet }`) with the given magazine size.
pub fn config(magazine_size: usize) -> Config {
    Config {
        magazine_size,
        ..Config::default()
    }
}

/// A cache over a never-exhausted free list, with default configuration and options
/// (restartable sequences where the platform has them).
pub fn cache() -> Cache<FreeList> {
    Cache::new(FreeList::fresh())
}

/// A per-CPU cache in front of `source`, default configuration, with restartable
/// sequences on (where the platform has them; the default) or off (every operation takes
/// its slot with a compare-and-swap: the portable slot protocol).
pub fn per_cpu_on<S: Source>(source: S, sequences: bool) -> Cache<S> {
    let mut options = magazine::Options::default();
    options.restartable_sequences = sequences;
    Cache::with_options(source, Config::default(), options)
}

/// `Dynamic` with the given trim rule and target.
pub fn dynamic(target: usize, trim: Trim) -> DepotPolicy {
    DepotPolicy::Dynamic { target, trim }
}

/// Criterion with short default times, so that `cargo bench` runs the whole suite in a
/// few minutes; command-line flags (`--measurement-time`, `--sample-size`, ...) override.
pub fn criterion(warm_up_ms: u64, measurement_ms: u64, sample_size: usize) -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(warm_up_ms))
        .measurement_time(Duration::from_millis(measurement_ms))
        .sample_size(sample_size)
}

/// When one thread started and ended its timed work.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    start: Instant,
    end: Instant,
}

/// Waits at `barrier` with the other threads, then times `work`.
pub fn timed(barrier: &Barrier, work: impl FnOnce()) -> Span {
    barrier.wait();
    let start = Instant::now();
    work();
    Span {
        start,
        end: Instant::now(),
    }
}

/// Runs `worker(i, barrier)` on `threads` scoped threads; each worker sets itself up, then
/// calls [`timed`] with the barrier. Returns the time from the first start to the last end:
/// thread creation and set-up are not timed.
pub fn run_timed<F>(threads: usize, worker: F) -> Duration
where
    F: Fn(usize, &Barrier) -> Span + Sync,
{
    let barrier = Barrier::new(threads);
    let spans: Vec<Span> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (worker, barrier) = (&worker, &barrier);
                s.spawn(move || worker(i, barrier))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let start = spans.iter().map(|s| s.start).min().unwrap();
    let end = spans.iter().map(|s| s.end).max().unwrap();
    end - start
}

/// Whether the bench binary runs as a smoke test (`cargo bench -- --test`).
pub fn smoke_test() -> bool {
    std::env::args().any(|arg| arg == "--test")
}
