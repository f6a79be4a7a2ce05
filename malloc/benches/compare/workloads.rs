//! Allocator comparison workloads, shared by the four `cmp_*` bench binaries. Each binary
//! only declares its `#[global_allocator]` (MagazineMalloc, mimalloc, jemalloc, glibc's
//! malloc through `std::alloc::System`) and calls [`main`], so every allocator runs the
//! same code.
//!
//! The workloads are Rust ports of the *patterns* of mimalloc-bench, written from their
//! descriptions (no code taken from there), plus one real-program shape:
//!
//! | workload | pattern | one operation |
//! |---|---|---|
//! | `xmalloc` | producers allocate small blocks, consumers free them (cross-thread frees) | a block allocated and freed |
//! | `larson` | server churn: threads replace random blocks in their slots, hand the slots to new threads | a block replaced |
//! | `cache-thrash` | active false sharing: each thread allocates a small object, writes it heavily, frees it | a one-byte write |
//! | `cache-scratch` | passive false sharing: as `cache-thrash`, but each thread first frees an object that the main thread allocated next to the others' | a one-byte write |
//! | `mstress` | mixed sizes (some large), realloc, transfers between threads, live sets that grow and shrink | an allocator call |
//! | `pair64` | one thread, a 64-byte alloc + free pair in a loop | a pair |
//! | `stringmap` | build a `HashMap<String, Vec<u8>>` of 10^6 entries, look keys up, move it into a `BTreeMap`, grow and remove entries, drop it | a map operation |
//!
//! After them come workloads that run real libraries' code (`serde-json`, `syn`, `regex`,
//! `channel`, `rayon-sort`, `bigvec`): see `compare/real.rs`.
//!
//! One process runs one workload: `<binary> <workload> [--threads N] [--scale S]
//! [--trim-interval SECS]` and prints one line, `RESULT key=value ...`:
//! the workload's wall time and operations per second, peak RSS (`VmHWM`), RSS after the
//! workload freed everything (`VmRSS`), and RSS once more after one trim interval. For
//! MagazineMalloc "one trim interval" is `trim()`, a sleep of the interval, `trim()` again
//! (its working-set rule counts trims, not time: what nobody used between the two trims
//! goes back); the other allocators only sleep the same interval. They purge on their own
//! schedules, inside their own allocator calls (jemalloc's dirty-page decay, 10 s by
//! default without a background thread; mimalloc's purge delay; glibc trims the top of a
//! heap at `free`), so an idle sleep gives them no chance to purge: their third figure
//! shows what they keep when the program goes quiet. The default interval is 1 s
//! (MagazineMalloc's advised `TRIM_INTERVAL` is 2 s; the length does not change what its
//! two trims give back).
//!
//! Scale 1 is sized so that each workload runs for about 1-3 s with glibc on a 2-core
//! machine; every RNG is a seeded xorshift, so the same workload allocates the same
//! sizes in the same order for every allocator.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::hint::black_box;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

#[path = "real.rs"]
mod real;

/// A workload: its name, how many threads it runs by default on a machine with `cores`
/// CPUs, and the function that runs it and returns how many operations it did.
struct Workload {
    name: &'static str,
    default_threads: fn(cores: usize) -> usize,
    run: fn(threads: usize, scale: f64) -> u64,
}

/// Patterns that want more threads than cores (contention, threads that wait) run twice
/// as many as the machine has; the false-sharing ones run one per core (they measure
/// cores writing to the same cache line); the single-threaded ones run one.
const WORKLOADS: &[Workload] = &[
    Workload {
        name: "xmalloc",
        default_threads: |c| 2 * c,
        run: xmalloc,
    },
    Workload {
        name: "larson",
        default_threads: |c| 2 * c,
        run: larson,
    },
    Workload {
        name: "cache-thrash",
        default_threads: |c| c,
        run: cache_thrash,
    },
    Workload {
        name: "cache-scratch",
        default_threads: |c| c,
        run: cache_scratch,
    },
    Workload {
        name: "mstress",
        default_threads: |c| 2 * c,
        run: mstress,
    },
    Workload {
        name: "pair64",
        default_threads: |_| 1,
        run: pair64,
    },
    Workload {
        name: "stringmap",
        default_threads: |_| 1,
        run: stringmap,
    },
];

