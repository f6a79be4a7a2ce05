//! What the cache guarantees when something fails: a source that panics, a system call
//! that fails, configuration values at their edges, re-entry from the source, and
//! signals. Each promise here is what the code does now, with the test that holds it.
//!
//! # A source that panics
//!
//! The source runs only with no CPU slot held and no flush flag set, so a panic in it
//! leaves no slot taken and no thread waiting. What the cache held at that moment, path
//! by path:
//!
//! | call site | held while the source runs | on unwind |
//! |---|---|---|
//! | `alloc` miss, exhausted allocation's last ask (`Source::alloc_batch`, or `Source::alloc` with a batch of 1) | a magazine out of every slot and stack, holding what the source has handed so far | the magazine, with those items, goes to the depot past the cap; the items the source had not handed are its own |
//! | `free` into two full magazines of a `Fixed` depot at its cap, or with every slot busy (`free_batch` of the refused magazine) | the refused magazine, the freed item in it | the magazine, with the items the source did not take, goes to the depot past the cap |
//! | `alloc` with every slot busy, an exhausted allocation's look at the depot (`free_batch` of a magazine a `Fixed` depot refused after one item was taken out of it) | that item and the magazine | the item goes to the depot in a magazine of its own, the magazine as above |
//! | the exhaustion flush, when a `Fixed` depot refuses what it found (`free_batch` after the flush's flag is cleared) | the allocation's item and up to two magazines | as above, for each |
//! | `trim`, `flush`, `flush_cpu`, `try_flush`, idle-slot reclaim, a `LocalCache`'s drop (`free_batch`) | every magazine the step took out | each, with what the source did not take, goes to the depot past the cap |
//! | the cache's drop (`free_batch`) | the cache itself | the remaining items are dropped with the cache (their `Drop` runs once each); no other item is read |
//!
//! The last row is the one limit: a panic while the cache is being dropped cannot put
//! items back anywhere. The slots' magazines still drop exactly the items they hold:
//! each slot folds the hit counts that restartable sequences keep in its loaded
//! magazine's length word before its magazines drop, whatever unwinds.
//!
//! `tests/unwinding.rs` holds this table: a source that panics once, at its Nth call point
//! (an `alloc`, the entry of a `free_batch`, or any item a `free_batch` takes), N swept over
//! every point of a script that passes through each call site, under the slot protocol
//! and with sequences, with one slot and with several; after each run every id is back in
//! the source or, for a panic in the drop alone, was dropped. A second test panics on
//! every third `free_batch` while four threads contend for one slot, which reaches the
//! refusals that need a racing push.
//!
//! # System calls that fail
//!
//! - **`membarrier` fails after it was registered** (a seccomp filter that denies it):
//!   a take of another CPU's active slot runs on that CPU for a moment instead
//!   (`sched_setaffinity`, then the thread's mask is restored), which proves what the
//!   fence proves; when that fails too, the take gives its claim back and gets the slot's
//!   `previous` magazine only (see [`design`](super::design#restartable-sequences)):
//!   `flush_cpu`, `flush` and `cached` return, with that slot's loaded magazine left
//!   cached, and never panic with the slot claimed (`tests/fences.rs`).
//! - **`membarrier` is not available at all** (an old kernel, or the registration fails):
//!   the cache runs the slot protocol.
//! - **No rseq area** (glibc before 2.35, `GLIBC_TUNABLES=glibc.pthread.rseq=0`, a
//!   program that registers its own, valgrind): the slot protocol, and the CPU id from
//!   `sched_getcpu`; when that fails, a per-thread index. CI runs the whole test command
//!   without glibc's areas.
//! - **`sysconf(_SC_NPROCESSORS_CONF)` fails**: no sequences.
//! - **Memory allocation fails.** Every allocation the cache makes for itself is
//!   fallible, and a failure degrades, never panics or aborts:
//!   - building: [`Cache::try_with_config`](crate::Cache::try_with_config),
//!     [`try_with_options`](crate::Cache::try_with_options) and
//!     [`Cache::try_local`](crate::Cache::try_local) return the error (the slots, their
//!     magazines, the depot's shelves; what was built is freed). `new`, `with_config`,
//!     `with_options` and `local` abort then, as a `Vec` does;
//!   - a miss that finds no empty magazine to fill from the source asks the source for one
//!     item; a free into full magazines with no empty one to swap in, or with every slot
//!     busy and no magazine in the depot, gives its item to the source (`free_batch` of
//!     one); a magazine whose depot node cannot be allocated is refused like a `Fixed`
//!     overflow (its items go to the source); a flush or trim that cannot replace a
//!     slot's magazine leaves it, with its items, in the slot;
//!   - with a panicking source at the same time, an item that an allocation held while a
//!     refused magazine went to the source, and that finds no magazine to go into, is
//!     leaked, never handed out twice.
//!
//!   crossbeam-epoch's own allocations (a thread's participant record at its first pin,
//!   the garbage bags it moves to the global queue) are infallible: an allocator built on
//!   the cache serves them from memory it reserves ([`obligations`](super::obligations#inside-a-global-allocator)).
//!   `tests/out_of_memory.rs` runs every path under a global allocator that refuses the
//!   cache's allocations and checks that no item is lost or handed out twice (mutant
//!   `infallible_magazine`: the process aborts); `malloc/tests/out_of_memory.rs` runs
//!   `magazine-malloc` out of address space under `RLIMIT_AS`.

