//! The deterministic simulation of one policy in one unmap mode: one thread drives the
//! real `Cache` for every virtual CPU, on a simulated clock (completed I/Os / IOPS).

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use magazine::{Cache, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::contender::Contender;
use crate::flush::{FlushCounts, FlushQueues};
use crate::jobs::JobLoad;
use crate::scenario::{Mode, Scenario};
use crate::source::{CountingIds, SlowPath};
use crate::workload::{irq_cpus, IrqGroup, Unmap};

/// Which part of the run a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Load,
    Idle,
}

/// One point of the time series (CSV and plot).
#[derive(Clone, Debug)]
pub struct Sample {
    pub ns: u64,
    pub phase: Phase,
    /// Magazines holding items (full or partly filled) in the depot at the sample's
    /// instant (`Stats::depot_full`).
    pub depot_full: usize,
    /// The most such magazines seen since the previous sample: at this sample, right
    /// after every flush-queue timer drain in between (the lazy mode's spikes), and any
    /// new high `Stats::depot_peak` recorded in between (inside a trim's idle-slot
    /// reclaim, or between two interrupts). So the highest value over the samples is the
    /// run's `depot_peak_run`.
    pub depot_full_max: usize,
    /// The fewest such magazines seen since the previous sample: at this sample and right
    /// before every flush-queue timer drain in between.
    pub depot_full_min: usize,
    pub depot_empty: usize,
    pub cached: usize,
    /// Items unmapped and waiting in the flush queues (lazy mode).
    pub queued: usize,
    pub slow: SlowPath,
}

/// What one policy did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub mode: Mode,
    pub contender: Contender,
    /// I/Os after the warm-up, and the slow-path calls they caused.
    pub counted_ios: u64,
    pub counted_slow: SlowPath,
    /// Slow-path calls of the whole load, warm-up included.
    pub load_slow: SlowPath,
    /// The most magazines holding items the depot held during the load
    /// (`Stats::depot_peak` at its end).
    pub depot_peak: usize,
    /// The same over the whole run: the load, the completion of the last in-flight I/Os,
    /// and the idle phase.
    pub depot_peak_run: usize,
    /// Items in the slots, the depot and the flush queues once the load stopped and its
    /// I/Os completed.
    pub held_at_load_end: usize,
    pub held_after_idle: usize,
    /// Full magazines in the depot at the end of the idle phase.
    pub depot_after_idle: usize,
    /// Simulated time from the end of the load until the depot was at its target; `None`
    /// when it was still above it at the end of the idle phase.
    pub back_to_target_ns: Option<u64>,
    pub warmup_end_ns: u64,
    pub load_end_ns: u64,
    pub wall: Duration,
    pub samples: Vec<Sample>,
    /// What the flush queues did (all zero in strict mode).
    pub flush: FlushCounts,
    /// Disagreements between the source's own counts and the cache's `Stats`.
    pub audit: Vec<String>,
    /// Items the cache asks the source for per refill (`Options::source_batch`): 1 is
    /// Linux's one at a time.
    pub source_batch: usize,
    /// The same policy and mode run with the other batch size (`main` pairs them: the
    /// one-at-a-time run holds the batched one).
    pub batched: Option<Box<Outcome>>,
}

impl Outcome {
    /// Slow-path allocations per 1000 counted I/Os.
    pub fn allocs_per_k(&self) -> f64 {
        per_k(self.counted_slow.allocs, self.counted_ios)
    }

    /// Slow-path frees per 1000 counted I/Os.
    pub fn frees_per_k(&self) -> f64 {
        per_k(self.counted_slow.frees, self.counted_ios)
    }

    /// Slow-path alloc calls per 1000 counted I/Os (each hands 1 to `source_batch` items).
    pub fn alloc_calls_per_k(&self) -> f64 {
        per_k(self.counted_slow.alloc_calls, self.counted_ios)
    }

    /// Slow-path free calls per 1000 counted I/Os (each a magazine or less).
    pub fn free_calls_per_k(&self) -> f64 {
        per_k(self.counted_slow.free_calls, self.counted_ios)
    }

    /// Slow-path calls (allocs + frees) per counted I/O.
    pub fn slow_calls_per_io(&self) -> f64 {
        let s = self.counted_slow;
        (s.alloc_calls + s.free_calls) as f64 / self.counted_ios.max(1) as f64
    }

    /// Items moved by slow-path calls (allocs + frees) per counted I/O.
    pub fn slow_items_per_io(&self) -> f64 {
        (self.counted_slow.allocs + self.counted_slow.frees) as f64 / self.counted_ios.max(1) as f64
    }
}

