//! A CPU count below the highest CPU id + 1, as containers that mask
//! `/sys/devices/system/cpu` (glibc then counts `/proc/stat`), sparse or offline CPU ids,
//! and `Config::cpus` larger than the machine produce. `MAGAZINE_CPUS_CONF=1` makes the
//! crate read a count of 1 (its test seam); CPUs beyond it still run sequences on their
//! slots, which must then be fenced like the others: no hit may be read as part of a
//! length, and nothing may be lost. The crate reads the variable once, at its first cache
//! creation, which a global allocator built on it (`.ci/on-malloc.sh`) makes before any
//! test runs: without the variable, the test runs itself in a child process that has it
//! in its environment from the start. `.ci/run` also runs the whole test command with it.
#![cfg(target_os = "linux")]

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::process::Command;
use std::sync::Arc;
use std::thread;

use common::cpus::{allowed_cpus, run_on};
use common::Tracking;
use magazine::{Cache, Config, Options};

#[test]
fn cpus_beyond_the_configured_count_run_sequences_on_fenced_slots() {
    if std::env::var("MAGAZINE_CPUS_CONF").as_deref() != Ok("1") {
        let status = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cpus_beyond_the_configured_count_run_sequences_on_fenced_slots",
                "--nocapture",
            ])
            .env("MAGAZINE_CPUS_CONF", "1")
            .status()
            .expect("the test binary runs");
        assert!(
            status.success(),
            "the test with MAGAZINE_CPUS_CONF=1: {status}"
        );
        return;
    }
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU allowed: no CPU beyond the count of 1 to run on, skipped");
        return;
    }
    let mut options = Options::default();
    options.restartable_sequences = true;
    options.source_batch = Some(1);
    let config = Config {
        magazine_size: 4,
        cpus: cpus.iter().max().unwrap() + 1,
        ..Config::default()
    };
    let source = Arc::new(Tracking::new(256));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    if !cache.runs_restartable_sequences() {
        eprintln!("no restartable sequences here: skipped");
        return;
    }
    let beyond = *cpus.last().unwrap();
    // Hits on the last CPU's slot, counted in its length word by the sequences.
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&[beyond]);
            let ids: Vec<u32> = (0..3).map(|_| cache.alloc().unwrap()).collect();
            ids.into_iter().for_each(|id| cache.free(id));
            let id = cache.alloc().unwrap();
            cache.free(id);
        });
    });
    run_on(&cpus[..1]);
    assert_eq!(cache.cached(), 3, "a hit count read as part of a length");
    // Both CPUs at work while this thread flushes, counts and takes the last CPU's slot.
    thread::scope(|s| {
        for &cpu in &cpus[..2] {
            let cache = &cache;
            s.spawn(move || {
                run_on(&[cpu]);
                let mut held = Vec::new();
                for round in 0..100_000 {
                    match round % 7 < 4 {
                        true => held.extend(cache.alloc()),
                        false => held.pop().into_iter().for_each(|id| cache.free(id)),
                    }
                }
                held.into_iter().for_each(|id| cache.free(id));
            });
        }
        for _ in 0..200 {
            cache.flush_cpu(beyond);
            assert!(
                cache.cached() <= 256,
                "a hit count read as part of a length"
            );
        }
    });
    drop(cache);
    source.assert_all_home();
}
