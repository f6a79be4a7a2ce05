//! Conservation on the restartable-sequence fast path (`Options::restartable_sequences`):
//! many more threads than CPUs allocate and free at random while each one keeps moving
//! itself between CPUs (`sched_setaffinity`), another thread sends them signals (both
//! abort sequences in flight), and a third flushes CPU slots, trims and counts what is
//! cached (each of which takes slots from another CPU, fenced by `membarrier`). The
//! tracking source panics on a duplicated or foreign id; after the cache is dropped it must
//! hold exactly the ids it started with.
//!
//! `MAGAZINE_RSEQ_OPS` sets the operations in all (default 10^7 in release builds, 10^6 in
//! debug ones). Where the platform has no restartable sequences (another OS or
//! architecture, valgrind, an old kernel) the cache runs the slot protocol and the test
//! checks that instead.
#![cfg(target_os = "linux")]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::Tracking;
use magazine::{Cache, Config, DepotPolicy, Options, Source, Trim};
use rand::{Rng, SeedableRng};

const THREADS: usize = 16;

fn ops() -> usize {
    std::env::var("MAGAZINE_RSEQ_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            1_000_000
        } else {
            10_000_000
        })
}

/// The CPUs the process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: 0 is the calling thread; `set` is a valid set of `size` bytes.
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below `CPU_SETSIZE`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Moves the calling thread to `cpus` (it may be running elsewhere until it returns).
fn run_on(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is below `CPU_SETSIZE` (it came from `allowed_cpus`).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: 0 is the calling thread; `set` is a valid, non-empty set.
    assert_eq!(unsafe { libc::sched_setaffinity(0, size, &set) }, 0);
}

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// Installs `on_signal` for SIGUSR1.
fn catch_sigusr1() {
    // SAFETY: a zeroed `sigaction` is valid (empty mask, no flags); the handler only
    // touches an atomic, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
}

/// The tracking source's ids as one-word items (the sequences move those in a register,
/// other sizes with a copy), tagged so that a garbled word is caught.
struct Words(Arc<Tracking>);

const TAG: u64 = 0x5eed << 32;

impl Source for Words {
    type Item = u64;

    fn alloc(&self) -> Option<u64> {
        self.0.alloc().map(|id| TAG | u64::from(id))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        self.0.free_batch(&mut items.map(|word| {
            assert_eq!(word & !0xffff_ffff, TAG, "a garbled item: {word:#x}");
            word as u32
        }))
    }
}

