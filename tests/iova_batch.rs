//! Batches on the IOVA range tree: `IovaDomain::alloc_batch` / `free_batch` (one lock hold
//! for many ranges) and the opt-in batched fast-path miss (`with_miss_batch`) place ranges
//! exactly where single calls in a row would, so the tree stays Linux-identical.

use magazine::iova::{Iova, IovaDomain, IovaError};
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

use magazine::{Config, DepotPolicy};

/// Pages of 16 MiB: the 32-bit boundary at pfn 256, a small space to fill.
const GRANULE: u64 = 1 << 24;

/// A deterministic pseudo-random sequence (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Both cached search starts (below and above the 32-bit boundary).
fn cached_nodes(domain: &IovaDomain) -> (Option<Iova>, Option<Iova>) {
    (domain.cached_node(0xff), domain.cached_node(u64::MAX))
}

#[test]
fn alloc_batch_places_as_try_alloc_in_a_row() {
    let mut rng = Rng(0x1234_5678);
    for round in 0..200 {
        let (batched, single) = (IovaDomain::new(GRANULE, 1), IovaDomain::new(GRANULE, 1));
        let mut live = Vec::new();
        for _ in 0..rng.below(30) {
            if rng.below(3) == 0 && !live.is_empty() {
                let pfn = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(batched.free_batch([pfn]), Ok(1));
                single.free(pfn).unwrap();
            } else {
                let (size, limit) = (1 + rng.below(6), 0x20 + rng.below(0x200));
                let aligned = rng.below(2) == 0;
                let got = batched.try_alloc(size, limit, aligned);
                assert_eq!(got, single.try_alloc(size, limit, aligned), "same history");
                live.extend(got.map(|iova| iova.pfn_lo));
            }
        }
        let (size, limit, aligned) = (1 + rng.below(4), 0x20 + rng.below(0x200), true);
        let max = rng.below(100) as usize;
        let mut from_batch = Vec::new();
        let result =
            batched.alloc_batch(size, limit, aligned, max, &mut |iova| from_batch.push(iova));
        let mut from_singles = Vec::new();
        let mut error = None;
        while from_singles.len() < max {
            match single.try_alloc(size, limit, aligned) {
                Ok(iova) => from_singles.push(iova),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        assert_eq!(from_batch, from_singles, "round {round}");
        match error.filter(|_| from_singles.is_empty()) {
            Some(error) => assert_eq!(result, Err(error)),
            None => assert_eq!(result, Ok(from_singles.len())),
        }
        assert_eq!(
            cached_nodes(&batched),
            cached_nodes(&single),
            "round {round}"
        );
        batched.check().unwrap();
        let pfns: Vec<u64> = from_batch.iter().map(|iova| iova.pfn_lo).collect();
        assert_eq!(batched.free_batch(pfns.iter().copied()), Ok(pfns.len()));
        pfns.iter().for_each(|&pfn| single.free(pfn).unwrap());
        assert_eq!(
            cached_nodes(&batched),
            cached_nodes(&single),
            "round {round}"
        );
        batched.check().unwrap();
    }
}

#[test]
fn free_batch_stops_at_the_first_bad_pfn() {
    let domain = IovaDomain::new(GRANULE, 1);
    let pfns: Vec<u64> = (0..3)
        .map(|_| domain.alloc(1, 0xff, false).unwrap().pfn_lo)
        .collect();
    domain.reserve(0x10, 0x10).unwrap();
    assert!(matches!(
        domain.free_batch([pfns[0], 0x10, pfns[1]]),
        Err(IovaError::Reserved { pfn: 0x10, .. })
    ));
    assert_eq!(domain.find(pfns[0]), None, "freed before the bad pfn");
    assert!(domain.find(pfns[1]).is_some(), "left after it");
    assert_eq!(domain.free_batch(pfns[1..].iter().copied()), Ok(2));
    domain.check().unwrap();
}

/// Allocates on slot 0 until the space is exhausted; returns the pfns handed out.
fn fill(domain: &IovaDomain, size: u64, limit: u64) -> Vec<u64> {
    std::iter::from_fn(|| domain.alloc_fast_on(0, size, limit)).collect()
}

#[test]
fn batched_misses_hand_out_the_pfns_of_single_misses() {
    for batch in [2, 8, 127, 1000] {
        for (size, limit) in [(1, 0xff), (2, 0x1ff), (4, u64::MAX >> 40), (3, 0x80)] {
            let config = Config {
                cpus: 2,
                ..Config::default()
            };
            let linux = IovaDomain::with_config(GRANULE, 1, config.clone());
            let batched = IovaDomain::with_config(GRANULE, 1, config).with_miss_batch(batch);
            assert_eq!(batched.miss_batch(), batch.min(127));
            let take = 300;
            let a: Vec<_> = (0..take)
                .map_while(|_| linux.alloc_fast_on(0, size, limit))
                .collect();
            let b: Vec<_> = (0..take)
                .map_while(|_| batched.alloc_fast_on(0, size, limit))
                .collect();
            assert_eq!(a, b, "batch {batch}, size {size}, limit {limit:#x}");
            let stats = batched.stats();
            let class = size.next_power_of_two().trailing_zeros() as usize;
            assert!(stats.rcaches[class].alloc_hits > 0 || b.len() < 2);
            batched.check().unwrap();
            for pfn in b {
                batched.free_fast_on(1, pfn, size).unwrap();
            }
            batched.check().unwrap();
        }
    }
}

#[test]
fn batched_misses_exhaust_the_space_as_single_misses() {
    for depot in [DepotPolicy::Fixed { max_full: 1 }, Config::default().depot] {
        let config = Config {
            magazine_size: 8,
            cpus: 2,
            depot,
        };
        let linux = IovaDomain::with_config(GRANULE, 1, config.clone());
        let batched = IovaDomain::with_config(GRANULE, 1, config).with_miss_batch(8);
        let (a, b) = (fill(&linux, 1, 0xff), fill(&batched, 1, 0xff));
        assert_eq!(a.len(), 255, "every pfn below the boundary but 0");
        assert_eq!(a, b, "{depot:?}");
        batched.check().unwrap();
        // Freed on another slot and taken again: the tree and the caches agree throughout.
        for pfn in b {
            batched.free_fast_on(1, pfn, 1).unwrap();
        }
        assert_eq!(fill(&batched, 1, 0xff).len(), 255);
        batched.check().unwrap();
    }
}
