//! The scenario's parameters: every one a command-line flag, defaulting to the seed report.

use std::fmt;

use clap::{Parser, ValueEnum};

/// Simulated seconds of load from which the steady-state claim (WorkingSet's slow-path
/// rate at most 1/5 of Fixed{32}'s) is checked: the default length.
pub const STEADY_SECONDS: f64 = 60.0;

/// The hold-time model's a (ns): what one source call holds the tree lock for is
/// a + b x items. The median of three `--threads 2` fits on the IovaDomain tree,
/// uncontended (one thread), on the 2-core development machine (2026-12-06, `6bd93c9`):
/// see examples/seed/README.md.
pub const HOLD_A_NS: f64 = 7.0;
/// The hold-time model's b (ns per item), measured as [`HOLD_A_NS`].
pub const HOLD_B_NS: f64 = 110.0;

/// How an unmap returns its IOVA (Linux: `iommu.strict=1` or the lazy default).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Strict IOTLB invalidation: the IRQ CPU frees the item at once on its own slot.
    Strict,
    /// Lazy (flush queue), the unmap queued on the IRQ CPU that completed the I/O.
    LazyIrq,
    /// Lazy (flush queue), the unmap queued on the CPU that submitted the I/O (completion
    /// steered back to the submitter, e.g. blk-mq `rq_affinity=2` or per-CPU queues).
    LazySubmit,
}

impl Mode {
    /// Whether unmaps go through the flush queue.
    pub fn lazy(self) -> bool {
        self != Mode::Strict
    }

    /// One line on what the mode does, for table headings and figure captions.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Strict => "strict: the IRQ CPU frees each IOVA at once on its own slot",
            Mode::LazyIrq => {
                "lazy: unmaps queued on the IRQ CPU's flush queue (full queue self-drains, 10 ms timer drains all on one CPU)"
            }
            Mode::LazySubmit => {
                "lazy: unmaps queued on the submitting CPU's flush queue (full queue self-drains, 10 ms timer drains all on one CPU)"
            }
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .to_possible_value()
            .expect("no variant is skipped")
            .get_name()
            .to_owned();
        f.write_str(&name)
    }
}

