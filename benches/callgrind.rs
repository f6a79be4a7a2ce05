//! A driver for instruction-level profiles: runs one scenario of the suite a fixed number
//! of times in a function of its own, so that `valgrind --tool=callgrind` counts the same
//! instructions on every run and `callgrind_annotate --inclusive=yes` shows what one
//! operation costs, by function (perf has no hardware counters on the benchmark VM).
//!
//! ```text
//! cargo bench --bench callgrind --no-run
//! valgrind --tool=callgrind --callgrind-out-file=cg.percpu \
//!     target/release/deps/callgrind-<hash> percpu 100000
//! callgrind_annotate --inclusive=yes cg.percpu | head -40
//! ```
//!
//! Scenarios: `vec`, `local`, `percpu`, `percpu_on` (slot 0, no CPU lookup),
//! `array_queue` (one alloc+free pair each, as in `fast_path`), `exchange` (one item moved between two handles through the depot, as in
//! `depot/exchange` at magazine size 127), `exchange1` (the same at magazine size 1: every
//! move is a depot exchange), `handoff_local` and `handoff_array_queue` (1 -> 1
//! on two threads, as in `handoff`), `iova_fast`, `iova_fast_unchecked` and `iova_tree` (as
//! in `iova`, 1 page; the fast pairs with the current CPU's slot, as the bench runs them).
//! Divide a scenario function's inclusive count by the operation count.
//!
//! Under `cargo bench` (no scenario argument) it does nothing.

mod common;

use std::hint::black_box;
use std::sync::Barrier;

use crossbeam_queue::ArrayQueue;
use magazine::iova::{FreeCheck, IovaDomain};
use magazine::{Cache, Source};

use common::FreeList;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scenario) = args.first().filter(|a| !a.starts_with('-')) else {
        return;
    };
    let ops: u64 = args
        .get(1)
        .map_or(100_000, |n| n.parse().expect("an operation count"));
    match scenario.as_str() {
        "vec" => scenario_vec(ops),
        "local" => scenario_local(ops),
        "percpu" => scenario_percpu(ops, false),
        "percpu_on" => scenario_percpu(ops, true),
        "array_queue" => scenario_array_queue(ops),
        "exchange" => scenario_exchange(ops, 127),
        "exchange1" => scenario_exchange(ops, 1),
        "handoff_local" => scenario_handoff_local(ops),
        "handoff_array_queue" => scenario_handoff_array_queue(ops),
        "iova_fast" => scenario_iova(ops, Some(FreeCheck::Checked)),
        "iova_fast_unchecked" => scenario_iova(ops, Some(FreeCheck::Unchecked)),
        "iova_tree" => scenario_iova(ops, None),
        other => panic!("unknown scenario {other}"),
    }
}

#[inline(never)]
fn scenario_vec(ops: u64) {
    let mut pool: Vec<u64> = (0..64).collect();
    for _ in 0..ops {
        let pool = black_box(&mut pool);
        let item = pool.pop().unwrap();
        pool.push(black_box(item));
    }
}

#[inline(never)]
fn scenario_local(ops: u64) {
    let cache = common::cache();
    let mut local = cache.local();
    let warm: Vec<_> = (0..64).map(|_| local.alloc().unwrap()).collect();
    warm.into_iter().for_each(|item| local.free(item));
    pairs_local(&mut local, ops);
}

#[inline(never)]
fn pairs_local<S: Source<Item = u64>>(local: &mut magazine::LocalCache<'_, S>, ops: u64) {
    for _ in 0..ops {
        let local = black_box(&mut *local);
        let item = local.alloc().unwrap();
        local.free(black_box(item));
    }
}

#[inline(never)]
fn scenario_percpu(ops: u64, on_slot_0: bool) {
    let cache = common::cache();
    for cpu in 0..cache.config().cpus {
        let warm: Vec<_> = (0..64).map(|_| cache.alloc_on(cpu).unwrap()).collect();
        warm.into_iter().for_each(|item| cache.free_on(cpu, item));
    }
    if on_slot_0 {
        pairs_percpu_on(&cache, ops);
    } else {
        pairs_percpu(&cache, ops);
    }
}

/// Without the CPU lookup: under valgrind, glibc's `sched_getcpu` cannot use rseq and
/// costs a vDSO call, which a native run does not pay.
#[inline(never)]
fn pairs_percpu_on(cache: &Cache<FreeList>, ops: u64) {
    for _ in 0..ops {
        let cache = black_box(cache);
        let item = cache.alloc_on(0).unwrap();
        cache.free_on(0, black_box(item));
    }
}