const USAGE: &str = "usage: <binary> <workload> [--threads N] [--scale S] [--trim-interval SECS]
       <binary> --list
workloads: xmalloc larson cache-thrash cache-scratch mstress pair64 stringmap
           serde-json syn regex channel rayon-sort bigvec";

/// Runs the workload named on the command line and prints its `RESULT` line.
/// `allocator` names the global allocator in that line; `trim`, where the allocator has
/// one, is called before and after the trim interval's sleep.
pub fn main(allocator: &str, trim: Option<&dyn Fn()>) {
    // `cargo bench` passes `--bench`; test runners may pass nothing at all.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut workload = None;
    let mut threads = None;
    let mut scale = 1.0_f64;
    let mut interval = 1.0_f64;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| -> String {
            it.next()
                .cloned()
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--threads" => threads = Some(parse::<usize>(&value(arg), arg)),
            "--scale" => scale = parse::<f64>(&value(arg), arg),
            "--trim-interval" => interval = parse::<f64>(&value(arg), arg),
            "--list" => {
                for w in WORKLOADS.iter().chain(real::WORKLOADS) {
                    println!("{}", w.name);
                }
                return;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            name if workload.is_none() && !name.starts_with('-') => workload = Some(name),
            other => fail(&format!("unexpected argument {other:?}")),
        }
    }
    let Some(name) = workload else {
        // Nothing to run (e.g. built and started by `cargo test --benches`).
        eprintln!("{USAGE}");
        return;
    };
    let Some(w) = WORKLOADS
        .iter()
        .chain(real::WORKLOADS)
        .find(|w| w.name == name)
    else {
        fail(&format!("unknown workload {name:?}"));
    };
    let valid = scale > 0.0 && scale.is_finite() && interval >= 0.0 && interval.is_finite();
    if !valid {
        fail("--scale must be positive, --trim-interval not negative");
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.unwrap_or((w.default_threads)(cores)).max(1);

    let start = Instant::now();
    let ops = (w.run)(threads, scale);
    let seconds = start.elapsed().as_secs_f64();
    let peak = status_kb("VmHWM");
    let after = status_kb("VmRSS");
    let pause = Duration::from_secs_f64(interval);
    match trim {
        Some(trim) => {
            trim();
            thread::sleep(pause);
            trim();
        }
        None => thread::sleep(pause),
    }
    let trimmed = status_kb("VmRSS");
    println!(
        "RESULT workload={} allocator={allocator} threads={threads} scale={scale} \
         seconds={seconds:.6} ops={ops} ops_per_s={:.1} ns_per_op={:.3} peak_rss_kb={peak} \
         rss_after_kb={after} rss_trim_kb={trimmed} trim_interval_s={interval} trim={}",
        w.name,
        ops as f64 / seconds,
        // The time one thread spends on one operation: for pair64 (one thread) the time
        // of one pair.
        seconds * 1e9 * threads as f64 / ops as f64,
        if trim.is_some() {
            "trim-sleep-trim"
        } else {
            "sleep"
        },
    );
}

fn fail(message: &str) -> ! {
    eprintln!("{message}\n{USAGE}");
    std::process::exit(2)
}

fn parse<T: std::str::FromStr>(value: &str, flag: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| fail(&format!("{flag}: cannot parse {value:?}")))
}

/// A field of `/proc/self/status` in kB (`VmHWM`: peak resident set; `VmRSS`: now), 0
/// where there is no such file.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `base * scale`, at least 1.
fn scaled(base: u64, scale: f64) -> u64 {
    ((base as f64 * scale).round() as u64).max(1)
}