/// Runs the stress on a cache of `magazine_size` and `depot` over `make(tracking)`, a
/// tracking source of `pool` ids. Workers hold up to 64 ids each: with a pool below
/// `64 * THREADS` the source runs dry, and allocations steal from other CPUs' slots
/// (claims and fenced takes) and flush.
fn stress<S>(magazine_size: usize, depot: DepotPolicy, pool: u32, make: fn(Arc<Tracking>) -> S)
where
    S: Source + Sync,
    S::Item: Send,
{
    catch_sigusr1();
    let cpus = allowed_cpus();
    let slots = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: no preconditions.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    let config = Config {
        magazine_size,
        cpus: slots.max(usize::try_from(configured).unwrap_or(1)),
        depot,
    };
    let mut options = Options::default();
    options.restartable_sequences = true;
    let source = Arc::new(Tracking::new(pool));
    let cache = Cache::with_options(make(Arc::clone(&source)), config, options);
    eprintln!(
        "restartable sequences: {}",
        cache.runs_restartable_sequences()
    );
    let per_thread = ops() / THREADS;
    let done = AtomicBool::new(false);
    let workers_left = AtomicUsize::new(THREADS);
    // Each worker's `pthread_t`, for the signals (0 until it has started).
    let handles: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();

    thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|seed| {
                let (cache, cpus, workers_left, slots) = (&cache, &cpus, &workers_left, slots);
                let handle = &handles[seed];
                s.spawn(move || {
                    // SAFETY: no preconditions.
                    handle.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64);
                    let mut held = Vec::new();
                    for op in 0..per_thread {
                        if op % 1000 == 0 {
                            // One CPU (a forced migration), or all of them.
                            match rng.random_bool(0.5) {
                                true => run_on(&[cpus[rng.random_range(0..cpus.len())]]),
                                false => run_on(cpus),
                            }
                        }
                        let alloc = held.is_empty() || (held.len() < 64 && rng.random_bool(0.5));
                        // One operation in 32 names a CPU (`alloc_on`/`free_on`): the
                        // sequences that run only on that CPU, else a fenced take.
                        let on = rng
                            .random_bool(1.0 / 32.0)
                            .then(|| rng.random_range(0..slots));
                        if alloc {
                            let id = match on {
                                Some(cpu) => cache.alloc_on(cpu),
                                None => cache.alloc(),
                            };
                            held.extend(id);
                        } else {
                            let id = held.swap_remove(rng.random_range(0..held.len()));
                            match on {
                                Some(cpu) => cache.free_on(cpu, id),
                                None => cache.free(id),
                            }
                        }
                    }
                    held.into_iter().for_each(|id| cache.free(id));
                    workers_left.fetch_sub(1, Ordering::Release);
                })
            })
            .collect();
        // Signals at the workers while they run: only while no worker has finished (a
        // finished thread's id may be reused), and only at workers that have started.
        let signaller = s.spawn(|| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(99);
            while workers_left.load(Ordering::Acquire) == THREADS {
                let target = handles[rng.random_range(0..THREADS)].load(Ordering::Acquire);
                if target != 0 {
                    // SAFETY: no worker has finished yet, so `target` names a live thread.
                    unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR1) };
                }
                thread::yield_now();
            }
        });
        // Takers from other CPUs: flush a slot, trim, count.
        s.spawn(|| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            while !done.load(Ordering::Relaxed) {
                match rng.random_range(0..3) {
                    0 => cache.flush_cpu(rng.random_range(0..cache.config().cpus)),
                    1 => {
                        cache.trim();
                    }
                    _ => {
                        let cached = cache.cached();
                        assert!(cached <= source.capacity(), "more cached than exist");
                    }
                }
                thread::yield_now();
            }
        });
        // Before any worker is joined (which ends its `pthread_t`): the signaller stops
        // once one worker has finished.
        signaller.join().unwrap();
        for worker in workers {
            worker.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });

    let stats = cache.stats();
    eprintln!("{stats}; {} signals", SIGNALS.load(Ordering::Relaxed));
    assert_eq!(
        source.at_home() + cache.cached(),
        source.capacity(),
        "every id is in the source or the cache once the workers are done: {stats:?}"
    );
    drop(cache);
    source.assert_all_home();
}

#[test]
fn magazines_of_four_working_set() {
    stress(
        4,
        DepotPolicy::Dynamic {
            target: 2,
            trim: Trim::WorkingSet,
        },
        4096,
        |tracking| tracking,
    );
}

/// The source runs dry all the time: steals (a claimed `previous`, a fenced loaded
/// magazine) and exhaustion flushes race the sequences, the migrations and the signals.
#[test]
fn exhausted_pool() {
    stress(
        4,
        DepotPolicy::Dynamic {
            target: 2,
            trim: Trim::WorkingSet,
        },
        256,
        |tracking| tracking,
    );
}

#[test]
fn magazines_of_one_fixed_depot() {
    stress(1, DepotPolicy::Fixed { max_full: 2 }, 4096, |tracking| {
        tracking
    });
}

#[test]
fn one_word_items() {
    stress(
        2,
        DepotPolicy::Dynamic {
            target: 2,
            trim: Trim::WorkingSet,
        },
        4096,
        Words,
    );
}

