//! Bad input to an IOVA domain: each case gets a clear error (or `None`), leaves the
//! domain exactly as it was, and a consistency check passes afterwards.

use magazine::iova::{Iova, IovaDomain, IovaError};
#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)

const GRANULE: u64 = 1 << 24; // 32-bit boundary at pfn 256
const LIMIT: u64 = 511;

/// Everything a caller can observe of the layout: what `find` says for every pfn, and
/// the ranges in callers' hands.
fn layout(domain: &IovaDomain) -> (Vec<Option<Iova>>, usize, u64) {
    let stats = domain.stats();
    let found = (0..=LIMIT + 1).map(|pfn| domain.find(pfn)).collect();
    (found, stats.fast_in_use, stats.allocated_pages)
}

/// A domain with a reservation, slow allocations, fast allocations in hand and cached.
fn busy_domain() -> (IovaDomain, Iova, u64) {
    let domain = IovaDomain::with_cpus(GRANULE, 16, 2);
    domain.reserve(100, 119).unwrap();
    let slow = domain.alloc(5, LIMIT, false).unwrap();
    let fast = domain.alloc_fast(4, LIMIT).unwrap();
    let cached = domain.alloc_fast(2, LIMIT).unwrap();
    domain.free_fast(cached, 2).unwrap();
    (domain, slow, fast)
}

/// Runs `bad` on a busy domain and checks that nothing changed.
fn refused<T: std::fmt::Debug>(bad: impl FnOnce(&IovaDomain, Iova, u64) -> T) -> T {
    let (domain, slow, fast) = busy_domain();
    let before = layout(&domain);
    let flushes = domain.stats().exhaustion_flushes;
    let result = bad(&domain, slow, fast);
    assert_eq!(layout(&domain), before, "{result:?} changed the domain");
    assert_eq!(
        domain.stats().exhaustion_flushes,
        flushes,
        "bad input flushed the caches"
    );
    domain.check().unwrap();
    result
}

#[test]
fn free_of_an_unknown_pfn() {
    assert_eq!(
        refused(|d, _, _| d.free(300)),
        Err(IovaError::NotAllocated { pfn: 300 })
    );
    assert_eq!(
        refused(|d, _, _| d.free(u64::MAX)),
        Err(IovaError::NotAllocated { pfn: u64::MAX })
    );
    assert_eq!(
        refused(|d, _, _| d.free_fast(300, 4)),
        Err(IovaError::NotAllocated { pfn: 300 })
    );
    assert_eq!(
        refused(|d, _, _| d.free_fast(300, 64)),
        Err(IovaError::NotAllocated { pfn: 300 })
    );
}

#[test]
fn double_free() {
    let (domain, slow, fast) = busy_domain();
    domain.free(slow.pfn_lo).unwrap();
    assert_eq!(
        domain.free(slow.pfn_lo),
        Err(IovaError::NotAllocated { pfn: slow.pfn_lo })
    );
    domain.free_fast(fast, 4).unwrap();
    let before = layout(&domain);
    // The range sits in a magazine: a second free of either kind is refused.
    assert_eq!(
        domain.free_fast(fast, 4),
        Err(IovaError::DoubleFree { pfn: fast })
    );
    assert_eq!(domain.free(fast), Err(IovaError::DoubleFree { pfn: fast }));
    assert_eq!(layout(&domain), before);
    domain.check().unwrap();
    // After the cache gave it back to the tree, it is simply not allocated.
    domain.flush();
    assert_eq!(
        domain.free_fast(fast, 4),
        Err(IovaError::NotAllocated { pfn: fast })
    );
    domain.check().unwrap();
}

#[test]
fn free_fast_with_the_wrong_size() {
    let found = |pfn, size| Iova {
        pfn_lo: pfn,
        pfn_hi: pfn + size - 1,
    };
    let error = refused(|d, _, fast| d.free_fast(fast, 8));
    assert!(
        matches!(error, Err(IovaError::SizeMismatch { size: 8, .. })),
        "{error:?}"
    );
    let error = refused(|d, _, fast| d.free_fast(fast, 64));
    assert!(
        matches!(error, Err(IovaError::SizeMismatch { size: 64, .. })),
        "{error:?}"
    );
    // Not the start of the allocation.
    let (domain, _, fast) = busy_domain();
    let mismatch = IovaError::SizeMismatch {
        pfn: fast + 1,
        size: 1,
        found: found(fast, 4),
    };
    assert_eq!(
        refused(|d, _, fast| d.free_fast(fast + 1, 1)),
        Err(mismatch)
    );
    drop(domain);
    // A slow allocation of another class.
    let (domain, slow, _) = busy_domain();
    let mismatch = IovaError::SizeMismatch {
        pfn: slow.pfn_lo,
        size: 1,
        found: slow,
    };
    assert_eq!(
        refused(|d, slow, _| d.free_fast(slow.pfn_lo, 1)),
        Err(mismatch)
    );
    drop(domain);
    // Sizes in the same class are the same size to the fast path (as in Linux).
    let (domain, _, fast) = busy_domain();
    domain.free_fast(fast, 3).unwrap();
    domain.check().unwrap();
}

