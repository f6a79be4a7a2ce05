//! The restartable-sequence path where its assumptions meet a hostile process: a source
//! that panics while the cache is dropped after sequences counted hits on several CPUs, and
//! a `membarrier` that a seccomp filter denies after the cache registered it (alone, and
//! together with `sched_setaffinity`, the fallback fence). Each test says so and returns
//! where the cache cannot run sequences or the machine has a single CPU to run on.
#![cfg(target_os = "linux")]

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use common::cpus::{allowed_cpus, configured_cpus, run_on};
use common::Tracking;
use magazine::{Cache, Config, Options};

/// A cache over a tracking source, the source, and two CPUs it may run on.
type TwoCpus = (Cache<Arc<Tracking>>, Arc<Tracking>, [usize; 2]);

/// A cache with restartable sequences, a slot for every CPU, magazines of `magazine_size`,
/// over a tracking source of `pool` ids, and two CPUs to run on; `None`, saying why,
/// where that cannot be had.
fn two_cpus_with_sequences(magazine_size: usize, pool: u32) -> Option<TwoCpus> {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU allowed: skipped");
        return None;
    }
    let mut options = Options::default();
    options.restartable_sequences = true;
    // One item per source call: the counts below follow single allocations.
    options.source_batch = Some(1);
    let config = Config {
        magazine_size,
        cpus: (cpus.iter().max().unwrap() + 1).max(configured_cpus()),
        ..Config::default()
    };
    let source = Arc::new(Tracking::new(pool));
    let cache = Cache::with_options(Arc::clone(&source), config, options);
    if !cache.runs_restartable_sequences() {
        eprintln!("no restartable sequences here: skipped");
        return None;
    }
    Some((cache, source, [cpus[0], cpus[1]]))
}

/// On each CPU in turn, a thread allocates `n` ids and frees them, then allocates and
/// frees one more: hits that sequences count in the loaded magazines' length words,
/// which no owner has folded yet. Leaves the `n` ids in the CPU's slot.
fn hits_on(cache: &Cache<Arc<Tracking>>, cpus: &[usize], n: usize) {
    for &cpu in cpus {
        thread::scope(|s| {
            s.spawn(|| {
                run_on(&[cpu]);
                let ids: Vec<u32> = (0..n).map(|_| cache.alloc().unwrap()).collect();
                ids.into_iter().for_each(|id| cache.free(id));
                let id = cache.alloc().unwrap();
                cache.free(id);
            });
        });
    }
}

/// A source that panics while the cache is dropped, after sequences counted hits on two
/// CPUs: the slots that unwinding drops fold their hits first, so their magazines drop
/// exactly the items they hold (before the fix, a length in the 2^48 range: an
/// out-of-bounds read). Every id is either back in the source or was in a slot that
/// unwinding dropped; none is read twice or from beyond a magazine.
#[test]
fn a_source_panicking_in_the_caches_drop_after_sequence_hits() {
    let Some((cache, source, cpus)) = two_cpus_with_sequences(4, 64) else {
        return;
    };
    hits_on(&cache, &cpus, 3);
    assert_eq!(
        cache.stats().free_hits,
        8,
        "4 hits a CPU, counted in the length words"
    );
    source
        .panic_free_after
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(cache)));
    assert!(dropped.is_err(), "the source panicked in the drop");
    // 6 ids cached (3 per CPU), one returned before the panic; the rest were dropped with
    // the cache, which is what the contract allows, and nothing else happened to them.
    assert_eq!(source.at_home(), 64 - 6 + 1);
}

/// Installs a seccomp filter on the calling thread (and threads it creates later) that
/// fails `membarrier`, and `sched_setaffinity` too when `deny_affinity`, with EPERM.
fn deny_fences(deny_affinity: bool) {
    let denied = |nr: libc::c_long| nr as u32;
    let affinity = match deny_affinity {
        true => denied(libc::SYS_sched_setaffinity),
        false => u32::MAX, // no system call has this number
    };
    let statement = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let filter = [
        // The system call's number: `seccomp_data.nr`, at offset 0.
        statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        statement(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            2,
            0,
            denied(libc::SYS_membarrier),
        ),
        statement(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, affinity),
        statement(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        statement(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1)` only sets a flag of the calling thread, which
    // an unprivileged thread needs to install a filter.
    let no_new_privileges = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(no_new_privileges, 0);
    // SAFETY: `program` points to `filter`, which outlives the call; the kernel copies it.
    let installed = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &program as *const libc::sock_fprog,
        )
    };
    assert_eq!(installed, 0, "seccomp: {}", std::io::Error::last_os_error());
}

/// `membarrier` denied after the cache registered it: a take of another CPU's active slot
/// falls back to a moment on that CPU (`sched_setaffinity`), so flushes still take the
/// whole slot, and nothing panics or hangs.
#[test]
fn a_denied_membarrier_falls_back_to_running_on_the_cpu() {
    let Some((cache, source, [here, there])) = two_cpus_with_sequences(4, 64) else {
        return;
    };
    hits_on(&cache, &[there], 3);
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&[here]);
            deny_fences(false);
            assert_eq!(cache.cached(), 3, "the other CPU's slot, counted whole");
            cache.flush_cpu(there);
            assert_eq!(cache.cached(), 0, "its loaded magazine came too");
            let id = cache
                .alloc_on(there)
                .expect("the slot serves after the flush");
            cache.free_on(there, id);
        });
    });
    drop(cache);
    source.assert_all_home();
}

/// `membarrier` and `sched_setaffinity` both denied: no fence is possible. A take of
/// another CPU's active slot gives its claim back instead of panicking with it held, so
/// `flush_cpu`, `flush` and `cached` return (with the loaded magazine left cached), the
/// slot's own CPU keeps using it, and `alloc_on`/`free_on` for it are served elsewhere.
#[test]
fn no_fence_at_all_leaves_the_loaded_magazine_and_hangs_nothing() {
    let Some((cache, source, [here, there])) = two_cpus_with_sequences(4, 64) else {
        return;
    };
    hits_on(&cache, &[there], 5);
    // There: 4 in `previous`, 1 in the loaded magazine.
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&[here]);
            deny_fences(true);
            let flushed = catch_unwind(AssertUnwindSafe(|| cache.flush_cpu(there)));
            assert!(flushed.is_ok(), "a failed fence panicked");
            assert_eq!(
                cache.cached(),
                1,
                "the loaded magazine stays, counted by a look"
            );
            cache.flush();
            assert_eq!(cache.cached(), 1);
            for _ in 0..10 {
                let id = cache
                    .alloc_on(there)
                    .expect("served by another slot or the source");
                cache.free_on(there, id);
            }
        });
    });
    // The slot's own CPU takes it whole without a fence (the other slot was never
    // activated: no fence either).
    thread::scope(|s| {
        s.spawn(|| {
            run_on(&[there]);
            deny_fences(true);
            cache.flush();
        });
    });
    assert_eq!(cache.cached(), 0);
    drop(cache);
    source.assert_all_home();
}
