//! The C functions' semantics, called through the built library: loaded with `dlopen`
//! beside the test's own (glibc's) heap, each function taken with `dlsym`. The library's
//! heap is its own statics, so its blocks never mix with the test's.

mod common;

use std::ffi::c_void;
use std::ptr;

use common::{errno, set_errno, Lib};

#[test]
fn malloc_aligns_and_sizes_every_small_request() {
    let lib = Lib::get();
    for size in 0..=5000usize {
        let block = lib.malloc(size);
        assert!(!block.is_null(), "malloc({size})");
        let align = if size > 8 { 16 } else { 8 };
        assert_eq!(block as usize % align, 0, "malloc({size}) at {block:p}");
        let usable = lib.malloc_usable_size(block);
        assert!(usable >= size.max(1), "malloc({size}): usable {usable}");
        // SAFETY: the block holds `usable` bytes.
        unsafe { ptr::write_bytes(block.cast::<u8>(), 0xa5, usable) };
        lib.free(block);
    }
    assert_eq!(lib.malloc_usable_size(ptr::null_mut()), 0);
    lib.free(ptr::null_mut()); // nothing
}

#[test]
fn blocks_of_every_kind_are_freed_by_address() {
    let lib = Lib::get();
    // Span classes, page classes, large blocks (kept and not), over-aligned ones.
    let sizes = [
        1usize,
        24,
        100,
        4000,
        32 << 10,
        40 << 10,
        300 << 10,
        1 << 20,
        3 << 20,
        64 << 20,
    ];
    for round in 0..3 {
        let blocks: Vec<_> = sizes
            .iter()
            .map(|&size| {
                let block = lib.malloc(size);
                assert!(!block.is_null());
                // SAFETY: `size` bytes of ours.
                unsafe { ptr::write_bytes(block.cast::<u8>(), round as u8, size) };
                (block, size)
            })
            .collect();
        for &(block, size) in &blocks {
            // SAFETY: as above.
            let last = unsafe { block.cast::<u8>().add(size - 1).read() };
            assert_eq!(last, round as u8);
            lib.free(block);
        }
    }
}

#[test]
fn calloc_zeroes_reused_blocks_and_refuses_an_overflow() {
    let lib = Lib::get();
    for &size in &[8usize, 100, 5000, 50 << 10, 2 << 20] {
        let dirty = lib.malloc(size);
        // SAFETY: `size` bytes of ours.
        unsafe { ptr::write_bytes(dirty.cast::<u8>(), 0xff, size) };
        lib.free(dirty);
        let block = lib.calloc(size / 4, 4);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(block.cast::<u8>(), size) };
        assert!(bytes.iter().all(|&b| b == 0), "calloc of {size} bytes");
        lib.free(block);
    }
    set_errno(0);
    assert!(lib.calloc(usize::MAX / 2, 3).is_null(), "the product wraps");
    assert_eq!(errno(), libc::ENOMEM);
    set_errno(0);
    assert!(lib.calloc(1 << 33, 1 << 33).is_null());
    assert_eq!(errno(), libc::ENOMEM);
    let empty = lib.calloc(0, 100);
    assert!(!empty.is_null(), "a unique block, as glibc");
    lib.free(empty);
}

#[test]
fn realloc_keeps_contents_through_every_kind() {
    let lib = Lib::get();
    let mut block = lib.realloc(ptr::null_mut(), 1);
    assert!(!block.is_null(), "realloc(NULL, n) is malloc(n)");
    let mut size = 1;
    let grown: Vec<usize> = (0..=23)
        .map(|shift| (1usize << shift) + shift * 7)
        .collect();
    let steps = grown.iter().chain(grown.iter().rev().skip(1));
    for (step, &new) in steps.enumerate() {
        // SAFETY: `size` bytes of ours; each byte holds its index's low bits.
        unsafe {
            let bytes = std::slice::from_raw_parts_mut(block.cast::<u8>(), size);
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = (i as u8) ^ (step as u8);
            }
        }
        let moved = lib.realloc(block, new);
        assert!(!moved.is_null(), "realloc to {new}");
        // SAFETY: `min(size, new)` bytes kept.
        unsafe {
            let kept = std::slice::from_raw_parts(moved.cast::<u8>(), size.min(new));
            for (i, &byte) in kept.iter().enumerate() {
                assert_eq!(
                    byte,
                    (i as u8) ^ (step as u8),
                    "byte {i} from {size} to {new}"
                );
            }
        }
        block = moved;
        size = new;
    }
    set_errno(0);
    assert!(
        lib.realloc(block, 0).is_null(),
        "realloc(p, 0) frees, as glibc"
    );
}

