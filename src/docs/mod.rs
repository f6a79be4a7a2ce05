//! Long-form documentation: the design the code implements, how to use it correctly, and
//! how to schedule trimming. These modules hold no code; they are versioned and tested
//! with the crate (their examples run as doc tests), and the type docs link into them.
//!
//! - [`design`]: the problem and its numbers, the vocabulary, the five invariants every
//!   checker and proof refers to, the exhaustion rule, and how the seed scenario maps onto
//!   Linux.
//! - [`obligations`]: what the cache trusts its caller and its source to do (no double
//!   frees, no foreign items, no re-entry from callbacks), and the limits of its counters.
//! - [`trimming`]: how often to call [`Cache::trim`](crate::Cache::trim) for each policy,
//!   and the measurements behind the advice.

pub mod design;
pub mod obligations;
pub mod trimming;
