//! How often to trim: one recommendation per depot policy, and the measurements behind it.
//!
//! The cache starts no thread. Something must call [`Cache::trim`] periodically: your own
//! timer, or a [`Reaper`] thread (`std` only). The interval matters differently for each
//! policy, because it means something different to each:
//!
//! | policy | call `trim()` every | why |
//! | --- | --- | --- |
//! | `Dynamic { trim: WorkingSet }` (the default) | **2 s** | the interval *is* the working-set window: a magazine is released only if it stayed unused for a whole interval |
//! | `Dynamic { trim: OnePerTick }` | **100 ms** | the interval sets the release rate (one magazine per call); 100 ms is Linux's `IOVA_DEPOT_DELAY` |
//! | `Fixed { .. }` | **2 s** | trim releases no full magazine, only idle empty ones and the loose path's idle partly filled ones; the interval barely matters |
//!
//! [`Reaper::interval_for`] returns exactly these, and [`Cache::start_default_reaper`]
//! starts a reaper with them:
//!
//! ```
//! use magazine::{Cache, Config, DepotPolicy, Reaper, Source, Trim};
//! use std::sync::Arc;
//! use std::time::Duration;
//! # struct Ids(std::sync::atomic::AtomicU32);
//! # impl Source for Ids {
//! #     type Item = u32;
//! #     fn alloc(&self) -> Option<u32> { Some(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) }
//! #     fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) { items.for_each(drop) }
//! # }
//!
//! let working_set = DepotPolicy::Dynamic { target: 4, trim: Trim::WorkingSet };
//! let one_per_tick = DepotPolicy::Dynamic { target: 4, trim: Trim::OnePerTick };
//! assert_eq!(Reaper::interval_for(working_set), Duration::from_secs(2));
//! assert_eq!(Reaper::interval_for(one_per_tick), Duration::from_millis(100));
//!
//! let cache = Arc::new(Cache::new(Ids(Default::default())));
//! let reaper = cache.start_default_reaper(); // every 2 s: the default depot is WorkingSet
//! reaper.stop();
//! ```
//!
//! # Why 2 s for the working set, not Linux's 100 ms
//!
//! A working-set trim releases what the depot did not need during the last interval. If
//! the interval is shorter than the swings of the load, magazines that are idle for a
//! moment are released and then rebuilt from the source a moment later. The seed scenario
//! (256 virtual CPUs, 16 interrupt CPUs, target 16; the case study
//! `examples/seed/README.md`: `cargo run --release --example seed -- --target 16
//! --working-set-ms 2000,100,1000`, 2026-12-05) measured,
//! in slow-path allocations per 1000 I/Os relative to a depot that is never trimmed, in
//! its three modes (lazy-submit, lazy-irq, strict):
//!
//! | policy, interval | slow-path allocations | back to target after the load |
//! | --- | --- | --- |
//! | `WorkingSet`, 100 ms | 12.9x, 5.4x, 1.35x | 0.2 s |
//! | `WorkingSet`, 1 s | 1.0x, 1.06x, 1.0x | 2.0 s |
//! | `WorkingSet`, 2 s | 1.0x, 1.0x, 1.0x | 4.0 s |
//! | `OnePerTick`, 100 ms | 178x, 2.6x, 1.35x | not within the 5 s idle phase (strict: 4.0 s) |
//!
//! 1 s already matches never trimming in this run; 2 s is the default because it keeps a
//! margin for loads that swing over a second or more, at the price of returning the
//! surplus 4 s after the load instead of 2 s. Shorten it only if memory must come back
//! faster than that and the slow path is cheap; lengthen it if the load swings over
//! seconds.
//!
//! # Why 100 ms for one-per-tick
//!
//! `OnePerTick` releases one magazine per call whatever the demand, so the interval is a
//! rate: 100 ms is 10 magazines per second, Linux's. It trims during the load as well
//! (178x the slow path above, in lazy-submit mode), which is the behaviour it exists to
//! reproduce; prefer `WorkingSet` for anything else.
//!
//! [`Cache::trim`]: crate::Cache::trim
#![cfg_attr(
    all(feature = "std", not(magazine_model)),
    doc = "[`Reaper`]: crate::Reaper",
    doc = "[`Reaper::interval_for`]: crate::Reaper::interval_for",
    doc = "[`Cache::start_default_reaper`]: crate::Cache::start_default_reaper"
)]
