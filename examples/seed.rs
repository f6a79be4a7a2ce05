//! The seed scenario: the workload of the 256-CPU Linux IOVA rcache report, on the real
//! crate code, comparing the depot policies Linux used, the seed report's patch, and this
//! crate's working-set trim, in Linux's strict and lazy (flush-queue) unmap modes.
//!
//! 256 virtual CPUs keep 16 I/Os in flight each and allocate an item (an IOVA) per I/O on
//! their own cache slot; only the 16 IRQ CPUs 0, 16, ..., 240 complete I/Os. How a
//! completed I/O's item comes back is the mode:
//! - `strict`: the IRQ CPU frees it at once on its own slot. Items flow one way, IRQ slots
//!   -> depot -> submitting slots.
//! - `lazy-irq`, `lazy-submit`: the unmap is queued on a per-CPU flush queue (of the IRQ
//!   CPU, or of the submitting CPU) with Linux's parameters: 256 ring slots, a full queue
//!   drained by its own CPU, a 10 ms timer that drains every CPU's queue through the slot
//!   of the one CPU it runs on (see `seed/flush.rs`).
//!
//! Whenever the depot cannot absorb the imbalance the slow path (the source) runs. One
//! thread per policy and mode drives a `Cache` through `alloc_on`/`free_on` on a simulated
//! clock (completed I/Os / IOPS), so a run is deterministic for its seed. Compared: a
//! `Fixed{32}` depot (Linux <= 6.6), `Fixed{max(32, cpus)}` (the seed report's patch),
//! `Dynamic` trimmed one magazine per 100 ms (Linux >= 6.7), `Dynamic` trimmed by working
//! set (this crate), and a depot never trimmed (the best any depot can do). After the load
//! an idle phase shows how fast each gives memory back. Every policy runs twice: the cache
//! asking its source for one item per refill (Linux's one range per miss) and for a whole
//! magazine per call (the crate's default, `Options::source_batch`). The simulation counts
//! slow-path calls and the items they move, and items held; its IOPS columns are a model
//! (the device limit, or what the one tree lock allows when a call holds it a + b x items,
//! with a and b measured by `--threads`), not a measurement.
//!
//! Prints one table per mode on stdout, then a legend of the columns, and writes
//! `target/seed/seed.csv` and `target/seed/seed.svg`. The case study built on it, with
//! its tables and sources, is `examples/seed/README.md`.
//!
//! ```text
//! cargo run --release --example seed                       # the case study's tables
//! cargo run --release --example seed -- --seconds 2 --check   # CI: exit 1 if a claim fails
//! cargo run --release --example seed -- --target 16 --working-set-ms 2000,100,1000
//!                                        # a target the depot exceeds; compare intervals
//! cargo run --release --example seed -- --modes strict     # one mode only
//! cargo run --release --example seed -- --wide             # one value per column
//! cargo run --release --example seed -- --unpinned-jobs 12  # 12 migrating fio-like jobs
//! cargo run --release --example seed -- --threads 2 --seconds 2
//!                      # real threads, ops per second; the tree lock's hold time a + b x items
//! cargo run --release --example seed -- --help
//! ```

// An example's crate root looks for modules beside itself (`examples/`), so each one is
// pointed into `examples/seed/` (cargo builds no example from a directory without main.rs).
#[path = "seed/contender.rs"]
mod contender;
#[path = "seed/flush.rs"]
mod flush;
#[path = "seed/jobs.rs"]
mod jobs;
#[path = "seed/plot.rs"]
mod plot;
#[path = "seed/report.rs"]
mod report;
#[path = "seed/scenario.rs"]
mod scenario;
#[path = "seed/sim.rs"]
mod sim;
#[path = "seed/source.rs"]
mod source;
#[path = "seed/threads.rs"]
mod threads;
#[path = "seed/workload.rs"]
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use contender::Contender;
use scenario::{Mode, Scenario};
use sim::Outcome;