#[test]
fn a_failed_realloc_keeps_the_block() {
    let lib = Lib::get();
    for &size in &[100usize, 64 << 10, 2 << 20] {
        let block = lib.malloc(size);
        // SAFETY: `size` bytes of ours.
        unsafe { ptr::write_bytes(block.cast::<u8>(), 0x5a, size) };
        for huge in [usize::MAX / 2, 1 << 46] {
            set_errno(0);
            assert!(lib.realloc(block, huge).is_null(), "realloc to {huge}");
            assert_eq!(errno(), libc::ENOMEM);
        }
        set_errno(0);
        assert!(lib.reallocarray(block, usize::MAX / 2, 3).is_null());
        assert_eq!(errno(), libc::ENOMEM);
        // SAFETY: the block is still ours and whole.
        let bytes = unsafe { std::slice::from_raw_parts(block.cast::<u8>(), size) };
        assert!(bytes.iter().all(|&b| b == 0x5a));
        let grown = lib.reallocarray(block, 2, size);
        assert!(!grown.is_null());
        lib.free(grown);
    }
    set_errno(0);
    assert!(lib.malloc(usize::MAX - 100).is_null());
    assert_eq!(errno(), libc::ENOMEM);
}

#[test]
fn aligned_allocations_honour_their_alignment() {
    let lib = Lib::get();
    for shift in 3..=23 {
        let align = 1usize << shift;
        for &size in &[1usize, align / 2 + 1, align, 3 * align + 5, 100_000] {
            let mut out = ptr::null_mut();
            assert_eq!(
                lib.posix_memalign(&mut out, align, size),
                0,
                "{align} {size}"
            );
            assert_eq!(out as usize % align, 0, "posix_memalign({align}, {size})");
            assert!(lib.malloc_usable_size(out) >= size);
            // SAFETY: `size` bytes of ours.
            unsafe { ptr::write_bytes(out.cast::<u8>(), 1, size) };
            let grown = lib.realloc(out, size * 2);
            assert!(!grown.is_null());
            lib.free(grown);
            let block = lib.aligned_alloc(align, size);
            assert_eq!(block as usize % align, 0, "aligned_alloc({align}, {size})");
            lib.free(block);
            let block = lib.memalign(align, size);
            assert_eq!(block as usize % align, 0, "memalign({align}, {size})");
            lib.free(block);
        }
    }
    let mut out = 7 as *mut c_void;
    for bad in [0usize, 3, 4, 24, usize::MAX] {
        assert_eq!(lib.posix_memalign(&mut out, bad, 10), libc::EINVAL, "{bad}");
        assert_eq!(out as usize, 7, "untouched on EINVAL");
    }
    assert_eq!(
        lib.posix_memalign(&mut out, 64, usize::MAX / 2),
        libc::ENOMEM
    );
    set_errno(0);
    assert!(lib.aligned_alloc(24, 10).is_null());
    assert_eq!(errno(), libc::EINVAL);
    let rounded = lib.memalign(24, 10);
    assert_eq!(
        rounded as usize % 32,
        0,
        "memalign rounds an alignment up, as glibc"
    );
    lib.free(rounded);
    set_errno(0);
    assert!(lib.memalign(usize::MAX, 10).is_null());
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn valloc_and_pvalloc_give_whole_pages() {
    let lib = Lib::get();
    // SAFETY: no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let block = lib.valloc(100);
    assert_eq!(block as usize % page, 0);
    lib.free(block);
    let block = lib.pvalloc(1);
    assert_eq!(block as usize % page, 0);
    assert!(lib.malloc_usable_size(block) >= page);
    lib.free(block);
    set_errno(0);
    assert!(lib.pvalloc(usize::MAX - 10).is_null());
    assert_eq!(errno(), libc::ENOMEM);
}

#[test]
fn threads_free_each_others_blocks() {
    let lib = Lib::get();
    let (send, receive) = std::sync::mpsc::sync_channel::<Vec<usize>>(4);
    let consumer = std::thread::spawn(move || {
        let mut n = 0;
        for batch in receive {
            for addr in batch {
                let block = addr as *mut c_void;
                // SAFETY: each block holds its own address in its first word.
                assert_eq!(unsafe { block.cast::<usize>().read() }, addr);
                Lib::get().free(block);
                n += 1;
            }
        }
        n
    });
    let producers: Vec<_> = (0..3)
        .map(|t| {
            let send = send.clone();
            std::thread::spawn(move || {
                let lib = Lib::get();
                for round in 0..200 {
                    let batch: Vec<usize> = (0..100)
                        .map(|i| {
                            let block = lib.malloc(8 + (i * 37 + round * 11 + t) % 3000);
                            // SAFETY: at least 8 bytes of ours.
                            unsafe { block.cast::<usize>().write(block as usize) };
                            block as usize
                        })
                        .collect();
                    send.send(batch).unwrap();
                }
            })
        })
        .collect();
    drop(send);
    for producer in producers {
        producer.join().unwrap();
    }
    assert_eq!(consumer.join().unwrap(), 3 * 200 * 100);
    let _ = lib;
}

/// The pointers `invalid_pointers_abort_with_a_report` passes, one per child process: the
/// child runs this test again with the case's name in `INVALID_CASE`.
const INVALID_CASES: [&str; 8] = [
    "stack",
    "glibc",
    "inside-small",
    "inside-page-class",
    "inside-large",
    "realloc-inside",
    "usable-size-stack",
    "made-up",
];

#[test]
fn invalid_pointers_abort_with_a_report() {
    if let Ok(case) = std::env::var("INVALID_CASE") {
        let lib = Lib::get();
        let local = 0u64;
        let small = lib.malloc(100);
        let page_class = lib.malloc(100 << 10);
        let large = lib.malloc(4 << 20);
        // SAFETY: glibc's malloc (the test's own heap), never freed.
        let glibc = unsafe { libc::malloc(100) };
        let at = |block: *mut c_void, offset: usize| block.cast::<u8>().wrapping_add(offset).cast();
        match case.as_str() {
            "stack" => lib.free(&local as *const u64 as *mut c_void),
            "glibc" => lib.free(glibc),
            "inside-small" => lib.free(at(small, 16)),
            "inside-page-class" => lib.free(at(page_class, 8 << 10)),
            "inside-large" => lib.free(at(large, 1 << 20)),
            "realloc-inside" => {
                lib.realloc(at(small, 8), 1000);
            }
            "usable-size-stack" => {
                lib.malloc_usable_size(&local as *const u64 as *mut c_void);
            }
            "made-up" => lib.free(0x7000_1234_5670 as *mut c_void),
            _ => unreachable!(),
        }
        // Reached only when the pointer was taken.
        std::process::exit(0);
    }
    for case in INVALID_CASES {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "invalid_pointers_abort_with_a_report",
                "--nocapture",
            ])
            .env("INVALID_CASE", case)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            output.status.signal(),
            Some(libc::SIGABRT),
            "{case}: {stderr}"
        );
        assert!(
            stderr.contains("magazine-malloc: ") && stderr.contains("(): invalid pointer 0x"),
            "{case}: {stderr}"
        );
    }
}
