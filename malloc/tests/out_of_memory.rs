//! Out of memory is a null, never an abort: a child process limited by `RLIMIT_AS`
//! exhausts its address space through every class and the large path, then, with nothing
//! left, creates a class cache, lets a thread exit, frees (spills that need magazines),
//! allocates again after freeing, and exits normally with the address space exhausted
//! again. Thread and process exit release the crate's epoch participants, whose
//! allocations (crossbeam-epoch's) cannot fail gracefully: they come from the allocator's
//! reserve. Mutants: `no_reserve` (no reserve: the exits abort), `no_exit_marker` (exit
//! allocations go through the caches, past the reserve: the exits abort), and the cache's
//! `infallible_magazine` (a magazine's allocation aborts).
//!
//! Its own `main` (`harness = false`): under libtest the scenario would share the process
//! with the harness's main thread, whose first blocking wait for the test's result
//! allocates (std's channel context) at a moment set by the scheduler, sometimes after the
//! limit, where that infallible allocation aborts the child for a reason that is not the
//! allocator's.

use std::alloc::{alloc, dealloc, Layout};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use magazine_malloc::{classes, MagazineMalloc};

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

/// Address space the child may map beyond what it has at the limit's start.
const HEADROOM: u64 = 24 << 20;

/// Set in the child's environment: run the scenario.
const CHILD: &str = "MAGAZINE_OOM_CHILD";

const NAME: &str = "out_of_memory_is_null_in_every_path_and_the_program_exits_normally";

fn main() -> ExitCode {
    if std::env::var_os(CHILD).is_some() {
        exhausted_address_space_scenario();
    }
    // The part of libtest's command line that cargo and test runners use.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--list") {
        if !args.iter().any(|arg| arg == "--ignored") {
            println!("{NAME}: test");
        }
        return ExitCode::SUCCESS;
    }
    // Filters are the words that are neither options nor an option's separate value.
    let mut filters = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if [
            "--skip",
            "--test-threads",
            "--color",
            "--format",
            "--logfile",
            "-Z",
        ]
        .contains(&word.as_str())
        {
            words.next();
        } else if !word.starts_with('-') {
            filters.push(word);
        }
    }
    if args.iter().any(|arg| arg == "--ignored")
        || !(filters.is_empty() || filters.iter().any(|filter| NAME.contains(filter.as_str())))
    {
        println!("running 0 tests");
        return ExitCode::SUCCESS;
    }
    println!("running 1 test");
    match out_of_memory_is_null_in_every_path_and_the_program_exits_normally() {
        Ok(note) => {
            println!("test {NAME} ... ok{note}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            println!("test {NAME} ... FAILED\n{failure}");
            ExitCode::FAILURE
        }
    }
}

fn out_of_memory_is_null_in_every_path_and_the_program_exits_normally(
) -> Result<&'static str, String> {
    if ["ASAN_OPTIONS", "TSAN_OPTIONS"]
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        // A sanitizer's runtime maps memory of its own at any time: a limit on the
        // address space makes it fail, not the allocator.
        return Ok(" (skipped under a sanitizer)");
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() && stdout.contains("scenario complete") {
        Ok("")
    } else {
        Err(format!(
            "the child failed ({}):\n{stdout}\n{stderr}",
            output.status
        ))
    }
}

/// Blocks allocated until the allocator said no.
struct Held(Vec<(*mut u8, Layout)>);

impl Held {
    /// Allocates blocks of `layout` until one is null (at most `max`); returns how many.
    fn exhaust(&mut self, layout: Layout, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.0.len() < self.0.capacity() {
            // SAFETY: a layout of nonzero size.
            let block = unsafe { alloc(layout) };
            if block.is_null() {
                return n;
            }
            // SAFETY: a fresh block of `layout.size()` bytes: touched, as a program would.
            unsafe { block.write_bytes(0xa5, layout.size().min(64)) };
            self.0.push((block, layout));
            n += 1;
        }
        n
    }

    /// Every class and the large path until each says no.
    fn exhaust_all(&mut self) {
        let large = Layout::from_size_align(2 << 20, 8).unwrap();
        self.exhaust(large, usize::MAX);
        for class in (0..classes::CLASSES).rev() {
            let size = classes::class_size(class);
            self.exhaust(Layout::from_size_align(size, 8).unwrap(), usize::MAX);
        }
    }

    /// Frees the blocks of `size` bytes.
    fn free_size(&mut self, size: usize) -> usize {
        let before = self.0.len();
        self.0.retain(|&(block, layout)| {
            if layout.size() != size {
                return true;
            }
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { dealloc(block, layout) };
            false
        });
        before - self.0.len()
    }
}

