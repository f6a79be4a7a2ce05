//! What the run prints and writes: the table, the CSV, and the checked properties.

use std::fmt::Write as _;
use std::path::Path;

use magazine::DepotPolicy;

use crate::contender::{millis, Role};
use crate::scenario::{Mode, Scenario, STEADY_SECONDS};
use crate::sim::{Outcome, Phase};

/// The table of one mode, one row per policy: slow-path calls and items, one at a time
/// and batched, depot lengths and items held (of the one-at-a-time run), and the
/// hold-time IOPS model for each capacity in `lock_mcalls` and for the measured a and b.
/// Related figures share a column ("a / b") unless `--wide` asks for one value per
/// column; [`legend`] defines every column.
pub fn table(outcomes: &[Outcome], scenario: &Scenario) -> String {
    let capacities: Vec<String> = scenario
        .lock_mcalls
        .iter()
        .map(|c| trim_float(*c))
        .collect();
    fn batched(o: &Outcome) -> &Outcome {
        o.batched.as_deref().expect("main pairs every run")
    }
    let mut header: Vec<String> = vec!["policy".into(), "trim every".into()];
    if scenario.wide {
        for (run, what) in [
            ("1", "alloc calls"),
            ("1", "alloc items"),
            ("B", "alloc calls"),
            ("B", "alloc items"),
            ("1", "free calls"),
            ("1", "free items"),
            ("B", "free calls"),
            ("B", "free items"),
        ] {
            header.push(format!("{what}/1k ({run})"));
        }
        header.extend(
            [
                "depot peak (load)",
                "depot peak (run)",
                "held at load end",
                "held after idle",
                "back to target",
            ]
            .map(String::from),
        );
        for run in ["1", "B"] {
            header.extend(capacities.iter().map(|c| format!("IOPS C={c}M ({run})")));
            header.push(format!("IOPS a,b ({run})"));
        }
    } else {
        header.extend(
            [
                "allocs/1k calls/items (1)",
                "(B)",
                "frees/1k calls/items (1)",
                "(B)",
                "depot peak load/run",
                "held load end/idle",
                "back to target",
            ]
            .map(String::from),
        );
        header.push(format!("IOPS at C={}M (1)", capacities.join("/")));
        header.push("(B)".into());
        header.push("IOPS a,b (1/B)".into());
    }
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let b = batched(o);
            let back = match o.contender.depot {
                // A fixed depot has a cap, not a target it is trimmed back to.
                DepotPolicy::Fixed { .. } => "-".into(),
                DepotPolicy::Dynamic { .. } => o
                    .back_to_target_ns
                    .map_or("never".into(), |ns| format!("{:.1} s", ns as f64 / 1e9)),
            };
            let iops = |o: &Outcome| -> Vec<String> {
                scenario
                    .lock_mcalls
                    .iter()
                    .map(|&c| {
                        format!(
                            "{:.2}",
                            model_iops(scenario, o, Hold::capacity(scenario, c * 1e6)) / 1e6
                        )
                    })
                    .collect()
            };
            let here = |o: &Outcome| {
                format!(
                    "{:.2}",
                    model_iops(scenario, o, Hold::measured(scenario)) / 1e6
                )
            };
            let mut row = vec![
                o.contender.name.clone(),
                o.contender.trim_every_ms.map_or("-".into(), millis),
            ];
            if scenario.wide {
                for r in [o, b] {
                    row.extend([rate(r.alloc_calls_per_k()), rate(r.allocs_per_k())]);
                }
                for r in [o, b] {
                    row.extend([rate(r.free_calls_per_k()), rate(r.frees_per_k())]);
                }
                row.extend([
                    o.depot_peak.to_string(),
                    o.depot_peak_run.to_string(),
                    o.held_at_load_end.to_string(),
                    o.held_after_idle.to_string(),
                    back,
                ]);
                for r in [o, b] {
                    row.extend(iops(r).into_iter().map(|v| v + "M"));
                    row.push(here(r) + "M");
                }
            } else {
                for r in [o, b] {
                    row.push(format!(
                        "{}/{}",
                        rate(r.alloc_calls_per_k()),
                        rate(r.allocs_per_k())
                    ));
                }
                for r in [o, b] {
                    row.push(format!(
                        "{}/{}",
                        rate(r.free_calls_per_k()),
                        rate(r.frees_per_k())
                    ));
                }
                row.extend([
                    format!("{}/{}", o.depot_peak, o.depot_peak_run),
                    format!("{}/{}", o.held_at_load_end, o.held_after_idle),
                    back,
                    iops(o).join("/"),
                    iops(b).join("/"),
                    format!("{}/{}", here(o), here(b)),
                ]);
            }
            row
        })
        .collect();
    let mut out = markdown(&header, &rows);
    let wall: f64 = outcomes
        .iter()
        .flat_map(|o| [Some(o), o.batched.as_deref()])
        .flatten()
        .map(|o| o.wall.as_secs_f64())
        .sum();
    writeln!(
        out,
        "(Simulation wall time of this mode, summed over policies and both batch sizes: {wall:.1} s.)"
    )
    .unwrap();
    if let Some(o) = outcomes.first().filter(|o| o.mode.lazy()) {
        // The queues see the same unmaps under every policy (the random draws never depend
        // on the cache), so their counts are the same in every row.
        let f = o.flush;
        let seconds = o.load_end_ns as f64 / 1e9;
        writeln!(
            out,
            "(Flush queues, whole run: {} timer drains ({:.1}/s of load), {:.0} items per drain on average, {} at most, all on one CPU's slot; {} full-queue drains; {} items freed by their own CPU.)",
            f.timer_drains,
            f.timer_drains as f64 / seconds,
            f.timer_items as f64 / f.timer_drains.max(1) as f64,
            f.largest_timer_batch,
            f.full_drains,
            f.own_items,
        )
        .unwrap();
    }
    out
}

