//! The synchronisation facade: the only module that names std, loom or shuttle atomics,
//! cells, thread-locals and the epoch participant.
//!
//! | build                                              | atomics, cells, threads | epoch participant                         |
//! |----------------------------------------------------|-------------------------|-------------------------------------------|
//! | default                                            | `core`/`std`            | the crate's own `Collector`, a handle per thread |
//! | without feature `std` (`no_std` + `alloc`)         | `core`                  | a participant per guard in one global collector |
//! | `--cfg loom`                                       | `loom`                  | one `Collector` per model, a handle per loom thread |
//! | `--cfg loom --cfg crossbeam_loom` (+ epoch `loom`) | `loom`                  | the same, and loom also sees inside the epoch |
//! | feature `shuttle`                                  | `shuttle`               | one `Collector` per test, a handle per shuttle task |
//!
//! Loom and shuttle run every model thread on one OS thread, so crossbeam-epoch's default
//! handle (a std thread-local) would be shared by all of them: one task's pin would cover
//! another's reads. Each model thread therefore registers its own participant.
//!
//! `UnsafeCell` has loom's closure shape (`with`, `with_mut`) so that the same code runs
//! under every build and loom can see every access to magazine storage and slot state.

#[cfg(all(loom, feature = "shuttle"))]
compile_error!("`--cfg loom` and the `shuttle` feature are mutually exclusive");

#[cfg(not(magazine_model))]
#[cfg_attr(not(feature = "iova"), allow(unused_imports))] // `AtomicU8`: the IOVA live table
pub(crate) use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
#[cfg(loom)]
#[cfg_attr(not(feature = "iova"), allow(unused_imports))] // `AtomicU8`: the IOVA live table
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
#[cfg(feature = "shuttle")]
#[cfg_attr(not(feature = "iova"), allow(unused_imports))] // `AtomicU8`: the IOVA live table
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

// The depot stack's tagged head (`src/stack.rs`); a target without 64-bit atomics, or one
// where the stack falls back to a pointer-sized head, does not use it.
#[cfg(all(not(magazine_model), magazine_tagged_head))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::AtomicU64;

pub(crate) use crossbeam_epoch::Guard;

// The IOVA range tree's lock: a model lock under the checkers, so that they see it.
#[cfg(all(feature = "iova", loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(all(feature = "iova", feature = "shuttle"))]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};
#[cfg(all(feature = "iova", not(magazine_model)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// A cell whose accesses go through closures, so loom can track them.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline(always)]
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// The crate's own epoch collector, and the calling thread's participant in it: what a
/// depot operation pins, so that the only deferred functions a cache call can run are the
/// crate's own frees (stack nodes), never another library's garbage in crossbeam-epoch's
/// default collector (which could take a lock the caller holds, or panic).
#[cfg(all(feature = "std", not(magazine_model)))]
mod epoch {
    use crossbeam_epoch::{Collector, Guard, LocalHandle};
    use std::sync::OnceLock;

    /// Built at the first pin of the process; never dropped.
    static COLLECTOR: OnceLock<Collector> = OnceLock::new();

    fn collector() -> &'static Collector {
        COLLECTOR.get_or_init(Collector::new)
    }

    std::thread_local! {
        /// Registered at the thread's first pin (or by `register_thread`); its destructor
        /// moves the thread's garbage to the collector's global queue at thread exit.
        static HANDLE: LocalHandle = collector().register();
    }

    #[inline]
    pub(crate) fn pin() -> Guard {
        if cfg!(magazine_mutant = "default_collector") {
            // MUTANT: the depot pins crossbeam-epoch's process-wide default collector, whose
            // collection runs any library's deferred functions inside a cache call.
            return crossbeam_epoch::pin();
        }
        // After the thread's handle is gone (a thread-local destructor that runs after
        // ours), a participant registered for the guard's lifetime, as crossbeam-epoch
        // does for its default collector.
        HANDLE
            .try_with(LocalHandle::pin)
            .unwrap_or_else(|_| collector().register().pin())
    }

    pub(crate) fn register_thread() {
        let _ = HANDLE.try_with(|_| ());
    }
}