/// An assertion for the child once memory is exhausted: a panic's report allocates (and a
/// failed allocation inside it waits for the backtrace lock the panic holds), so a failed
/// check prints without allocating and exits.
fn check(condition: bool, what: &str) {
    if !condition {
        eprintln!("child: check failed: {what}");
        // SAFETY: ends the process at once, which is the point.
        unsafe { libc::_exit(3) };
    }
}

fn vm_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: `sysconf` has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// The child's scenario: the process's only threads are its own.
fn exhausted_address_space_scenario() -> ! {
    // stdout's buffer allocated before the limit.
    println!("child: starting");
    // The thread's epoch participant and exit marker registered now, before the limit:
    // otherwise a thread registers them at its first call that misses its cache's hit, and
    // registering a thread-local destructor allocates from glibc's own heap, which aborts
    // when it cannot.
    MagazineMalloc::new().register_thread();
    let mut held = Held(Vec::with_capacity(4 << 20));
    // A thread started before the limit (its stack is mapped), used after it.
    static READY: AtomicBool = AtomicBool::new(false);
    static GO: AtomicBool = AtomicBool::new(false);
    let worker = thread::spawn(|| {
        // Registered before the limit, as the main thread is above.
        MagazineMalloc::new().register_thread();
        let mut kept = Vec::with_capacity(1000);
        READY.store(true, Ordering::Release);
        while !GO.load(Ordering::Acquire) {
            thread::yield_now();
        }
        // Cache operations with nothing left: nulls, frees, then thread exit (its epoch
        // participant is released, which allocates).
        for size in [8, 64, 640, 3000] {
            for _ in 0..200 {
                // SAFETY: a layout of nonzero size.
                let block = unsafe { alloc(Layout::from_size_align(size, 8).unwrap()) };
                if !block.is_null() {
                    kept.push((block, size));
                }
            }
        }
        for (block, size) in kept {
            // SAFETY: allocated above with this layout.
            unsafe { dealloc(block, Layout::from_size_align(size, 8).unwrap()) };
        }
    });
    while !READY.load(Ordering::Acquire) {
        thread::yield_now();
    }
    let limit = vm_bytes() + HEADROOM;
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid `rlimit`; lowering a soft limit needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) }, 0);

    // Everything until each path says no (a null): the large path, then every class.
    // (An allocation only tested for null is not checked again: the compiler may remove
    // an allocation whose block is never used, and fold the test.)
    held.exhaust_all();
    check(
        held.0.len() > 1000,
        "the limit was reached after some blocks",
    );

    // A thread exits with nothing left.
    GO.store(true, Ordering::Release);
    check(worker.join().is_ok(), "the worker exits normally");

    // Frees with nothing left: blocks of the smallest classes, whose magazines fill and
    // spill (a spill takes a new magazine).
    for size in [8, 16, 24, 32] {
        held.free_size(size);
    }
    // And allocations again after freeing: served.
    let small = Layout::from_size_align(8, 8).unwrap();
    check(
        held.exhaust(small, 1000) > 0,
        "allocations succeed again after frees",
    );
    // Memory back in bulk (freed 1 MiB blocks stay cached, and some freed 2 MiB mappings
    // kept, until trims give them back: two trims with nothing allocated between them),
    // then exhausted again for the process's exit.
    held.free_size(1 << 20);
    // Freed large mappings are kept (8 at most); one larger than what the others gave back
    // is refused by the system at first, and made once the kept ones are unmapped. (The
    // exhausted page classes leave less than 40 KiB unused under the limit.)
    let freed = held.free_size(2 << 20);
    let kept = freed.min(8);
    check(kept > 0, "some 2 MiB mappings were freed and kept");
    let beyond = (freed - kept + 1) * (2 << 20);
    check(
        held.exhaust(Layout::from_size_align(beyond, 8).unwrap(), 1) == 1,
        "a refused mapping is made after the kept ones are unmapped",
    );
    held.free_size(beyond);
    let heap = MagazineMalloc::new();
    heap.trim();
    heap.trim();
    let stats = heap.stats();
    println!(
        "child: reserve in use {} bytes; scenario complete",
        stats.reserve_in_use
    );
    // The caches' metadata (magazines, crossbeam-epoch's records and bags) found room in
    // the reserve while the system refused memory.
    check(stats.reserve_in_use > 0, "the reserve served metadata");
    drop(stats);
    held.exhaust_all();
    // Exits with the address space exhausted (libtest's report would allocate): this
    // thread's epoch participant is released by `exit`, which runs its thread-local
    // destructors.
    std::process::exit(0);
}