/// What every column of [`table`] means, printed once after the tables.
pub fn legend(scenario: &Scenario) -> String {
    let (peak, held, then) = if scenario.wide {
        (
            "depot peak (load), (run)",
            "held at load end, after idle",
            ", and",
        )
    } else {
        ("depot peak load/run", "held load end/idle", " /")
    };
    let hold = Hold::measured(scenario);
    let lines = [
        "Columns:".to_string(),
        "  policy: the depot policy (Fixed{cap}: a capped depot; OnePerTick{target}, WorkingSet{target}: Dynamic depots trimmed to their target; never trimmed: Dynamic, no trim() call)".into(),
        "  trim every: simulated time between two trim() calls (-: never trimmed)".into(),
        format!(
            "  allocs/1k, frees/1k calls/items: calls to the source (the IOVA tree) and the items they moved, per 1000 I/Os, counted after the {}% warm-up; (1): the cache asks for one item per refill (Options::source_batch = Some(1): Linux's alloc_iova, one range per miss), (B): for a whole magazine of {} per call (the crate's default); frees go back a magazine per call in both",
            trim_float(scenario.warmup_percent),
            scenario.magazine_size,
        ),
        format!(
            "  {peak}: of the (1) run: the most magazines holding IOVAs (full or partly filled) the depot held at once (Stats::depot_peak): during the load{then} over the whole run, which adds the completion of the last in-flight I/Os and the idle phase (there trim's idle-slot reclaim moves the slots' magazines into the depot just before it releases them)"
        ),
        format!(
            "  {held}: of the (1) run: IOVAs cached in the slots and the depot plus those queued in flush queues: when the load stopped and its in-flight I/Os completed{then} after {} s of idle time",
            trim_float(scenario.idle_seconds)
        ),
        "  back to target: of the (1) run: simulated time from the end of the load until the depot held no more magazines than its target (never: not within the idle phase; -: a Fixed depot, which has a cap and no target)".into(),
        format!(
            "  IOPS{}: the hold-time model, min({:.2}M device limit, 1 s / tree-lock time per I/O), in millions, where a source call holds the one tree lock a + b x items: for each capacity C (millions of one-item calls per second) a + b = 1/C, split in the measured ratio a:b = {}:{}; a,b: the measured a = {} ns and b = {} ns themselves (--hold-a-ns, --hold-b-ns; this crate's IovaDomain tree on the development machine, not a 256-CPU machine). A model, not a measurement",
            if scenario.wide { " C=..M" } else { " at C=..M" },
            scenario.iops as f64 / 1e6,
            trim_float(hold.a_ns),
            trim_float(hold.b_ns),
            trim_float(hold.a_ns),
            trim_float(hold.b_ns),
        ),
    ];
    lines.join("\n") + "\n"
}

/// What one source call holds the tree lock for: `a_ns + b_ns x items`.
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    pub a_ns: f64,
    pub b_ns: f64,
}

impl Hold {
    /// The a and b of `--hold-a-ns` and `--hold-b-ns`.
    pub fn measured(scenario: &Scenario) -> Self {
        Hold {
            a_ns: scenario.hold_a_ns,
            b_ns: scenario.hold_b_ns,
        }
    }

    /// A lock that serves `capacity` one-item calls per second: a + b = 1/capacity, in the
    /// measured ratio of a to b.
    pub fn capacity(scenario: &Scenario, capacity: f64) -> Self {
        let measured = Self::measured(scenario);
        let scale = 1e9 / capacity / (measured.a_ns + measured.b_ns);
        Hold {
            a_ns: measured.a_ns * scale,
            b_ns: measured.b_ns * scale,
        }
    }
}