fn main() -> ExitCode {
    let scenario = Scenario::parse();
    if let Err(message) = scenario.validate() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let contenders = Contender::all(&scenario);
    if let Some(threads) = scenario.threads {
        print!("{}", threads::compare(&scenario, &contenders, threads));
        return ExitCode::SUCCESS;
    }

    let modes = scenario.modes();
    let outcomes = simulate_all(&scenario, &modes, &contenders);
    let by_mode: Vec<(Mode, &[Outcome])> = modes
        .iter()
        .zip(outcomes.chunks(contenders.len()))
        .map(|(&m, o)| (m, o))
        .collect();
    for (mode, outcomes) in &by_mode {
        println!("{mode} ({})", mode.describe());
        println!("{}", report::table(outcomes, &scenario));
    }
    println!("{}", report::legend(&scenario));
    match write_outputs(&by_mode, &outcomes) {
        Ok(paths) => paths.iter().for_each(|p| println!("wrote {}", p.display())),
        Err(error) => {
            eprintln!("error: writing target/seed: {error}");
            return ExitCode::FAILURE;
        }
    }
    if scenario.check {
        let properties: Vec<_> = by_mode
            .iter()
            .flat_map(|(_, o)| report::properties(o, &scenario))
            .collect();
        return check(&properties);
    }
    ExitCode::SUCCESS
}

/// `--check`: prints every property with its measurement on stderr; fails if one fails.
fn check(properties: &[report::Property]) -> ExitCode {
    for p in properties {
        let verdict = if p.holds { "ok  " } else { "FAIL" };
        eprintln!("check {verdict} {}: {}", p.claim, p.measured);
    }
    let failed = properties.iter().filter(|p| !p.holds).count();
    if failed > 0 {
        eprintln!("check: {failed} of {} properties failed", properties.len());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Simulates every policy in every mode twice, the cache asking its source for one item
/// per refill (Linux's `alloc_iova`, one range per miss) and for a whole magazine (the
/// crate's default), `--jobs` at a time, each on its own thread; returns the one-at-a-time
/// outcomes, each holding its batched twin, mode by mode, each mode in table order.
fn simulate_all(scenario: &Scenario, modes: &[Mode], contenders: &[Contender]) -> Vec<Outcome> {
    let batches = [1, scenario.magazine_size];
    let runs: Vec<(Mode, &Contender, usize)> = modes
        .iter()
        .flat_map(|&m| contenders.iter().map(move |c| (m, c)))
        .flat_map(|(m, c)| batches.map(|b| (m, c, b)))
        .collect();
    let jobs = scenario
        .jobs
        .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, runs.len());
    let bars = progress_bars(scenario, &runs);
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                // Workers take the next policy until none is left: the wall time of a
                // policy is then its own, not shared with more runnable threads than cores.
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(mode, contender, batch)) = runs.get(i) else {
                        break;
                    };
                    let outcome = sim::simulate(scenario, mode, contender, batch, &bars[i]);
                    outcomes.lock().unwrap().push((i, outcome));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(i, _)| *i);
    let mut runs = outcomes.into_iter().map(|(_, o)| o);
    std::iter::from_fn(|| {
        let mut single = runs.next()?;
        single.batched = runs.next().map(Box::new);
        Some(single)
    })
    .collect()
}

/// One bar per run on stderr, in simulated ms (hidden when stderr is not a terminal).
fn progress_bars(scenario: &Scenario, runs: &[(Mode, &Contender, usize)]) -> Vec<ProgressBar> {
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template(
        "{prefix:>44} [{bar:40}] {pos:>6}/{len} simulated ms {elapsed:>4}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    let length = ((scenario.seconds + scenario.idle_seconds) * 1000.0) as u64;
    runs.iter()
        .map(|(m, c, b)| {
            multi
                .add(ProgressBar::new(length))
                .with_style(style.clone())
                .with_prefix(format!("{m} {} batch {b}", c.label()))
        })
        .collect()
}

/// Writes the CSV and the plot under `target/seed/` of the workspace (wherever cargo
/// builds); returns their paths.
fn write_outputs(
    by_mode: &[(Mode, &[Outcome])],
    outcomes: &[Outcome],
) -> std::io::Result<Vec<PathBuf>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/seed");
    std::fs::create_dir_all(&dir)?;
    let csv = dir.join("seed.csv");
    report::write_csv(outcomes, &csv)?;
    let svg = dir.join("seed.svg");
    plot::draw(by_mode, &svg).map_err(std::io::Error::other)?;
    Ok(vec![csv, svg])
}
