//! The slow backing allocator of the simulation: an id allocator that counts its calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use magazine::Source;

/// Hands out ids (reusing freed ones) and counts every slow-path call and item itself, so
/// that the cache's own `Stats` can be cross-checked against what the source actually saw.
#[derive(Default)]
pub struct CountingIds {
    free: Mutex<Vec<u32>>,
    next: AtomicU64,
    alloc_calls: AtomicU64,
    allocs: AtomicU64,
    free_calls: AtomicU64,
    frees: AtomicU64,
}

/// The slow-path calls a source has seen so far, and the items they moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowPath {
    /// `alloc` and `alloc_batch` calls.
    pub alloc_calls: u64,
    /// Items those calls handed out.
    pub allocs: u64,
    /// `free_batch` calls.
    pub free_calls: u64,
    /// Items those calls took back.
    pub frees: u64,
}

impl SlowPath {
    /// Items the source has handed out and not got back.
    pub fn outstanding(self) -> u64 {
        self.allocs - self.frees
    }

    /// Calls and items since `earlier`.
    pub fn since(self, earlier: SlowPath) -> SlowPath {
        SlowPath {
            alloc_calls: self.alloc_calls - earlier.alloc_calls,
            allocs: self.allocs - earlier.allocs,
            free_calls: self.free_calls - earlier.free_calls,
            frees: self.frees - earlier.frees,
        }
    }
}

impl CountingIds {
    /// Calls and items seen so far.
    pub fn slow_path(&self) -> SlowPath {
        SlowPath {
            alloc_calls: self.alloc_calls.load(Ordering::Relaxed),
            allocs: self.allocs.load(Ordering::Relaxed),
            free_calls: self.free_calls.load(Ordering::Relaxed),
            frees: self.frees.load(Ordering::Relaxed),
        }
    }

    /// A freed id, else a new one.
    fn take(&self, free: &mut Vec<u32>) -> u32 {
        free.pop().unwrap_or_else(|| {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            u32::try_from(id).expect("fewer than 2^32 ids are ever outstanding")
        })
    }
}

impl Source for CountingIds {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        self.alloc_calls.fetch_add(1, Ordering::Relaxed);
        self.allocs.fetch_add(1, Ordering::Relaxed);
        Some(self.take(&mut self.free.lock().unwrap()))
    }

    /// The whole batch under one lock hold (never short: new ids are always there).
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u32)) -> usize {
        self.alloc_calls.fetch_add(1, Ordering::Relaxed);
        self.allocs.fetch_add(max as u64, Ordering::Relaxed);
        let mut free = self.free.lock().unwrap();
        for _ in 0..max {
            out(self.take(&mut free));
        }
        max
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        self.free_calls.fetch_add(1, Ordering::Relaxed);
        let mut free = self.free.lock().unwrap();
        let before = free.len();
        free.extend(items);
        self.frees
            .fetch_add((free.len() - before) as u64, Ordering::Relaxed);
    }
}

/// The IOVA domain's range tree (Linux `alloc_iova`/`free_iova`, one lock) as the slow
/// path of a cache of one-page IOVAs: the source of `--threads`, where the slow path's
/// real cost is what the throughput shows.
#[cfg(feature = "iova")]
pub struct IovaTree(pub magazine::iova::IovaDomain);

#[cfg(feature = "iova")]
impl IovaTree {
    /// A domain of 4 KiB pages starting at pfn 1 (Linux reserves pfn 0).
    pub fn new() -> Self {
        IovaTree(magazine::iova::IovaDomain::new(4096, 1))
    }
}

#[cfg(feature = "iova")]
impl Source for IovaTree {
    type Item = u64;

    fn alloc(&self) -> Option<u64> {
        // 4 KiB reads map one page; a 64-bit DMA mask: the whole space is the limit.
        self.0.alloc(1, u64::MAX, true).map(|iova| iova.pfn_lo)
    }

    /// A whole refill under one hold of the tree lock: the ranges `max` `alloc` calls in
    /// a row would place.
    fn alloc_batch(&self, max: usize, out: &mut dyn FnMut(u64)) -> usize {
        self.0
            .alloc_batch(1, u64::MAX, true, max, &mut |iova| out(iova.pfn_lo))
            .unwrap_or(0)
    }

    /// A whole magazine under one hold of the tree lock.
    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        self.0
            .free_batch(items)
            .expect("the cache frees only pfns the tree allocated, once");
    }
}
