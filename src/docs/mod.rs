//! Long-form documentation: the design the code implements, how to use it correctly, how
//! to schedule trimming, and the known limits. These modules hold no code; they are versioned and tested
//! with the crate (their examples run as doc tests), and the type docs link into them.
//!
//! - [`design`]: the problem and its numbers, the vocabulary, the five invariants every
//!   checker and proof refers to, the exhaustion rule, and how the seed scenario maps onto
//!   Linux.
//! - [`obligations`]: what the cache trusts its caller and its source to do (no double
//!   frees, no foreign items, no re-entry from callbacks), and the limits of its counters.
//! - [`failures`]: what the cache guarantees when something fails: a panicking source,
//!   path by path; failing system calls; configuration at its edges; re-entry; signals.
//! - [`trimming`]: how often to call [`Cache::trim`](crate::Cache::trim) for each policy,
//!   and the measurements behind the advice.
//! - [`limits`]: what the cache does not do or costs more for, with the figures behind
//!   each limit.
//!
//! The seed scenario's case study (the workload the crate was built for, every depot
//! policy compared) is `examples/seed/README.md` in the repository.

pub mod design;
pub mod failures;
pub mod limits;
pub mod obligations;
pub mod trimming;
