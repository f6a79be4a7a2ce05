//! The depot's stacks under churn, for the epoch that guards their nodes: more threads than
//! CPUs exchange magazines with the depot on nearly every operation (`LocalCache` handles
//! with magazines of one item), and every empty magazine given back is dropped (no empty
//! magazine is kept), which retires its stack node through the epoch. A pop that read a
//! node as the stack's head and was interrupted before it read that node's `next` must
//! still find the node allocated: the pin it holds keeps the node's memory until it has
//! looked (`src/stack.rs`, "Memory"). Another thread interrupts the workers, one at a time,
//! at random points: a signal whose handler sleeps for 50 us, so that pops stop half way
//! far more often than the scheduler alone would stop them, while the other workers pop,
//! drop magazines and move the epoch on. (Under ASan, with the mutant below, this finds the
//! use-after-free within seconds; the scheduler's preemptions alone did in about half of
//! the 8-second runs.)
//!
//! Natively a read of freed memory usually goes unnoticed (the allocator keeps it mapped);
//! under AddressSanitizer (`.ci/sanitizers.sh` runs every test) it is a heap-use-after-free
//! report, and `.ci/tool-mutants.sh` shows that it is, with the mutant
//! `pop_reads_after_unpin` (a pop whose pin ends with its load of the head). The tracking
//! source checks conservation on the way.
//!
//! `MAGAZINE_DEPOT_OPS` sets the operations per worker (default 10^5 in release builds,
//! 10^4 in debug ones).
#![cfg(target_os = "linux")]

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::Tracking;
use magazine::{Cache, Config, DepotPolicy, Options, Trim};

/// Worker threads, more than the CPUs of the 2-core CI machine.
const THREADS: usize = 8;

/// Items each worker takes, then gives back, in a round: with magazines of one item, the
/// frees push `HELD - 2` full magazines into the depot (the handle keeps two) and the
/// allocations pop as many, while other workers pop the same stack.
const HELD: usize = 6;

fn ops() -> usize {
    std::env::var("MAGAZINE_DEPOT_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            10_000
        } else {
            100_000
        })
}

/// Signals received, and those whose handler has returned (a futex word: the interrupter
/// waits on it).
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
static HANDLED: AtomicU32 = AtomicU32::new(0);

/// `FUTEX_WAIT` (with a timeout of `wait`) or `FUTEX_WAKE` on [`HANDLED`].
fn futex(operation: libc::c_int, value: u32, wait: Option<&libc::timespec>) {
    let timeout = wait.map_or(std::ptr::null(), |wait| wait as *const libc::timespec);
    // SAFETY: `HANDLED` is an aligned `u32` that lives for the whole program; `timeout` is
    // null or points to a live `timespec`. A futex call is a plain system call (no lock,
    // no allocation), so the handler may make it too.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            HANDLED.as_ptr(),
            operation | libc::FUTEX_PRIVATE_FLAG,
            value,
            timeout,
        )
    };
}

/// SIGUSR1's handler: stops the worker for a moment wherever it was, then lets the
/// interrupter send the next signal. Async-signal-safe: atomics, `nanosleep` and a futex
/// wake.
extern "C" fn pause(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
    let moment = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000,
    };
    // SAFETY: `nanosleep` reads `moment`; no remainder is asked for.
    unsafe { libc::nanosleep(&moment, std::ptr::null_mut()) };
    HANDLED.fetch_add(1, Ordering::Release);
    futex(libc::FUTEX_WAKE, 1, None);
}

/// Tells the interrupter to stop and waits until it has, so that it never signals a
/// worker that has ended; also when the worker unwinds.
struct Finish<'a> {
    running: &'a AtomicUsize,
    stopped: &'a AtomicBool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::Release);
        while !self.stopped.load(Ordering::Acquire) {
            thread::yield_now();
        }
    }
}

#[test]
fn magazines_dropped_while_pops_race() {
    // SAFETY: a zeroed `sigaction` is valid (empty mask, no flags); the handler is
    // async-signal-safe (see it).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = pause as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let config = Config {
        magazine_size: 1,
        cpus: 1,
        depot: DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::OnePerTick,
        },
    };
    // No empty magazine is kept: each one given back is dropped, its node retired.
    let mut options = Options::default();
    options.max_empty = Some(0);
    // `HELD` items per worker at most in its hands: the source is never exhausted, so no
    // worker waits for another.
    let source = Arc::new(Tracking::new((HELD * THREADS) as u32));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    let rounds = ops() / (2 * HELD);
    // Each worker's `pthread_t` (0 until it has started), for the signals.
    let workers: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let (running, stopped) = (AtomicUsize::new(THREADS), AtomicBool::new(false));
    thread::scope(|s| {
        for worker in &workers {
            let (cache, running, stopped) = (&cache, &running, &stopped);
            s.spawn(move || {
                let _finish = Finish { running, stopped };
                // SAFETY: no preconditions.
                worker.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
                let mut local = cache.local();
                let mut held = Vec::with_capacity(HELD);
                for _ in 0..rounds {
                    held.extend((0..HELD).map(|_| local.alloc().expect("the pool suffices")));
                    held.drain(..).for_each(|id| local.free(id));
                }
            });
        }
        // The interrupter: a signal at each worker in turn, the next once the handler of
        // the last one has returned (it waits on the futex, so it takes no CPU from the
        // workers meanwhile), while all of them run: a finished worker waits for
        // `stopped`, so every `pthread_t` stays valid.
        s.spawn(|| {
            let wait = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            let all_running = || running.load(Ordering::Acquire) == THREADS;
            let mut next = 0;
            while all_running() {
                let target = workers[next % THREADS].load(Ordering::Acquire);
                next += 1;
                if target == 0 {
                    continue;
                }
                let handled = HANDLED.load(Ordering::Acquire);
                // SAFETY: no worker has ended: each waits for `stopped` first, also when
                // it unwinds (`Finish`).
                unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR1) };
                while HANDLED.load(Ordering::Acquire) == handled && all_running() {
                    futex(libc::FUTEX_WAIT, handled, Some(&wait));
                }
            }
            stopped.store(true, Ordering::Release);
        });
    });
    let stats = cache.stats();
    eprintln!("{stats}; {} signals", SIGNALS.load(Ordering::Relaxed));
    assert!(
        stats.depot_pops >= rounds as u64,
        "the handles exchanged magazines with the depot: {stats:?}"
    );
    drop(cache);
    source.assert_all_home();
}