/// The hold-time model: the device's IOPS unless the slow path's calls and items per I/O
/// hold the one tree lock for more than a second per second. With one item per call it
/// is the lock-capacity model `capacity / calls per I/O`.
pub fn model_iops(scenario: &Scenario, outcome: &Outcome, hold: Hold) -> f64 {
    let device = scenario.iops as f64;
    let ns_per_io =
        hold.a_ns * outcome.slow_calls_per_io() + hold.b_ns * outcome.slow_items_per_io();
    if ns_per_io == 0.0 {
        device
    } else {
        device.min(1e9 / ns_per_io)
    }
}

/// A rate per 1000 I/Os with about four significant digits.
fn rate(v: f64) -> String {
    match v {
        v if v >= 100.0 => format!("{v:.1}"),
        v if v >= 10.0 => format!("{v:.2}"),
        v if v >= 1.0 => format!("{v:.3}"),
        v => format!("{v:.4}"),
    }
}

/// `4.0` -> "4", `0.5` -> "0.5".
pub fn trim_float(v: f64) -> String {
    let s = format!("{v}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_owned)
}

/// A Markdown table with aligned columns: names left-aligned, numbers right-aligned.
pub fn markdown(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .fold(header[c].len(), usize::max)
        })
        .collect();
    let line = |cells: &[String], out: &mut String| {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| match c {
                0 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        writeln!(out, "| {} |", cells.join(" | ")).unwrap();
    };
    line(header, &mut out);
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(c, w)| match c {
            0 => format!(":{}", "-".repeat(w - 1)),
            _ => format!("{}:", "-".repeat(w - 1)),
        })
        .collect();
    writeln!(out, "| {} |", rule.join(" | ")).unwrap();
    for row in rows {
        line(row, &mut out);
    }
    out
}

/// Writes every policy's time series as CSV.
pub fn write_csv(outcomes: &[Outcome], path: &Path) -> std::io::Result<()> {
    let mut csv = String::from(
        "mode,policy,trim_every_ms,source_batch,phase,time_s,depot_full,depot_full_min,depot_full_max,depot_empty,cached_items,queued_items,slow_alloc_calls,slow_allocs,slow_free_calls,slow_frees\n",
    );
    let runs = outcomes
        .iter()
        .flat_map(|o| [Some(o), o.batched.as_deref()])
        .flatten();
    for o in runs {
        let trim = o
            .contender
            .trim_every_ms
            .map_or(String::new(), |ms| ms.to_string());
        for s in &o.samples {
            let phase = match s.phase {
                Phase::Load => "load",
                Phase::Idle => "idle",
            };
            writeln!(
                csv,
                "{},{},{trim},{},{phase},{:.3},{},{},{},{},{},{},{},{},{},{}",
                o.mode,
                o.contender.name,
                o.source_batch,
                s.ns as f64 / 1e9,
                s.depot_full,
                s.depot_full_min,
                s.depot_full_max,
                s.depot_empty,
                s.cached,
                s.queued,
                s.slow.alloc_calls,
                s.slow.allocs,
                s.slow.free_calls,
                s.slow.frees
            )
            .unwrap();
        }
    }
    std::fs::write(path, csv)
}

/// A property the case study claims, and whether this run shows it.
pub struct Property {
    pub claim: String,
    pub holds: bool,
    pub measured: String,
}