#[inline(never)]
fn pairs_percpu(cache: &Cache<FreeList>, ops: u64) {
    for _ in 0..ops {
        let cache = black_box(cache);
        let item = cache.alloc().unwrap();
        cache.free(black_box(item));
    }
}

#[inline(never)]
fn scenario_array_queue(ops: u64) {
    let queue = ArrayQueue::new(1024);
    (0..64).for_each(|i| queue.push(i).unwrap());
    for _ in 0..ops {
        let queue = black_box(&queue);
        let item = queue.pop().unwrap();
        queue.push(black_box(item)).unwrap();
    }
}

#[inline(never)]
fn scenario_exchange(ops: u64, magazine_size: usize) {
    let cache = Cache::with_config(FreeList::fresh(), common::config(magazine_size));
    let (mut giver, mut taker) = (cache.local(), cache.local());
    for _ in 0..4 * magazine_size {
        let item = taker.alloc().unwrap();
        giver.free(item);
    }
    moves(&mut taker, &mut giver, ops);
    drop((giver, taker));
    eprintln!("{:?}", cache.stats());
}

#[inline(never)]
fn moves<S: Source<Item = u64>>(
    taker: &mut magazine::LocalCache<'_, S>,
    giver: &mut magazine::LocalCache<'_, S>,
    ops: u64,
) {
    for _ in 0..ops {
        let item = taker.alloc().unwrap();
        giver.free(black_box(item));
    }
}

#[inline(never)]
fn scenario_handoff_local(ops: u64) {
    let cache = Cache::new(FreeList::empty());
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut local = cache.local();
            barrier.wait();
            produce_local(&mut local, ops);
        });
        let mut local = cache.local();
        barrier.wait();
        consume_local(&mut local, ops);
    });
    eprintln!("{:?}", cache.stats());
}

#[inline(never)]
fn produce_local(local: &mut magazine::LocalCache<'_, FreeList>, ops: u64) {
    (0..ops).for_each(|item| local.free(black_box(item)));
}

#[inline(never)]
fn consume_local(local: &mut magazine::LocalCache<'_, FreeList>, ops: u64) {
    let mut got = 0;
    while got < ops {
        match local.alloc() {
            Some(item) => {
                black_box(item);
                got += 1;
            }
            None => std::thread::yield_now(),
        }
    }
}

#[inline(never)]
fn scenario_handoff_array_queue(ops: u64) {
    let queue = ArrayQueue::new(4096);
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            barrier.wait();
            for mut item in 0..ops {
                while let Err(back) = queue.push(black_box(item)) {
                    item = back;
                    std::thread::yield_now();
                }
            }
        });
        barrier.wait();
        let mut got = 0;
        while got < ops {
            match queue.pop() {
                Some(item) => {
                    black_box(item);
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
    });
}

/// `fast`: the fast path with that check (`pairs_iova_fast`), else the tree
/// (`pairs_iova_tree`).
#[inline(never)]
fn scenario_iova(ops: u64, fast: Option<FreeCheck>) {
    let domain = IovaDomain::new(4096, 1).with_free_check(fast.unwrap_or_default());
    let limit = domain.dma_32bit_pfn() - 1;
    let held: Vec<_> = (0..4096)
        .map(|_| domain.alloc(1, limit, false).unwrap())
        .collect();
    if fast.is_some() {
        for cpu in 0..domain.config().cpus {
            let pfns: Vec<_> = (0..64)
                .map(|_| domain.alloc_fast_on(cpu, 1, limit).unwrap())
                .collect();
            pfns.into_iter()
                .for_each(|pfn| domain.free_fast_on(cpu, pfn, 1).unwrap());
        }
        pairs_iova_fast(&domain, limit, ops);
    } else {
        pairs_iova_tree(&domain, limit, ops);
    }
    black_box(held);
}

#[inline(never)]
fn pairs_iova_fast(domain: &IovaDomain, limit: u64, ops: u64) {
    for _ in 0..ops {
        let pfn = domain.alloc_fast(1, limit).unwrap();
        domain.free_fast(black_box(pfn), 1).unwrap();
    }
}

#[inline(never)]
fn pairs_iova_tree(domain: &IovaDomain, limit: u64, ops: u64) {
    for _ in 0..ops {
        let iova = domain.alloc(1, limit, true).unwrap();
        domain.free(black_box(iova.pfn_lo)).unwrap();
    }
}
