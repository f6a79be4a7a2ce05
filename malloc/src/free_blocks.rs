//! A span's given-back blocks, kept in the free blocks themselves: a stack of *nodes*, each
//! a free block that holds the next node's address, a count, and the addresses of up to
//! [`node_capacity`] more free blocks of the span.
//!
//! A plain list (each free block holding the next one's address) touches every block
//! twice: the free writes its first word, and the allocation that takes it back must read
//! that word before it can find the next block, one cache miss after another (the blocks
//! went back a magazine at a time, usually long before). In nodes, a give writes into the
//! node on top, a line it has just used, and a take reads a whole node's addresses after
//! one miss: for 64-byte blocks, one dependent miss per seven blocks instead of one per
//! block (`source::take` was 87% of its samples on that load in Python's profile).
//! Blocks of 8 and 16 bytes have no room for addresses: their nodes are a plain list.
//!
//! Every function runs under the lock of the class that holds the span (`source`), and
//! none can panic (plain loads and stores), so a stack is never left half changed.

/// Addresses of other free blocks a node of `size`-byte blocks holds: the block's words
/// past the next node's address and the count; 0 for blocks of fewer than 3 words.
#[inline]
pub(crate) const fn node_capacity(size: usize) -> usize {
    (size / 8).saturating_sub(2)
}

/// Pushes `block` onto the stack whose top node is `*top` (0 for none).
///
/// # Safety
///
/// `*top` is 0 or a node of such a stack, of blocks with `capacity` = [`node_capacity`]
/// of their size; `block` is a free block of that size, in no stack, 8-byte aligned, ours
/// to write; the caller holds the lock that guards the stack.
#[inline]
pub(crate) unsafe fn push(top: &mut usize, block: usize, capacity: usize) {
    let node = *top as *mut usize;
    if !node.is_null() && capacity > 0 {
        // SAFETY: a node of the stack: a free block of at least `capacity + 2` words.
        unsafe {
            let count = node.add(1).read();
            if count < capacity {
                node.add(2 + count).write(block);
                node.add(1).write(count + 1);
                return;
            }
        }
    }
    // SAFETY: `block` is free and ours: it becomes the top node, holding no address yet.
    unsafe {
        let block = block as *mut usize;
        block.write(*top);
        if capacity > 0 {
            block.add(1).write(0);
        }
    }
    *top = block;
}

/// Pops a free block off the stack whose top node is `*top`, which is not 0: an address
/// the top node holds, else the node itself.
///
/// # Safety
///
/// As [`push`], and the stack is not empty.
#[inline]
pub(crate) unsafe fn pop(top: &mut usize, capacity: usize) -> usize {
    let node = *top as *mut usize;
    debug_assert!(!node.is_null());
    // SAFETY: the caller's contract: the top node of a stack of such nodes.
    unsafe {
        if capacity > 0 {
            let count = node.add(1).read();
            if cfg!(magazine_mutant = "node_pops_twice") && count > 0 {
                // MUTANT: the node's last address is handed out but stays counted.
                return node.add(1 + count).read();
            }
            if count > 0 {
                node.add(1).write(count - 1);
                return node.add(1 + count).read();
            }
        }
        *top = node.read();
    }
    node as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block pushed comes out once, whatever the block size and the order of
    /// pushes and pops.
    #[test]
    fn blocks_pushed_come_out_once() {
        for size in [8, 16, 24, 32, 64, 128] {
            let capacity = node_capacity(size);
            let words = size / 8;
            let mut memory = vec![0usize; words * 100];
            let base = memory.as_mut_ptr() as usize;
            let block = |i: usize| base + i * size;
            let mut top = 0;
            let mut out = Vec::new();
            // SAFETY: every block is `size` bytes of `memory`, pushed while free, once.
            unsafe {
                for i in 0..60 {
                    push(&mut top, block(i), capacity);
                }
                for _ in 0..25 {
                    out.push(pop(&mut top, capacity));
                }
                for i in 60..100 {
                    push(&mut top, block(i), capacity);
                }
                for _ in 25..100 {
                    assert_ne!(top, 0, "size {size}: a block lost");
                    out.push(pop(&mut top, capacity));
                }
            }
            assert_eq!(top, 0, "size {size}: every block came out");
            out.sort_unstable();
            let all: Vec<usize> = (0..100).map(block).collect();
            assert_eq!(out, all, "size {size}");
        }
    }
}
