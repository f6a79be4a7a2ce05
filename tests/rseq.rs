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

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::cpus::{allowed_cpus, configured_cpus, run_on};
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
                        // Counted while items move, the figure may count an item twice
                        // (read in a slot, then again in the depot it moved to), so only
                        // the count's own takes are exercised here; it is exact once the
                        // workers are done (checked below).
                        std::hint::black_box(cache.cached());
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

/// `alloc_if_hit` and `free_if_hit` are a sequence's hit or nothing: a miss calls no
/// source, changes nothing and hands the item back; a hit is counted as `alloc`'s and
/// `free`'s are, last in first out on the CPU's loaded magazine.
#[test]
fn hits_alone_or_nothing() {
    hits_alone_or_nothing_through(false);
}

/// The same through a [`magazine::HitPath`]: its hits are the cache's.
#[test]
fn a_hit_path_hits_as_its_cache_does() {
    hits_alone_or_nothing_through(true);
}

fn hits_alone_or_nothing_through(path: bool) {
    let cpus = allowed_cpus();
    let Some((cache, source)) = cache_with_sequences(4, cpus.len().max(configured_cpus()), 64)
    else {
        return;
    };
    let hits = cache
        .hit_path()
        .expect("a cache that runs sequences has a hit path");
    let alloc_if_hit = || match path {
        true => hits.alloc_if_hit(),
        false => cache.alloc_if_hit(),
    };
    let free_if_hit = |id| match path {
        true => hits.free_if_hit(id),
        false => cache.free_if_hit(id),
    };
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&cpus[..1]);
            assert_eq!(alloc_if_hit(), None, "nothing cached: a miss");
            assert_eq!(
                cache.stats().source_alloc_calls,
                0,
                "a miss calls no source"
            );
            let ids: Vec<u32> = (0..12).map(|_| cache.alloc().unwrap()).collect();
            let before = cache.stats();
            let (mut pushed, mut rest) = (Vec::new(), Vec::new());
            for id in ids {
                if !rest.is_empty() {
                    rest.push(id);
                    continue;
                }
                match free_if_hit(id) {
                    Ok(()) => pushed.push(id),
                    Err(back) => {
                        assert_eq!(back, id, "the item handed back");
                        rest.push(back);
                    }
                }
            }
            assert!(
                (1..=4).contains(&pushed.len()) && !rest.is_empty(),
                "the loaded magazine took {} of 12 (it holds 4)",
                pushed.len()
            );
            let after = cache.stats();
            assert_eq!(after.free_hits - before.free_hits, pushed.len() as u64);
            assert_eq!(after.source_free_calls, before.source_free_calls);
            assert_eq!(
                after.depot_full, before.depot_full,
                "a refused push moved nothing"
            );
            for &id in pushed.iter().rev() {
                assert_eq!(alloc_if_hit(), Some(id), "last in, first out");
            }
            let popped = cache.stats().alloc_hits - after.alloc_hits;
            assert_eq!(popped, pushed.len() as u64);
            pushed.into_iter().chain(rest).for_each(|id| cache.free(id));
        });
    });
    drop(cache);
    source.assert_all_home();
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

/// Idle-slot reclaim (`Options::reclaim_idle_slots`, on by default with `WorkingSet`)
/// keeps the working set: a slot that only restartable sequences used during a trim
/// interval is in use, although no owner took it to fold their hits into its counters
/// (they are still counted in its loaded magazine's length word), and keeps its
/// magazines; a slot nobody used is idle, and the trim after the interval takes its
/// magazines and, the target being 0, returns their items to the source.
#[test]
fn idle_reclaim_keeps_a_slot_that_only_sequences_use() {
    let cpus = allowed_cpus();
    let mut options = Options::default();
    options.restartable_sequences = true;
    let config = Config {
        magazine_size: 4,
        cpus: cpus.len().max(configured_cpus()),
        depot: DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::WorkingSet,
        },
    };
    let pool = 64;
    let source = Arc::new(Tracking::new(pool));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    if !cache.runs_restartable_sequences() {
        eprintln!("no restartable sequences here: skipped");
        return;
    }
    let busy = cpus[0];
    // A slot no thread runs on: only the `_on` calls below use it.
    let idle = (busy + 1) % cache.config().cpus;
    let on_busy_cpu = |work: &(dyn Fn() + Sync)| {
        thread::scope(|s| {
            s.spawn(|| {
                run_on(&[busy]);
                work();
            });
        })
    };
    // Three items, straight from the source, in the busy CPU's loaded magazine (the first
    // free activates the slot, the others are sequence hits), two in the idle slot's.
    on_busy_cpu(&|| {
        for _ in 0..3 {
            cache.free(source.alloc().unwrap());
        }
    });
    for _ in 0..2 {
        cache.free_on(idle, source.alloc().unwrap());
    }
    // `cached` takes every slot, which folds the hits counted so far into the counters.
    assert_eq!(cache.cached(), 5);
    // The first trim opens the interval: both slots were used before it.
    cache.trim();
    assert_eq!(
        source.at_home(),
        pool as usize - 5,
        "a slot in use was reclaimed"
    );
    // During the interval, only sequence hits on the busy CPU's slot (its loaded magazine
    // holds 2 or 3 items at each): nobody takes the slot, so nobody folds them.
    on_busy_cpu(&|| {
        for _ in 0..1000 {
            let id = cache.alloc().unwrap();
            cache.free(id);
        }
    });
    let before = cache.stats();
    cache.trim();
    let stats = cache.stats();
    assert_eq!(
        stats.depot_pushes - before.depot_pushes,
        1,
        "the idle slot's magazine, and nothing else, reclaimed: {stats:?}"
    );
    assert_eq!(
        source.at_home(),
        pool as usize - 3,
        "the idle slot's 2 items went home and the busy slot's 3 stayed: {stats:?}"
    );
    assert_eq!(cache.cached(), 3);
    drop(cache);
    source.assert_all_home();
}

