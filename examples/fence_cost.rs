//! What a fenced take of a CPU slot costs with restartable sequences: the time of one
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, cpu)`, the
//! call `Options::restartable_sequences` makes when a thread takes another CPU's slot and
//! that CPU does not acknowledge the claim (see `magazine::docs::design`). The kernel
//! interrupts only CPUs running a thread of this process, so a thread spins on the
//! target CPU meanwhile.
//!
//! ```sh
//! cargo run --release --example fence_cost    # Linux, at least 2 CPUs; 3 runs, medians
//! ```

#[cfg(target_os = "linux")]
fn main() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    const REGISTER: libc::c_int = 1 << 8; // MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ
    const FENCE: libc::c_int = 1 << 7; // MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ
    const FLAG_CPU: libc::c_uint = 1; // MEMBARRIER_CMD_FLAG_CPU
    const CALLS: u32 = 100_000;

    let membarrier = |command: libc::c_int, cpu: usize| {
        // SAFETY: `membarrier` reads no memory of ours; an unknown command fails.
        unsafe { libc::syscall(libc::SYS_membarrier, command, FLAG_CPU, cpu as libc::c_int) }
    };
    let pin = |cpu: usize| {
        // SAFETY: a zeroed `cpu_set_t` is the empty set; 0 is the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 || !pin(0) {
        eprintln!("needs CPUs 0 and 1");
        return;
    }
    // SAFETY: registration takes no memory of ours.
    if unsafe { libc::syscall(libc::SYS_membarrier, REGISTER, 0, 0) } != 0 {
        eprintln!("this kernel has no membarrier rseq fence");
        return;
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(pin(1), "cannot run on CPU 1");
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(10));
        let time = |cpu: usize| {
            let start = Instant::now();
            for _ in 0..CALLS {
                assert_eq!(membarrier(FENCE, cpu), 0, "membarrier failed");
            }
            start.elapsed().as_nanos() as f64 / f64::from(CALLS)
        };
        let median = |mut runs: Vec<f64>| {
            runs.sort_by(f64::total_cmp);
            (runs[runs.len() / 2], runs[0], runs[runs.len() - 1])
        };
        for (what, cpu) in [("another CPU (1)", 1), ("the caller's own CPU (0)", 0)] {
            let (mid, low, high) = median((0..3).map(|_| time(cpu)).collect());
            println!("fence of {what}: {mid:.0} ns per call (3 runs: {low:.0}-{high:.0})");
        }
        stop.store(true, Ordering::Relaxed);
    });
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("membarrier is Linux only");
}