/// Pins the current thread in the crate's own epoch collector.
#[cfg(all(feature = "std", not(magazine_model)))]
#[inline]
pub(crate) fn pin() -> Guard {
    epoch::pin()
}

/// Registers the current thread's participant in the crate's collector now, rather than at
/// its first pin.
#[cfg(all(feature = "std", not(magazine_model)))]
pub(crate) fn register_thread() {
    epoch::register_thread();
}

/// Pins without a thread-local participant (`no_std`): registers a participant in one
/// global collector for the duration of the guard. It costs an allocation and a list
/// insertion, paid once per depot operation (one magazine), not per item.
#[cfg(not(any(feature = "std", loom)))]
pub(crate) fn pin() -> Guard {
    use alloc::boxed::Box;
    use core::sync::atomic::{AtomicPtr, Ordering};
    use crossbeam_epoch::Collector;

    static COLLECTOR: AtomicPtr<Collector> = AtomicPtr::new(core::ptr::null_mut());
    let mut collector = COLLECTOR.load(Ordering::Acquire);
    if collector.is_null() {
        let fresh = Box::into_raw(Box::new(Collector::new()));
        collector = match COLLECTOR.compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
    }
    // SAFETY: the collector is leaked on purpose: it lives for the rest of the program.
    let collector = unsafe { &*collector };
    // The guard keeps the participant alive after its handle is dropped.
    collector.register().pin()
}

/// Pins the current model thread with its own participant.
#[cfg(loom)]
pub(crate) fn pin() -> Guard {
    use crossbeam_epoch::{Collector, LocalHandle};
    loom::lazy_static! {
        static ref COLLECTOR: Collector = Collector::new();
    }
    loom::thread_local! {
        static HANDLE: LocalHandle = COLLECTOR.register();
    }
    HANDLE.with(|handle| handle.pin())
}

/// Pins the current shuttle task with its own participant.
#[cfg(feature = "shuttle")]
pub(crate) fn pin() -> Guard {
    use crossbeam_epoch::{Collector, LocalHandle};
    shuttle::lazy_static! {
        static ref COLLECTOR: Collector = Collector::new();
    }
    shuttle::thread_local! {
        static HANDLE: LocalHandle = COLLECTOR.register();
    }
    HANDLE.with(|handle| handle.pin())
}

/// The calling process's id, which tells a flag copied by `fork` from one held here
/// ([`ProcessFlag`](crate::process_flag::ProcessFlag)); one process under the model
/// checkers and without `std`.
pub(crate) fn process_id() -> usize {
    #[cfg(all(feature = "std", not(magazine_model)))]
    return std::process::id() as usize;
    #[cfg(not(all(feature = "std", not(magazine_model))))]
    1
}

/// OS threads, for the reaper (never model-checked: it only calls `trim`).
#[cfg(all(feature = "std", not(magazine_model)))]
pub(crate) mod thread {
    pub(crate) use std::thread::{Builder, JoinHandle};
}

/// A small number that stays the same for the life of the calling thread: the CPU id
/// where the OS gives none, and the "CPU" of a model thread.
#[cfg(feature = "std")]
pub(crate) fn thread_index() -> usize {
    #[cfg(loom)]
    use loom::thread_local;
    #[cfg(feature = "shuttle")]
    use shuttle::thread_local;
    #[cfg(not(magazine_model))]
    use std::thread_local;

    static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }
    INDEX.with(|index| *index)
}

/// Waits politely for another thread; under the model checkers it yields to the scheduler,
/// which a retry loop there must do.
pub(crate) struct Backoff {
    #[cfg(not(magazine_model))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(magazine_model))]
            inner: crossbeam_utils::Backoff::new(),
        }
    }

    /// Backs off in a loop that waits for another thread to make progress.
    pub(crate) fn snooze(&self) {
        #[cfg(not(magazine_model))]
        self.inner.snooze();
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(feature = "shuttle")]
        shuttle::thread::yield_now();
    }

    /// Backs off in a CAS retry loop (lost a race, retry at once).
    pub(crate) fn spin(&self) {
        #[cfg(not(magazine_model))]
        self.inner.spin();
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(feature = "shuttle")]
        shuttle::thread::yield_now();
    }
}
