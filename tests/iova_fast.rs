//! The IOVA fast path (`alloc_fast`/`free_fast` through the size-class caches): random
//! sequences against an oracle of the ranges in callers' hands, and the Linux behaviours
//! one at a time (limit filtering, exhaustion flush, CPU flush, uncached sizes).

use magazine::iova::{FreeCheck, IovaDomain, IovaError, IOVA_RANGE_CACHE_MAX_SIZE};
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

use magazine::{Config, DepotPolicy, Trim};
use proptest::prelude::*;

/// Pages of 16 MiB: the 32-bit boundary is pfn 256, so the space stays small.
const GRANULE: u64 = 1 << 24;
const TOP: u64 = 512;

fn config(cpus: usize, magazine_size: usize, depot: DepotPolicy) -> Config {
    Config {
        magazine_size,
        cpus,
        depot,
    }
}

/// What `alloc_fast` does to a size: classes round up to a power of two; both are
/// aligned to the size rounded up to a power of two.
fn placed_size(size: u64) -> u64 {
    if size <= 32 {
        size.next_power_of_two()
    } else {
        size
    }
}

/// A range in a caller's hands.
#[derive(Clone, Copy, Debug)]
struct Held {
    pfn: u64,
    /// The size asked for.
    size: u64,
    /// The pages it covers.
    pages: u64,
    fast: bool,
}

struct Oracle {
    used: Vec<bool>,
    held: Vec<Held>,
}

impl Oracle {
    fn highest_fit(&self, size: u64, align: u64, low: u64, high: u64) -> Option<u64> {
        let high = high.min(TOP);
        if high < size {
            return None;
        }
        let mut p = (high - size) / align * align;
        loop {
            if p < low {
                return None;
            }
            match (p..p + size).rev().find(|&q| self.used[q as usize]) {
                None => return Some(p),
                Some(taken) if taken < size => return None,
                Some(taken) => p = (taken - size) / align * align,
            }
        }
    }

    fn mark(&mut self, pfn: u64, pages: u64, used: bool) {
        for q in pfn..pfn + pages {
            self.used[q as usize] = used;
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    AllocFast {
        cpu: usize,
        size: u64,
        limit: u64,
    },
    Alloc {
        size: u64,
        limit: u64,
        aligned: bool,
    },
    /// `free_fast` a held range (`wrong`: first with a size of another class, which must
    /// be refused; `again`: then a second time, which must be refused).
    FreeFast {
        cpu: usize,
        pick: usize,
        wrong: bool,
        again: bool,
    },
    /// `free` a held range, fast or not.
    Free {
        pick: usize,
        again: bool,
    },
    FlushCpu {
        cpu: usize,
    },
    Flush,
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    let limit = || prop_oneof![Just(255u64), Just(TOP - 1), 0..TOP];
    prop_oneof![
        8 => (0usize..3, 1u64..=40, limit())
            .prop_map(|(cpu, size, limit)| Op::AllocFast { cpu, size, limit }),
        2 => (1u64..=40, limit(), any::<bool>())
            .prop_map(|(size, limit, aligned)| Op::Alloc { size, limit, aligned }),
        7 => (0usize..3, any::<usize>(), prop::bool::weighted(0.1), prop::bool::weighted(0.1))
            .prop_map(|(cpu, pick, wrong, again)| Op::FreeFast { cpu, pick, wrong, again }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, again)| Op::Free { pick, again }),
        1 => (0usize..3).prop_map(|cpu| Op::FlushCpu { cpu }),
        1 => Just(Op::Flush),
        1 => Just(Op::Trim),
    ]
}

fn policy() -> impl Strategy<Value = DepotPolicy> {
    prop_oneof![
        Just(DepotPolicy::Fixed { max_full: 1 }),
        Just(DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::WorkingSet
        }),
        Just(DepotPolicy::Dynamic {
            target: 1,
            trim: Trim::OnePerTick
        }),
    ]
}

/// A size in another size class than `size` (or, for uncached sizes, another size).
fn wrong_size(size: u64) -> u64 {
    if size > 32 {
        size + 1
    } else if size.next_power_of_two() == 32 {
        1
    } else {
        size.next_power_of_two() * 2
    }
}