fn per_k(calls: u64, ios: u64) -> f64 {
    calls as f64 * 1000.0 / ios.max(1) as f64
}

/// A periodic event on the simulated clock (a trim, a sample).
struct Every {
    period_ns: u64,
    next_ns: u64,
}

impl Every {
    fn new(period_ns: u64) -> Self {
        Every {
            period_ns,
            next_ns: period_ns,
        }
    }

    /// Whether the event is due at `now`; if so, schedules the next one. Call in a loop:
    /// a long step may cover several periods.
    fn due(&mut self, now_ns: u64) -> bool {
        let due = now_ns >= self.next_ns;
        if due {
            self.next_ns += self.period_ns;
        }
        due
    }
}

/// Where a completed I/O's item goes: straight back to the cache, or into a flush queue.
struct Unmapper {
    mode: Mode,
    queues: Option<FlushQueues<u32>>,
}

impl Unmapper {
    fn new(scenario: &Scenario, mode: Mode) -> Self {
        Unmapper {
            mode,
            queues: mode.lazy().then(|| {
                FlushQueues::new(
                    scenario.cpus,
                    scenario.fq_size,
                    scenario.fq_timeout_ms * 1_000_000,
                )
            }),
        }
    }

    /// The unmap of a completed I/O at simulated time `now_ns`.
    fn unmap(&mut self, cache: &Cache<CountingIds>, io: Unmap<u32>, now_ns: u64) {
        match (self.mode, &mut self.queues) {
            (Mode::LazyIrq, Some(queues)) => queues.queue(cache, io.irq, io.item, now_ns),
            (Mode::LazySubmit, Some(queues)) => queues.queue(cache, io.vcpu, io.item, now_ns),
            _ => cache.free_on(io.irq, io.item),
        }
    }

    fn queued(&self) -> usize {
        self.queues.as_ref().map_or(0, FlushQueues::queued)
    }
}

/// The submitters: one per vCPU, pinned (the default), or `--unpinned-jobs` migrating jobs.
enum Load {
    Pinned(Vec<IrqGroup<u32>>),
    Jobs(JobLoad<u32>),
}

impl Load {
    /// One interrupt (on a uniformly chosen IRQ CPU for the pinned load); returns the I/Os
    /// it completed.
    fn interrupt(
        &mut self,
        cache: &Cache<CountingIds>,
        rng: &mut impl Rng,
        batch: usize,
        unmap: &mut impl FnMut(Unmap<u32>),
    ) -> usize {
        match self {
            Load::Pinned(groups) => {
                let group = rng.random_range(0..groups.len());
                groups[group].interrupt(cache, rng, batch, unmap)
            }
            Load::Jobs(jobs) => jobs.interrupt(cache, rng, batch, unmap),
        }
    }

    fn complete_all(&mut self, unmap: &mut impl FnMut(Unmap<u32>)) {
        match self {
            Load::Pinned(groups) => groups.iter_mut().for_each(|g| g.complete_all(unmap)),
            Load::Jobs(jobs) => jobs.complete_all(unmap),
        }
    }

    fn in_flight(&self) -> usize {
        match self {
            Load::Pinned(groups) => groups.iter().map(IrqGroup::in_flight).sum(),
            Load::Jobs(jobs) => jobs.in_flight(),
        }
    }
}

/// The simulation of one policy in progress.
struct Run<'a> {
    scenario: &'a Scenario,
    contender: &'a Contender,
    cache: Cache<CountingIds>,
    unmapper: Unmapper,
    trims: Option<Every>,
    sampler: Every,
    samples: Vec<Sample>,
    /// The most and the fewest magazines holding items seen since the last sample.
    depot_max: usize,
    depot_min: usize,
    /// `Stats::depot_peak` at the last sample: a higher one since is a high of this interval.
    peak_seen: usize,
}

