//! The scenarios under loom: bounded-exhaustive over interleavings and the C11 memory
//! model, up to the preemption bound in `LOOM_MAX_PREEMPTIONS` (2 when unset).
//!
//! Fast mode: `RUSTFLAGS="--cfg loom"`. Full mode adds `--cfg crossbeam_loom`, so that
//! crossbeam-epoch runs on loom's primitives too; `run.sh full` runs the depot scenarios
//! 1-3 there, one per process (see README.md). The `_wide` tests run a cache scenario with
//! three workers instead of two.
#![cfg(loom)]

use magazine::Trim;
use magazine_loom_tests::checker::Scale;
use magazine_loom_tests::scenarios;

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    // A whole execution (set-up, the race, the end checks) takes a few thousand branches;
    // a spin that never ends (a wait on a busy slot) exceeds this and fails.
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        builder.max_branches = 20_000;
    }
    let bound = builder.preemption_bound;
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom: {executions} executions, preemption bound {bound:?}");
}

const S: Scale = Scale::LOOM;
const C: Scale = Scale::LOOM_CACHE;
const W: Scale = Scale::LOOM_WIDE;

// Depot scenarios (run at preemption bounds 2 and 3 by `run.sh fast`).

#[test]
fn depot_push_pop() {
    check(|| scenarios::depot_push_pop(S));
}

#[test]
fn depot_aba() {
    check(|| scenarios::depot_aba(S));
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

// Cache scenarios (bound 2).

#[test]
fn fixed_overflow() {
    check(|| scenarios::fixed_overflow(C));
}

#[test]
fn slot_shared() {
    check(|| scenarios::slot_shared(C));
}

#[test]
fn slot_busy_is_a_miss() {
    check(|| scenarios::slot_busy_is_a_miss(C));
}

#[test]
fn flush_cpu_race() {
    check(|| scenarios::flush_cpu_race(C));
}

#[test]
fn local_drop_race() {
    check(|| scenarios::local_drop_race(C));
}

#[test]
fn exhaustion_retry() {
    check(|| scenarios::exhaustion_retry(C));
}

#[test]
fn busy_slot_loose() {
    check(|| scenarios::busy_slot_loose(C));
}

#[test]
fn steal_race() {
    check(|| scenarios::steal_race(C));
}

#[test]
fn idle_reclaim_race() {
    check(|| scenarios::idle_reclaim_race(C));
}

#[test]
fn shelf_race() {
    check(|| scenarios::shelf_race(S));
}

#[test]
fn fixed_overflow_wide() {
    check(|| scenarios::fixed_overflow(W));
}

#[test]
fn slot_shared_wide() {
    check(|| scenarios::slot_shared(W));
}

#[test]
fn slot_busy_is_a_miss_wide() {
    check(|| scenarios::slot_busy_is_a_miss(W));
}

#[test]
fn flush_cpu_race_wide() {
    check(|| scenarios::flush_cpu_race(W));
}

#[test]
fn local_drop_race_wide() {
    check(|| scenarios::local_drop_race(W));
}

#[test]
fn exhaustion_retry_wide() {
    check(|| scenarios::exhaustion_retry(W));
}

// The IOVA fast path's double-free check (scenarios 13-14).

#[test]
fn iova_double_free_race() {
    check(|| scenarios::iova_double_free_race(C));
}

#[test]
fn iova_free_alloc_race() {
    check(|| scenarios::iova_free_alloc_race(C));
}

#[test]
fn exhaustion_race() {
    check(|| scenarios::exhaustion_race(C));
}

#[test]
fn refill_race() {
    check(|| scenarios::refill_race(C));
}
