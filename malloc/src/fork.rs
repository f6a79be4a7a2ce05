//! `fork` in a process with threads: the child's heap stays usable.
//!
//! `fork` copies only the calling thread. A lock that another thread held at that moment
//! stays held in the child for ever, and the child's first allocation that needs it
//! hangs. So the allocator registers `pthread_atfork` handlers at its first setup: before
//! the fork, the forking thread takes every lock of the allocator (the trim lock, then
//! each class's central free list in class order, then each span pool in kind order, then
//! the metadata reserve's, then the kept large mappings': the order in which the code
//! nests them; the last two are never held with another), and after it, in the parent and in the child,
//! releases them. The child thus starts with every lock free and every central list and
//! pool whole.
//!
//! What the child inherits from the caches themselves is safe to use without any of the
//! dead threads (`magazine::docs::obligations`, "Fork"): a CPU slot that a dead thread
//! owned is busy for good (a miss; its items leak), a dead thread's epoch pin keeps the
//! child's epoch garbage. Trims hold the trim lock, so that none is half done at the fork:
//! the magazines a trim has in hand would leak in the child (its flag, which the child
//! takes over, would not stop the child's trims).
//!
//! Handlers registered with `pthread_atfork` before ours run while ours hold the locks
//! (their prepare after ours, their parent and child before ours): they must not allocate
//! through this allocator.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{caches, large, reserve, source, span};

/// Serialises trims (see the module docs).
static TRIM: Mutex<()> = Mutex::new(());

/// Whether the handlers were registered (or their registration tried).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// The allocator's locks, held from the prepare handler to the parent's or child's.
struct Held {
    _trim: MutexGuard<'static, ()>,
    _classes: source::Locked,
    _pools: span::Locked,
    _reserve: MutexGuard<'static, reserve::State>,
    _large: MutexGuard<'static, large::Retained>,
}

/// Where the prepare handler keeps the guards until the parent's or child's handler drops
/// them.
struct HeldCell(UnsafeCell<Option<Held>>);

// SAFETY: the cell is only touched by a thread that holds every lock of the allocator:
// the prepare handler writes it after taking them, the parent's and the child's handlers
// empty it before releasing them (in the child, the forking thread is the only one). So
// two threads never touch it at once, and the guards are dropped on the thread that took
// them.
unsafe impl Sync for HeldCell {}

static HELD: HeldCell = HeldCell(UnsafeCell::new(None));

/// The trim lock: a trim holds it while it runs the class caches' trims.
pub(crate) fn trimming() -> MutexGuard<'static, ()> {
    // Nothing panics while it is held, so it is never poisoned; if it were, nothing it
    // guards could be torn.
    TRIM.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The trim lock if no other trim holds it (and no fork is being prepared).
pub(crate) fn try_trimming() -> Option<MutexGuard<'static, ()>> {
    match TRIM.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Registers the handlers, once per process (at the first class cache's creation, with no
/// lock of ours held). A failed registration leaves the allocator as it was, without fork
/// protection; it is not tried again.
pub(crate) fn register_once() {
    if REGISTERED.load(Ordering::Relaxed) || REGISTERED.swap(true, Ordering::Relaxed) {
        return;
    }
    if cfg!(magazine_mutant = "no_fork_handlers") {
        // MUTANT: no handlers: a child forked while a thread held a lock of ours hangs.
        return;
    }
    // SAFETY: three `extern "C"` functions that live as long as the process. glibc (and
    // musl) keep the registration in memory of their own `malloc`, never in this
    // allocator, and take no lock of ours. On failure (ENOMEM) nothing is registered and
    // the result is ignored: allocation works as before.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Before `fork`: takes every lock of the allocator, in the order the code nests them.
extern "C" fn prepare() {
    let held = Held {
        _trim: trimming(),
        _classes: source::lock_all(),
        _pools: span::lock_all(),
        _reserve: reserve::lock(),
        _large: large::lock(),
    };
    // SAFETY: we hold every lock of the allocator (see `HeldCell`).
    unsafe { *HELD.0.get() = Some(held) };
}

/// After `fork`, in the parent: releases the locks.
extern "C" fn parent() {
    release();
}

/// After `fork`, in the child (whose only thread is the one that forked): releases the
/// locks, which nobody else can hold there.
extern "C" fn child() {
    release();
    caches::after_fork_in_child();
}

fn release() {
    // SAFETY: our prepare handler ran on this thread before the fork (glibc runs a parent or
    // child handler only for handlers whose prepare ran, and holds its fork lock from the
    // prepare phase to the end), so this thread holds every lock of the allocator (see
    // `HeldCell`). Dropping the guards releases them; `None` would release nothing.
    drop(unsafe { (*HELD.0.get()).take() });
}