#[test]
fn free_of_a_reserved_range() {
    let reserved = |pfn| {
        Err(IovaError::Reserved {
            pfn,
            range: Iova {
                pfn_lo: 100,
                pfn_hi: 119,
            },
        })
    };
    assert_eq!(refused(|d, _, _| d.free(105)), reserved(105));
    assert_eq!(refused(|d, _, _| d.free_fast(100, 4)), reserved(100));
    assert_eq!(refused(|d, _, _| d.free_fast(100, 20)), reserved(100));
}

#[test]
fn size_zero() {
    assert_eq!(
        refused(|d, _, _| d.try_alloc(0, LIMIT, true)),
        Err(IovaError::ZeroSize)
    );
    assert_eq!(refused(|d, _, _| d.alloc(0, LIMIT, false)), None);
    assert_eq!(refused(|d, _, _| d.alloc_fast(0, LIMIT)), None);
    assert_eq!(
        refused(|d, _, fast| d.free_fast(fast, 0)),
        Err(IovaError::ZeroSize)
    );
}

#[test]
fn size_larger_than_the_space_under_the_limit() {
    // start_pfn 16, limit 255: 240 pages.
    let too_large = Err(IovaError::TooLarge {
        size: 241,
        space: 240,
    });
    assert_eq!(refused(|d, _, _| d.try_alloc(241, 255, false)), too_large);
    assert_eq!(refused(|d, _, _| d.alloc_fast(241, 255)), None);
    assert_eq!(refused(|d, _, _| d.alloc_fast(u64::MAX, u64::MAX)), None);
}

#[test]
fn limit_below_start_pfn() {
    let below = Err(IovaError::LimitBelowStart {
        limit_pfn: 15,
        start_pfn: 16,
    });
    assert_eq!(refused(|d, _, _| d.try_alloc(1, 15, false)), below);
    assert_eq!(refused(|d, _, _| d.alloc_fast(1, 15)), None);
    assert_eq!(refused(|d, _, _| d.alloc_fast(1, 0)), None);
}

#[test]
fn reserve_over_an_allocation_or_malformed() {
    let error = refused(|d, slow, _| d.reserve(slow.pfn_lo - 3, slow.pfn_lo));
    assert!(matches!(error, Err(IovaError::Overlap { .. })), "{error:?}");
    let error = refused(|d, _, fast| d.reserve(fast, fast));
    assert!(matches!(error, Err(IovaError::Overlap { .. })), "{error:?}");
    assert_eq!(
        refused(|d, _, _| d.reserve(9, 8)),
        Err(IovaError::InvalidRange {
            pfn_lo: 9,
            pfn_hi: 8
        })
    );
    assert_eq!(
        refused(|d, _, _| d.reserve(5, u64::MAX)),
        Err(IovaError::InvalidRange {
            pfn_lo: 5,
            pfn_hi: u64::MAX
        })
    );
}

#[test]
fn reserve_over_cached_ranges_flushes_them_first() {
    let domain = IovaDomain::with_cpus(GRANULE, 16, 2);
    let pfn = domain.alloc_fast(8, LIMIT).unwrap();
    domain.free_fast(pfn, 8).unwrap();
    assert!(domain.find(pfn).is_some(), "cached, so still in the tree");
    domain.reserve(pfn, pfn + 7).unwrap();
    assert_ne!(domain.alloc_fast(8, LIMIT), Some(pfn));
    domain.check().unwrap();
}

#[test]
fn limits_at_the_top_of_the_space_are_fine() {
    let domain = IovaDomain::new(4096, 1);
    let top = domain.alloc(1, u64::MAX, false).unwrap();
    assert_eq!(
        top.pfn_lo,
        u64::MAX - 1,
        "the anchor pfn itself is never allocated"
    );
    let fast = domain.alloc_fast(32, u64::MAX).unwrap();
    assert_eq!(fast % 32, 0);
    domain.free_fast(fast, 32).unwrap();
    domain.free(top.pfn_lo).unwrap();
    domain.check().unwrap();
}

#[test]
fn errors_explain_themselves() {
    let errors = [
        IovaError::ZeroSize,
        IovaError::NoSpace,
        IovaError::NotAllocated { pfn: 1 },
        IovaError::DoubleFree { pfn: 1 },
        IovaError::TooLarge { size: 2, space: 1 },
    ];
    for error in errors {
        let text = error.to_string();
        assert!(!text.is_empty());
        let _: &dyn std::error::Error = &error;
    }
}

#[test]
#[should_panic(expected = "not a power of two")]
fn granule_must_be_a_power_of_two() {
    let _ = IovaDomain::new(3000, 1);
}
