//! A range of pages, the unit the IOVA allocator hands out (Linux `struct iova`).

use std::fmt;

/// A range of pages `pfn_lo..=pfn_hi` (Linux `struct iova`).
///
/// ```
/// use magazine::iova::Iova;
///
/// let iova = Iova { pfn_lo: 0x100, pfn_hi: 0x103 };
/// assert_eq!(iova.size(), 4);
/// assert!(iova.contains(0x103) && !iova.contains(0x104));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Iova {
    /// First page frame of the range.
    pub pfn_lo: u64,
    /// Last page frame of the range (included).
    pub pfn_hi: u64,
}

impl Iova {
    /// Number of pages in the range (0 for a malformed range with `pfn_hi < pfn_lo`;
    /// `u64::MAX` for the whole space, one short of the truth).
    pub fn size(&self) -> u64 {
        self.pfn_hi
            .checked_sub(self.pfn_lo)
            .map_or(0, |span| span.saturating_add(1))
    }

    /// Whether `pfn` lies in the range.
    pub fn contains(&self, pfn: u64) -> bool {
        self.pfn_lo <= pfn && pfn <= self.pfn_hi
    }
}

impl fmt::Display for Iova {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:#x}, {:#x}]", self.pfn_lo, self.pfn_hi)
    }
}
