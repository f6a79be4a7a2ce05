//! Linux's lazy (non-strict) IOTLB mode: the per-CPU flush queue of `dma-iommu`
//! (`queue_iova`, `fq_ring_free`, `fq_flush_timeout`; `drivers/iommu/iova.c` until 5.x,
//! `drivers/iommu/dma-iommu.c` since).
//!
//! An unmap does not free its IOVA: it appends it to the flush queue of the CPU doing the
//! unmap, stamped with the IOTLB flush count at that moment. An entry may be freed once a
//! later IOTLB flush has completed. The rules modelled, all from `queue_iova`:
//! - before queueing, the CPU frees the entries of its own queue that a flush made by anyone
//!   has already covered (on its own rcache slot);
//! - if its queue is still full, it flushes the IOTLB and frees its whole queue (on its own
//!   slot);
//! - the first queueing while no timer is pending arms a timer `IOVA_FQ_TIMEOUT` (10 ms)
//!   ahead, on the queueing CPU (`mod_timer` queues on the local CPU);
//! - when the timer fires it flushes the IOTLB and frees every CPU's queue, all through the
//!   rcache slot of the CPU it runs on (`fq_flush_timeout` -> `fq_ring_free` ->
//!   `free_iova_fast` on `raw_cpu_ptr`).
//!
//! The ring has `IOVA_FQ_SIZE` = 256 slots and is full when `tail + 1 == head`, so it holds
//! 255 entries.

use std::collections::VecDeque;

use magazine::{Cache, Source};

/// The per-CPU flush queues of one IOMMU domain, and its timer.
pub struct FlushQueues<T> {
    /// Per CPU: (flush count when queued, item), oldest first.
    queues: Vec<VecDeque<(u64, T)>>,
    /// Entries a queue holds before its CPU must flush (`IOVA_FQ_SIZE - 1`).
    capacity: usize,
    timeout_ns: u64,
    /// IOTLB flushes completed (`fq_flush_finish_cnt`; the model's flushes are instant, so
    /// the start count equals it).
    flushes: u64,
    /// The pending timer: when it fires and on which CPU.
    timer: Option<(u64, usize)>,
    queued: usize,
    counts: FlushCounts,
}

/// What the flush queues did during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushCounts {
    /// Timer expiries (each one drains every queue on one CPU).
    pub timer_drains: u64,
    /// Items freed by timer expiries.
    pub timer_items: u64,
    /// Flushes by a CPU whose queue was full (it drains its own queue).
    pub full_drains: u64,
    /// Items freed by full-queue drains and by the "already flushed" sweep of `queue_iova`.
    pub own_items: u64,
    /// The largest batch of items one timer expiry freed on one CPU.
    pub largest_timer_batch: usize,
}

impl<T> FlushQueues<T> {
    /// Queues of `size` ring slots (Linux: 256) for `cpus` CPUs, timer `timeout_ns`.
    pub fn new(cpus: usize, size: usize, timeout_ns: u64) -> Self {
        FlushQueues {
            queues: (0..cpus).map(|_| VecDeque::with_capacity(size)).collect(),
            capacity: size.saturating_sub(1).max(1),
            timeout_ns,
            flushes: 0,
            timer: None,
            queued: 0,
            counts: FlushCounts::default(),
        }
    }

    /// `queue_iova` on `cpu` at simulated time `now_ns`: the unmap of `item`.
    pub fn queue<S: Source<Item = T>>(
        &mut self,
        cache: &Cache<S>,
        cpu: usize,
        item: T,
        now_ns: u64,
    ) {
        self.free_flushed(cache, cpu);
        if self.queues[cpu].len() >= self.capacity {
            self.flushes += 1;
            self.counts.full_drains += 1;
            self.free_flushed(cache, cpu);
        }
        self.queues[cpu].push_back((self.flushes, item));
        self.queued += 1;
        if self.timer.is_none() {
            self.timer = Some((now_ns + self.timeout_ns, cpu));
        }
    }

    /// `fq_ring_free` of `cpu`'s own queue on its own slot: the entries a completed flush
    /// covers.
    fn free_flushed<S: Source<Item = T>>(&mut self, cache: &Cache<S>, cpu: usize) {
        let flushes = self.flushes;
        let queue = &mut self.queues[cpu];
        while queue.front().is_some_and(|(stamp, _)| *stamp < flushes) {
            let (_, item) = queue.pop_front().expect("front exists");
            cache.free_on(cpu, item);
            self.queued -= 1;
            self.counts.own_items += 1;
        }
    }

    /// When the pending timer fires, if one is armed.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.timer.map(|(at, _)| at)
    }

    /// Runs the timer if it is due at `now_ns`: flushes the IOTLB and frees every CPU's
    /// queue on the slot of the CPU that armed it. Returns whether it fired.
    pub fn run_timer<S: Source<Item = T>>(&mut self, cache: &Cache<S>, now_ns: u64) -> bool {
        let Some((at, cpu)) = self.timer else {
            return false;
        };
        if now_ns < at {
            return false;
        }
        self.timer = None;
        self.flushes += 1;
        self.counts.timer_drains += 1;
        let mut batch = 0;
        for queue in &mut self.queues {
            for (_, item) in queue.drain(..) {
                cache.free_on(cpu, item);
                batch += 1;
            }
        }
        self.queued -= batch;
        self.counts.timer_items += batch as u64;
        self.counts.largest_timer_batch = self.counts.largest_timer_batch.max(batch);
        true
    }

    /// Items waiting in the queues (unmapped, not yet freed).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// What the queues did so far.
    pub fn counts(&self) -> FlushCounts {
        self.counts
    }
}
