//! `--unpinned-jobs J`: the load of J fio-like jobs that are not pinned to a CPU, instead
//! of one submitter per vCPU (the 2020 reports ran 12-21 fio jobs on 256 CPUs).
//!
//! A job keeps its share of the I/Os in flight (`cpus x depth / J`, so that the device sees
//! the same queue depth as the pinned load) and submits from the CPU it runs on; every
//! `--migrate-every` of its completions the scheduler moves it to a uniformly chosen CPU.
//! An I/O completes on the IRQ CPU of the CPU it was submitted from (the same 16 IRQ CPUs
//! as the pinned load), and its unmap names that submitting CPU; the job then resubmits
//! from wherever it runs now.

use magazine::{Cache, Source};
use rand::seq::SliceRandom;
use rand::Rng;

use crate::scenario::Scenario;
use crate::workload::Unmap;

/// An I/O in flight: the job that submitted it, the CPU it was submitted from, its item.
struct Io<T> {
    job: usize,
    cpu: usize,
    item: T,
}

/// Every job and every I/O in flight, grouped by the IRQ CPU that will complete it.
pub struct JobLoad<T> {
    stride: usize,
    cpus: usize,
    migrate_every: u64,
    /// Per IRQ group: the I/Os submitted from its CPUs.
    pending: Vec<Vec<Io<T>>>,
    /// Per job: the CPU it runs on and its completions so far.
    job_cpu: Vec<usize>,
    job_done: Vec<u64>,
    /// The jobs of the batch being completed (kept to reuse its allocation).
    resubmit: Vec<usize>,
}

impl<T> JobLoad<T> {
    /// `jobs` jobs, job j starting on CPU `j x cpus / jobs`, each submitting its share of
    /// the in-flight I/Os there.
    pub fn submit<S: Source<Item = T>>(cache: &Cache<S>, scenario: &Scenario, jobs: usize) -> Self {
        let groups = scenario.cpus.div_ceil(scenario.irq_stride);
        let mut load = JobLoad {
            stride: scenario.irq_stride,
            cpus: scenario.cpus,
            migrate_every: scenario.migrate_every,
            pending: (0..groups).map(|_| Vec::new()).collect(),
            job_cpu: (0..jobs).map(|j| j * scenario.cpus / jobs).collect(),
            job_done: vec![0; jobs],
            resubmit: Vec::with_capacity(scenario.batch),
        };
        let depth = (scenario.cpus * scenario.depth).div_ceil(jobs);
        for job in 0..jobs {
            for _ in 0..depth {
                load.issue(cache, job);
            }
        }
        load
    }

    /// `job` submits one I/O from the CPU it runs on.
    fn issue<S: Source<Item = T>>(&mut self, cache: &Cache<S>, job: usize) {
        let cpu = self.job_cpu[job];
        let item = cache
            .alloc_on(cpu)
            .expect("the source holds enough items for every I/O in flight");
        self.pending[cpu / self.stride].push(Io { job, cpu, item });
    }

    /// One interrupt: an IRQ CPU chosen with probability proportional to its pending I/Os
    /// (queues with more I/Os complete more) completes between 1 and `batch` of them chosen
    /// uniformly and hands their items to `unmap`; each job then resubmits from the CPU it
    /// runs on, after moving if its migration is due. Returns the I/Os completed.
    pub fn interrupt<S: Source<Item = T>>(
        &mut self,
        cache: &Cache<S>,
        rng: &mut impl Rng,
        batch: usize,
        unmap: &mut impl FnMut(Unmap<T>),
    ) -> usize {
        let total: usize = self.pending.iter().map(Vec::len).sum();
        let mut pick = rng.random_range(0..total);
        let group = self
            .pending
            .iter()
            .position(|p| {
                let here = pick < p.len();
                if !here {
                    pick -= p.len();
                }
                here
            })
            .expect("pick < total");
        let pending = &mut self.pending[group];
        let count = rng.random_range(1..=batch.min(pending.len()));
        pending.partial_shuffle(rng, count);
        for _ in 0..count {
            let io = pending.pop().expect("count <= pending");
            unmap(Unmap {
                irq: group * self.stride,
                vcpu: io.cpu,
                item: io.item,
            });
            self.job_done[io.job] += 1;
            if self.job_done[io.job] % self.migrate_every == 0 {
                self.job_cpu[io.job] = rng.random_range(0..self.cpus);
            }
            self.resubmit.push(io.job);
        }
        let mut resubmit = std::mem::take(&mut self.resubmit);
        for job in resubmit.drain(..) {
            self.issue(cache, job);
        }
        self.resubmit = resubmit;
        count
    }

    /// The load stops: every pending I/O completes and nothing is resubmitted.
    pub fn complete_all(&mut self, unmap: &mut impl FnMut(Unmap<T>)) {
        for (group, pending) in self.pending.iter_mut().enumerate() {
            for io in pending.drain(..) {
                unmap(Unmap {
                    irq: group * self.stride,
                    vcpu: io.cpu,
                    item: io.item,
                });
            }
        }
    }

    /// I/Os in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.iter().map(Vec::len).sum()
    }
}