/// Simulates `contender` on the scenario in `mode`, the cache asking its source for
/// `source_batch` items per refill: the load, then the idle phase.
pub fn simulate(
    scenario: &Scenario,
    mode: Mode,
    contender: &Contender,
    source_batch: usize,
    bar: &ProgressBar,
) -> Outcome {
    let started = Instant::now();
    // The bar was created with the others; its clock starts when this policy does.
    bar.reset_elapsed();
    let mut run = Run {
        scenario,
        contender,
        cache: Cache::with_options(CountingIds::default(), contender.config(scenario), {
            let mut options = Options::default();
            options.source_batch = Some(source_batch);
            options
        }),
        unmapper: Unmapper::new(scenario, mode),
        trims: contender.trim_every_ms.map(|ms| Every::new(ms * 1_000_000)),
        sampler: Every::new(scenario.sample_ms * 1_000_000),
        samples: Vec::new(),
        depot_max: 0,
        depot_min: usize::MAX,
        peak_seen: 0,
    };
    // The same seed for every policy: they all see the same completions in the same order
    // (the random draws never depend on the cache's state).
    let mut rng = SmallRng::seed_from_u64(scenario.seed);
    let mut load = match scenario.unpinned_jobs {
        None => Load::Pinned(
            irq_cpus(scenario)
                .map(|irq| IrqGroup::submit(&run.cache, scenario, irq))
                .collect(),
        ),
        Some(jobs) => Load::Jobs(JobLoad::submit(&run.cache, scenario, jobs)),
    };

    let (warm, done) = run.load(&mut load, &mut rng, bar);
    let load_end_ns = scenario.ns_at(done.ios);
    // A sample at the load's end, so that the load's peak is on the plotted line before
    // the completions below raise it.
    if run.samples.last().is_none_or(|s| s.ns < load_end_ns) {
        run.push_sample(load_end_ns, Phase::Load);
    }
    let depot_peak = run.cache.stats().depot_peak;
    // The load stops: the device completes what is in flight, nobody resubmits.
    {
        let (cache, unmapper) = (&run.cache, &mut run.unmapper);
        load.complete_all(&mut |io| unmapper.unmap(cache, io, load_end_ns));
    }
    let held_at_load_end = run.cache.cached() + run.unmapper.queued();
    let back_to_target_ns = run.idle(load_end_ns);
    let held_after_idle = run.cache.cached() + run.unmapper.queued();
    let depot_after_idle = run.cache.stats().depot_full;
    bar.finish();

    let depot_peak_run = run.cache.stats().depot_peak;
    let mut audit = run.audit(load.in_flight(), source_batch);
    // The plot's panel titles quote the two peaks: each must be a value of its line.
    let line_peak = |phase: Option<Phase>| {
        run.samples
            .iter()
            .filter(|s| phase.is_none_or(|p| s.phase == p))
            .map(|s| s.depot_full_max)
            .max()
            .unwrap_or(0)
    };
    for (what, peak, line) in [
        ("load", depot_peak, line_peak(Some(Phase::Load))),
        ("run", depot_peak_run, line_peak(None)),
    ] {
        if peak != line {
            audit.push(format!(
                "depot peak ({what}) {peak}, but the plotted line's highest is {line}"
            ));
        }
    }
    Outcome {
        mode,
        contender: contender.clone(),
        counted_ios: done.ios - warm.ios,
        counted_slow: done.slow.since(warm.slow),
        load_slow: done.slow,
        depot_peak,
        depot_peak_run,
        held_at_load_end,
        held_after_idle,
        depot_after_idle,
        back_to_target_ns,
        warmup_end_ns: scenario.ns_at(warm.ios),
        load_end_ns,
        wall: started.elapsed(),
        samples: run.samples,
        flush: run
            .unmapper
            .queues
            .as_ref()
            .map_or_else(FlushCounts::default, FlushQueues::counts),
        audit,
        source_batch,
        batched: None,
    }
}

/// Completed I/Os and the source's calls at some instant.
#[derive(Clone, Copy)]
struct Mark {
    ios: u64,
    slow: SlowPath,
}