/// Each hit is counted once, also when signals abort the sequences, and across the folds
/// of the counts in the length word (every `2^15` allocation hits: `ops() / 10` pairs are
/// 10^5 or more): one thread pinned to one CPU does alloc/free pairs that all hit, while
/// another thread signals it.
#[test]
fn hits_are_counted_once() {
    catch_sigusr1();
    let mut options = Options::default();
    options.restartable_sequences = true;
    let slots = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: no preconditions.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    let config = Config {
        magazine_size: 8,
        cpus: slots.max(usize::try_from(configured).unwrap_or(1)),
        ..Config::default()
    };
    let source = Arc::new(Tracking::new(64));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    let pairs = ops() / 10;
    let (done, stopped) = (AtomicBool::new(false), AtomicBool::new(false));
    let worker = AtomicU64::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&allowed_cpus()[..1]);
            // Two items in the loaded magazine: every pair below hits it.
            let warm: Vec<_> = (0..2).map(|_| cache.alloc().unwrap()).collect();
            warm.into_iter().for_each(|id| cache.free(id));
            let before = cache.stats();
            // SAFETY: no preconditions.
            worker.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
            for _ in 0..pairs {
                let id = cache.alloc().unwrap();
                cache.free(id);
            }
            let after = cache.stats();
            done.store(true, Ordering::Release);
            // Alive until the signaller has sent its last signal.
            while !stopped.load(Ordering::Acquire) {
                thread::yield_now();
            }
            assert_eq!(
                after.alloc_hits - before.alloc_hits,
                pairs as u64,
                "{after:?}"
            );
            assert_eq!(
                after.free_hits - before.free_hits,
                pairs as u64,
                "{after:?}"
            );
        });
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let target = worker.load(Ordering::Acquire);
                if target != 0 {
                    // SAFETY: the worker waits for `stopped` before it ends, so `target`
                    // names a live thread.
                    unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR1) };
                }
                thread::yield_now();
            }
            stopped.store(true, Ordering::Release);
        });
    });
    eprintln!("{} signals", SIGNALS.load(Ordering::Relaxed));
    drop(cache);
    source.assert_all_home();
}

/// The CPUs the system may bring up (at least one).
fn configured_cpus() -> usize {
    // SAFETY: no preconditions; -1 on failure.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(configured).unwrap_or(1).max(1)
}

/// A cache with restartable sequences on, magazines of `magazine_size`, `cpus` slots, over
/// a tracking source of `pool` ids; `None`, saying so, where it cannot run sequences.
fn cache_with_sequences(
    magazine_size: usize,
    cpus: usize,
    pool: u32,
) -> Option<(Cache<Arc<Tracking>>, Arc<Tracking>)> {
    let mut options = Options::default();
    options.restartable_sequences = true;
    let config = Config {
        magazine_size,
        cpus,
        ..Config::default()
    };
    let source = Arc::new(Tracking::new(pool));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    if !cache.runs_restartable_sequences() {
        eprintln!("no restartable sequences here: skipped");
        return None;
    }
    Some((cache, source))
}

/// An exhausted allocation fences only what needs it: a slot's `previous` magazine comes
/// through a claim with no fence, its loaded magazine with one, and once everything is
/// in the caller's hands further allocations find nothing and make no fence at all (a
/// consumer that polls an empty cache must not interrupt the other CPUs each time).
#[test]
fn exhausted_allocations_fence_only_slots_with_items() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU allowed: nothing to steal across CPUs, skipped");
        return;
    }
    let Some((cache, source)) = cache_with_sequences(2, cpus.len().max(configured_cpus()), 4)
    else {
        return;
    };
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&cpus[..1]);
            let ids: Vec<_> = (0..4).map(|_| cache.alloc().unwrap()).collect();
            // Two full magazines on this CPU's slot: `previous` and loaded.
            ids.into_iter().for_each(|id| cache.free(id));
        });
    });
    let fences = || cache.stats().fenced_takes;
    let before = fences();
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&cpus[1..2]);
            let mut held = vec![cache.alloc().expect("the other slot's previous magazine")];
            held.push(cache.alloc().expect("a hit"));
            assert_eq!(
                fences(),
                before,
                "a claimed previous magazine needs no fence"
            );
            held.push(cache.alloc().expect("the other slot's loaded magazine"));
            held.push(cache.alloc().expect("a hit"));
            assert_eq!(fences() - before, 1, "one fence for the loaded magazine");
            for _ in 0..100 {
                assert_eq!(cache.alloc(), None, "all four items are held");
            }
            assert_eq!(
                fences() - before,
                1,
                "a poll of an empty cache fenced a slot"
            );
            assert_eq!(cache.stats().steals, 2);
            held.into_iter().for_each(|id| cache.free(id));
        });
    });
    drop(cache);
    source.assert_all_home();
}

