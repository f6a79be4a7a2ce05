//! The IOVA domain: the fast path (`alloc_fast` + `free_fast`, the per-size-class
//! magazines) against the slow path only (`alloc` + `free`, the range tree behind its
//! lock), one pair per iteration on one thread.
//!
//! The tree holds `LIVE` one-page allocations first (mappings in flight), so the slow
//! path searches a tree of realistic size. The limit is a 32-bit DMA mask, as for most
//! devices. `iova/2 threads` runs the same pairs on two threads at once (ns per pair of
//! the two together), where the slow path's single tree lock is contended.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use magazine::iova::{FreeCheck, IovaDomain};

/// Allocations held in the tree while the pairs run.
const LIVE: usize = 4096;

fn iova(c: &mut Criterion) {
    let mut group = c.benchmark_group("iova");
    for pages in [1, 4] {
        let domain = IovaDomain::new(4096, 1);
        let limit = domain.dma_32bit_pfn() - 1;
        let held: Vec<_> = (0..LIVE)
            .map(|_| domain.alloc(1, limit, false).unwrap())
            .collect();
        group.bench_function(BenchmarkId::new("alloc+free (tree only)", pages), |b| {
            b.iter(|| {
                let domain = black_box(&domain);
                let iova = domain.alloc(pages, limit, true).unwrap();
                domain.free(black_box(iova.pfn_lo)).unwrap();
            })
        });
        let domain = warm(domain, pages);
        group.bench_function(BenchmarkId::new("alloc_fast+free_fast", pages), |b| {
            b.iter(|| {
                let domain = black_box(&domain);
                let pfn = domain.alloc_fast(pages, limit).unwrap();
                domain.free_fast(black_box(pfn), pages).unwrap();
            })
        });
        let unchecked = warm(
            IovaDomain::new(4096, 1).with_free_check(FreeCheck::Unchecked),
            pages,
        );
        group.bench_function(
            BenchmarkId::new("alloc_fast+free_fast (unchecked)", pages),
            |b| {
                b.iter(|| {
                    let domain = black_box(&unchecked);
                    let pfn = domain.alloc_fast(pages, limit).unwrap();
                    domain.free_fast(black_box(pfn), pages).unwrap();
                })
            },
        );
        for iova in held {
            domain.free(iova.pfn_lo).unwrap();
        }
        domain.check().unwrap();
    }
    group.finish();

    let mut group = c.benchmark_group("iova/2 threads");
    group.throughput(Throughput::Elements(BATCH));
    let domain = IovaDomain::new(4096, 1);
    let limit = domain.dma_32bit_pfn() - 1;
    let held: Vec<_> = (0..LIVE)
        .map(|_| domain.alloc(1, limit, false).unwrap())
        .collect();
    group.bench_function(BenchmarkId::new("alloc+free (tree only)", 1), |b| {
        b.iter_custom(|iters| {
            common::run_timed(2, |_, barrier| {
                common::timed(barrier, || {
                    for _ in 0..iters * BATCH / 2 {
                        let iova = domain.alloc(1, limit, true).unwrap();
                        domain.free(black_box(iova.pfn_lo)).unwrap();
                    }
                })
            })
        })
    });
    for (name, domain) in [
        ("alloc_fast+free_fast", &domain),
        (
            "alloc_fast+free_fast (unchecked)",
            &warm(
                IovaDomain::new(4096, 1).with_free_check(FreeCheck::Unchecked),
                1,
            ),
        ),
    ] {
        group.bench_function(BenchmarkId::new(name, 1), |b| {
            b.iter_custom(|iters| {
                common::run_timed(2, |_, barrier| {
                    common::timed(barrier, || {
                        for _ in 0..iters * BATCH / 2 {
                            let pfn = domain.alloc_fast(1, limit).unwrap();
                            domain.free_fast(black_box(pfn), 1).unwrap();
                        }
                    })
                })
            })
        });
    }
    // The same pairs on a plain per-CPU `Cache` (no tree, no live table): what the fast
    // path would cost without its double-free check. The slot protocol, as the fast path's
    // `_on` calls run it.
    let cache = common::per_cpu_on(common::FreeList::fresh(), false);
    group.bench_function(
        BenchmarkId::new("reference: Cache alloc+free (per-CPU)", 1),
        |b| {
            b.iter_custom(|iters| {
                common::run_timed(2, |_, barrier| {
                    common::timed(barrier, || {
                        for _ in 0..iters * BATCH / 2 {
                            let item = cache.alloc().unwrap();
                            cache.free(black_box(item));
                        }
                    })
                })
            })
        },
    );
    for iova in held {
        domain.free(iova.pfn_lo).unwrap();
    }
    domain.check().unwrap();
    group.finish();
}

/// Fills every slot's magazines of the class of `pages` with 64 ranges (the bench thread
/// may move between CPUs), so that the fast path runs warm.
fn warm(domain: IovaDomain, pages: u64) -> IovaDomain {
    let limit = domain.dma_32bit_pfn() - 1;
    for cpu in 0..domain.config().cpus {
        let pfns: Vec<_> = (0..64)
            .map(|_| domain.alloc_fast_on(cpu, pages, limit).unwrap())
            .collect();
        pfns.into_iter()
            .for_each(|pfn| domain.free_fast_on(cpu, pfn, pages).unwrap());
    }
    domain
}

/// Pairs per iteration in the two-thread benches.
const BATCH: u64 = 1024;

criterion_group! {
    name = benches;
    config = common::criterion(500, 1500, 50);
    targets = iova
}
criterion_main!(benches);
