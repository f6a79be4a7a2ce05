//! The seed scenario's access pattern at small scale, for each `DepotPolicy`.
//!
//! 16 vCPUs keep 16 I/Os in flight each and allocate an item per I/O on their own slot;
//! the IRQ CPUs 0, 4, 8, 12 complete 1 to 64 pending I/Os of their group at a time and
//! free the items on *their* slots (`free_on`/`alloc_on` on one thread, as the seed
//! example does). Depot sizes are the seed's scaled by 16/256: `Fixed{2}` stands for
//! Linux <= 6.6's `Fixed{32}` on 256 CPUs, `Fixed{16}` for the seed patch
//! `Fixed{max(32, cpus)}`, and the dynamic depots have target 16 (= cpus). Trims run on
//! a simulated clock: 1.9M IOPS x 16/256, `OnePerTick` every 100 ms, `WorkingSet` every
//! 1000 ms.
//!
//! Slow-path calls (from `Stats`) are printed once per policy from a fixed-length run;
//! criterion times the I/Os (one free + one alloc each, plus exchanges, slow-path calls and
//! trims). The source is a free list behind a mutex: a cheap slow path next to the
//! rbtree of a real IOVA allocator, so time differences here understate the real ones.

mod common;

use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use magazine::{Cache, Config, DepotPolicy, Trim};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use common::FreeList;

const CPUS: usize = 16;
const IRQ_STRIDE: usize = 4;
const DEPTH: usize = 16;
const BATCH: usize = 64;
/// Completed I/Os per simulated second.
const IOPS: u64 = 1_900_000 * CPUS as u64 / 256;
const SEED: u64 = 0x5eed;

/// A depot policy and its trim period in simulated ms (`None`: never trimmed).
struct Policy {
    name: &'static str,
    depot: DepotPolicy,
    trim_every_ms: Option<u64>,
}

fn policies() -> [Policy; 4] {
    [
        Policy {
            name: "Fixed{2} (Linux <= 6.6, scaled)",
            depot: DepotPolicy::Fixed { max_full: 2 },
            trim_every_ms: None,
        },
        Policy {
            name: "Fixed{16} (seed patch, scaled)",
            depot: DepotPolicy::Fixed { max_full: CPUS },
            trim_every_ms: None,
        },
        Policy {
            name: "Dynamic{16, OnePerTick} /100ms",
            depot: common::dynamic(CPUS, Trim::OnePerTick),
            trim_every_ms: Some(100),
        },
        Policy {
            name: "Dynamic{16, WorkingSet} /1s",
            depot: common::dynamic(CPUS, Trim::WorkingSet),
            trim_every_ms: Some(1000),
        },
    ]
}

/// One IRQ CPU and the pending I/Os (submitting vCPU, item) of its vCPUs.
struct Group {
    irq: usize,
    pending: Vec<(usize, u64)>,
    resubmit: Vec<usize>,
}

/// The workload driving one cache on a simulated clock.
struct Sim {
    cache: Cache<FreeList>,
    groups: Vec<Group>,
    rng: SmallRng,
    ios: u64,
    trim_every_ios: Option<u64>,
    next_trim: u64,
}

impl Sim {
    fn new(policy: &Policy) -> Self {
        let config = Config {
            magazine_size: 127,
            cpus: CPUS,
            depot: policy.depot,
        };
        let cache = Cache::with_config(FreeList::fresh(), config);
        let groups = (0..CPUS)
            .step_by(IRQ_STRIDE)
            .map(|irq| Group {
                irq,
                pending: (irq..irq + IRQ_STRIDE)
                    .flat_map(|vcpu| (0..DEPTH).map(move |_| vcpu))
                    .map(|vcpu| (vcpu, cache.alloc_on(vcpu).unwrap()))
                    .collect(),
                resubmit: Vec::with_capacity(BATCH),
            })
            .collect();
        let trim_every_ios = policy.trim_every_ms.map(|ms| IOPS * ms / 1000);
        Sim {
            cache,
            groups,
            rng: SmallRng::seed_from_u64(SEED),
            ios: 0,
            trim_every_ios,
            next_trim: trim_every_ios.unwrap_or(u64::MAX),
        }
    }

    /// Completes exactly `ios` I/Os, resubmitting each, with the trims that fall due.
    fn run(&mut self, ios: u64) {
        let end = self.ios + ios;
        while self.ios < end {
            let index = self.rng.random_range(0..self.groups.len());
            let group = &mut self.groups[index];
            let most = BATCH
                .min(group.pending.len())
                .min((end - self.ios) as usize);
            let count = self.rng.random_range(1..=most);
            group.pending.partial_shuffle(&mut self.rng, count);
            for _ in 0..count {
                let (vcpu, item) = group.pending.pop().unwrap();
                self.cache.free_on(group.irq, item);
                group.resubmit.push(vcpu);
            }
            for vcpu in group.resubmit.drain(..) {
                let item = self.cache.alloc_on(vcpu).unwrap();
                group.pending.push((vcpu, item));
            }
            self.ios += count as u64;
            while self.ios >= self.next_trim {
                self.cache.trim();
                self.next_trim += self.trim_every_ios.unwrap();
            }
        }
    }
}

/// I/Os of the warm-up and of the counted part of the slow-path report.
const WARMUP_IOS: u64 = 200_000;
const COUNTED_IOS: u64 = 1_000_000;

fn print_slow_paths() {
    eprintln!(
        "policies: slow-path calls per 1000 I/Os after {WARMUP_IOS} warm-up I/Os, over {COUNTED_IOS} I/Os \
         ({CPUS} vCPUs, IRQ CPUs every {IRQ_STRIDE}, depth {DEPTH}, magazine 127)"
    );
    eprintln!(
        "    {:<34} {:>12} {:>12} {:>10} {:>12}",
        "policy", "allocs/1k", "frees/1k", "peak depot", "ns/I/O"
    );
    for policy in policies() {
        let mut sim = Sim::new(&policy);
        sim.run(WARMUP_IOS);
        let before = sim.cache.stats();
        let start = Instant::now();
        sim.run(COUNTED_IOS);
        let wall = start.elapsed();
        let after = sim.cache.stats();
        let per_k = |n: u64| n as f64 * 1000.0 / COUNTED_IOS as f64;
        eprintln!(
            "    {:<34} {:>12.2} {:>12.2} {:>10} {:>12.1}",
            policy.name,
            per_k(after.source_allocs - before.source_allocs),
            per_k(after.source_frees - before.source_frees),
            after.depot_peak,
            wall.as_nanos() as f64 / COUNTED_IOS as f64,
        );
    }
}

fn policies_bench(c: &mut Criterion) {
    print_slow_paths();
    let mut group = c.benchmark_group("policies");
    group.throughput(Throughput::Elements(1));
    for policy in policies() {
        let mut sim = Sim::new(&policy);
        sim.run(WARMUP_IOS);
        group.bench_function(BenchmarkId::from_parameter(policy.name), |b| {
            b.iter_custom(|ios| {
                let start = Instant::now();
                sim.run(ios);
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion(500, 2000, 30);
    targets = policies_bench
}
criterion_main!(benches);
