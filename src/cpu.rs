//! The current CPU id, which picks a thread's slot.

/// The id of the CPU the calling thread runs on: `sched_getcpu()` on Linux, and a stable
/// per-thread index elsewhere (and under the model checkers, where it names the model
/// thread). The thread may migrate right after the call; the cache only uses the id as a
/// hint for locality, never for exclusion.
#[inline]
pub fn current() -> usize {
    #[cfg(all(target_os = "linux", not(any(loom, feature = "shuttle"))))]
    {
        // SAFETY: `sched_getcpu` has no preconditions; it returns -1 on failure.
        let cpu = unsafe { libc::sched_getcpu() };
        if let Ok(cpu) = usize::try_from(cpu) {
            return cpu;
        }
    }
    crate::sync::thread_index()
}