/// xorshift64*: small, fast, and seeded, so every allocator sees the same sizes.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Spread small seeds over the state; the state must not be 0.
        Rng(splitmix(seed) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform index into a slice of `len > 0` items.
    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }
}

/// splitmix64's finalizer: a seed or counter to a well-mixed word.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const PAGE: usize = 4096;

/// A heap block that knows its size (kept in its first word, as a C program's header
/// would be), so that any thread can free it: dropping it frees it. Sizes are at least a
/// word; the block is written where it starts, where it ends and once in every page, so
/// its pages are resident and count in RSS as a program's would.
struct Block(NonNull<u8>);

// SAFETY: a `Block` owns its allocation alone (no aliasing pointer is kept); the global
// allocators compared here all accept frees from any thread.
unsafe impl Send for Block {}

const WORD: usize = std::mem::size_of::<usize>();

impl Block {
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, WORD).expect("block size")
    }

    fn new(size: usize) -> Block {
        let size = size.max(WORD);
        let layout = Self::layout(size);
        // SAFETY: the layout has a nonzero size.
        let p = unsafe { alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `p` is a fresh allocation of `size` bytes.
        unsafe { Self::touch(p, size) };
        Block(p)
    }

    /// Writes the size header, the last byte (past the header) and one byte in every
    /// page.
    ///
    /// # Safety
    /// `p` must point to at least `size >= WORD` writable bytes, aligned for a word.
    unsafe fn touch(p: NonNull<u8>, size: usize) {
        let p = p.as_ptr();
        // SAFETY: the caller's contract: `size` bytes, word-aligned, `size >= WORD`.
        unsafe {
            p.cast::<usize>().write(size);
            let mut at = PAGE;
            while at < size {
                p.add(at).write(at as u8);
                at += PAGE;
            }
            if size > WORD {
                p.add(size - 1).write(size as u8);
            }
        }
    }

    fn size(&self) -> usize {
        // SAFETY: the first word of a live block holds its size (written by `touch`).
        unsafe { self.0.as_ptr().cast::<usize>().read() }
    }

    /// Reallocates to `new_size` bytes (contents kept up to the smaller size).
    fn resize(&mut self, new_size: usize) {
        let new_size = new_size.max(WORD);
        let old = Self::layout(self.size());
        // SAFETY: the block was allocated with `old` by the global allocator; the new
        // size is nonzero and fits a layout (checked by `layout` below).
        let p = unsafe { realloc(self.0.as_ptr(), old, new_size) };
        let Some(p) = NonNull::new(p) else {
            handle_alloc_error(Self::layout(new_size))
        };
        // SAFETY: `p` is now an allocation of `new_size` bytes, word-aligned.
        unsafe { Self::touch(p, new_size) };
        self.0 = p;
    }

    fn into_raw(self) -> *mut u8 {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// # Safety
    /// `p` must come from [`Block::into_raw`] and not be owned by another `Block`.
    unsafe fn from_raw(p: *mut u8) -> Block {
        // SAFETY: `into_raw` gave out a non-null pointer.
        Block(unsafe { NonNull::new_unchecked(p) })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let layout = Self::layout(self.size());
        // SAFETY: the block was allocated with this layout (its size is in its header).
        unsafe { dealloc(self.0.as_ptr(), layout) };
    }
}

// ---------------------------------------------------------------------------------------
// xmalloc: producers allocate, consumers free.

/// Blocks allocated (and freed) over all producers at scale 1.
const XMALLOC_BLOCKS: u64 = 16_000_000;
/// Blocks handed over at once: a producer fills a batch, sends it to a consumer.
const XMALLOC_BATCH: usize = 128;
/// Batches that may wait for one consumer before its producers block.
const XMALLOC_QUEUE: usize = 8;

/// Models xmalloc-test: half of the threads (producers) allocate blocks of random small
/// sizes (8-512 bytes) and hand them in batches to the other half (consumers), which free
/// them. Every free is of a block another thread allocated, so the allocator's cross-thread
/// free path and the return of memory to the producers' caches are what is measured.
fn xmalloc(threads: usize, scale: f64) -> u64 {
    let producers = (threads / 2).max(1);
    let consumers = threads.saturating_sub(producers).max(1);
    let batches = scaled(XMALLOC_BLOCKS, scale).div_ceil((producers * XMALLOC_BATCH) as u64);
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..consumers)
        .map(|_| mpsc::sync_channel::<Vec<Block>>(XMALLOC_QUEUE))
        .unzip();
    thread::scope(|s| {
        for receiver in receivers {
            // Dropping a batch frees its blocks and its vector, all allocated elsewhere.
            s.spawn(move || receiver.into_iter().for_each(drop));
        }
        for p in 0..producers {
            let senders = senders.clone();
            s.spawn(move || {
                let mut rng = Rng::new(0x1000 + p as u64);
                for b in 0..batches {
                    let batch: Vec<Block> = (0..XMALLOC_BATCH)
                        .map(|_| Block::new(rng.range(8, 512)))
                        .collect();
                    let to = (b as usize + p) % senders.len();
                    senders[to].send(batch).expect("consumer alive");
                }
            });
        }
        drop(senders);
    });
    batches * (producers * XMALLOC_BATCH) as u64
}

