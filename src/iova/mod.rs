//! A Linux-compatible IOVA allocator built on the cache (work in progress, see issue 5).
