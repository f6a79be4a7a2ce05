//! What can go wrong in an IOVA domain: bad input and exhaustion, reported without
//! changing the domain.

use std::fmt;

use super::range::Iova;

/// Why an [`IovaDomain`](super::IovaDomain) operation refused to act.
///
/// Every error leaves the domain exactly as it was (a following
/// [`check`](super::IovaDomain::check) passes), so a caller can report it and carry on.
///
/// ```
/// use magazine::iova::{IovaDomain, IovaError};
///
/// let domain = IovaDomain::new(4096, 1);
/// assert_eq!(domain.free(42), Err(IovaError::NotAllocated { pfn: 42 }));
/// assert!(domain.check().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IovaError {
    /// An allocation of 0 pages.
    ZeroSize,
    /// `limit_pfn` lies below the domain's `start_pfn`: there is no space at all.
    LimitBelowStart {
        /// The limit asked for.
        limit_pfn: u64,
        /// The lowest pfn the domain allocates.
        start_pfn: u64,
    },
    /// The size is larger than the whole space between `start_pfn` and `limit_pfn`.
    TooLarge {
        /// The size asked for, in pages.
        size: u64,
        /// The pages between `start_pfn` and `limit_pfn`, both included.
        space: u64,
    },
    /// No free range of that size (and alignment) below the limit.
    NoSpace,
    /// No allocation contains `pfn` (never allocated, or already freed).
    NotAllocated {
        /// The pfn given.
        pfn: u64,
    },
    /// The range at `pfn` was freed through [`free_fast`](super::IovaDomain::free_fast)
    /// already and sits in a magazine.
    DoubleFree {
        /// The pfn given.
        pfn: u64,
    },
    /// `pfn` lies in a reserved range, which is never freed.
    Reserved {
        /// The pfn given.
        pfn: u64,
        /// The reserved range containing it.
        range: Iova,
    },
    /// The allocation found at `pfn` does not start there or is not of the given size
    /// class (a [`free_fast`](super::IovaDomain::free_fast) with the wrong size).
    SizeMismatch {
        /// The pfn given.
        pfn: u64,
        /// The size given, in pages.
        size: u64,
        /// The allocation that contains `pfn`.
        found: Iova,
    },
    /// A range with `pfn_lo > pfn_hi`, or reaching the anchor pfn `u64::MAX`.
    InvalidRange {
        /// First pfn asked for.
        pfn_lo: u64,
        /// Last pfn asked for.
        pfn_hi: u64,
    },
    /// A reservation overlaps this allocated range.
    Overlap {
        /// The allocation in the way.
        allocated: Iova,
    },
}

impl fmt::Display for IovaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IovaError::ZeroSize => f.write_str("allocation of 0 pages"),
            IovaError::LimitBelowStart {
                limit_pfn,
                start_pfn,
            } => write!(
                f,
                "limit pfn {limit_pfn:#x} is below start pfn {start_pfn:#x}"
            ),
            IovaError::TooLarge { size, space } => write!(
                f,
                "{size} pages do not fit in the {space} pages under the limit"
            ),
            IovaError::NoSpace => f.write_str("no free IOVA range fits under the limit"),
            IovaError::NotAllocated { pfn } => write!(f, "pfn {pfn:#x} is not allocated"),
            IovaError::DoubleFree { pfn } => {
                write!(f, "pfn {pfn:#x} was freed already (it is cached)")
            }
            IovaError::Reserved { pfn, range } => {
                write!(f, "pfn {pfn:#x} lies in the reserved range {range}")
            }
            IovaError::SizeMismatch { pfn, size, found } => write!(
                f,
                "pfn {pfn:#x} with {size} pages does not match the allocation {found}"
            ),
            IovaError::InvalidRange { pfn_lo, pfn_hi } => {
                write!(f, "invalid range [{pfn_lo:#x}, {pfn_hi:#x}]")
            }
            IovaError::Overlap { allocated } => {
                write!(f, "the range overlaps the allocation {allocated}")
            }
        }
    }
}

impl std::error::Error for IovaError {}

/// An inconsistency found by [`IovaDomain::check`](super::IovaDomain::check): a bug in
/// the domain (or a check run while other threads work), never a user error.
///
/// ```
/// use magazine::iova::IovaDomain;
///
/// let domain = IovaDomain::new(4096, 1);
/// if let Err(error) = domain.check() {
///     panic!("inconsistent domain: {}", error.message());
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError(pub(crate) String);

impl CheckError {
    /// What is wrong, in words.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IOVA domain inconsistent: {}", self.0)
    }
}

impl std::error::Error for CheckError {}
