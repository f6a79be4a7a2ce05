//! The I/O workload: vCPUs allocate an item per submitted I/O on their own slot; the I/Os
//! complete on IRQ CPUs, which hand each item to an unmap path (strict: freed at once on
//! the IRQ CPU's slot; lazy: queued for a later IOTLB flush, see `flush.rs`).

use magazine::{Cache, Source};
use rand::seq::SliceRandom;
use rand::Rng;

use crate::scenario::Scenario;

/// An I/O in flight: the vCPU that submitted it and the item (an IOVA, an id) it holds.
struct Io<T> {
    vcpu: usize,
    item: T,
}

/// A completed I/O's item on its way back: the IRQ CPU that completed it, the vCPU that
/// submitted it, and the item.
pub struct Unmap<T> {
    pub irq: usize,
    pub vcpu: usize,
    pub item: T,
}

/// One IRQ CPU and the I/Os in flight of the vCPUs whose completions it handles.
///
/// Every completion is followed by a resubmission from the same vCPU, so a group always
/// has `vcpus x depth` I/Os pending. With strict unmaps items only ever move from the IRQ
/// CPU's slot, through the depot, to the vCPUs' slots: the imbalance of the seed report.
pub struct IrqGroup<T> {
    irq: usize,
    pending: Vec<Io<T>>,
    /// The vCPUs of the batch being completed (kept to reuse its allocation).
    resubmit: Vec<usize>,
}

/// The IRQ CPU of every group: 0, stride, 2*stride, ... below `cpus`.
pub fn irq_cpus(scenario: &Scenario) -> impl Iterator<Item = usize> {
    (0..scenario.cpus).step_by(scenario.irq_stride)
}

impl<T> IrqGroup<T> {
    /// The group of IRQ CPU `irq`: each of its vCPUs submits `depth` I/Os, allocating
    /// their items on its own slot.
    pub fn submit<S: Source<Item = T>>(cache: &Cache<S>, scenario: &Scenario, irq: usize) -> Self {
        let vcpus = irq..(irq + scenario.irq_stride).min(scenario.cpus);
        let pending = vcpus
            .flat_map(|vcpu| (0..scenario.depth).map(move |_| vcpu))
            .map(|vcpu| Io {
                vcpu,
                item: alloc(cache, vcpu),
            })
            .collect();
        IrqGroup {
            irq,
            pending,
            resubmit: Vec::with_capacity(scenario.batch),
        }
    }

    /// One interrupt: completes between 1 and `batch` pending I/Os chosen uniformly, hands
    /// their items to `unmap`, then each completed I/O's vCPU resubmits at once (allocates
    /// on its own slot). Returns the number of I/Os completed.
    pub fn interrupt<S: Source<Item = T>>(
        &mut self,
        cache: &Cache<S>,
        rng: &mut impl Rng,
        batch: usize,
        unmap: &mut impl FnMut(Unmap<T>),
    ) -> usize {
        let count = rng.random_range(1..=batch.min(self.pending.len()));
        // Moves `count` uniformly chosen I/Os to the end of `pending`.
        self.pending.partial_shuffle(rng, count);
        for _ in 0..count {
            let io = self.pending.pop().expect("count <= pending");
            self.resubmit.push(io.vcpu);
            unmap(Unmap {
                irq: self.irq,
                vcpu: io.vcpu,
                item: io.item,
            });
        }
        for vcpu in self.resubmit.drain(..) {
            let item = alloc(cache, vcpu);
            self.pending.push(Io { vcpu, item });
        }
        count
    }

    /// The load stops: every pending I/O completes and nothing is resubmitted.
    pub fn complete_all(&mut self, unmap: &mut impl FnMut(Unmap<T>)) {
        for io in self.pending.drain(..) {
            unmap(Unmap {
                irq: self.irq,
                vcpu: io.vcpu,
                item: io.item,
            });
        }
    }

    /// I/Os in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

fn alloc<S: Source>(cache: &Cache<S>, vcpu: usize) -> S::Item {
    cache
        .alloc_on(vcpu)
        .expect("the source holds enough items for every I/O in flight")
}
