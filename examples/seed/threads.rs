//! `--threads N`: the same workload (strict unmaps) on N real OS threads, for operations
//! per second; then the capacity of the IOVA range tree's one lock on N threads, the `C`
//! of the simulation's IOPS model measured on this machine.
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
use crate::report::markdown;
use crate::scenario::Scenario;
use crate::workload::{irq_cpus, IrqGroup, Unmap};

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

/// Runs every policy in turn on `threads` threads, then measures the tree lock's capacity;
/// returns the tables. `threads` is at least 1 (`Scenario::validate`).
pub fn compare(scenario: &Scenario, contenders: &[Contender], threads: usize) -> String {
    let groups = irq_cpus(scenario).count();
    let used = threads.min(groups);
    let mut out = String::new();
    if used < threads {
        writeln!(
            out,
            "(--threads {threads}: only {groups} IRQ groups to share out, so {used} threads run.)"
        )
        .unwrap();
    }
    writeln!(
        out,
        "{used} threads, {groups} IRQ groups, strict unmaps, source: {SOURCE}. Each policy runs {} I/Os; the first {} ({}%) are warm-up, the table counts the {} after it.",
        scenario.total_ios(),
        scenario.warmup_ios(),
        crate::report::trim_float(scenario.warmup_percent),
        scenario.total_ios() - scenario.warmup_ios(),
    )
    .unwrap();
    let results: Vec<Throughput> = contenders
        .iter()
        .map(|c| {
            let cache = Cache::with_config(new_source(), c.config(scenario));
            run(scenario, c, &cache, used)
        })
        .collect();
    out.push_str(&table(contenders, &results));
    out.push('\n');
    out.push_str(&lock_capacity(threads));
    out
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
                let mut free = |io: Unmap<S::Item>| cache.free_on(io.irq, io.item);
                start.wait();
                loop {
                    let group = rng.random_range(0..groups.len());
                    let count =
                        groups[group].interrupt(cache, &mut rng, scenario.batch, &mut free) as u64;
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
                groups.iter_mut().for_each(|g| g.complete_all(&mut free));
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
    let header = [
        "policy",
        "trim every",
        "I/Os after warm-up",
        "wall",
        "alloc+free ops/s",
        "vs Fixed{32}",
        "slow allocs/1k I/O",
        "slow frees/1k I/O",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = contenders
        .iter()
        .zip(results)
        .map(|(c, r)| {
            vec![
                r.label.split(" /").next().unwrap_or(&r.label).to_owned(),
                c.trim_every_ms.map_or("-".into(), millis),
                r.ios.to_string(),
                format!("{:.2} s", r.wall.as_secs_f64()),
                format!("{:.1} M", r.ops_per_sec() / 1e6),
                format!("{:.2}", baseline.map_or(f64::NAN, |b| r.ops_per_sec() / b)),
                format!("{:.4}", r.source_allocs as f64 * 1000.0 / r.ios as f64),
                format!("{:.4}", r.source_frees as f64 * 1000.0 / r.ios as f64),
            ]
        })
        .collect();
    markdown(&header, &rows)
}

/// Seconds each thread-count step of the lock measurement runs.
#[cfg(feature = "iova")]
const LOCK_SECONDS: f64 = 1.0;
/// Pages each thread keeps allocated while it measures (the tree then holds
/// `threads x LOCK_OUTSTANDING` ranges, the order of the seed run's in-flight I/Os).
#[cfg(feature = "iova")]
const LOCK_OUTSTANDING: usize = 4096;

/// The IOPS model's `C` for the crate's own tree: `threads` threads call `alloc` (one
/// page) and `free` of the IOVA domain's range tree (`magazine::iova::IovaDomain`, one
/// lock, no cache) back to back for a fixed time; C = calls completed / seconds. Also run
/// on 1 thread, where the lock is never contended: 1/C there is the time one call holds the
/// lock plus the call's own overhead on this machine, a lower bound on the hold time.
#[cfg(feature = "iova")]
fn lock_capacity(threads: usize) -> String {
    let mut counts = vec![1];
    if threads > 1 {
        counts.push(threads);
    }
    let rows: Vec<Vec<String>> = counts
        .iter()
        .map(|&n| {
            let (calls, seconds) = hammer_tree(n);
            let c = calls as f64 / seconds;
            vec![
                n.to_string(),
                calls.to_string(),
                format!("{seconds:.2} s"),
                format!("{:.2}M", c / 1e6),
                format!("{:.0} ns", 1e9 / c),
            ]
        })
        .collect();
    let header = ["threads", "tree calls", "wall", "C (calls/s)", "1/C"].map(String::from);
    let mut out = format!(
        "Tree-lock capacity C, measured: each thread keeps {LOCK_OUTSTANDING} one-page IOVAs allocated and repeats `IovaDomain::alloc(1 page)` + `free(oldest)` for {LOCK_SECONDS} s, straight on the range tree (no cache); C = tree calls / wall.\n"
    );
    out.push_str(&markdown(&header, &rows));
    out.push_str(
        "On 1 thread the lock is never contended: 1/C is what one call holds the lock for on this machine, plus the call's own overhead. That is a lower bound on the hold time on a 256-CPU machine, where the lock's and the tree's cache lines cross sockets, so the real C is at most the 1-thread C; contention (the other rows) lowers it further.\n",
    );
    out
}

#[cfg(not(feature = "iova"))]
fn lock_capacity(_threads: usize) -> String {
    "Tree-lock capacity: needs the iova feature.\n".into()
}

/// `threads` threads hammer one IOVA domain's tree for `LOCK_SECONDS`; returns the calls
/// made (allocs + frees) and the seconds from the common start to the last thread's end.
#[cfg(feature = "iova")]
fn hammer_tree(threads: usize) -> (u64, f64) {
    use std::collections::VecDeque;

    let domain = magazine::iova::IovaDomain::new(4096, 1);
    let calls = AtomicU64::new(0);
    let start = Barrier::new(threads + 1);
    let began = OnceLock::new();
    thread::scope(|s| {
        for _ in 0..threads {
            let (domain, calls, start) = (&domain, &calls, &start);
            s.spawn(move || {
                let alloc = || {
                    domain
                        .alloc(1, u64::MAX, true)
                        .expect("a 64-bit space has room")
                        .pfn_lo
                };
                let mut held: VecDeque<u64> = (0..LOCK_OUTSTANDING).map(|_| alloc()).collect();
                start.wait();
                let until = Instant::now() + Duration::from_secs_f64(LOCK_SECONDS);
                let mut mine = 0;
                while Instant::now() < until {
                    for _ in 0..64 {
                        held.push_back(alloc());
                        let pfn = held.pop_front().expect("held is never empty");
                        domain
                            .free(pfn)
                            .expect("allocated by this thread, freed once");
                    }
                    mine += 128;
                }
                calls.fetch_add(mine, Ordering::Relaxed);
            });
        }
        start.wait();
        let _ = began.set(Instant::now());
    });
    let seconds = began.get().expect("set").elapsed().as_secs_f64();
    (calls.into_inner(), seconds)
}
