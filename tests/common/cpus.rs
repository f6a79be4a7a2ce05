//! The CPUs a test may run on, and moving the calling thread between them (Linux).

/// The CPUs the process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: 0 is the calling thread; `set` is a valid set of `size` bytes.
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below `CPU_SETSIZE`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Moves the calling thread to `cpus` (it may be running elsewhere until it returns).
pub fn run_on(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is below `CPU_SETSIZE` (it came from `allowed_cpus`).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: 0 is the calling thread; `set` is a valid, non-empty set.
    assert_eq!(unsafe { libc::sched_setaffinity(0, size, &set) }, 0);
}

/// The CPUs the system may bring up, as glibc counts them (at least one).
pub fn configured_cpus() -> usize {
    // SAFETY: no preconditions; -1 on failure.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(configured).unwrap_or(1).max(1)
}