fn step(domain: &IovaDomain, oracle: &mut Oracle, op: &Op) -> Result<(), TestCaseError> {
    let start = domain.start_pfn();
    match *op {
        Op::AllocFast { cpu, size, limit } => {
            let pages = placed_size(size);
            let align = size.next_power_of_two();
            let fit = if limit < start {
                None
            } else {
                oracle.highest_fit(pages, align, start, limit + 1)
            };
            let result = domain.alloc_fast_on(cpu, size, limit);
            // After the exhaustion flush nothing is cached, so `None` means no fit among
            // the ranges in callers' hands.
            prop_assert_eq!(
                result.is_some(),
                fit.is_some(),
                "alloc_fast {} under {}",
                size,
                limit
            );
            if let Some(pfn) = result {
                prop_assert!(
                    pfn >= start && pfn + pages - 1 <= limit,
                    "{} out of bounds",
                    pfn
                );
                prop_assert_eq!(pfn % align, 0, "{} misaligned", pfn);
                prop_assert!(
                    (pfn..pfn + pages).all(|q| !oracle.used[q as usize]),
                    "{} overlaps",
                    pfn
                );
                oracle.mark(pfn, pages, true);
                oracle.held.push(Held {
                    pfn,
                    size,
                    pages,
                    fast: true,
                });
            }
        }
        Op::Alloc {
            size,
            limit,
            aligned,
        } => {
            if let Some(iova) = domain.alloc(size, limit, aligned) {
                prop_assert!((iova.pfn_lo..=iova.pfn_hi).all(|q| !oracle.used[q as usize]));
                oracle.mark(iova.pfn_lo, size, true);
                oracle.held.push(Held {
                    pfn: iova.pfn_lo,
                    size,
                    pages: size,
                    fast: false,
                });
            }
        }
        Op::FreeFast {
            cpu,
            pick,
            wrong,
            again,
        } => {
            if oracle.held.is_empty() {
                return Ok(());
            }
            let held = oracle.held.swap_remove(pick % oracle.held.len());
            if wrong {
                let refused = domain.free_fast_on(cpu, held.pfn, wrong_size(held.size));
                prop_assert!(
                    matches!(refused, Err(IovaError::SizeMismatch { .. })),
                    "{:?}",
                    refused
                );
                prop_assert!(domain.check().is_ok());
                prop_assert!(
                    domain.find(held.pfn).is_some(),
                    "a refused free changed nothing"
                );
            }
            prop_assert_eq!(domain.free_fast_on(cpu, held.pfn, held.size), Ok(()));
            oracle.mark(held.pfn, held.pages, false);
            if again {
                let refused = domain.free_fast_on(cpu, held.pfn, held.size);
                prop_assert!(
                    matches!(
                        refused,
                        Err(IovaError::DoubleFree { .. } | IovaError::NotAllocated { .. })
                    ),
                    "double free_fast: {:?}",
                    refused
                );
            }
        }
        Op::Free { pick, again } => {
            if oracle.held.is_empty() {
                return Ok(());
            }
            let held = oracle.held.swap_remove(pick % oracle.held.len());
            prop_assert_eq!(domain.free(held.pfn), Ok(()));
            oracle.mark(held.pfn, held.pages, false);
            if again {
                prop_assert_eq!(
                    domain.free(held.pfn),
                    Err(IovaError::NotAllocated { pfn: held.pfn })
                );
            }
        }
        Op::FlushCpu { cpu } => domain.flush_cpu(cpu),
        Op::Flush => {
            domain.flush();
            // Only ranges in callers' hands are left in the tree.
            let pages: u64 = oracle.held.iter().map(|held| held.pages).sum();
            prop_assert_eq!(domain.stats().allocated_pages, pages);
        }
        Op::Trim => {
            domain.trim();
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn random_fast_path_sequences_match_the_oracle(
        start_pfn in 0u64..4,
        magazine_size in 1usize..4,
        depot in policy(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        let domain = IovaDomain::with_config(GRANULE, start_pfn, config(2, magazine_size, depot));
        let mut oracle = Oracle { used: vec![false; TOP as usize], held: Vec::new() };
        for op in &ops {
            step(&domain, &mut oracle, op)?;
            if let Err(error) = domain.check() {
                prop_assert!(false, "after {:?}: {}", op, error);
            }
            let fast = oracle.held.iter().filter(|held| held.fast && held.size <= 32).count();
            prop_assert_eq!(domain.stats().fast_in_use, fast);
        }
        // Conservation: everything freed and flushed leaves an empty domain.
        for held in std::mem::take(&mut oracle.held) {
            prop_assert_eq!(domain.free_fast(held.pfn, held.size), Ok(()));
        }
        domain.flush();
        let stats = domain.stats();
        prop_assert_eq!(stats.allocated_ranges, 0);
        prop_assert_eq!(stats.fast_in_use, 0);
        prop_assert!(domain.check().is_ok());
    }
}

#[test]
fn sizes_round_up_and_align() {
    let domain = IovaDomain::with_cpus(GRANULE, 1, 1);
    for size in 1..=32u64 {
        let pfn = domain.alloc_fast(size, TOP - 1).unwrap();
        let class = size.next_power_of_two();
        assert_eq!(pfn % class, 0);
        assert_eq!(domain.find(pfn).unwrap().size(), class, "size {size}");
        domain.free_fast(pfn, size).unwrap();
    }
    // Over the largest class: not rounded, but aligned.
    let pfn = domain.alloc_fast(33, TOP - 1).unwrap();
    assert_eq!(pfn % 64, 0);
    assert_eq!(domain.find(pfn).unwrap().size(), 33);
    domain.free_fast(pfn, 33).unwrap();
    assert_eq!(
        domain.find(pfn),
        None,
        "uncached sizes go straight back to the tree"
    );
    domain.check().unwrap();
}

#[test]
fn a_cached_pfn_is_handed_out_only_under_the_limit() {
    let domain = IovaDomain::with_cpus(GRANULE, 1, 1);
    let high = domain.alloc_fast_on(0, 4, TOP - 1).unwrap();
    assert!(high > 255);
    domain.free_fast_on(0, high, 4).unwrap();
    // A 32-bit device must not get the cached high range.
    let low = domain.alloc_fast_on(0, 4, 255).unwrap();
    assert!(low + 3 <= 255);
    // A 64-bit device gets it from the magazine.
    assert_eq!(domain.alloc_fast_on(0, 4, TOP - 1), Some(high));
    assert_eq!(domain.stats().rcaches[2].alloc_hits, 1);
    domain.check().unwrap();
}

#[test]
fn exhaustion_flushes_every_size_class_and_retries_once() {
    // 16 pages in all: pfns 240..=255.
    let domain = IovaDomain::with_config(
        GRANULE,
        240,
        config(2, 8, DepotPolicy::Fixed { max_full: 4 }),
    );
    let ones: Vec<u64> = (0..16)
        .map(|_| domain.alloc_fast_on(0, 1, 255).unwrap())
        .collect();
    assert_eq!(domain.alloc_fast_on(0, 1, 255), None, "full");
    for &pfn in &ones {
        domain.free_fast_on(1, pfn, 1).unwrap();
    }
    // All 16 pages sit in size-1 magazines; a 16-page request needs them back.
    let flushes = domain.stats().exhaustion_flushes;
    assert_eq!(domain.alloc_fast_on(0, 16, 255), Some(240));
    assert_eq!(domain.stats().exhaustion_flushes, flushes + 1);
    domain.check().unwrap();
    domain.free_fast_on(0, 240, 16).unwrap();
    domain.flush();
    assert_eq!(domain.stats().allocated_ranges, 0);
}

#[test]
fn flush_cpu_returns_that_slot_only() {
    let domain =
        IovaDomain::with_config(GRANULE, 1, config(2, 8, DepotPolicy::Fixed { max_full: 4 }));
    let a = domain.alloc_fast_on(0, 2, TOP - 1).unwrap();
    let b = domain.alloc_fast_on(1, 2, TOP - 1).unwrap();
    domain.free_fast_on(0, a, 2).unwrap();
    domain.free_fast_on(1, b, 2).unwrap();
    assert_eq!(domain.stats().allocated_ranges, 2, "both cached");
    domain.flush_cpu(0);
    assert_eq!(domain.find(a), None, "CPU 0's pfn went back to the tree");
    assert!(domain.find(b).is_some(), "CPU 1's pfn is still cached");
    domain.check().unwrap();
}

#[test]
fn free_fast_accepts_a_slow_allocation_of_a_class_size() {
    let domain = IovaDomain::with_cpus(GRANULE, 1, 1);
    let aligned = domain.alloc(8, TOP - 1, true).unwrap();
    domain.free_fast(aligned.pfn_lo, 8).unwrap();
    assert!(domain.find(aligned.pfn_lo).is_some(), "cached");
    assert_eq!(domain.alloc_fast(8, TOP - 1), Some(aligned.pfn_lo));
    // Three pages are the 4-page class but cannot be cached as 4: freed to the tree.
    let three = domain.alloc(3, TOP - 1, false).unwrap();
    domain.free_fast(three.pfn_lo, 3).unwrap();
    assert_eq!(domain.find(three.pfn_lo), None);
    domain.check().unwrap();
}

#[test]
fn every_policy_serves_the_same_domain() {
    let policies = [
        DepotPolicy::Fixed { max_full: 32 },
        DepotPolicy::Dynamic {
            target: 1,
            trim: Trim::OnePerTick,
        },
        DepotPolicy::Dynamic {
            target: 1,
            trim: Trim::WorkingSet,
        },
    ];
    for depot in policies {
        let domain = IovaDomain::with_config(4096, 1, config(4, 16, depot));
        for round in 0..4 {
            let pfns: Vec<u64> = (0..200)
                .map(|i| {
                    domain
                        .alloc_fast_on(i % 4, 1 + (i as u64 % 32), u64::MAX)
                        .unwrap()
                })
                .collect();
            for (i, pfn) in pfns.into_iter().enumerate() {
                domain
                    .free_fast_on(round, pfn, 1 + (i as u64 % 32))
                    .unwrap();
            }
            domain.trim();
            domain.check().unwrap();
        }
        let served: u64 = domain
            .stats()
            .rcaches
            .iter()
            .map(|s| s.alloc_hits + s.depot_pops)
            .sum();
        assert!(served > 0, "{depot:?}: the caches served some allocations");
        assert_eq!(domain.stats().rcaches.len(), IOVA_RANGE_CACHE_MAX_SIZE);
        domain.flush();
        assert_eq!(domain.stats().allocated_ranges, 0, "{depot:?}");
    }
}

#[test]
fn options_current_cpu_picks_the_fast_path_slot() {
    let mut options = magazine::Options::default();
    options.current_cpu = Some(|| 1);
    let domain = IovaDomain::with_options(
        GRANULE,
        1,
        config(2, 8, DepotPolicy::Fixed { max_full: 4 }),
        options,
    );
    let pfn = domain.alloc_fast(2, TOP - 1).unwrap();
    domain.free_fast(pfn, 2).unwrap();
    domain.flush_cpu(0);
    assert!(domain.find(pfn).is_some(), "cached on slot 1, not 0");
    domain.flush_cpu(1);
    assert_eq!(domain.find(pfn), None);
    domain.check().unwrap();
}

#[test]
fn unchecked_frees_are_linux_free_iova_fast() {
    let domain = IovaDomain::with_cpus(GRANULE, 1, 1).with_free_check(FreeCheck::Unchecked);
    assert_eq!(domain.free_check(), FreeCheck::Unchecked);
    let pfns: Vec<u64> = (0..4)
        .map(|_| domain.alloc_fast(2, TOP - 1).unwrap())
        .collect();
    assert_eq!(
        domain.stats().fast_in_use,
        4,
        "fast ranges in the tree, none cached"
    );
    for &pfn in &pfns {
        domain.free_fast(pfn, 2).unwrap();
    }
    assert_eq!(domain.stats().fast_in_use, 0);
    domain.check().unwrap();
    // The hazard the mode accepts, as in Linux: a double free is cached twice, and the
    // range is then handed out twice.
    let pfn = domain.alloc_fast(2, TOP - 1).unwrap();
    domain.free_fast(pfn, 2).unwrap();
    domain.free_fast(pfn, 2).unwrap();
    let first = domain.alloc_fast(2, TOP - 1).unwrap();
    let second = domain.alloc_fast(2, TOP - 1).unwrap();
    assert_eq!((first, second), (pfn, pfn));
}

#[test]
#[should_panic(expected = "used its fast path")]
fn the_check_mode_is_chosen_before_the_fast_path_is_used() {
    let domain = IovaDomain::with_cpus(GRANULE, 1, 1);
    let pfn = domain.alloc_fast(1, TOP - 1).unwrap();
    domain.free_fast(pfn, 1).unwrap();
    let _ = domain.with_free_check(FreeCheck::Unchecked);
}
