//! The current CPU id, which picks a thread's slot.

/// The id of the CPU the calling thread runs on: on Linux, read from the thread's
/// restartable-sequence area when glibc registered one (x86_64; the same value as
/// `sched_getcpu()` without the call), else `sched_getcpu()`; a stable
/// per-thread index elsewhere (and under the model checkers, where it names the model
/// thread, and under Miri, which has no `sched_getcpu`). Without the `std` feature it is 0: set
/// [`Options::current_cpu`](crate::Options::current_cpu) to your platform's CPU id instead.
///
/// The thread may migrate right after the call; the cache only uses the id to pick a slot
/// (for locality), never for exclusion.
///
/// ```
/// let cpu = magazine::cpu::current();
/// # let _ = cpu;
/// ```
#[inline]
pub fn current() -> usize {
    #[cfg(not(feature = "std"))]
    {
        0
    }
    #[cfg(feature = "std")]
    {
        // Miri has no `sched_getcpu`: it gets the per-thread index.
        // Miri cannot run the inline assembly.
        #[cfg(all(magazine_rseq, not(miri)))]
        if let Some(cpu) = crate::rseq::current_cpu() {
            return cpu;
        }
        #[cfg(all(target_os = "linux", not(any(magazine_model, miri))))]
        {
            // SAFETY: `sched_getcpu` has no preconditions; it returns -1 on failure.
            let cpu = unsafe { libc::sched_getcpu() };
            if let Ok(cpu) = usize::try_from(cpu) {
                return cpu;
            }
        }
        crate::sync::thread_index()
    }
}
