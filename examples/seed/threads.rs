//! `--threads N`: the same workload (strict unmaps) on N real OS threads, for operations
//! per second, each policy with one item per refill and with a magazine per refill; then
//! the hold time of the IOVA range tree's one lock, a + b x items per call, on 1 and on N
//! threads: the a and b of the simulation's IOPS model, measured on this machine.
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

use magazine::{Cache, Options, Source};
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
    source_batch: usize,
    source_alloc_calls: u64,
    source_allocs: u64,
    source_free_calls: u64,
    source_frees: u64,
}

/// The shared I/O count, the time and the source's calls at some instant. Exactly one
/// thread's `fetch_add` crosses a given count, so exactly one thread records it.
#[derive(Clone, Copy)]
struct Mark {
    ios: u64,
    at: Instant,
    source_alloc_calls: u64,
    source_allocs: u64,
    source_free_calls: u64,
    source_frees: u64,
}

impl Mark {
    fn now<S: Source>(cache: &Cache<S>, ios: u64) -> Self {
        let stats = cache.stats();
        Mark {
            ios,
            at: Instant::now(),
            source_alloc_calls: stats.source_alloc_calls,
            source_allocs: stats.source_allocs,
            source_free_calls: stats.source_free_calls,
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
    // Each policy one item per refill (Linux's one range per miss), then a whole magazine.
    let runs: Vec<(&Contender, usize)> = contenders
        .iter()
        .flat_map(|c| [(c, 1), (c, scenario.magazine_size)])
        .collect();
    let results: Vec<Throughput> = runs
        .iter()
        .map(|&(c, batch)| {
            let mut options = Options::default();
            options.source_batch = Some(batch);
            let cache = Cache::with_options(new_source(), c.config(scenario), options);
            run(scenario, c, &cache, used, batch)
        })
        .collect();
    out.push_str(&table(&runs, &results));
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
    source_batch: usize,
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
        source_batch,
        source_alloc_calls: end.source_alloc_calls - warm.source_alloc_calls,
        source_allocs: end.source_allocs - warm.source_allocs,
        source_free_calls: end.source_free_calls - warm.source_free_calls,
        source_frees: end.source_frees - warm.source_frees,
    }
}

fn table(runs: &[(&Contender, usize)], results: &[Throughput]) -> String {
    let baseline = runs
        .iter()
        .zip(results)
        .find(|((c, batch), _)| c.role == Role::Fixed32 && *batch == 1)
        .map(|(_, r)| r.ops_per_sec());
    let header = [
        "policy",
        "trim every",
        "batch",
        "I/Os after warm-up",
        "wall",
        "alloc+free ops/s",
        "vs Fixed{32} (1)",
        "allocs/1k I/O calls/items",
        "frees/1k I/O calls/items",
    ]
    .map(String::from);
    let per_k = |n: u64, r: &Throughput| n as f64 * 1000.0 / r.ios as f64;
    let rows: Vec<Vec<String>> = runs
        .iter()
        .zip(results)
        .map(|((c, _), r)| {
            vec![
                r.label.split(" /").next().unwrap_or(&r.label).to_owned(),
                c.trim_every_ms.map_or("-".into(), millis),
                r.source_batch.to_string(),
                r.ios.to_string(),
                format!("{:.2} s", r.wall.as_secs_f64()),
                format!("{:.1} M", r.ops_per_sec() / 1e6),
                format!("{:.2}", baseline.map_or(f64::NAN, |b| r.ops_per_sec() / b)),
                format!(
                    "{:.4}/{:.4}",
                    per_k(r.source_alloc_calls, r),
                    per_k(r.source_allocs, r)
                ),
                format!(
                    "{:.4}/{:.4}",
                    per_k(r.source_free_calls, r),
                    per_k(r.source_frees, r)
                ),
            ]
        })
        .collect();
    markdown(&header, &rows)
}

/// Seconds each step (thread count x batch size) of the lock measurement runs.
#[cfg(feature = "iova")]
const LOCK_SECONDS: f64 = 0.4;
/// Pages each thread keeps allocated while it measures (the tree then holds
/// `threads x LOCK_OUTSTANDING` ranges, the order of the seed run's in-flight I/Os).
#[cfg(feature = "iova")]
const LOCK_OUTSTANDING: usize = 4096;
/// Items per call the hold time is measured at: one, a few, a quarter and a whole
/// magazine of Linux's 127.
#[cfg(feature = "iova")]
const LOCK_BATCHES: [usize; 4] = [1, 8, 32, 127];

/// The hold-time model's a and b for the crate's own tree: `threads` threads call
/// `IovaDomain::alloc_batch` (k one-page ranges, one lock hold) and `free_batch` (the k
/// oldest, one hold) back to back for a fixed time, for each k of `LOCK_BATCHES`; the
/// time per call is wall / calls, and a least-squares line through (1/k, time per item)
/// gives b (the intercept: what each item costs) and a (the slope: what a call costs
/// whatever it moves); time per call = a + b x k. On 1 thread the lock is never contended: there the time per call is what the
/// call holds the lock for plus its own overhead, a lower bound on the hold time. On
/// more threads the calls queue on the lock: the time per call is the lock's throughput,
/// which contention (the lock's line moving between cores) lowers.
#[cfg(feature = "iova")]
fn lock_capacity(threads: usize) -> String {
    let mut counts = vec![1];
    if threads > 1 {
        counts.push(threads);
    }
    let mut rows = Vec::new();
    let mut fits = Vec::new();
    for &n in &counts {
        let mut points = Vec::new();
        for k in LOCK_BATCHES {
            let (calls, seconds) = hammer_tree(n, k);
            let per_call_ns = seconds * 1e9 / calls as f64;
            // Per item against 1/k: per item = b + a / k. Fitting this rather than the
            // time per call weighs each k alike (the largest k would set the line alone).
            points.push((1.0 / k as f64, per_call_ns / k as f64));
            rows.push(vec![
                n.to_string(),
                k.to_string(),
                calls.to_string(),
                format!("{seconds:.2} s"),
                format!("{:.2}M", calls as f64 / seconds / 1e6),
                format!("{per_call_ns:.0} ns"),
                format!("{:.1} ns", per_call_ns / k as f64),
            ]);
        }
        let (b, a) = least_squares(&points);
        fits.push(format!(
            "{n} thread{}: a = {a:.0} ns, b = {b:.1} ns per item (a single-item call: {:.0} ns, C = {:.1}M calls/s)",
            if n == 1 { " (uncontended)" } else { "s (contended)" },
            a + b,
            1e3 / (a + b),
        ));
    }
    let header = [
        "threads",
        "items per call k",
        "tree calls",
        "wall",
        "calls/s",
        "per call",
        "per item",
    ]
    .map(String::from);
    let mut out = format!(
        "Tree-lock hold time a + b x items, measured: each thread keeps {LOCK_OUTSTANDING} one-page IOVAs allocated and repeats `IovaDomain::alloc_batch(k pages)` + `free_batch(k oldest)`, each one lock hold, for {LOCK_SECONDS} s per k, straight on the range tree (no cache).\n"
    );
    out.push_str(&markdown(&header, &rows));
    out.push_str("Least-squares fit of the time per item against 1/k (per item = b + a/k, per call = a + b x k):\n");
    for fit in fits {
        out.push_str(&format!("  {fit}\n"));
    }
    out.push_str(
        "On 1 thread the lock is never contended: the time per call is what one call holds the lock for on this machine, plus the call's own overhead. That is a lower bound on the hold time on a 256-CPU machine, where the lock's and the tree's cache lines cross sockets. The simulation's --hold-a-ns and --hold-b-ns default to the 1-thread fit of examples/seed/README.md.\n",
    );
    out
}

/// The intercept and slope of the least-squares line through `points`.
#[cfg(feature = "iova")]
fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), &(x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let sxy: f64 = points.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    let b = sxy / sxx;
    (my - b * mx, b)
}

