//! A Linux-compatible IOVA allocator built on the cache: the crate's flagship user.
//!
//! An IOMMU driver maps DMA buffers at I/O virtual addresses (IOVAs) it allocates per
//! domain. Linux's allocator (`drivers/iommu/iova.c`) is a range tree behind one lock,
//! fronted by per-CPU caches of recently freed ranges, one per size class: exactly a
//! magazine/depot [`Cache`](crate::Cache) per class in front of a range allocator
//! [`Source`](crate::Source). [`IovaDomain`] is that allocator:
//!
//! | Linux                                   | here                                       |
//! | --------------------------------------- | ------------------------------------------ |
//! | `init_iova_domain(granule, start_pfn)`  | [`IovaDomain::new`], [`IovaDomain::with_config`] |
//! | `alloc_iova(size, limit_pfn, aligned)`  | [`IovaDomain::alloc`] / [`IovaDomain::try_alloc`] |
//! | `find_iova`, `free_iova`, `reserve_iova`| [`IovaDomain::find`], [`IovaDomain::free`], [`IovaDomain::reserve`] |
//! | `alloc_iova_fast(.., flush_rcache=true)`| [`IovaDomain::alloc_fast`]                  |
//! | `free_iova_fast`                        | [`IovaDomain::free_fast`]                   |
//! | `free_cpu_cached_iovas` (CPU hot-unplug)| [`IovaDomain::flush_cpu`]                   |
//! | `put_iova_domain`                       | `Drop`                                      |
//! | `IOVA_RANGE_CACHE_MAX_SIZE`, `IOVA_MAG_SIZE` | [`IOVA_RANGE_CACHE_MAX_SIZE`], [`Config::magazine_size`](crate::Config::magazine_size) |
//!
//! # Placement
//!
//! Pfns are counted in pages of `granule` bytes; limits are inclusive (the last pfn a
//! device can address). An allocation lands as high as possible below the limit, first
//! fit from the top, size-aligned when asked (aligned to the size rounded up to a power
//! of two). As in Linux, the search starts at a *cached node* rather than at the limit:
//! it takes the highest fit below the cached node, and only if there is none the highest
//! fit between the cached node and the limit. A fit anywhere under the limit is always
//! found; the cached node only decides which one. [`IovaDomain::cached_node`] shows it.
//!
//! # Speed-ups kept from Linux
//!
//! - The cached search start (`cached_node`, and `cached32_node` for limits below 4 GiB),
//!   moved to each new allocation, and on free moved up past a freed range at or above
//!   it so that freed space is found first and no cached node outlives its range.
//! - The early failure of 32-bit requests (`max32_alloc_size`): once the whole space
//!   below 4 GiB has no room for a size, requests of that size or more under a 32-bit
//!   limit fail without a search, until something below 4 GiB is freed. Unlike Linux's
//!   bound, this one is exact (never fails a request that would fit).
//! - The per-CPU caches themselves, with [`Cache::alloc_cached_where_on`] standing in for
//!   Linux's scan of a magazine for a pfn under the limit.
//!
//! Not kept: Linux's `iova_find_limit` shortcut is unnecessary, the ordered map finds the
//! first range below a limit directly.
//!
//! # Batches (not in Linux)
//!
//! [`IovaDomain::alloc_batch`] allocates many ranges of one size under one hold of the
//! tree lock, and [`IovaDomain::free_batch`] frees many; both do exactly what as many
//! single calls in a row would (same pfns, same cached nodes), only the lock is taken
//! once. The fast path keeps Linux's one range per miss unless a domain opts in with
//! [`IovaDomain::with_miss_batch`]; a class's [`Source`](crate::Source) never allocates,
//! in batches either (see step 2 below).
//!
//! # Differences from Linux
//!
//! Bad input is refused with an [`IovaError`] and changes nothing, where Linux warns,
//! corrupts a magazine or crashes: a free of an unknown pfn, a double free (also through
//! `free_fast`), `free_fast` with the wrong size, size 0, a size larger than the space
//! under the limit, a limit below `start_pfn`, a reservation over an allocation.
//! [`IovaDomain::check`] verifies the whole domain and is meant to follow any of them.
//!
//! A differential test of the range allocator against Linux's own `iova.c` (run outside
//! this repository: 12.7 million random operations, placement and the cached nodes
//! identical) found three more, kept as they are:
//!
//! - **A reservation over a reservation keeps separate ranges.** Linux's `reserve_iova`
//!   widens an overlapping reserved node downwards and inserts a node only for what lies
//!   above it; here the reserved ranges already there keep their bounds (and the cached
//!   nodes that point at them stay valid), and only the holes between them become new
//!   reserved ranges. The same pages are reserved either way, but [`IovaDomain::find`]
//!   returns the range that holds the pfn here, where Linux returns the widened node.
//! - **`find(u64::MAX)` is `None`.** Linux's tree holds an anchor node at pfn
//!   `IOVA_ANCHOR` (`~0UL`), which `find_iova` returns; here the anchor is no range, so
//!   nothing is found there (and [`IovaDomain::reserve`] refuses to reach it).
//! - **Reservations above pfn `u64::MAX >> log2(granule)` are accepted.** Linux's
//!   `reserve_iova` warns and refuses a pfn whose address would not fit in 64 bits (above
//!   2^52 - 1 for 4 KiB pages); here any pfn below the anchor can be reserved, as any can
//!   be allocated under a limit of `u64::MAX`. A driver that mirrors Linux should check
//!   its reservations against the address width itself.
//!
//! ```
//! use magazine::iova::{Iova, IovaDomain};
//!
//! let domain = IovaDomain::new(4096, 1);
//! domain.reserve(10, 20).unwrap();
//! domain.reserve(5, 15).unwrap(); // Linux: one node, 5..=20
//! assert_eq!(domain.find(7), Some(Iova { pfn_lo: 5, pfn_hi: 9 }));
//! assert_eq!(domain.find(12), Some(Iova { pfn_lo: 10, pfn_hi: 20 }));
//! assert_eq!(domain.find(u64::MAX), None); // Linux: the anchor node
//! assert!(domain.reserve(1 << 52, 1 << 52).is_ok()); // Linux (4 KiB pages): refused
//! domain.check().unwrap();
//! ```
//!
//! # The pattern to copy: how the domain uses the cache
//!
//! [`IovaDomain`] is the crate's worked example of putting [`Cache`](crate::Cache) in
//! front of an allocator that is more than a free list:
//!
//! 1. **Share the slow allocator.** Put it behind one lock in an `Arc` (the range tree, as
//!    Linux's rbtree behind `iova_rbtree_lock`). The domain calls it directly for
//!    requests the cache cannot serve.
//! 2. **One `Cache` per size class, each with a tiny [`Source`](crate::Source)** that
//!    holds an `Arc` clone of the shared allocator and its class:
//!    ```rust,ignore
//!    struct ClassSource { ranges: Arc<Ranges>, order: u8 }
//!    impl Source for ClassSource {
//!        type Item = u64; // a pfn
//!        // Never used: a miss needs the caller's limit_pfn, which `alloc` cannot carry
//!        // (step 3). The domain allocates through an inherent method that also counts.
//!        fn alloc(&self) -> Option<u64> { None }
//!        // Nor in batches: `alloc_batch` hands nothing (0), consistently.
//!        fn free_batch(&self, pfns: &mut dyn Iterator<Item = u64>) {
//!            let mut tree = self.ranges.lock(); // one lock per magazine, not per item
//!            for pfn in pfns { tree.remove(pfn); }
//!        }
//!    }
//!    ```
//! 3. **When allocation takes arguments the `Source` trait cannot carry** (here
//!    `limit_pfn`), use `cache.alloc_cached_where(|&pfn| pfn + size - 1 <= limit_pfn)`: it
//!    takes only cached items that fit and never calls the source. On `None`, call your
//!    allocator yourself; if that fails, `try_flush()` every cache (it skips busy slots)
//!    and retry once, as Linux's `alloc_iova_fast` does.
//! 4. **Free with `cache.free(item)`.** Items in magazines stay allocated in your
//!    allocator, so it never hands them out twice; they go back through `free_batch` on
//!    overflow (`Fixed`), `trim()`, `flush_cpu()`, `flush()` and drop.
//! 5. **Call `trim()` periodically**: every 2 s for `WorkingSet` (the default), every
//!    100 ms for `OnePerTick`, or start a `Reaper` with `start_default_reaper()` on an
//!    `Arc<Cache>`, which picks that interval. The cache starts no thread of its own.
//! 6. **Pick the depot policy per instance** with `Config`; `Options::current_cpu` and the
//!    `*_on(cpu, ..)` variants let simulators and pinned threads choose slots.
//! 7. **Check frees in front of the cache when callers cannot be trusted.** The cache
//!    takes every free on trust. The domain records each range `alloc_fast` hands out in
//!    a lock-free table of one byte per pfn (a store on allocation, a compare-and-swap on
//!    free), so `free_fast` refuses a double free or a wrong size with an error, where
//!    Linux would hand the range out twice; [`FreeCheck::Unchecked`] gives Linux's
//!    unchecked behaviour. Measured (`BENCHMARKS.md`, 2026-12-04, `4f98df1`, medians of
//!    three): the checked fast pair is 5.3x faster than the tree pair on one thread (6.9x
//!    unchecked) and 14.4x on two threads.
//!
//! [`Cache::alloc_cached_where_on`]: crate::Cache::alloc_cached_where_on

mod domain;
mod error;
mod live;
mod range;
mod rcache;
mod tree;

pub use domain::{FreeCheck, IovaDomain, IovaStats};
pub use error::{CheckError, IovaError};
pub use range::Iova;
pub use rcache::IOVA_RANGE_CACHE_MAX_SIZE;