/// An item the abort-path test moves: made from a tracking id, and checked whole when it
/// comes out of the cache (a stale commit can hand out a cell that was overwritten).
trait Tagged: Send + Sized + 'static {
    fn make(id: u32) -> Self;
    /// The id, after checking every word of the item.
    fn id(&self) -> u32;
}

impl Tagged for u64 {
    fn make(id: u32) -> Self {
        TAG | u64::from(id)
    }

    fn id(&self) -> u32 {
        assert_eq!(self & !0xffff_ffff, TAG, "a garbled item: {self:#x}");
        *self as u32
    }
}

/// A 64 KiB item: the sequences copy it with `rep movsb` inside the critical section, so
/// a sequence lasts long enough (a microsecond or two) for a second signal to land in it.
struct Page([u64; 8192]);

impl Tagged for Page {
    fn make(id: u32) -> Self {
        Page([TAG | u64::from(id); 8192])
    }

    fn id(&self) -> u32 {
        let first = self.0[0];
        if let Some(other) = self.0.iter().find(|&&word| word != first) {
            panic!("a torn item: {first:#x} and {other:#x}");
        }
        first.id()
    }
}

/// A tracking source of [`Tagged`] items.
struct TaggedSource<I>(Arc<Tracking>, std::marker::PhantomData<fn() -> I>);

impl<I: Tagged> Source for TaggedSource<I> {
    type Item = I;

    fn alloc(&self) -> Option<I> {
        self.0.alloc().map(I::make)
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = I>) {
        self.0.free_batch(&mut items.map(|item| item.id()))
    }
}

/// What the signal handler of [`abort_path_rearms_the_section`] works with: the cache and
/// the one item it keeps between two signals.
struct Interrupted<I: Tagged> {
    cache: Cache<TaggedSource<I>>,
    /// The item the handler took and keeps until the next signal. Only the handler
    /// touches it while signals are sent (it does not nest: its signal is blocked while it
    /// runs), and the worker only after the last one.
    kept: std::cell::UnsafeCell<Option<I>>,
    /// Whether the handler holds an item (0 or 1), for the worker's checks.
    holding: AtomicUsize,
    /// The worker is folding the hit counts (`cached`, which takes the slot): the handler
    /// does nothing.
    quiet: AtomicBool,
    /// Handler operations since the last fold; the handler stops at [`HANDLER_OPS`].
    ops: AtomicUsize,
    /// Handler allocations and frees in all.
    allocs: AtomicUsize,
    frees: AtomicUsize,
    /// Signals received, and those whose interrupted instruction lay inside a critical
    /// section (see [`inside_a_section`]).
    signals: AtomicUsize,
    inside: AtomicUsize,
    /// Signals whose handler has returned (or is returning).
    handled: AtomicUsize,
}

// SAFETY: `kept` is used by one thread at a time: the worker's signal handler while
// signals are sent, then the worker (see the field).
unsafe impl<I: Tagged> Sync for Interrupted<I> {}

/// The worker folds the sequences' hit counts every `FOLD` pairs, and the handler does at
/// most `HANDLER_OPS` operations (half of them allocations) between two folds: the
/// allocation hits counted in the length word stay below `2^15` (8192 + 16384), so no
/// hit sequence misses for full counters (a miss in the handler would run the slow path,
/// which is not async-signal-safe).
const FOLD: usize = 8192;
const HANDLER_OPS: usize = 4 * FOLD;

