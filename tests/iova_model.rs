//! The IOVA range tree against an independent oracle: random alloc/free/reserve/find
//! sequences, with `IovaDomain::check` after every step.
//!
//! The oracle is a plain array of page owners. For each allocation it computes, by brute
//! force, where Linux's search must place the range (the highest fit below the cached
//! node the domain reports, else the highest fit between that node and the limit) and
//! whether any fit exists at all under the limit. So the test pins down: no overlap,
//! in bounds, alignment, top-down first-fit placement, and completeness (an allocation
//! fails only when nothing fits, which also shows that frees make space reusable).

use magazine::iova::{Iova, IovaDomain, IovaError};
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

use proptest::prelude::*;

/// Pages of 16 MiB put the 32-bit boundary at pfn 256, so both cached search starts
/// (`cached32_node` below it, `cached_node` above) are exercised in a small space.
const GRANULE: u64 = 1 << 24;
/// The oracle models pfns `0..TOP`; limits stay below it.
const TOP: u64 = 640;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Free,
    Allocated,
    Reserved,
}

/// Which pages are free, allocated or reserved, and the live allocations.
struct Oracle {
    owner: Vec<Owner>,
    live: Vec<Iova>,
}

impl Oracle {
    fn new() -> Self {
        Self {
            owner: vec![Owner::Free; TOP as usize],
            live: Vec::new(),
        }
    }

    fn is_free(&self, pfn: u64) -> bool {
        self.owner[pfn as usize] == Owner::Free
    }

