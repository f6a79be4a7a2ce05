//! Optional background trimming for `std` users: a thread that calls `trim()` on a
//! schedule. The cache itself never starts a thread.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::cache::Cache;
use crate::source::Source;
use crate::sync::thread::{self, JoinHandle};

/// A thread that calls [`Cache::trim`] every interval, from [`Cache::start_reaper`].
///
/// It holds only a weak reference, so it never keeps the cache alive: it stops by itself
/// when the last `Arc` of the cache is dropped, when [`Reaper::stop`] is called, or when
/// the `Reaper` is dropped (which waits for the thread to finish its current trim).
///
/// ```
/// use magazine::{Cache, Source};
/// use std::sync::Arc;
/// use std::time::Duration;
/// # struct Ids(std::sync::atomic::AtomicU32);
/// # impl Source for Ids {
/// #     type Item = u32;
/// #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
/// #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
/// # }
///
/// let cache = Arc::new(Cache::new(Ids(Default::default())));
/// let reaper = cache.start_reaper(Duration::from_millis(100));
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
    pub(crate) fn start<S: Source + 'static>(cache: &Arc<Cache<S>>, interval: Duration) -> Self {
        let cache: Weak<Cache<S>> = Arc::downgrade(cache);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("magazine-reaper".into())
            .spawn(move || loop {
                match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => match cache.upgrade() {
                        Some(cache) => {
                            cache.trim();
                        }
                        None => return,
                    },
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })
            .expect("failed to spawn the reaper thread");
        Self {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Stops the thread and waits for it to finish.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // A panic of the trim (a panicking source) stays in that thread.
            let _ = thread.join();
        }
    }
}

impl<S: Source + 'static> Cache<S> {
    /// Starts a thread that calls [`trim`](Cache::trim) every `interval` until the
    /// returned [`Reaper`] is dropped or the cache is. Without it the cache trims only when
    /// you call `trim()` (no hidden threads, as allocators expect).
    pub fn start_reaper(self: &Arc<Self>, interval: Duration) -> Reaper {
        Reaper::start(self, interval)
    }
}