impl Run<'_> {
    fn mark(&self, ios: u64) -> Mark {
        Mark {
            ios,
            slow: self.cache.source().slow_path(),
        }
    }

    /// Runs the load: random interrupts until the scenario's I/O count is reached, with
    /// trims and samples on schedule. Returns the marks at the end of the warm-up and at
    /// the end of the load.
    fn load(&mut self, load: &mut Load, rng: &mut impl Rng, bar: &ProgressBar) -> (Mark, Mark) {
        let (total, warmup) = (self.scenario.total_ios(), self.scenario.warmup_ios());
        let mut warm = (warmup == 0).then(|| self.mark(0));
        let mut done = 0;
        while done < total {
            let now = self.scenario.ns_at(done);
            let (cache, unmapper) = (&self.cache, &mut self.unmapper);
            done += load.interrupt(cache, rng, self.scenario.batch, &mut |io| {
                unmapper.unmap(cache, io, now)
            }) as u64;
            if warm.is_none() && done >= warmup {
                warm = Some(self.mark(done));
            }
            let now = self.scenario.ns_at(done);
            self.tick(now, Phase::Load);
            bar.set_position(now / 1_000_000);
        }
        (warm.expect("warmup < total"), self.mark(done))
    }

    /// The idle phase: no I/O, trims keep their schedule. Returns how long after the load
    /// the depot was back at its target.
    fn idle(&mut self, load_end_ns: u64) -> Option<u64> {
        let target = self.contender.target();
        let end_ns = load_end_ns + (self.scenario.idle_seconds * 1e9) as u64;
        let mut back = (self.cache.stats().depot_full <= target).then_some(0);
        self.push_sample(load_end_ns, Phase::Idle);
        // Jump from one scheduled event to the next: nothing happens in between.
        let mut now = load_end_ns;
        while now < end_ns {
            let next_trim = self.trims.as_ref().map_or(u64::MAX, |t| t.next_ns);
            let next_flush = self
                .unmapper
                .queues
                .as_ref()
                .and_then(FlushQueues::next_timer_ns)
                .unwrap_or(u64::MAX);
            now = next_trim
                .min(next_flush)
                .min(self.sampler.next_ns)
                .min(end_ns);
            self.tick(now, Phase::Idle);
            if back.is_none() && self.cache.stats().depot_full <= target {
                back = Some(now - load_end_ns);
            }
        }
        back
    }

    /// Runs the flush timer, the trims and takes the samples due at `now`.
    fn tick(&mut self, now_ns: u64, phase: Phase) {
        if let Some(queues) = &mut self.unmapper.queues {
            if queues.next_timer_ns().is_some_and(|at| at <= now_ns) {
                let before = self.cache.stats().depot_full;
                queues.run_timer(&self.cache, now_ns);
                self.depot_min = self.depot_min.min(before);
                self.depot_max = self.depot_max.max(self.cache.stats().depot_full);
            }
        }
        if let Some(trims) = &mut self.trims {
            while trims.due(now_ns) {
                self.cache.trim();
            }
        }
        let mut sample = false;
        while self.sampler.due(now_ns) {
            sample = true;
        }
        if sample {
            self.push_sample(now_ns, phase);
        }
    }

    fn push_sample(&mut self, now_ns: u64, phase: Phase) {
        let stats = self.cache.stats();
        // The peak only rises: a rise since the last sample is a high of this interval
        // that no sample saw (a trim's idle-slot reclaim pushes the slots' magazines and
        // releases them within one call).
        if stats.depot_peak > self.peak_seen {
            self.peak_seen = stats.depot_peak;
            self.depot_max = self.depot_max.max(stats.depot_peak);
        }
        self.samples.push(Sample {
            ns: now_ns,
            phase,
            depot_full: stats.depot_full,
            depot_full_max: self.depot_max.max(stats.depot_full),
            depot_full_min: self.depot_min.min(stats.depot_full),
            depot_empty: stats.depot_empty,
            cached: self.cache.cached(),
            queued: self.unmapper.queued(),
            slow: self.cache.source().slow_path(),
        });
        self.depot_max = 0;
        self.depot_min = usize::MAX;
    }

    /// Cross-checks the cache's `Stats` against the source's own counts (calls and items),
    /// the calls against the items (each call moves at least one item, an alloc call at
    /// most `source_batch`, a free call at most a magazine), and conservation: every item
    /// the source handed out is in flight, queued for a flush, or cached.
    fn audit(&self, in_flight: usize, source_batch: usize) -> Vec<String> {
        let stats = self.cache.stats();
        let seen = self.cache.source().slow_path();
        let mut errors = Vec::new();
        let counted = [
            stats.source_alloc_calls,
            stats.source_allocs,
            stats.source_free_calls,
            stats.source_frees,
        ];
        let own = [seen.alloc_calls, seen.allocs, seen.free_calls, seen.frees];
        if counted != own {
            errors.push(format!(
                "Stats says {counted:?} alloc calls, allocs, free calls, frees; the source saw {own:?}"
            ));
        }
        let magazine = self.scenario.magazine_size as u64;
        for (what, calls, items, most) in [
            ("alloc", seen.alloc_calls, seen.allocs, source_batch as u64),
            ("free", seen.free_calls, seen.frees, magazine),
        ] {
            if items < calls || items > calls * most {
                errors.push(format!(
                    "{calls} {what} calls moved {items} items: not between 1 and {most} per call"
                ));
            }
        }
        let held = (self.cache.cached() + self.unmapper.queued() + in_flight) as u64;
        if held != seen.outstanding() {
            errors.push(format!(
                "{} items outstanding at the source, {held} cached, queued or in flight",
                seen.outstanding()
            ));
        }
        errors
    }
}