//!
//! # Configuration at its edges
//!
//! - `magazine_size` or `cpus` of 0: [`Cache::with_options`](crate::Cache::with_options)
//!   panics before it builds anything.
//! - `cpus` larger than the machine: the slots beyond its CPUs are used by the `_on`
//!   calls and by the modulo of larger ids; no sequence ever runs on them, so they stay
//!   plain and cost no fence.
//! - `cpus` smaller than the CPUs the system may bring up (the default under an affinity
//!   mask or a cgroup limit): no sequences; the slot protocol maps CPU ids onto the slots
//!   modulo `cpus`. `tests` run once under `taskset -c 0` in CI.
//! - A CPU count below the highest CPU id + 1 (sparse or offline ids, a masked
//!   `/sys/devices/system/cpu`): every slot of a cache that runs sequences is fenced, so
//!   this costs fences, never soundness (`tests/cpu_count_gap.rs`, and the CI run of the
//!   test command with `MAGAZINE_CPUS_CONF=1`, the crate's seam that lowers the count it
//!   reads; read once, at the first creation of a cache that may run the sequences, so
//!   set it in the process's environment, before any thread starts).
//! - Magazines of `2^31` items or more: no sequences (the length shares its word with the
//!   hit counts, and a pop tells an empty magazine by the borrow into the length's top bit).
//! - 32-bit targets: a depot stack counts at most 65535 magazines (see
//!   [`obligations`](super::obligations#depot-length-on-32-bit-targets)); x32
//!   (`x86_64-unknown-linux-gnux32`) runs no sequences, whose offsets assume 8-byte words.
//! - A depot node whose address does not fit the stack's 48-bit head word (a 5-level
//!   paging mapping asked for by a hint, a tagging allocator): its push is refused like
//!   a `Fixed` overflow (the items go to the source), never packed wrong and never a
//!   panic, which could strike while a rescue unwinds.
//! - Items of 8 bytes with padding (`(u32, u16)`): the sequences copy their bytes with
//!   the machine's own loads and stores, never as a Rust integer, so padding is never
//!   read as a value.
//!
//! # Re-entry from the source
//!
//! A source may call into its own cache from `alloc` or `free_batch` (a `Weak` back to an
//! `Arc<Cache>`, say): no slot and no flush flag is held while it runs, so it waits for
//! nobody, and what it allocates or frees is counted like any other operation
//! (`tests/regressions.rs`, `a_source_may_allocate_from_its_own_cache`). It must not
//! call into a cache that is being dropped (a `Weak` no longer upgrades then). The
//! callbacks that do run with a slot held are the `accept` closures of
//! [`Cache::alloc_cached_where`](crate::Cache::alloc_cached_where): see
//! [`obligations`](super::obligations#callbacks-must-not-re-enter-the-cache).
//!
//! # Signals
//!
//! No function of the crate is async-signal-safe: an operation that misses may allocate
//! (a magazine, crossbeam-epoch's per-thread record), call the source (which takes its
//! own locks), or wait (`flush`, `cached`), and whether an operation will miss cannot be
//! known beforehand. So a signal handler must not call into the cache. A signal that
//! interrupts a thread inside the cache is harmless: a restartable sequence in flight is
//! aborted and restarts after the handler (`tests/rseq.rs` sends signals throughout its
//! stress), and a slot the thread holds stays a busy miss for the others until the
//! handler returns.