// ---------------------------------------------------------------------------------------
// larson: server churn with hand-offs.

/// Block replacements over all threads at scale 1.
const LARSON_REPLACEMENTS: u64 = 80_000_000;
/// Blocks each thread owns.
const LARSON_SLOTS: usize = 1000;
/// Replacements a thread does before handing its slots to a new thread.
const LARSON_GENERATION: u64 = 20_000;

/// Models Larson's server benchmark: each thread owns an array of blocks of random sizes
/// (8-1000 bytes) and replaces random ones (free the old block, allocate a new one of a new
/// random size), like a server's per-connection objects churning. After every generation of
/// replacements the thread hands its array to a newly started thread and exits, so the new
/// thread frees blocks that the old one allocated, and thread caches come and go.
fn larson(threads: usize, scale: f64) -> u64 {
    let per_thread = scaled(LARSON_REPLACEMENTS, scale).div_ceil(threads as u64);
    let generations = per_thread.div_ceil(LARSON_GENERATION);
    thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = Rng::new(0x2000 + t as u64);
                let mut slots: Vec<Block> = (0..LARSON_SLOTS)
                    .map(|_| Block::new(rng.range(8, 1000)))
                    .collect();
                for _ in 0..generations {
                    let next = thread::spawn(move || {
                        for _ in 0..LARSON_GENERATION {
                            let i = rng.index(slots.len());
                            slots[i] = Block::new(rng.range(8, 1000));
                        }
                        (slots, rng)
                    });
                    (slots, rng) = next.join().expect("larson thread");
                }
            });
        }
    });
    threads as u64 * (LARSON_SLOTS as u64 + generations * LARSON_GENERATION)
}

// ---------------------------------------------------------------------------------------
// cache-thrash and cache-scratch: false sharing.

/// Allocate-write-free cycles per thread at scale 1.
const CACHE_ITERATIONS: u64 = 5000;
/// One-byte writes to each object (a read-modify-write each) before it is freed.
const CACHE_WRITES: u64 = 100_000;
/// Object size: small, so that objects of different threads can share a cache line.
const CACHE_OBJECT: usize = 8;

/// Models cache-thrash (active false sharing): each thread repeatedly allocates a small
/// object, writes it many times and frees it. An allocator that hands threads objects in
/// the same cache line makes the cores fight over the line; one that keeps threads apart
/// runs at the speed of the writes.
fn cache_thrash(threads: usize, scale: f64) -> u64 {
    cache_false_sharing(threads, scale, false)
}