/// Slots beyond the CPUs the system may bring up never run a sequence, so the `_on` calls
/// take them with a compare-and-swap, from any thread, without a fence; so do the slots of
/// real CPUs until a thread there activates them with `alloc` or `free` (`_on` calls never
/// do); after that, taking one from another CPU needs a fence.
#[test]
fn slots_beyond_the_cpus_take_no_fence() {
    let configured = configured_cpus();
    let Some((cache, source)) = cache_with_sequences(2, configured + 2, 8) else {
        return;
    };
    let beyond = configured + 1;
    for _ in 0..100 {
        let id = cache.alloc_on(beyond).unwrap();
        cache.free_on(beyond, id);
    }
    assert_eq!(
        cache.stats().fenced_takes,
        0,
        "a slot beyond the CPUs was fenced"
    );
    let cpus = allowed_cpus();
    if cpus.len() >= 2 {
        let remote_take = || {
            thread::scope(|s| {
                s.spawn(|| {
                    run_on(&cpus[..1]);
                    let id = cache.alloc_on(cpus[1]).unwrap();
                    cache.free_on(cpus[1], id);
                });
            })
        };
        remote_take();
        assert_eq!(
            cache.stats().fenced_takes,
            0,
            "a slot that no sequence has run on was fenced"
        );
        // Activate the other CPU's slot: `alloc` and `free` on that CPU.
        thread::scope(|s| {
            s.spawn(|| {
                run_on(&cpus[1..2]);
                let id = cache.alloc().unwrap();
                cache.free(id);
            });
        });
        remote_take();
        assert!(
            cache.stats().fenced_takes >= 1,
            "another real CPU's active slot was taken without a fence"
        );
    }
    drop(cache);
    source.assert_all_home();
}

/// A thread that runs sequences on a CPU acknowledges the claims of that CPU's slot at its
/// next operation, so a take from another CPU then needs no fence: `flush_cpu` of a busy
/// CPU's slot from another CPU, repeated, finds a take that was acknowledged (within 10 s:
/// a liveness bound for a loaded machine, where the busy thread may not run for a while).
#[test]
fn claims_are_acknowledged_by_the_slots_cpu() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU allowed: skipped");
        return;
    }
    let Some((cache, source)) = cache_with_sequences(4, cpus.len().max(configured_cpus()), 64)
    else {
        return;
    };
    let busy = cpus[1];
    let started = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&[busy]);
            started.store(true, Ordering::Release);
            while !done.load(Ordering::Acquire) {
                let id = cache.alloc();
                id.into_iter().for_each(|id| cache.free(id));
            }
        });
        run_on(&cpus[..1]);
        while !started.load(Ordering::Acquire) {
            thread::yield_now();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (mut flushes, mut acknowledged) = (0, false);
        while !acknowledged && std::time::Instant::now() < deadline {
            let before = cache.stats().fenced_takes;
            cache.flush_cpu(busy);
            flushes += 1;
            acknowledged = cache.stats().fenced_takes == before;
        }
        done.store(true, Ordering::Release);
        eprintln!("{flushes} flushes until an acknowledged take: {acknowledged}");
        assert!(acknowledged, "no take was acknowledged by the slot's CPU");
    });
    drop(cache);
    source.assert_all_home();
}
