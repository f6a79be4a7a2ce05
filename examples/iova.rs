//! A driver-like user of the IOVA domain: several submitting threads map DMA buffers
//! (allocate an IOVA range for each), and one completion thread, like an IRQ handler on
//! another CPU, unmaps them (frees the range). Prints what served the allocations.
//!
//! ```text
//! cargo run --release --example iova
//! ```

use std::sync::mpsc;
use std::thread;

use magazine::iova::IovaDomain;
use magazine::{Config, DepotPolicy, Trim};

const PAGE: u64 = 4096;
const SUBMITTERS: usize = 3;
const MAPS_PER_SUBMITTER: u64 = 50_000;

/// A mapped buffer: what a driver keeps until the device is done with it.
struct Mapping {
    dma_addr: u64,
    len: u64,
}

fn main() {
    // One domain per device (IOMMU group); pfn 0 is never handed out, as in Linux.
    let config = Config {
        cpus: SUBMITTERS + 1,
        depot: DepotPolicy::Dynamic {
            target: 2,
            trim: Trim::WorkingSet,
        },
        ..Config::default()
    };
    let domain = IovaDomain::with_config(PAGE, 1, config);
    // The device does 32-bit DMA: every address must be below 4 GiB.
    let dma_limit = domain.dma_32bit_pfn() - 1;
    // Firmware says a window is off limits (e.g. an MSI doorbell).
    domain
        .reserve(domain.pfn(0xfee0_0000), domain.pfn(0xfeef_ffff))
        .expect("nothing is mapped there yet");

    let (completions, irq) = mpsc::sync_channel::<Mapping>(1024);
    thread::scope(|s| {
        // The IRQ thread completes I/O on "CPU" SUBMITTERS: unmap.
        let domain = &domain;
        s.spawn(move || {
            for mapping in irq {
                let pfn = domain.pfn(mapping.dma_addr);
                domain
                    .free_fast_on(SUBMITTERS, pfn, domain.pages(mapping.len))
                    .expect("unmapping what we mapped");
            }
        });
        for cpu in 0..SUBMITTERS {
            let completions = completions.clone();
            s.spawn(move || {
                for i in 0..MAPS_PER_SUBMITTER {
                    // Buffers of 4 KiB to 64 KiB: map = allocate IOVA pages.
                    let len = PAGE * (1 + i % 16);
                    let pfn = domain
                        .alloc_fast_on(cpu, domain.pages(len), dma_limit)
                        .expect("the IOVA space is large enough");
                    let dma_addr = domain.dma_addr(pfn);
                    assert!(dma_addr + len <= 1 << 32);
                    completions.send(Mapping { dma_addr, len }).unwrap();
                }
            });
        }
        drop(completions);
        // A periodic worker would do this every 2 s, the interval for a WorkingSet depot
        // (`Reaper::interval_for`; 100 ms only for OnePerTick); once is enough here.
        domain.trim();
    });

    let stats = domain.stats();
    let maps = SUBMITTERS as u64 * MAPS_PER_SUBMITTER;
    let hits: u64 = stats.rcaches.iter().map(|c| c.alloc_hits).sum();
    let depot: u64 = stats.rcaches.iter().map(|c| c.depot_pops).sum();
    println!("{maps} buffers mapped and unmapped by {SUBMITTERS} submitters and 1 IRQ thread");
    println!("  served by a CPU's magazines:      {hits}");
    println!("  full magazines from the depot:    {depot}");
    println!("  allocated by the range tree:      {}", stats.tree_allocs);
    println!("  ranges returned to the tree:      {}", stats.tree_frees);
    println!(
        "  exhaustion flushes:               {}",
        stats.exhaustion_flushes
    );
    for (order, cache) in stats.rcaches.iter().enumerate() {
        println!(
            "  {:>2}-page class: {:>6} hits, depot {} full now (peak {})",
            1 << order,
            cache.alloc_hits,
            cache.depot_full,
            cache.depot_peak
        );
    }
    domain.check().expect("consistent");
    println!(
        "  cached at the end: {} ranges (returned to the tree when the domain drops)",
        stats.allocated_ranges
    );
}