/// The most signals the worker gets per pair it has done (see the signaller).
const SIGNALS_PER_PAIR: usize = 8;

/// The handler's `Interrupted<I>`, while one is running.
static INTERRUPTED: std::sync::atomic::AtomicPtr<()> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

// One empty descriptor in the crate's descriptor section (`src/rseq.rs`), so that the
// section and its bounds exist in every x86_64 build of this test, sequences or not: a
// zero-length section at address 0, which no instruction is in.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection __rseq_cs, \"aw\", @progbits",
    ".balign 32",
    ".zero 32",
    ".popsection",
);

/// Whether the instruction a signal interrupted (in `context`, a `ucontext_t`) lies inside
/// one of the crate's restartable sequences: the `[start_ip, start_ip +
/// post_commit_offset)` of a `struct rseq_cs` in the `__rseq_cs` section, where
/// `src/rseq.rs` puts every descriptor (32-byte aligned, 32 bytes apart). Never, while
/// the sequences are armed: the kernel moves a thread signalled inside its armed section
/// to the abort handler before the signal handler runs, so the context shows `abort_ip`.
/// A section entered without storing its descriptor in `rseq_cs` (a restart that skips
/// the store; the kernel cleared `rseq_cs` when it aborted the section) is not aborted.
#[cfg(target_arch = "x86_64")]
fn inside_a_section(context: *const libc::c_void) -> bool {
    extern "C" {
        // The bounds of the `__rseq_cs` section, from the linker.
        static __start___rseq_cs: [u64; 4];
        static __stop___rseq_cs: [u64; 4];
    }
    // SAFETY: the kernel passes a `ucontext_t` to an SA_SIGINFO handler.
    let ip =
        unsafe { (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] }
            as u64;
    // SAFETY: the section holds `struct rseq_cs` descriptors 32 bytes apart (the `.balign
    // 32` of each), read as four words: version and flags, start_ip, post_commit_offset,
    // abort_ip. Static data, never written.
    let descriptors = unsafe {
        let (start, stop) = (
            std::ptr::addr_of!(__start___rseq_cs),
            std::ptr::addr_of!(__stop___rseq_cs),
        );
        std::slice::from_raw_parts(start, (stop as usize - start as usize) / 32)
    };
    descriptors
        .iter()
        .any(|&[_, start, length, _]| ip.wrapping_sub(start) < length)
}

#[cfg(not(target_arch = "x86_64"))]
fn inside_a_section(_: *const libc::c_void) -> bool {
    false
}

/// SIGUSR2's handler: a hit on the worker's slot, alternately an allocation (whose item it
/// keeps) and a free of that item. Async-signal-safe because each is a hit, a restartable
/// sequence and nothing else: no allocation, no lock (the test keeps every sequence a hit,
/// see [`abort_path_rearms_the_section`]); the rest is atomics and reads of static data.
/// (A panic here would abort the process: an `extern "C"` function does not unwind.)
extern "C" fn interrupt<I: Tagged>(
    _: libc::c_int,
    _: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let interrupted = INTERRUPTED.load(Ordering::Acquire);
    if interrupted.is_null() {
        return;
    }
    // SAFETY: the worker, the only thread that receives SIGUSR2 and so the one this
    // handler runs on, stores its `Interrupted<I>` there, and clears it (`Finish`, also
    // when it unwinds) before the `Interrupted` can be dropped.
    let interrupted = unsafe { &*(interrupted as *const Interrupted<I>) };
    interrupted.signals.fetch_add(1, Ordering::Relaxed);
    if inside_a_section(context) {
        interrupted.inside.fetch_add(1, Ordering::Relaxed);
    }
    if !interrupted.quiet.load(Ordering::Relaxed)
        && interrupted.ops.fetch_add(1, Ordering::Relaxed) < HANDLER_OPS
    {
        // SAFETY: only this handler touches `kept` while signals are sent (see the field).
        let kept = unsafe { &mut *interrupted.kept.get() };
        match kept.take() {
            Some(item) => {
                interrupted.cache.free(item);
                interrupted.frees.fetch_add(1, Ordering::Relaxed);
                interrupted.holding.store(0, Ordering::Relaxed);
            }
            None => {
                *kept = interrupted.cache.alloc();
                interrupted.allocs.fetch_add(1, Ordering::Relaxed);
                interrupted.holding.store(1, Ordering::Relaxed);
            }
        }
    }
    // Release: the signaller sends the next signal once it sees this.
    interrupted.handled.fetch_add(1, Ordering::Release);
}

