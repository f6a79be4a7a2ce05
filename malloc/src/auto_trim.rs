//! Trims the allocator runs by itself, so that a program that never calls
//! [`MagazineMalloc::trim`](crate::MagazineMalloc::trim) (any C program under the
//! `magazine-malloc-preload` library, most Rust programs) still gets back the memory that
//! a finished phase of its work left in the caches.
//!
//! No thread and no timer: the clock is read only where the allocator already leaves its
//! fast path, at a class source's call (a depot that ran empty or overflowed, under the
//! class's lock) and at a large block's allocation or free. Once the interval has passed
//! since the last trim, such a call raises a flag; the next call past the caches' hits
//! made from outside the allocator (a class block's miss, a large block; no cache's code
//! on the thread's stack, where a trim may run) sees it, and the thread that lowers it
//! trims, unless another trim is running (then nobody waits). A program whose caches serve
//! every call needs no trim: its memory is in use. One that stops calling the allocator
//! keeps what its caches hold until it calls again (or calls `trim`).
//!
//! A trim gives back what nobody used for a whole interval (the working-set rule), so a
//! class in steady use loses nothing, and the cost is one pass over the class caches per
//! interval.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::{fork, heap};

/// The interval between automatic trims, in milliseconds (0: none), unless the program
/// sets another ([`set_interval`]).
pub(crate) const DEFAULT_INTERVAL_MS: u64 = 100;

// Every atomic here is Relaxed: none publishes data (the trim itself takes the trim lock
// and the caches' own synchronisation), and a trim one interval early or late is harmless.

/// The interval in milliseconds; 0 turns automatic trims off.
static INTERVAL_MS: AtomicU64 = AtomicU64::new(DEFAULT_INTERVAL_MS);

/// The monotonic clock (milliseconds) after which the next trim is due; 0 before the
/// first source call, which starts the first interval.
static DUE_AT: AtomicU64 = AtomicU64::new(0);

/// Raised by a source call once a trim is due; lowered by the thread that runs it.
static DUE: AtomicBool = AtomicBool::new(false);

/// Automatic trims run so far (statistics).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Sets the interval between automatic trims; `None` (or zero) turns them off.
pub(crate) fn set_interval(interval: Option<Duration>) {
    let ms = interval.map_or(0, |interval| {
        u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    });
    INTERVAL_MS.store(ms, Ordering::Relaxed);
    DUE_AT.store(0, Ordering::Relaxed);
}

/// The interval between automatic trims, `None` when they are off.
pub(crate) fn interval() -> Option<Duration> {
    match INTERVAL_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    }
}

/// The coarse monotonic clock in milliseconds (the vDSO's, no system call; its resolution
/// of a few milliseconds is ample); 0 if it cannot be read, which makes no trim due.
fn now_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes the `timespec` we own; it fails only for an unknown
    // clock, and then `now` stays zero. It neither allocates nor unwinds.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) } != 0 {
        return 0;
    }
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let millis = u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000_000;
    secs.saturating_mul(1000).saturating_add(millis)
}

/// A source call or a large block's allocation or free: raises the flag when a trim is
/// due. Takes no lock and never allocates: callable from anywhere, inside the allocator
/// included.
pub(crate) fn note_slow_call() {
    let interval = INTERVAL_MS.load(Ordering::Relaxed);
    // MUTANT: no trim ever falls due.
    if interval == 0 || DUE.load(Ordering::Relaxed) || cfg!(magazine_mutant = "auto_trim_never_due")
    {
        return;
    }
    let now = now_ms();
    if now == 0 {
        return;
    }
    let due_at = DUE_AT.load(Ordering::Relaxed);
    if due_at == 0 {
        // The first call starts the first interval.
        let _ = DUE_AT.compare_exchange(0, now + interval, Ordering::Relaxed, Ordering::Relaxed);
    } else if now >= due_at {
        DUE.store(true, Ordering::Relaxed);
    }
}

/// Whether a trim is due.
#[inline]
pub(crate) fn is_due() -> bool {
    DUE.load(Ordering::Relaxed)
}

/// Runs the trim if one is due; the caller is outside the allocator (see [`run`]).
#[inline]
pub(crate) fn run_if_due() {
    if is_due() {
        run();
    }
}

/// Runs the trim if it is still due. The caller is outside the allocator (no cache's code
/// on its stack) and holds none of its locks.
#[cold]
#[inline(never)]
pub(crate) fn run() {
    // One thread wins the flag; a trim already running makes this one unnecessary.
    if !DUE.swap(false, Ordering::Relaxed) {
        return;
    }
    let Some(trimming) = fork::try_trimming() else {
        return;
    };
    let interval = INTERVAL_MS.load(Ordering::Relaxed);
    if interval == 0 {
        return;
    }
    DUE_AT.store(now_ms().saturating_add(interval), Ordering::Relaxed);
    heap::trim_holding(&trimming);
    RUNS.fetch_add(1, Ordering::Relaxed);
}

/// Automatic trims run so far.
pub(crate) fn runs() -> u64 {
    RUNS.load(Ordering::Relaxed)
}
