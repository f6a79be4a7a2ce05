//! The scenarios under shuttle: randomly and PCT (depth 3) tested, with fixed seeds, at
//! the larger `Scale::SHUTTLE` shape (4-8 threads); `check_dfs` on the two smallest.
//!
//! Shuttle treats every atomic as SeqCst: it checks interleavings, not orderings (loom
//! does that). `SHUTTLE_ITERATIONS` (default 1000) sets the iterations per scheduler,
//! `SHUTTLE_SEED` the seed. A failure prints the schedule; replay it with
//! `SHUTTLE_REPLAY='<schedule>' cargo test ... <test name>` (see README.md).
#![cfg(feature = "shuttle")]

use magazine::Trim;
use magazine_loom_tests::checker::Scale;
use magazine_loom_tests::scenarios;
use shuttle::scheduler::{DfsScheduler, PctScheduler, RandomScheduler};
use shuttle::{Config, MaxSteps, Runner};

const S: Scale = Scale::SHUTTLE;
const DEFAULT_SEED: u64 = 0x6d61_6761_7a69_6e65; // "magazine"

fn iterations() -> usize {
    std::env::var("SHUTTLE_ITERATIONS").map_or(1000, |v| v.parse().expect("SHUTTLE_ITERATIONS"))
}

fn seed() -> u64 {
    std::env::var("SHUTTLE_SEED").map_or(DEFAULT_SEED, |v| v.parse().expect("SHUTTLE_SEED"))
}

fn config() -> Config {
    let mut config = Config::new();
    // Legitimate runs take a few thousand steps; a spin that never ends (a wait on a busy
    // slot) fails fast instead of after the default million.
    config.max_steps = MaxSteps::FailAfter(50_000);
    config
}

/// Runs `f` under PCT (depth 3) and under the random scheduler, or replays one schedule.
fn check(f: impl Fn() + Send + Sync + 'static) {
    if let Ok(schedule) = std::env::var("SHUTTLE_REPLAY") {
        return shuttle::replay(f, &schedule);
    }
    let (seed, iterations) = (seed(), iterations());
    eprintln!("shuttle: seed {seed}, {iterations} iterations per scheduler");
    let f = std::sync::Arc::new(f);
    let g = std::sync::Arc::clone(&f);
    Runner::new(PctScheduler::new_from_seed(seed, 3, iterations), config()).run(move || f());
    Runner::new(RandomScheduler::new_from_seed(seed, iterations), config()).run(move || g());
}

/// Depth-first search over every schedule, capped at `SHUTTLE_DFS_MAX` (default 200000);
/// prints whether the search was exhaustive.
fn dfs(name: &str, f: impl Fn() + Send + Sync + 'static) {
    let cap =
        std::env::var("SHUTTLE_DFS_MAX").map_or(200_000, |v| v.parse().expect("SHUTTLE_DFS_MAX"));
    let runs = Runner::new(DfsScheduler::new(Some(cap), false), config()).run(f);
    let verdict = if runs < cap { "exhaustive" } else { "capped" };
    eprintln!("shuttle dfs {name}: {runs} schedules ({verdict})");
}

#[test]
fn depot_push_pop() {
    check(|| scenarios::depot_push_pop(S));
}

#[test]
fn depot_push_pop_dfs() {
    dfs("depot_push_pop", || scenarios::depot_push_pop(Scale::LOOM));
}

#[test]
fn depot_aba() {
    check(|| scenarios::depot_aba(S));
}

#[test]
fn depot_aba_dfs() {
    dfs("depot_aba", || scenarios::depot_aba(Scale::LOOM));
}

#[test]
fn depot_growth() {
    check(|| scenarios::depot_growth(S));
}

#[test]
fn depot_shrink_working_set() {
    check(|| scenarios::depot_shrink(Trim::WorkingSet, S));
}

#[test]
fn depot_shrink_one_per_tick() {
    check(|| scenarios::depot_shrink(Trim::OnePerTick, S));
}

#[test]
fn depot_empty_recycling() {
    check(|| scenarios::depot_empty_recycling(S));
}

#[test]
fn fixed_overflow() {
    check(|| scenarios::fixed_overflow(S));
}

#[test]
fn slot_shared() {
    check(|| scenarios::slot_shared(S));
}

#[test]
fn slot_busy_is_a_miss() {
    check(|| scenarios::slot_busy_is_a_miss(S));
}

#[test]
fn flush_cpu_race() {
    check(|| scenarios::flush_cpu_race(S));
}

#[test]
fn local_drop_race() {
    check(|| scenarios::local_drop_race(S));
}

#[test]
fn exhaustion_retry() {
    check(|| scenarios::exhaustion_retry(S));
}

#[test]
fn busy_slot_loose() {
    check(|| scenarios::busy_slot_loose(S));
}

#[test]
fn steal_race() {
    check(|| scenarios::steal_race(S));
}

#[test]
fn idle_reclaim_race() {
    check(|| scenarios::idle_reclaim_race(S));
}

#[test]
fn shelf_race() {
    check(|| scenarios::shelf_race(S));
}

// The IOVA fast path's double-free check (scenarios 13-14).

#[test]
fn iova_double_free_race() {
    check(|| scenarios::iova_double_free_race(S));
}

#[test]
fn iova_free_alloc_race() {
    check(|| scenarios::iova_free_alloc_race(S));
}

#[test]
fn exhaustion_race() {
    check(|| scenarios::exhaustion_race(S));
}

#[test]
fn refill_race() {
    check(|| scenarios::refill_race(S));
}