    /// The highest aligned `p` with `low <= p` and `p + size <= high` whose pages are all
    /// free.
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
            match (p..p + size).rev().find(|&q| !self.is_free(q)) {
                None => return Some(p),
                Some(taken) if taken < size => return None,
                // The next candidate must end below the taken page.
                Some(taken) => p = (taken - size) / align * align,
            }
        }
    }

    fn set(&mut self, iova: Iova, owner: Owner) {
        for pfn in iova.pfn_lo..=iova.pfn_hi {
            self.owner[pfn as usize] = owner;
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: u64,
        limit: u64,
        aligned: bool,
    },
    /// Free the live allocation `pick` (modulo their number) through the pfn at `offset`
    /// into it (modulo its size): Linux frees the range containing the pfn.
    Free {
        pick: usize,
        offset: u64,
    },
    /// Free a pfn the oracle says is free or reserved: an error.
    FreeBad {
        pfn: u64,
    },
    Reserve {
        pfn_lo: u64,
        len: u64,
    },
    Find {
        pfn: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let limit = prop_oneof![Just(255u64), Just(TOP - 1), 0..TOP];
    prop_oneof![
        6 => (1u64..=40, limit, any::<bool>())
            .prop_map(|(size, limit, aligned)| Op::Alloc { size, limit, aligned }),
        4 => (any::<usize>(), any::<u64>()).prop_map(|(pick, offset)| Op::Free { pick, offset }),
        1 => (0..TOP).prop_map(|pfn| Op::FreeBad { pfn }),
        1 => (0..TOP - 16, 1u64..16).prop_map(|(pfn_lo, len)| Op::Reserve { pfn_lo, len }),
        1 => (0..TOP).prop_map(|pfn| Op::Find { pfn }),
    ]
}

/// Runs one allocation and checks it against the oracle.
fn checked_alloc(
    domain: &IovaDomain,
    oracle: &mut Oracle,
    size: u64,
    limit: u64,
    aligned: bool,
) -> Result<(), TestCaseError> {
    let start = domain.start_pfn();
    if limit < start {
        let error = IovaError::LimitBelowStart {
            limit_pfn: limit,
            start_pfn: start,
        };
        prop_assert_eq!(domain.try_alloc(size, limit, aligned), Err(error));
        return Ok(());
    }
    let space = limit + 1 - start;
    if size > space {
        let error = IovaError::TooLarge { size, space };
        prop_assert_eq!(domain.try_alloc(size, limit, aligned), Err(error));
        return Ok(());
    }
    let align = if aligned { size.next_power_of_two() } else { 1 };
    let cached = domain.cached_node(limit);
    let (cached_lo, cached_hi) = cached.map_or((u64::MAX, u64::MAX), |c| (c.pfn_lo, c.pfn_hi));
    let high = limit + 1;
    let below_cached = oracle.highest_fit(size, align, start, high.min(cached_lo));
    let expected = below_cached.or_else(|| {
        (cached_hi < high)
            .then(|| oracle.highest_fit(size, align, (cached_hi + 1).max(start), high))
            .flatten()
    });
    let any_fit = oracle.highest_fit(size, align, start, high);

    let result = domain.try_alloc(size, limit, aligned);
    match result {
        Ok(iova) => {
            prop_assert!(any_fit.is_some(), "allocated {} where nothing fits", iova);
            prop_assert_eq!(iova.size(), size);
            prop_assert!(
                iova.pfn_lo >= start && iova.pfn_hi <= limit,
                "out of bounds: {}",
                iova
            );
            prop_assert_eq!(iova.pfn_lo % align, 0, "misaligned: {}", iova);
            prop_assert!(
                (iova.pfn_lo..=iova.pfn_hi).all(|pfn| oracle.is_free(pfn)),
                "{} overlaps",
                iova
            );
            prop_assert_eq!(
                Some(iova.pfn_lo),
                expected,
                "not first fit from the top (cached node {:?})",
                cached
            );
            oracle.set(iova, Owner::Allocated);
            oracle.live.push(iova);
        }
        Err(error) => {
            prop_assert_eq!(error, IovaError::NoSpace);
            prop_assert_eq!(any_fit, None, "a fit exists but the allocation failed");
        }
    }
    Ok(())
}

fn step(domain: &IovaDomain, oracle: &mut Oracle, op: &Op) -> Result<(), TestCaseError> {
    match *op {
        Op::Alloc {
            size,
            limit,
            aligned,
        } => checked_alloc(domain, oracle, size, limit, aligned)?,
        Op::Free { pick, offset } => {
            if oracle.live.is_empty() {
                return Ok(());
            }
            let iova = oracle.live.swap_remove(pick % oracle.live.len());
            let pfn = iova.pfn_lo + offset % iova.size();
            prop_assert_eq!(domain.free(pfn), Ok(()));
            oracle.set(iova, Owner::Free);
            prop_assert_eq!(domain.find(pfn), None);
            if offset % 2 == 0 {
                // Freed space is reusable at once: the same size under a limit at the
                // freed range's top must succeed (`checked_alloc` asserts that an
                // allocation fails only when the oracle finds no fit).
                checked_alloc(domain, oracle, iova.size(), iova.pfn_hi, false)?;
                prop_assert!(oracle
                    .live
                    .last()
                    .is_some_and(|new| new.pfn_hi <= iova.pfn_hi));
            }
        }
        Op::FreeBad { pfn } => match oracle.owner[pfn as usize] {
            Owner::Free => prop_assert_eq!(domain.free(pfn), Err(IovaError::NotAllocated { pfn })),
            Owner::Reserved => {
                let freed = domain.free(pfn);
                let refused =
                    matches!(freed, Err(IovaError::Reserved { range, .. }) if range.contains(pfn));
                prop_assert!(refused, "free of reserved pfn {}: {:?}", pfn, freed);
            }
            Owner::Allocated => {}
        },
        Op::Reserve { pfn_lo, len } => {
            let pfn_hi = pfn_lo + len - 1;
            let clash = (pfn_lo..=pfn_hi).any(|pfn| oracle.owner[pfn as usize] == Owner::Allocated);
            match domain.reserve(pfn_lo, pfn_hi) {
                Ok(()) => {
                    prop_assert!(!clash, "reserved over an allocation");
                    for pfn in pfn_lo..=pfn_hi {
                        oracle.owner[pfn as usize] = Owner::Reserved;
                    }
                }
                Err(IovaError::Overlap { allocated }) => {
                    prop_assert!(clash);
                    prop_assert!(oracle.live.contains(&allocated));
                    prop_assert!(allocated.pfn_lo <= pfn_hi && allocated.pfn_hi >= pfn_lo);
                }
                Err(other) => prop_assert!(false, "reserve failed with {other:?}"),
            }
        }
        Op::Find { pfn } => {
            let found = domain.find(pfn);
            match oracle.owner[pfn as usize] {
                Owner::Free => prop_assert_eq!(found, None),
                Owner::Allocated => {
                    let live = oracle.live.iter().find(|iova| iova.contains(pfn)).copied();
                    prop_assert_eq!(found, live);
                }
                Owner::Reserved => {
                    let range = found.expect("a reserved pfn is found");
                    prop_assert!(range.contains(pfn));
                    prop_assert!((range.pfn_lo..=range.pfn_hi)
                        .all(|p| oracle.owner[p as usize] == Owner::Reserved));
                }
            }
        }
    }
    Ok(())
}

fn run(start_pfn: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let domain = IovaDomain::with_cpus(GRANULE, start_pfn, 2);
    prop_assert_eq!(domain.dma_32bit_pfn(), 256);
    let mut oracle = Oracle::new();
    for op in ops {
        step(&domain, &mut oracle, op)?;
        if let Err(error) = domain.check() {
            prop_assert!(false, "after {:?}: {}", op, error);
        }
        let stats = domain.stats();
        prop_assert_eq!(stats.allocated_ranges, oracle.live.len());
        let reserved = oracle
            .owner
            .iter()
            .filter(|&&o| o == Owner::Reserved)
            .count();
        prop_assert_eq!(stats.reserved_pages, reserved as u64);
    }
    // Everything freed: only reservations remain.
    for iova in std::mem::take(&mut oracle.live) {
        prop_assert_eq!(domain.free(iova.pfn_lo), Ok(()));
    }
    prop_assert_eq!(domain.stats().allocated_ranges, 0);
    prop_assert!(domain.check().is_ok());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_match_the_oracle(
        start_pfn in 0u64..4,
        ops in prop::collection::vec(op(), 1..150),
    ) {
        run(start_pfn, &ops)?;
    }
}

/// A full 32-bit space is refused at once (the `max32_alloc_size` speed-up), and a free
/// below 4 GiB makes the space usable again.
#[test]
fn full_32bit_space_fails_early_until_a_free() {
    // 256 pages below 4 GiB: 51 ranges of 5 leave pfn 0.
    let domain = IovaDomain::with_cpus(GRANULE, 0, 1);
    let mut all = Vec::new();
    while let Some(iova) = domain.alloc(5, 255, false) {
        all.push(iova);
    }
    let searched = domain.stats().early_failures;
    assert_eq!(domain.alloc(5, 255, false), None);
    assert_eq!(domain.alloc(8, 200, true), None);
    assert_eq!(domain.stats().early_failures, searched + 2);
    // Smaller sizes may still fit: the bound is exact.
    assert_eq!(domain.alloc(1, 255, false).map(|iova| iova.pfn_lo), Some(0));
    domain.free(all[10].pfn_lo).unwrap();
    assert_eq!(domain.alloc(5, 255, false), Some(all[10]));
    domain.check().unwrap();
}
