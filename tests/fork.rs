//! A child forked while a parent thread trims may trim: the trim flag that the parent's
//! thread held is copied by `fork` with its holder's process id, and the child takes it
//! over (mutant `flag_ignores_process`: the copied flag stays held, and every trim in the
//! child returns 0 at once). The exhaustion flush's flag is the same type
//! (`src/process_flag.rs` has its unit test).

#![cfg(unix)]

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// Ids from a counter; `free_batch` on the gated thread stops at the gate until the test
/// opens it.
struct Gated {
    next: AtomicU32,
    gated_thread: OnceLock<ThreadId>,
    inside: AtomicBool,
    open: AtomicBool,
}

impl Source for Gated {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        Some(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        if self.gated_thread.get() == Some(&thread::current().id()) {
            self.inside.store(true, Ordering::Release);
            while !self.open.load(Ordering::Acquire) {
                thread::yield_now();
            }
        }
        items.for_each(drop);
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not fork")]
fn a_child_forked_during_a_trim_may_trim() {
    let source = Gated {
        next: AtomicU32::new(0),
        gated_thread: OnceLock::new(),
        inside: AtomicBool::new(false),
        open: AtomicBool::new(false),
    };
    // One full magazine released per trim, down to none.
    let config = Config {
        magazine_size: 4,
        cpus: 1,
        depot: DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::OnePerTick,
        },
    };
    let cache = Cache::with_config(source, config);
    let ids: Vec<u32> = (0..40).map(|_| cache.alloc_on(0).unwrap()).collect();
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    assert!(cache.stats().depot_full >= 3, "magazines to trim");
    thread::scope(|s| {
        s.spawn(|| {
            cache
                .source()
                .gated_thread
                .set(thread::current().id())
                .unwrap();
            cache.trim(); // stops in the source, holding the trim flag
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cache.source().inside.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the trim reached the source");
            thread::yield_now();
        }
        // SAFETY: the child only calls the cache (whose source needs no lock) and the
        // system allocator's fork-safe paths, then leaves by `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // The child: the trimming thread does not exist here.
            let released = cache.trim();
            let ok = released == 1 && cache.alloc_on(0).is_some();
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let status = wait_for(pid, Duration::from_secs(30));
        cache.source().open.store(true, Ordering::Release);
        assert_eq!(
            status,
            Some(0),
            "the child's trim released a magazine (exit status; None: it hung)"
        );
    });
    assert!(cache.trim() <= 1, "the parent trims as before");
}

/// The child's exit code, or `None` (the child killed) when it did not exit in time.
fn wait_for(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: our child; `status` is a valid out-pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if waited == pid {
            return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        }
        if Instant::now() > deadline {
            // SAFETY: our child, which has not been reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}
