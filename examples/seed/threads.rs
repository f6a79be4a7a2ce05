//! `--threads N`: the same workload on N real OS threads, for operations per second.
//!
//! Each thread owns whole IRQ groups (the IRQ CPU and its vCPUs), so no two threads ever
//! use the same slot; items still cross threads through the shared depot, which is what
//! is measured. The simulated clock becomes the shared count of completed I/Os, and
//! thread 0 runs the trim schedule on it.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use magazine::{Cache, Source};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::contender::{millis, Contender, Role};
use crate::scenario::Scenario;
use crate::workload::{irq_cpus, IrqGroup};

/// What one policy did on real threads, between the end of the warm-up and the end of
/// the load.
struct Throughput {
    label: String,
    ios: u64,
    wall: Duration,
    source_allocs: u64,
    source_frees: u64,
}

/// The shared I/O count, the time and the source's calls at some instant. Exactly one
/// thread's `fetch_add` crosses a given count, so exactly one thread records it.
#[derive(Clone, Copy)]
struct Mark {
    ios: u64,
    at: Instant,
    source_allocs: u64,
    source_frees: u64,
}

impl Mark {
    fn now<S: Source>(cache: &Cache<S>, ios: u64) -> Self {
        let stats = cache.stats();
        Mark {
            ios,
            at: Instant::now(),
            source_allocs: stats.source_allocs,
            source_frees: stats.source_frees,
        }
    }
}

impl Throughput {
    /// Cache operations (one free and one alloc per I/O) per second.
    fn ops_per_sec(&self) -> f64 {
        2.0 * self.ios as f64 / self.wall.as_secs_f64()
    }
}

/// Runs every policy in turn on `threads` threads; returns the table.
pub fn compare(scenario: &Scenario, contenders: &[Contender], threads: usize) -> String {
    let groups = irq_cpus(scenario).count();
    let threads = threads.clamp(1, groups);
    eprintln!(
        "{threads} threads, {groups} IRQ groups, {} I/Os per policy, source: {SOURCE}",
        scenario.total_ios()
    );
    let results: Vec<Throughput> = contenders
        .iter()
        .map(|c| {
            let cache = Cache::with_config(new_source(), c.config(scenario));
            run(scenario, c, &cache, threads)
        })
        .collect();
    table(contenders, &results)
}

#[cfg(feature = "iova")]
const SOURCE: &str = "the IOVA domain's range tree (magazine::iova)";
#[cfg(feature = "iova")]
fn new_source() -> crate::source::IovaTree {
    crate::source::IovaTree::new()
}

#[cfg(not(feature = "iova"))]
const SOURCE: &str = "the counting id allocator (built without the iova feature)";
#[cfg(not(feature = "iova"))]
fn new_source() -> crate::source::CountingIds {
    crate::source::CountingIds::default()
}

/// The load of one policy on `threads` threads, then the in-flight I/Os complete.
fn run<S>(
    scenario: &Scenario,
    contender: &Contender,
    cache: &Cache<S>,
    threads: usize,
) -> Throughput
where
    S: Source,
{
    let irqs: Vec<usize> = irq_cpus(scenario).collect();
    let (total, warmup) = (scenario.total_ios(), scenario.warmup_ios());
    let completed = AtomicU64::new(0);
    let start = Barrier::new(threads);
    let (warm, end) = (OnceLock::new(), OnceLock::new());
    thread::scope(|s| {
        for t in 0..threads {
            let mine: Vec<usize> = irqs.iter().copied().skip(t).step_by(threads).collect();
            let (completed, start, warm, end) = (&completed, &start, &warm, &end);
            s.spawn(move || {
                let mut groups: Vec<_> = mine
                    .iter()
                    .map(|&irq| IrqGroup::submit(cache, scenario, irq))
                    .collect();
                let mut rng = SmallRng::seed_from_u64(scenario.seed.wrapping_add(t as u64));
                // Only thread 0 trims: trim() is safe to race, but one caller keeps the
                // schedule's period what the policy says.
                let period = contender
                    .trim_every_ms
                    .filter(|_| t == 0)
                    .map(|ms| ms * 1_000_000);
                let mut next_trim = period.unwrap_or(u64::MAX);
                start.wait();
                loop {
                    let group = rng.random_range(0..groups.len());
                    let count = groups[group].interrupt(cache, &mut rng, scenario.batch) as u64;
                    let done = completed.fetch_add(count, Ordering::Relaxed) + count;
                    if (done - count..done).contains(&warmup) {
                        let _ = warm.set(Mark::now(cache, done));
                    }
                    if done >= total {
                        if done - count < total {
                            let _ = end.set(Mark::now(cache, done));
                        }
                        break;
                    }
                    if let Some(period) = period {
                        while scenario.ns_at(done) >= next_trim {
                            cache.trim();
                            next_trim += period;
                        }
                    }
                }
                groups.iter_mut().for_each(|g| g.complete_all(cache));
            });
        }
    });
    let (warm, end) = (
        warm.get().expect("warm-up reached"),
        end.get().expect("end reached"),
    );
    Throughput {
        label: contender.label(),
        ios: end.ios - warm.ios,
        wall: end.at - warm.at,
        source_allocs: end.source_allocs - warm.source_allocs,
        source_frees: end.source_frees - warm.source_frees,
    }
}

fn table(contenders: &[Contender], results: &[Throughput]) -> String {
    let baseline = contenders
        .iter()
        .zip(results)
        .find(|(c, _)| c.role == Role::Fixed32)
        .map(|(_, r)| r.ops_per_sec());
    let mut out = String::new();
    writeln!(
        out,
        "| policy | trim every | I/Os | wall | alloc+free ops/s | vs Fixed{{32}} | slow allocs/1k I/O (after warm-up) | slow frees/1k I/O (after warm-up) |"
    )
    .unwrap();
    writeln!(out, "| :-- | --: | --: | --: | --: | --: | --: | --: |").unwrap();
    for (c, r) in contenders.iter().zip(results) {
        writeln!(
            out,
            "| {} | {} | {} | {:.2} s | {:.1} M | {:.2} | {:.4} | {:.4} |",
            r.label.split(" /").next().unwrap_or(&r.label),
            c.trim_every_ms.map_or("-".into(), millis),
            r.ios,
            r.wall.as_secs_f64(),
            r.ops_per_sec() / 1e6,
            baseline.map_or(f64::NAN, |b| r.ops_per_sec() / b),
            r.source_allocs as f64 * 1000.0 / r.ios as f64,
            r.source_frees as f64 * 1000.0 / r.ios as f64,
        )
        .unwrap();
    }
    out
}