/// Installs `interrupt::<I>` for SIGUSR2.
fn catch_sigusr2<I: Tagged>() {
    type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
    // SAFETY: a zeroed `sigaction` is valid (empty mask, no flags); SIGUSR2 is blocked
    // while its handler runs (no SA_NODEFER); the handler is async-signal-safe (see it).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = interrupt::<I> as Handler as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        assert_eq!(
            libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()),
            0
        );
    }
}

/// The end of the signals, on the worker's thread, also when it unwinds: tells the
/// signaller to stop, waits until it has (so that it never signals a thread that has
/// ended), then takes the `Interrupted` away from the handler (a signal still pending
/// finds none).
struct Finish<'a> {
    done: &'a AtomicBool,
    stopped: &'a AtomicBool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        while !self.stopped.load(Ordering::Acquire) {
            thread::yield_now();
        }
        INTERRUPTED.store(std::ptr::null_mut(), Ordering::Release);
        // The handler runs on this thread: nothing after this moves before the store.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    }
}

/// Items in the worker's loaded magazine between two operations, when neither the worker
/// nor the handler holds one.
const WARM: usize = 3;

/// The abort path of the restartable sequences: after an abort the kernel clears the
/// area's `rseq_cs`, so a restart must store the descriptor again before it reads
/// anything, or the retry runs unprotected and a second preemption or signal inside it
/// lets a commit through on a slot that changed meanwhile.
///
/// One thread, pinned to one CPU, does alloc/free pairs on that CPU's slot while another
/// thread sends it SIGUSR2, each signal as soon as the handler of the previous one has
/// returned (so that it may land in the restart of a section the previous one aborted).
/// The handler does hits on the same slot, alternately taking an item (and keeping it)
/// and giving it back, so an interrupted sequence finds the slot changed when it resumes.
/// Everything is a hit by construction: the loaded magazine (4 cells) holds `WARM` = 3
/// items when nobody holds one, the worker and the handler hold at most one each, so it
/// holds 1 to 3 items at every operation; nobody else uses the cache; the worker stays on
/// its CPU; the hit counts are folded before they fill (`FOLD`, `HANDLER_OPS`), with the
/// handler quiet meanwhile. The signaller sends at most `SIGNALS_PER_PAIR` per pair.
///
/// Checked: no signal finds the worker inside a section (the kernel aborts an armed one
/// first; see [`inside_a_section`]), so no sequence runs unarmed; and what an unarmed
/// retry would break: each fold finds `WARM` items cached but for the handler's, every
/// item that comes out is whole, the hits add up to the operations (all of them hits),
/// and the source gets each id back exactly once.
///
/// One-word items (moved in a register: a window of a few instructions) and 64 KiB items
/// (copied inside the section) in turn.
#[test]
fn abort_path_rearms_the_section() {
    // `MAGAZINE_RSEQ_OPS` scales both.
    if interrupted::<u64>(ops() / 20) {
        interrupted::<Page>(ops() / 400);
    }
}

