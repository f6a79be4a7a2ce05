//! The crate's own allocations, made fallible: each returns `None` when the allocator
//! refuses the memory, so that a cache degrades (items go to and come from the source
//! directly) instead of aborting the process (see [`docs::failures`](crate::docs::failures)).

use alloc::boxed::Box;
use alloc::collections::TryReserveError;
use alloc::vec::Vec;

/// A boxed slice of `len` elements made by `element` (called with each index in turn);
/// the error when the allocator refuses the memory or `element` fails (what was made so
/// far is dropped). A panic in `element` drops what was made, like `collect`.
pub(crate) fn boxed_slice<T>(
    len: usize,
    mut element: impl FnMut(usize) -> Result<T, TryReserveError>,
) -> Result<Box<[T]>, TryReserveError> {
    let mut elements = Vec::new();
    elements.try_reserve_exact(len)?;
    for index in 0..len {
        elements.push(element(index)?);
    }
    // Exactly as long as its capacity: `into_boxed_slice` does not reallocate.
    Ok(elements.into_boxed_slice())
}
