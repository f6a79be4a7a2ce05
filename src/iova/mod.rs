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
//! # Differences from Linux
//!
//! Bad input is refused with an [`IovaError`] and changes nothing, where Linux warns,
//! corrupts a magazine or crashes: a free of an unknown pfn, a double free (also through
//! `free_fast`), `free_fast` with the wrong size, size 0, a size larger than the space
//! under the limit, a limit below `start_pfn`, a reservation over an allocation.
//! [`IovaDomain::check`] verifies the whole domain and is meant to follow any of them.
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
