//! A panic inside the allocator aborts the process rather than unwinding out of a
//! `GlobalAlloc` method (undefined behaviour). The panic that an allocator built on
//! crossbeam-epoch cannot exclude: another library's epoch garbage whose destructor
//! panics, collected by a pin inside one of the class caches (as in `tests/epoch.rs`),
//! so during an allocation or a free. This binary runs that in a child process (itself,
//! with `CHILD` set) and checks that the child died of SIGABRT with the allocator's
//! message, after the panic's own.
#![cfg(target_os = "linux")]

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crossbeam_epoch as epoch;
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the lib declares the global allocator under this cfg

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: magazine_malloc::MagazineMalloc = magazine_malloc::MagazineMalloc::new();

/// Set in the child's environment.
const CHILD: &str = "MAGAZINE_MALLOC_PANIC_CHILD";

#[test]
fn a_panic_inside_the_allocator_aborts() {
    if std::env::var_os(CHILD).is_some() {
        return panic_inside_the_allocator();
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panic_inside_the_allocator_aborts",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGABRT),
        "the child ended with {} instead of SIGABRT:\n{stderr}",
        output.status
    );
    let panicked = stderr.find("epoch garbage panics");
    let aborted = stderr.find("magazine-malloc: a panic inside the allocator; aborting");
    assert!(
        panicked.is_some() && aborted > panicked,
        "the panic's message, then the allocator's:\n{stderr}"
    );
}

/// The child: garbage that panics when collected, then allocations and frees (each of
/// which may pin the epoch inside a class cache) until it is.
fn panic_inside_the_allocator() {
    {
        let guard = epoch::pin();
        // SAFETY: the closure owns nothing; it runs once, when the epoch has moved on, and
        // its panic is the test (it must abort the process).
        unsafe { guard.defer_unchecked::<_, ()>(|| panic!("epoch garbage panics")) };
        guard.flush();
    }
    // The test's own code never pins again: the garbage runs inside the allocator.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let churn: Vec<Vec<u8>> = (0..20_000).map(|i| vec![1; 16 + (i % 32) * 8]).collect();
        drop(churn);
    }
    eprintln!("the garbage was not collected in 30 s: nothing panicked inside the allocator");
}