/// The seed scenario: 256 vCPUs submit 4 KiB reads, 16 IRQ CPUs complete them in batches.
#[derive(Parser, Debug, Clone)]
#[command(
    about = "The seed scenario: the 256-CPU Linux IOVA cache collapse replayed on this crate's \
             cache, one table per unmap mode comparing every depot policy (deterministic; \
             about 2 minutes on 2 cores with the defaults; --help says more)",
    long_about = "The seed scenario: the workload of the 256-CPU Linux IOVA rcache report \
                  replayed on this crate's real cache, on a simulated clock. 256 vCPUs keep 16 \
                  I/Os in flight each; the 16 IRQ CPUs 0, 16, ..., 240 complete them. For each \
                  unmap mode (lazy-submit, lazy-irq, strict) it runs five depot policies \
                  (Linux <= 6.6's Fixed{32}, the report's Fixed{256}, Linux >= 6.7's \
                  OnePerTick, this crate's WorkingSet, a depot never trimmed), each with one \
                  item per source refill and with a magazine per refill, for 60 simulated \
                  seconds of load and 5 of idle time, then prints a table per mode with a \
                  legend, and writes target/seed/seed.csv and target/seed/seed.svg. The same \
                  seed gives the same numbers on any machine.\n\n\
                  Run time: about 2 minutes of wall time on 2 cores with the defaults (the \
                  policies run in parallel, --jobs); it scales with --seconds and with the \
                  number of modes and --working-set-ms intervals (--seconds 2: a few seconds). \
                  --threads N instead runs the strict load on N real threads for --seconds.",
    after_help = "Examples:\n  \
                  cargo run --release --example seed\n  \
                  cargo run --release --example seed -- --target 16 --working-set-ms 2000,100,1000\n  \
                  cargo run --release --example seed -- --modes strict --seconds 10 --wide\n  \
                  cargo run --release --example seed -- --seconds 2 --check\n\n\
                  The case study: examples/seed/README.md."
)]
pub struct Scenario {
    /// Virtual CPUs (one cache slot each); every one submits I/Os.
    #[arg(long, default_value_t = 256)]
    pub cpus: usize,
    /// The IRQ CPUs are 0, stride, 2*stride, ...; vCPU c completes on stride*(c/stride).
    #[arg(long, default_value_t = 16)]
    pub irq_stride: usize,
    /// I/Os each vCPU keeps in flight.
    #[arg(long, default_value_t = 16)]
    pub depth: usize,
    /// An interrupt completes between 1 and this many of its pending I/Os (uniformly).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Items per magazine (Linux: IOVA_MAG_SIZE).
    #[arg(long, default_value_t = 127)]
    pub magazine_size: usize,
    /// Completed I/Os per simulated second: the clock of the simulation.
    #[arg(long, default_value_t = 1_900_000)]
    pub iops: u64,
    /// Simulated seconds of load.
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// Percentage of the load's I/Os that are warm-up (not counted in the rates).
    #[arg(long, default_value_t = 20.0)]
    pub warmup_percent: f64,
    /// Simulated seconds after the load during which trim keeps its schedule.
    #[arg(long, default_value_t = 5.0)]
    pub idle_seconds: f64,
    /// Seed of the random completions; every policy sees the same sequence.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Trim period of Dynamic{OnePerTick} in simulated ms (Linux's IOVA_DEPOT_DELAY).
    #[arg(long, default_value_t = 100)]
    pub one_per_tick_ms: u64,
    /// Trim period(s) of Dynamic{WorkingSet} in simulated ms, comma-separated; the first
    /// is the one the checks use, the others are extra rows to compare intervals.
    #[arg(long, value_delimiter = ',', default_value = "2000")]
    pub working_set_ms: Vec<u64>,
    /// Instead of one pinned submitter per vCPU: this many jobs (like fio's), not pinned,
    /// each keeping cpus x depth / J I/Os in flight and moving to a random CPU every
    /// --migrate-every completions.
    #[arg(long)]
    pub unpinned_jobs: Option<usize>,
    /// With --unpinned-jobs: a job's completions between two migrations.
    #[arg(long, default_value_t = 10_000)]
    pub migrate_every: u64,
    /// The unmap modes to run, comma-separated; one table each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lazy-submit,lazy-irq,strict"
    )]
    pub modes: Vec<Mode>,
    /// Lazy mode: ring slots of a CPU's flush queue (Linux: IOVA_FQ_SIZE; holds one less).
    #[arg(long, default_value_t = 256)]
    pub fq_size: usize,
    /// Lazy mode: the flush timer's delay in simulated ms (Linux: IOVA_FQ_TIMEOUT).
    #[arg(long, default_value_t = 10)]
    pub fq_timeout_ms: u64,
    /// The IOPS model's tree-lock capacities C, in millions of one-item slow-path calls
    /// per second, comma-separated (a one-item call holds the lock 1/C, split between a
    /// and b in the measured ratio of --hold-a-ns to --hold-b-ns).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub lock_mcalls: Vec<f64>,
    /// The hold-time model's fixed cost of one source call under the tree lock, in ns:
    /// a lock hold is a + b x items. The default is measured on this crate's IovaDomain
    /// tree with `--threads 2` (see examples/seed/README.md), not on a 256-CPU machine.
    #[arg(long, default_value_t = HOLD_A_NS)]
    pub hold_a_ns: f64,
    /// The hold-time model's cost per item of a source call under the tree lock, in ns.
    #[arg(long, default_value_t = HOLD_B_NS)]
    pub hold_b_ns: f64,
    /// Full magazines trimming leaves in a Dynamic depot [default: cpus].
    #[arg(long)]
    pub target: Option<usize>,
    /// Simulated ms between two points of the CSV and the plot.
    #[arg(long, default_value_t = 10)]
    pub sample_ms: u64,
    /// Policies simulated at once [default: available parallelism].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Instead of the simulation: the same workload (strict mode) on N real OS threads,
    /// reporting operations per second per policy, then the calls per second the IOVA
    /// range tree's lock serves on N threads (the IOPS model's C on this machine).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Exit with status 1 unless the properties the case study claims hold.
    #[arg(long)]
    pub check: bool,
    /// One value per column (13 columns, about 300 characters wide) instead of the
    /// grouped columns.
    #[arg(long)]
    pub wide: bool,
}

