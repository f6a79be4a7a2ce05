//! Model-check scenarios for `magazine`: each scenario is written once, in `scenarios`,
//! against the tiny `checker` shim, and run under loom (`tests/loom.rs`, `--cfg loom`)
//! and under shuttle (`tests/shuttle.rs`, feature `shuttle`). See `README.md` for the
//! commands, what each mode covers, and the mutants that show the suites can fail.
//!
//! In a normal build this crate is empty: the scenarios need the crate's model-only
//! internals (`magazine::model`), which exist only under one of the two checkers.

#[cfg(any(loom, feature = "shuttle"))]
pub mod checker;
#[cfg(any(loom, feature = "shuttle"))]
pub mod scenarios;
#[cfg(any(loom, feature = "shuttle"))]
pub mod tracker;
