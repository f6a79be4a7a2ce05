//! Optional background trimming for `std` users: a thread that calls `trim()` on a
//! schedule. The cache itself never starts a thread.

use std::panic;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::cache::Cache;
use crate::policy::{DepotPolicy, Trim};
use crate::source::Source;
use crate::sync::thread::{self, JoinHandle};

/// A thread that calls [`Cache::trim`] every interval, from [`Cache::start_reaper`] or
/// [`Cache::start_default_reaper`].
///
/// # Lifetime
///
/// Between trims the thread holds only a [`Weak`] reference, so it does not keep the
/// cache alive: once the last `Arc` of the cache is gone, the thread stops at its next
/// tick. During a trim it needs the cache, so it holds a strong reference for exactly as
/// long as that one trim runs. If your last `Arc` is dropped during that window, the cache
/// is dropped by the reaper thread as soon as the trim ends (never later), its `Drop`
/// returns every cached item to the source there, and the thread stops. Should the source
/// panic in that `Drop` (or in any trim), the panic is not lost: [`Reaper::stop`] (and
/// dropping the `Reaper`, unless the dropping thread is already panicking) re-raises it.
///
/// The thread also stops when [`Reaper::stop`] is called or the `Reaper` is dropped,
/// which waits for the trim in progress, if any, to finish.
///
/// ```
/// use magazine::{Cache, Source};
/// use std::sync::Arc;
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
///
/// let cache = Arc::new(Cache::new(Ids(Default::default())));
/// // The default depot trims by working set: every 2 s (see `Reaper::interval_for`).
/// let reaper = cache.start_default_reaper();
/// let id = cache.alloc().unwrap();
/// cache.free(id);
/// reaper.stop(); // or just drop it
/// ```
#[derive(Debug)]
pub struct Reaper {
    /// Dropping the sender wakes the thread and tells it to stop.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    /// The recommended trim interval for a depot policy (see
    /// [`docs::trimming`](crate::docs::trimming) for the measurements): 2 s for
    /// [`Trim::WorkingSet`], whose interval is the working-set window; 100 ms for
    /// [`Trim::OnePerTick`], whose interval is its release rate (Linux's); 2 s for a
    /// `Fixed` depot, whose trims release no full magazine (only idle empty ones, and the
    /// idle partly filled ones of the loose path).
    ///
    /// ```
    /// use magazine::{Config, Reaper};
    /// use std::time::Duration;
    ///
    /// assert_eq!(Reaper::interval_for(Config::default().depot), Duration::from_secs(2));
    /// ```
    pub fn interval_for(policy: DepotPolicy) -> Duration {
        match policy {
            DepotPolicy::Dynamic {
                trim: Trim::OnePerTick,
                ..
            } => Duration::from_millis(100),
            DepotPolicy::Dynamic {
                trim: Trim::WorkingSet,
                ..
            }
            | DepotPolicy::Fixed { .. } => Duration::from_secs(2),
        }
    }

    pub(crate) fn start<S: Source + 'static>(cache: &Arc<Cache<S>>, interval: Duration) -> Self {
        let cache: Weak<Cache<S>> = Arc::downgrade(cache);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("magazine-reaper".into())
            .spawn(move || loop {
                match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => {
                        let Some(strong) = cache.upgrade() else {
                            return;
                        };
                        strong.trim();
                        // If the user's last `Arc` went away during the trim, ours is the
                        // last: the cache is dropped here, now, and the thread ends. A
                        // panic of that drop ends the thread too and reaches `stop`.
                        if let Some(last) = Arc::into_inner(strong) {
                            drop(last);
                            return;
                        }
                    }
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })
            .expect("failed to spawn the reaper thread");
        Self {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops the thread and waits for it to finish (and for the trim in progress, if any).
    ///
    /// # Panics
    ///
    /// If the thread panicked: the source panicked in a trim, or in the cache's `Drop`
    /// when the cache's last `Arc` was dropped during a trim (see [Lifetime](Self#lifetime)).
    /// The panic is re-raised here with its original payload.
    pub fn stop(mut self) {
        if let Err(panic) = self.join() {
            panic::resume_unwind(panic);
        }
    }

    /// Tells the thread to stop and joins it; the thread's panic, if any.
    fn join(&mut self) -> std::thread::Result<()> {
        drop(self.stop.take());
        match self.thread.take() {
            Some(thread) => thread.join(),
            None => Ok(()),
        }
    }
}

impl Drop for Reaper {
    /// As [`Reaper::stop`]; a panic of the thread is re-raised unless this thread is
    /// already unwinding (a second panic would abort the process).
    fn drop(&mut self) {
        if let Err(panic) = self.join() {
            if !std::thread::panicking() {
                panic::resume_unwind(panic);
            }
        }
    }
}

impl<S: Source + 'static> Cache<S> {
    /// Starts a thread that calls [`trim`](Cache::trim) every `interval` until the
    /// returned [`Reaper`] is dropped or the cache is. Without it the cache trims only when
    /// you call `trim()` (no hidden threads, as allocators expect). For the interval, see
    /// [`Reaper::interval_for`]; [`start_default_reaper`](Cache::start_default_reaper)
    /// uses it.
    pub fn start_reaper(self: &Arc<Self>, interval: Duration) -> Reaper {
        Reaper::start(self, interval)
    }

    /// [`start_reaper`](Cache::start_reaper) with the interval recommended for this
    /// cache's depot policy ([`Reaper::interval_for`]): 2 s for the default working-set
    /// depot, 100 ms for `OnePerTick`.
    pub fn start_default_reaper(self: &Arc<Self>) -> Reaper {
        self.start_reaper(Reaper::interval_for(self.config().depot))
    }
}