#[cfg(not(feature = "iova"))]
fn lock_capacity(_threads: usize) -> String {
    "Tree-lock hold time: needs the iova feature.\n".into()
}

/// `threads` threads hammer one IOVA domain's tree for `LOCK_SECONDS` with calls of `k`
/// pages each; returns the calls made (alloc batches + free batches) and the seconds
/// from the common start to the last thread's end.
#[cfg(feature = "iova")]
fn hammer_tree(threads: usize, k: usize) -> (u64, f64) {
    use std::collections::VecDeque;

    let domain = magazine::iova::IovaDomain::new(4096, 1);
    let calls = AtomicU64::new(0);
    let start = Barrier::new(threads + 1);
    let began = OnceLock::new();
    thread::scope(|s| {
        for _ in 0..threads {
            let (domain, calls, start) = (&domain, &calls, &start);
            s.spawn(move || {
                let mut held: VecDeque<u64> = VecDeque::with_capacity(LOCK_OUTSTANDING + k);
                let alloc = |held: &mut VecDeque<u64>, n: usize| {
                    let handed = domain
                        .alloc_batch(1, u64::MAX, true, n, &mut |iova| {
                            held.push_back(iova.pfn_lo)
                        })
                        .expect("a 64-bit space has room");
                    assert_eq!(handed, n, "a 64-bit space has room");
                };
                alloc(&mut held, LOCK_OUTSTANDING);
                start.wait();
                let until = Instant::now() + Duration::from_secs_f64(LOCK_SECONDS);
                let mut mine = 0;
                while Instant::now() < until {
                    for _ in 0..(64 / k).max(1) {
                        alloc(&mut held, k);
                        let freed = domain
                            .free_batch(held.drain(..k))
                            .expect("allocated by this thread, freed once");
                        debug_assert_eq!(freed, k);
                        mine += 2;
                    }
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
