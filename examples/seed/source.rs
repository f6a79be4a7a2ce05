//! The slow backing allocator of the simulation: an id allocator that counts its calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use magazine::Source;

/// Hands out ids (reusing freed ones) and counts every slow-path call itself, so that the
/// cache's own `Stats` can be cross-checked against what the source actually saw.
#[derive(Default)]
pub struct CountingIds {
    free: Mutex<Vec<u32>>,
    next: AtomicU64,
    allocs: AtomicU64,
    frees: AtomicU64,
}

/// The slow-path calls a source has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowPath {
    pub allocs: u64,
    pub frees: u64,
}

impl SlowPath {
    /// Items the source has handed out and not got back.
    pub fn outstanding(self) -> u64 {
        self.allocs - self.frees
    }

    /// Calls since `earlier`.
    pub fn since(self, earlier: SlowPath) -> SlowPath {
        SlowPath {
            allocs: self.allocs - earlier.allocs,
            frees: self.frees - earlier.frees,
        }
    }
}

impl CountingIds {
    /// Calls seen so far.
    pub fn slow_path(&self) -> SlowPath {
        SlowPath {
            allocs: self.allocs.load(Ordering::Relaxed),
            frees: self.frees.load(Ordering::Relaxed),
        }
    }
}

impl Source for CountingIds {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        let reused = self.free.lock().unwrap().pop();
        Some(reused.unwrap_or_else(|| {
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            u32::try_from(id).expect("fewer than 2^32 ids are ever outstanding")
        }))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
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

    fn free_batch(&self, items: &mut dyn Iterator<Item = u64>) {
        for pfn in items {
            self.0
                .free(pfn)
                .expect("the cache frees only pfns the tree allocated, once");
        }
    }
}