/// [`abort_path_rearms_the_section`] with items of type `I`, `pairs` pairs; `false` where
/// the cache cannot run sequences.
fn interrupted<I: Tagged>(pairs: usize) -> bool {
    let cpus = allowed_cpus();
    let mut options = Options::default();
    options.restartable_sequences = true;
    let config = Config {
        magazine_size: 4,
        cpus: cpus.len().max(configured_cpus()),
        ..Config::default()
    };
    let source = Arc::new(Tracking::new(64));
    let interrupted = Interrupted {
        cache: Cache::with_options(
            TaggedSource::<I>(Arc::clone(&source), std::marker::PhantomData),
            config,
            options,
        ),
        kept: std::cell::UnsafeCell::new(None),
        holding: AtomicUsize::new(0),
        quiet: AtomicBool::new(false),
        ops: AtomicUsize::new(0),
        allocs: AtomicUsize::new(0),
        frees: AtomicUsize::new(0),
        signals: AtomicUsize::new(0),
        inside: AtomicUsize::new(0),
        handled: AtomicUsize::new(0),
    };
    if !interrupted.cache.runs_restartable_sequences() {
        eprintln!("no restartable sequences here: skipped");
        return false;
    }
    catch_sigusr2::<I>();
    let cache = &interrupted.cache;
    let (done, stopped) = (AtomicBool::new(false), AtomicBool::new(false));
    let worker = AtomicU64::new(0);
    // Pairs the worker has done, for the signaller.
    let progress = AtomicUsize::new(0);
    let hits = thread::scope(|s| {
        // A large stack: the handler runs on it, and unoptimised builds keep several
        // copies of a 64 KiB item in each frame.
        let work = thread::Builder::new()
            .stack_size(32 << 20)
            .spawn_scoped(s, || {
                run_on(&cpus[..1]);
                // `WARM` items, straight from the source, in the loaded magazine: the first
                // free activates the slot, the others are sequence hits.
                for _ in 0..WARM {
                    cache.free(cache.source().alloc().unwrap());
                }
                assert_eq!(cache.cached(), WARM);
                let before = cache.stats();
                INTERRUPTED.store(
                    &interrupted as *const Interrupted<I> as *mut (),
                    Ordering::Release,
                );
                // Ends the signals when the worker is done, also when it panics.
                let finish = Finish {
                    done: &done,
                    stopped: &stopped,
                };
                // SAFETY: no preconditions.
                worker.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
                // From the first signal on: a run of one-word pairs is over in moments.
                while interrupted.signals.load(Ordering::Relaxed) == 0 {
                    thread::yield_now();
                }
                for pair in 0..pairs {
                    if pair % FOLD == 0 {
                        // The handler runs on this thread: a compiler fence orders the flag
                        // against it.
                        interrupted.quiet.store(true, Ordering::SeqCst);
                        std::sync::atomic::compiler_fence(Ordering::SeqCst);
                        let cached = cache.cached() + interrupted.holding.load(Ordering::SeqCst);
                        assert_eq!(cached, WARM, "pair {pair}: items duplicated or lost");
                        interrupted.ops.store(0, Ordering::SeqCst);
                        std::sync::atomic::compiler_fence(Ordering::SeqCst);
                        interrupted.quiet.store(false, Ordering::SeqCst);
                    }
                    let item = cache.alloc().expect("the loaded magazine holds an item");
                    std::hint::black_box(item.id());
                    cache.free(item);
                    progress.store(pair + 1, Ordering::Relaxed);
                }
                drop(finish);
                // SAFETY: no more signals come, and one still pending finds no
                // `Interrupted` (see `Finish`): `kept` is ours.
                if let Some(item) = unsafe { &mut *interrupted.kept.get() }.take() {
                    interrupted.frees.fetch_add(1, Ordering::Relaxed);
                    cache.free(item);
                }
                let after = cache.stats();
                assert_eq!(cache.cached(), WARM, "items duplicated or lost");
                assert_eq!(
                    after.source_allocs, before.source_allocs,
                    "a miss: {after:?}"
                );
                (
                    after.alloc_hits - before.alloc_hits,
                    after.free_hits - before.free_hits,
                )
            });
        let work = work.unwrap();
        s.spawn(|| {
            if cpus.len() > 1 {
                run_on(&cpus[1..2]);
            }
            // One signal at a time, sent once the handler of the previous one has
            // returned: it lands wherever the worker is then, the restart of a section the
            // previous one aborted included (a signal sent while the handler runs would be
            // delivered as it returns, before the worker runs an instruction). And at most
            // `SIGNALS_PER_PAIR` per pair, so that a worker that gets little CPU time (a
            // loaded machine) still makes progress.
            let mut sent = 0;
            while !done.load(Ordering::Acquire) {
                let target = worker.load(Ordering::Acquire);
                let handled = interrupted.handled.load(Ordering::Acquire);
                let allowed = SIGNALS_PER_PAIR * (progress.load(Ordering::Relaxed) + 1);
                if target != 0 && handled == sent && sent < allowed {
                    sent += 1;
                    // SAFETY: the worker waits for `stopped` before it ends, also when it
                    // panics (`Finish`), so `target` names a live thread.
                    unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR2) };
                }
                if cpus.len() == 1 {
                    thread::yield_now();
                }
            }
            stopped.store(true, Ordering::Release);
        });
        work.join().unwrap()
    });
    let load = |counter: &AtomicUsize| counter.load(Ordering::Relaxed);
    let (allocs, frees) = (load(&interrupted.allocs), load(&interrupted.frees));
    eprintln!(
        "{pairs} pairs of {}-byte items, {} signals, {allocs} handler allocations",
        std::mem::size_of::<I>(),
        load(&interrupted.signals),
    );
    assert_eq!(
        load(&interrupted.inside),
        0,
        "signals found the worker inside a section that was not armed"
    );
    // The last free of the kept item, if any, was the worker's (counted in `frees`).
    assert_eq!(hits, ((pairs + allocs) as u64, (pairs + frees) as u64));
    drop(interrupted);
    source.assert_all_home();
    true
}