/// Models cache-scratch (passive false sharing): the main thread allocates one small
/// object per thread, back to back, and hands one to each thread, which frees it first and
/// then runs cache-thrash's loop. An allocator whose thread caches reuse the freed object
/// keeps the threads writing into the main thread's cache line.
fn cache_scratch(threads: usize, scale: f64) -> u64 {
    cache_false_sharing(threads, scale, true)
}

fn cache_false_sharing(threads: usize, scale: f64, passive: bool) -> u64 {
    let iterations = scaled(CACHE_ITERATIONS, scale);
    let handed: Vec<Option<Box<[u8; CACHE_OBJECT]>>> = (0..threads)
        .map(|_| passive.then(|| Box::new([0u8; CACHE_OBJECT])))
        .collect();
    thread::scope(|s| {
        for first in handed {
            s.spawn(move || {
                drop(first);
                for _ in 0..iterations {
                    let object = Box::new([0u8; CACHE_OBJECT]);
                    let p = Box::into_raw(object).cast::<u8>();
                    for _ in 0..CACHE_WRITES {
                        // SAFETY: `p` is the first byte of the live, owned object.
                        unsafe { p.write_volatile(p.read_volatile().wrapping_add(1)) };
                    }
                    // SAFETY: `p` came from `Box::into_raw` of this type just above.
                    drop(unsafe { Box::from_raw(p.cast::<[u8; CACHE_OBJECT]>()) });
                }
            });
        }
    });
    threads as u64 * iterations * CACHE_WRITES
}

// ---------------------------------------------------------------------------------------
// mstress: mixed sizes, realloc, transfers.

/// Steps (each one allocator call) over all threads and rounds at scale 1.
const MSTRESS_STEPS: u64 = 30_000_000;
/// Rounds: each round starts fresh threads; the transfer slots live across rounds.
const MSTRESS_ROUNDS: u64 = 10;
/// Shared slots through which threads swap blocks.
const MSTRESS_TRANSFERS: usize = 1000;

/// A size for mstress: mostly small (8 bytes to 32-1024), 1 in 100 medium (4-64 KiB),
/// 1 in 1000 large (128 KiB-1 MiB, past glibc's initial mmap threshold).
fn mstress_size(rng: &mut Rng) -> usize {
    match rng.below(1000) {
        0 => rng.range(128 << 10, 1 << 20),
        1..=10 => rng.range(4 << 10, 64 << 10),
        _ => {
            let max = 32 << rng.below(6);
            rng.range(8, max)
        }
    }
}

/// Models mimalloc's stress test: threads keep a live set of blocks of mixed sizes, some
/// large; each step allocates a block, frees a random one, reallocates a random one to a
/// new size, or swaps one with a shared transfer slot (so blocks are freed, or
/// reallocated, by threads that did not allocate them, possibly rounds later). Each thread
/// aims at a live-set size drawn per round (100-5000 blocks), so memory grows and shrinks.
/// Threads end with every round and new ones start; what is left in the transfer slots is
/// freed at the end.
fn mstress(threads: usize, scale: f64) -> u64 {
    let steps = scaled(MSTRESS_STEPS, scale).div_ceil(threads as u64 * MSTRESS_ROUNDS);
    let transfer: Vec<AtomicPtr<u8>> = (0..MSTRESS_TRANSFERS)
        .map(|_| AtomicPtr::new(ptr::null_mut()))
        .collect();
    let transfer = &transfer;
    for round in 0..MSTRESS_ROUNDS {
        thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let mut rng = Rng::new(0x3000 + round * 64 + t as u64);
                    let target = rng.range(100, 5000);
                    let mut live: Vec<Block> = Vec::new();
                    for _ in 0..steps {
                        let choice = rng.below(100);
                        if live.is_empty() || (choice >= 20 && live.len() < target) {
                            live.push(Block::new(mstress_size(&mut rng)));
                        } else if choice < 10 {
                            let i = rng.index(live.len());
                            live[i].resize(mstress_size(&mut rng));
                        } else if choice < 20 {
                            let i = rng.index(live.len());
                            let j = rng.index(transfer.len());
                            let out = live.swap_remove(i).into_raw();
                            let got = transfer[j].swap(out, Ordering::AcqRel);
                            if !got.is_null() {
                                // SAFETY: the slot owned `got` (from `into_raw`); the swap
                                // took it out, so this thread owns it alone now.
                                live.push(unsafe { Block::from_raw(got) });
                            }
                        } else {
                            let i = rng.index(live.len());
                            drop(live.swap_remove(i));
                        }
                    }
                });
            }
        });
    }
    for slot in transfer {
        let p = slot.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: as in the swap above: the slot owned `p`.
            drop(unsafe { Block::from_raw(p) });
        }
    }
    steps * threads as u64 * MSTRESS_ROUNDS
}

