//! The kernel's restartable-sequence area of the calling thread, as glibc registers it, and
//! the one thing the crate reads from it: the id of the CPU the thread runs on.
//!
//! # The ABI
//!
//! Since Linux 4.18 a thread can register a `struct rseq` with the kernel (the `rseq`
//! system call); glibc 2.35 and later register one for every thread it creates and export
//! where it is:
//!
//! - `__rseq_offset` (`ptrdiff_t`): the area's offset from the thread pointer, the same
//!   for every thread;
//! - `__rseq_size` (`unsigned int`): 0 when glibc did not register areas (an older kernel,
//!   `GLIBC_TUNABLES=glibc.pthread.rseq=0`, or a program that registers its own).
//!
//! The area starts with `u32 cpu_id_start; u32 cpu_id; ...`. The kernel writes `cpu_id`
//! before the thread returns to user space on a CPU, so a load of it is the current CPU
//! (what glibc's `sched_getcpu` returns, without the call). A thread whose registration
//! failed (valgrind, for one, does not implement `rseq`) reads `-1` (not yet registered) or
//! `-2` (registration failed) there; both are negative as `i32`, and the caller falls back
//! to `sched_getcpu`.
//!
//! On x86_64 the thread pointer is the `fs` base, and the psABI's TLS layout puts a copy of
//! it at `fs:0` (glibc's `THREAD_SELF` reads it the same way), so the area of the calling
//! thread is `fs:0 + __rseq_offset`. The symbols are looked up once with `dlsym`: a
//! program linked against an older glibc, or a static one, finds none and keeps using
//! `sched_getcpu`. Other architectures and C libraries use `sched_getcpu` as well.
//!
//! Restartable sequences themselves (a critical section the kernel aborts on preemption)
//! are not used yet; this module is where their assembly will live.

use core::sync::atomic::{AtomicIsize, Ordering};

/// `__rseq_offset` once looked up; [`UNKNOWN`] before, [`ABSENT`] when there is no
/// registered area to read.
///
/// | value     | meaning                         | transition                               |
/// |-----------|---------------------------------|------------------------------------------|
/// | `UNKNOWN` | not looked up yet               | the first call stores the result, Relaxed (every caller computes the same value) |
/// | `ABSENT`  | no area: use `sched_getcpu`     | final                                    |
/// | other     | the areas' offset from the thread pointer | final                          |
static OFFSET: AtomicIsize = AtomicIsize::new(UNKNOWN);

const UNKNOWN: isize = isize::MIN;
const ABSENT: isize = isize::MIN + 1;

/// The CPU the calling thread runs on, read from its rseq area; `None` when there is no
/// area to read (see the module docs) or the kernel has not filled it in.
#[inline]
pub(crate) fn current_cpu() -> Option<usize> {
    let offset = match OFFSET.load(Ordering::Relaxed) {
        UNKNOWN => look_up(),
        offset => offset,
    };
    if offset == ABSENT {
        return None;
    }
    let thread_pointer: usize;
    // SAFETY: on x86_64 Linux `fs:0` holds the thread pointer (the TLS ABI's TCB self
    // pointer, set up by the C library before any Rust code runs); the load reads no other
    // memory and writes nothing.
    unsafe {
        core::arch::asm!(
            "mov {}, qword ptr fs:[0]",
            out(reg) thread_pointer,
            options(nostack, preserves_flags, readonly, pure),
        )
    };
    let cpu_id = thread_pointer.wrapping_add_signed(offset).wrapping_add(4);
    // SAFETY: glibc registered an area of at least the original 32 bytes (`__rseq_size`
    // is not 0) at `thread pointer + __rseq_offset` for this thread, for the thread's
    // lifetime; `cpu_id` is its second `u32`, aligned. Volatile: the kernel rewrites it
    // behind the compiler's back (on migration), so every call must load it.
    let cpu = unsafe { core::ptr::read_volatile(cpu_id as *const i32) };
    usize::try_from(cpu).ok()
}

/// Looks up `__rseq_offset` and `__rseq_size` and caches what they say.
#[cold]
fn look_up() -> isize {
    let symbol = |name: &core::ffi::CStr| {
        // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only searches the
        // loaded objects' symbol tables; it returns null when the name is not there.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
    };
    let (offset, size) = (symbol(c"__rseq_offset"), symbol(c"__rseq_size"));
    let found = if offset.is_null() || size.is_null() {
        ABSENT
    } else {
        // SAFETY: glibc defines the two symbols as a `ptrdiff_t` and an `unsigned int`,
        // written once by the dynamic loader before `main`, read-only afterwards.
        let (offset, size) = unsafe { (*(offset as *const isize), *(size as *const u32)) };
        match size {
            0 => ABSENT,
            _ => offset,
        }
    };
    OFFSET.store(found, Ordering::Relaxed);
    found
}

#[cfg(test)]
mod tests {
    /// Pins the thread to each CPU it may run on in turn: the area must name that CPU
    /// (when glibc registered one), as `sched_getcpu` does.
    #[test]
    fn the_area_names_the_cpu_the_thread_is_pinned_to() {
        // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
        let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        let size = core::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: 0 is the calling thread; `allowed` is a valid set of `size` bytes.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut allowed) }, 0);
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below `CPU_SETSIZE`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) })
            .collect();
        std::thread::spawn(move || {
            for &cpu in &cpus {
                // SAFETY: as above.
                let mut one: libc::cpu_set_t = unsafe { core::mem::zeroed() };
                // SAFETY: `cpu` is below `CPU_SETSIZE`.
                unsafe { libc::CPU_SET(cpu, &mut one) };
                // SAFETY: 0 is the calling thread; `one` is a valid set.
                assert_eq!(unsafe { libc::sched_setaffinity(0, size, &one) }, 0);
                // The kernel moves the thread before `sched_setaffinity` returns.
                if let Some(read) = super::current_cpu() {
                    assert_eq!(read, cpu, "the rseq area names another CPU");
                }
                // SAFETY: no preconditions.
                assert_eq!(unsafe { libc::sched_getcpu() }, cpu as i32);
            }
        })
        .join()
        .unwrap();
    }
}