/// The properties the case study claims, evaluated on the outcomes of one mode. Which ones
/// apply depends on the mode, on the load's length (`STEADY_SECONDS`), on whether the
/// trim target is Linux's (`target = cpus`) and on whether the load is pinned.
pub fn properties(outcomes: &[Outcome], scenario: &Scenario) -> Vec<Property> {
    let find = |role: Role| outcomes.iter().find(|o| o.contender.role == role);
    let (Some(fixed), Some(tick), Some(ws), Some(never)) = (
        find(Role::Fixed32),
        find(Role::OnePerTick),
        find(Role::WorkingSet { chosen: true }),
        find(Role::NeverTrimmed),
    ) else {
        unreachable!("Contender::all has every role")
    };
    let mode = fixed.mode;
    let steady = scenario.seconds >= STEADY_SECONDS;
    let linux_target = scenario.linux_target();
    let mut out = Vec::new();
    let mut claim = |claim: String, holds: bool, measured: String| {
        out.push(Property {
            claim: format!("[{mode}] {claim}"),
            holds,
            measured,
        })
    };

    let (w, f, n, t) = (
        ws.allocs_per_k(),
        fixed.allocs_per_k(),
        never.allocs_per_k(),
        tick.allocs_per_k(),
    );
    // The comparisons with Fixed{32} are claims about the pinned load the case study shows;
    // with --unpinned-jobs the slots that jobs leave behind dominate the slow path.
    let pinned = scenario.unpinned_jobs.is_none();
    match mode {
        _ if !pinned => {}
        Mode::Strict if steady => claim(
            "WorkingSet slow allocs/1k I/O <= 1/5 of Fixed{32}'s".into(),
            w <= f / 5.0,
            format!("{w:.4} vs {f:.4}"),
        ),
        // Shorter runs end inside the start-up transient (the vCPUs start in phase and
        // drift apart over tens of simulated seconds): every growing depot is still
        // filling from the source, so only "never worse" is a property at that scale.
        Mode::Strict => claim(
            format!(
                "WorkingSet slow allocs/1k I/O <= Fixed{{32}}'s (1/5 is checked from --seconds {STEADY_SECONDS})"
            ),
            w <= f,
            format!("{w:.4} vs {f:.4}"),
        ),
        Mode::LazySubmit => {
            let growing = w.max(n);
            claim(
                "collapse: Fixed{32} slow allocs/1k I/O >= 100x WorkingSet's and the never-trimmed depot's, and >= 100 (10% of allocations)".into(),
                f >= 100.0 * growing && f >= 100.0,
                format!("{f:.4} vs {w:.4} and {n:.4}"),
            );
        }
        Mode::LazyIrq if steady => claim(
            "Fixed{32} slow allocs/1k I/O >= 10x WorkingSet's and the never-trimmed depot's".into(),
            f >= 10.0 * w.max(n),
            format!("{f:.4} vs {w:.4} and {n:.4}"),
        ),
        // As in strict mode, short runs end while the growing depots still fill.
        Mode::LazyIrq => claim(
            format!(
                "Fixed{{32}} slow allocs/1k I/O >= WorkingSet's and the never-trimmed depot's (10x is checked from --seconds {STEADY_SECONDS})"
            ),
            f >= w.max(n),
            format!("{f:.4} vs {w:.4} and {n:.4}"),
        ),
    }
    claim(
        "WorkingSet slow allocs/1k I/O at most 25% above the never-trimmed depot's".into(),
        w <= 1.25 * n,
        format!("{w:.4} vs {n:.4}"),
    );
    if linux_target {
        // With target = cpus trimming never cuts below what the load needs; with a lower
        // target OnePerTick and short WorkingSet intervals trim during the load (that is
        // what `--target 16` shows), so these hold only for Linux's target.
        if mode.lazy() {
            claim(
                "OnePerTick slow allocs/1k I/O at most 25% above the never-trimmed depot's (target = cpus)".into(),
                t <= 1.25 * n,
                format!("{t:.4} vs {n:.4}"),
            );
        }
        for o in outcomes
            .iter()
            .filter(|o| matches!(o.contender.role, Role::OnePerTick | Role::WorkingSet { .. }))
        {
            claim(
                format!(
                    "{} makes no slow-path free during the load (target = cpus)",
                    o.contender.label()
                ),
                o.load_slow.frees == 0,
                format!("{} frees", o.load_slow.frees),
            );
        }
    }
    // The depot, not the items held: the slots' contents after the load differ between
    // policies by a few hundred items either way. Where trim also reclaims idle slots, it
    // moves their magazines through the depot, which then ends at its target.
    let ws_target = ws.contender.target();
    claim(
        "after the idle phase WorkingSet's depot is at or below its target, or no longer than OnePerTick's".into(),
        ws.depot_after_idle <= ws_target.max(tick.depot_after_idle),
        format!(
            "{} vs target {ws_target} and {}",
            ws.depot_after_idle, tick.depot_after_idle
        ),
    );
    let interval_ns = ws.contender.trim_every_ms.unwrap_or(0) * 1_000_000;
    claim(
        "WorkingSet is back at target within two trim intervals of the load's end".into(),
        ws.back_to_target_ns.is_some_and(|ns| ns <= 2 * interval_ns),
        format!(
            "{} (interval {})",
            ws.back_to_target_ns
                .map_or("never".into(), |ns| format!("{:.3} s", ns as f64 / 1e9)),
            millis(interval_ns / 1_000_000)
        ),
    );
    for o in outcomes
        .iter()
        .flat_map(|o| [Some(o), o.batched.as_deref()])
        .flatten()
    {
        claim(
            format!(
                "{} (batch {}): Stats agree with the source (calls and items), each call moved 1 to {} items, nothing lost",
                o.contender.label(),
                o.source_batch,
                o.source_batch,
            ),
            o.audit.is_empty(),
            o.audit.join("; "),
        );
    }
    out
}