// ---------------------------------------------------------------------------------------
// pair64: the fast path.

/// Alloc + free pairs per thread at scale 1.
const PAIR64_PAIRS: u64 = 150_000_000;

/// One thread (by default) allocates 64 bytes and frees them, in a loop: the allocator's
/// fast path, hot in cache; `ns_per_op` is the time of one pair. With `--threads N` each of
/// N threads runs the loop.
fn pair64(threads: usize, scale: f64) -> u64 {
    let pairs = scaled(PAIR64_PAIRS, scale);
    let layout = Layout::from_size_align(64, 8).expect("layout");
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                for _ in 0..pairs {
                    // SAFETY: the layout has a nonzero size; the block is freed with it.
                    unsafe {
                        let p = alloc(layout);
                        if p.is_null() {
                            handle_alloc_error(layout);
                        }
                        dealloc(black_box(p), layout);
                    }
                }
            });
        }
    });
    pairs * threads as u64
}

// ---------------------------------------------------------------------------------------
// stringmap: a real program's shape.

/// Entries per map (per thread) at scale 1.
const STRINGMAP_ENTRIES: u64 = 1_000_000;

type Hasher = BuildHasherDefault<DefaultHasher>;

/// A program that loads a table keyed by strings: builds a `HashMap<String, Vec<u8>>` of
/// 10^6 entries (a formatted key and a 0-63-byte value each), looks every key up once
/// and as many absent keys (each key formatted anew, as a parser would), moves the
/// entries into a `BTreeMap`, appends to every other value (a realloc), removes a third
/// of the entries, and drops the rest. Many small allocations of mixed sizes with long and
/// short lifetimes, on one thread by default (`--threads N`: N threads, a map each).
fn stringmap(threads: usize, scale: f64) -> u64 {
    let entries = scaled(STRINGMAP_ENTRIES, scale);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || stringmap_cycle(entries, 0x4000 + t as u64)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("stringmap thread"))
            .sum()
    })
}

fn stringmap_cycle(n: u64, seed: u64) -> u64 {
    let key = |i: u64| format!("key-{:016x}", splitmix(seed ^ (i << 8)));
    let mut rng = Rng::new(seed);
    let mut ops = 0;

    let mut map: HashMap<String, Vec<u8>, Hasher> = HashMap::default();
    for i in 0..n {
        map.insert(key(i), vec![i as u8; rng.index(64)]);
    }
    ops += n;

    let mut found = 0u64;
    for i in 0..n {
        found += u64::from(map.contains_key(&key(i)));
        found += u64::from(map.contains_key(&key(n + i)));
    }
    assert_eq!(
        black_box(found),
        n,
        "every present key found, no absent one"
    );
    ops += 2 * n;

    let mut tree: BTreeMap<String, Vec<u8>> = map.into_iter().collect();
    ops += n;

    for (i, value) in tree.values_mut().enumerate() {
        if i % 2 == 0 {
            value.extend_from_slice(b"-appended-");
        }
    }
    ops += n.div_ceil(2);

    let mut i = 0u64;
    tree.retain(|_, _| {
        i += 1;
        i % 3 != 0
    });
    ops += n;

    black_box(tree.len());
    drop(tree);
    ops
}
