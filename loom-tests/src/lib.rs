//! Model-check scenarios for `magazine` (work in progress, see issue 3).
