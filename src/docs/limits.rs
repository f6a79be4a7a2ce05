//! Known limits: what the cache does not do, where it costs more than it seems, and what
//! its checks do not cover. The README lists them in one line each; here they are with
//! their figures. Benchmark figures are from `BENCHMARKS.md` (medians of three runs on a
//! 2-vCPU guest, with the date and commit they were measured at); they move with the
//! machine, ratios between rows of one run less so.
//!
//! # Without restartable sequences, a per-CPU pair costs two locked instructions
//!
//! Where the sequences do not run (other architectures and operating systems, kernels
//! without rseq, valgrind, Miri, ThreadSanitizer builds, or
//! [`Options::restartable_sequences`] turned off) each per-CPU operation takes its slot
//! with a compare-and-swap and looks up the CPU: an `alloc` + `free` pair cost 11.8 ns on
//! the benchmark host at `0963c47` (2026-12-05), 0.99x a crossbeam `ArrayQueue` pair. A
//! [`LocalCache`] hit costs no atomic: 1.0 ns a pair there, 1.27x an owned `Vec`.
//!
//! # The restartable-sequence fast path, and where its cost went
//!
//! On by default on Linux x86_64 with glibc 2.35+ and kernel 5.10+: a pair cost 2.25 ns at
//! `0963c47` (0.19x an `ArrayQueue` pair, 2.9x an owned `Vec`), and 8 threads doing pairs
//! on 2 cores ran 19.9x the slot protocol's throughput with no busy miss (2026-12-05,
//! `775519c`). It runs only when the cache has a slot for every configured CPU
//! ([`Config::cpus`] defaults to the available parallelism, which CPU affinity or a cgroup
//! limit can make smaller: the sequences are then off) and no [`Options::current_cpu`] is
//! set; [`Cache::runs_restartable_sequences`] tells. A configured count below the highest
//! CPU id + 1 costs fences, not soundness, and a `membarrier` that fails (a seccomp
//! filter) degrades the takes of other CPUs' slots ([`docs::failures`](super::failures)).
//!
//! Its cost is elsewhere: a thread on another CPU takes a slot by claiming it; the slot's
//! own CPU acknowledges the claim at its next operation, and only a claim that no
//! operation there acknowledges within 2 us costs a `membarrier` system call that
//! interrupts that CPU (9 us on the 2-core guest; [`Stats::fenced_takes`] counts them). A
//! 1 -> 1 hand-off, whose consumer polls the producer's slot whenever it runs dry, ran at
//! 3.63x an `ArrayQueue` with it and 1.34x without (medians of three, 2026-12-05,
//! `775519c`); when the bench's two threads are scheduled so that every contender runs
//! about four times slower, single runs' ratios scatter (`BENCHMARKS.md`).
//!
//! Slots start *plain*, and only `alloc`/`free` on a CPU activate that CPU's slot; plain
//! slots are taken with a compare-and-swap from any thread, so a simulator that drives the
//! slots from one thread with `alloc_on`/`free_on` pays no fence. A program that both runs
//! `alloc`/`free` on a CPU and takes that slot from elsewhere all the time (`alloc_on` for
//! other CPUs, frequent `flush`/`cached`) should turn the option off. A thread that holds
//! its slot through a miss still makes the other threads of its CPU miss. The protocol is
//! in [`docs::design`](crate::docs::design), "Restartable sequences".
//!
//! # A preempted slot holder makes its slot busy
//!
//! Without the sequences, a thread preempted while it holds a CPU slot makes that slot
//! busy until it runs again. Operations that find every slot busy are served by partly
//! filled depot magazines (the *loose path*: a pop and a push on a lock-free stack, about
//! two compare-and-swaps more than a hit), never by the source; at most
//! `max(target, cpus)` such magazines stay in the partial stack, the rest join the full
//! stack, and trim releases those unused for a whole interval. With many more runnable
//! threads than CPUs, [`LocalCache`] is still the cheaper front end.
//!
//! # An exhausted source makes allocations flush, and may make them wait
//!
//! When the source is exhausted, `alloc` takes a depot magazine, else flushes, one flush
//! at a time, until it finds a slot or depot magazine that holds items, and keeps those
//! (counted in [`Stats::steals`]); only when nothing is cached in any free slot or the
//! depot does it ask the source once more. A thread whose exhausted allocation finds
//! another thread's flush running waits for that flush (it steals what is cached
//! meanwhile): the one wait on an allocation path, and only on an exhausted source
//! ([the exhaustion rule](crate::docs::design#the-exhaustion-rule)).
//!
//! # Leak checkers cannot see a depot that is never dropped
//!
//! The depot's stack head packs its top node's address with a tag (below), so no word in
//! memory points at that node. A cache that is never dropped (a `static`, a leaked `Box`)
//! and holds depot magazines at exit is therefore reported by LeakSanitizer as a leak of
//! its top node and, indirectly, the nodes below it; valgrind calls them "definitely
//! lost". The memory is still owned by the live cache (flushing does not help: the depot
//! keeps empty magazines for reuse). Drop the cache before exit when the report must be
//! clean, or suppress it (LeakSanitizer: `leak:magazine::stack`). A cache that is
//! dropped frees every node, which the crate's AddressSanitizer and valgrind runs check.
//!
//! # Trim reaches slots only when they are idle
//!
//! `trim` shrinks the depot; it takes a CPU slot's magazines only when the slot saw no
//! operation for a whole interval ([`Options::reclaim_idle_slots`], on by default for
//! `WorkingSet`); `flush_cpu` returns a slot's items.
//!
//! # The depot stack's tag, and the platforms without one
//!
//! Each magazine is its own depot stack node, behind a head tagged with a 22-bit counter
//! (x86_64 and aarch64; 38 bits on 32-bit targets): a pop's compare-and-swap could win
//! with a stale pointer only if 2^22 pushes and pops on one stack happen inside its
//! few-instruction window. Other targets (no 64-bit atomics, other 64-bit architectures,
//! Android on aarch64) fall back to a fresh node per push, freed through the epoch. A
//! node whose address does not fit the head word is never packed wrong (the
//! `src/stack.rs` module docs, "Platforms", say what happens to its magazine).
//!
//! # CPU shelves help CPUs that both spill and refill
//!
//! The depot's exchange scales through its CPU shelves ([`Options::cpu_shelves`], on for
//! `Dynamic`): two threads exchanging magazines moved 1.98x the items of one (medians
//! of three, 2026-12-05, `4029527`). Only a CPU that both spills and refills gains; a hand-off from producer
//! CPUs to consumer CPUs still meets on the shared stacks. A `Fixed` depot has no shelves
//! (its cap stays hard). Shelves add at most one full and one empty magazine per slot; a
//! trim takes those of a shelf unused for a whole interval, so once the load stops the
//! depot reaches its target one trim later than without shelves.
//! [`Stats::depot_peak`] may miss shelved magazines between two `stats()` calls.
//!
//! # The I/O loop is bound by its ring
//!
//! In a closed-pool I/O loop (submitters allocate, completers free, `benches/io_loop.rs`)
//! the default per-CPU path and [`LocalCache`] add 0-1 ns per item to what the ring costs
//! alone, against 6.4-6.7 ns for an `ArrayQueue` pool, and send at most 0.0074% of
//! operations to the source. The loop's items per second are the ring's: through a shared
//! `ArrayQueue` ring every pool runs at 0.97-1.35x the `ArrayQueue` pool; through a
//! single-producer single-consumer ring per submitter (a device's queue pairs) the
//! default per-CPU path ran at 2.0-3.6x and `LocalCache` at 1.8-3.4x, the ring alone at
//! 1.7-3.4x (medians of three, two sets, 2026-12-05, `8762ef7`). The slot protocol stays
//! near 1x: one locked compare-and-swap per operation, as the `ArrayQueue` pool.
//!
//! # The cache trusts its callers
//!
//! It cannot detect a double free or a foreign item, and an
//! [`alloc_cached_where`](crate::Cache::alloc_cached_where) closure that calls `cached()`,
//! `flush()` or `flush_cpu()` on the same cache waits for itself forever (it runs while
//! its thread holds a slot): see [`docs::obligations`](crate::docs::obligations).
//!
//! # 32-bit depots count to 65535
//!
//! On 32-bit targets a depot stack counts at most 65535 magazines; a `Dynamic` depot stops
//! growing 256 short of that (the rest is kept for rescues while a panicking source
//! unwinds) and returns further full magazines to the source.
//!
//! # The checks are bounded
//!
//! Model checking is bounded: loom up to its preemption bound and tiny configurations,
//! shuttle by sampling, SPIN for the stated process, magazine and operation counts; Miri
//! and the sanitizers see only the executions that ran. What each check covers, and what
//! it cannot, is in `.ci/README.md`.
//!
//! [`Options::restartable_sequences`]: crate::Options::restartable_sequences
//! [`Options::current_cpu`]: crate::Options::current_cpu
//! [`Options::reclaim_idle_slots`]: crate::Options::reclaim_idle_slots
//! [`Options::cpu_shelves`]: crate::Options::cpu_shelves
//! [`Config::cpus`]: crate::Config::cpus
//! [`Cache::runs_restartable_sequences`]: crate::Cache::runs_restartable_sequences
//! [`LocalCache`]: crate::LocalCache
//! [`Stats::fenced_takes`]: crate::Stats::fenced_takes
//! [`Stats::steals`]: crate::Stats::steals
//! [`Stats::depot_peak`]: crate::Stats::depot_peak