impl Scenario {
    /// The modes in run order, each once.
    pub fn modes(&self) -> Vec<Mode> {
        let mut modes = self.modes.clone();
        let mut seen = Vec::new();
        modes.retain(|m| {
            let new = !seen.contains(m);
            seen.push(*m);
            new
        });
        modes
    }

    /// Whether the trim target is Linux's (`num_online_cpus()`): the properties that rely
    /// on trimming never cutting below demand hold only then.
    pub fn linux_target(&self) -> bool {
        self.target() >= self.cpus
    }

    /// The depot length trimming aims at.
    pub fn target(&self) -> usize {
        self.target.unwrap_or(self.cpus)
    }

    /// I/Os of the whole load.
    pub fn total_ios(&self) -> u64 {
        (self.seconds * self.iops as f64).round() as u64
    }

    /// I/Os of the warm-up.
    pub fn warmup_ios(&self) -> u64 {
        (self.total_ios() as f64 * self.warmup_percent / 100.0).round() as u64
    }

    /// Simulated nanoseconds after `ios` completed I/Os.
    pub fn ns_at(&self, ios: u64) -> u64 {
        (u128::from(ios) * 1_000_000_000 / u128::from(self.iops)) as u64
    }

    /// Rejects parameters the workload cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("--cpus", self.cpus),
            ("--irq-stride", self.irq_stride),
            ("--depth", self.depth),
            ("--batch", self.batch),
            ("--magazine-size", self.magazine_size),
            ("--iops", self.iops as usize),
            ("--sample-ms", self.sample_ms as usize),
            ("--one-per-tick-ms", self.one_per_tick_ms as usize),
            ("--fq-size", self.fq_size),
            ("--fq-timeout-ms", self.fq_timeout_ms as usize),
            ("--threads", self.threads.unwrap_or(1)),
            ("--unpinned-jobs", self.unpinned_jobs.unwrap_or(1)),
            ("--migrate-every", self.migrate_every as usize),
        ];
        if let Some((flag, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{flag} must be at least 1"));
        }
        if self.working_set_ms.is_empty() || self.working_set_ms.contains(&0) {
            return Err("--working-set-ms needs periods of at least 1 ms".into());
        }
        if !(self.seconds > 0.0 && self.idle_seconds >= 0.0) {
            return Err("--seconds must be positive and --idle-seconds not negative".into());
        }
        if self.threads.is_some() && self.check {
            return Err("--check verifies the simulation's properties: drop --threads".into());
        }
        if self.threads.is_some() && self.unpinned_jobs.is_some() {
            return Err("--threads runs the pinned load only: drop --unpinned-jobs".into());
        }
        if self.modes.is_empty() {
            return Err("--modes needs at least one of strict, lazy-irq, lazy-submit".into());
        }
        if !(self.hold_a_ns >= 0.0
            && self.hold_b_ns >= 0.0
            && self.hold_a_ns + self.hold_b_ns > 0.0)
        {
            return Err("--hold-a-ns and --hold-b-ns must be >= 0, not both 0".into());
        }
        if self.lock_mcalls.is_empty() || !self.lock_mcalls.iter().all(|&c| c > 0.0) {
            return Err("--lock-mcalls needs positive capacities".into());
        }
        if !(0.0..100.0).contains(&self.warmup_percent) {
            return Err("--warmup-percent must be in [0, 100)".into());
        }
        Ok(())
    }
}
