//! The design: why the crate exists, its vocabulary, the invariants it keeps, and the
//! workload it was built for.
//!
//! Every type that upholds an invariant names it with a link to the heading below; the
//! loom and shuttle scenarios (`loom-tests/`) and the SPIN models (`proofs/`) that check
//! it name it the same way, so a reader can walk invariant -> code -> checker -> proof in
//! both directions.
//!
//! # The problem
//!
//! A magazine cache keeps recently freed objects in small per-CPU arrays (*magazines*) so
//! that most allocations and frees never touch the slow, locked allocator behind it.
//! Whole magazines move between the CPUs and a global *depot*. The Linux IOVA allocator
//! (`drivers/iommu/iova.c`) has had such a cache, the "rcache", since 4.x, and it shows
//! what goes wrong when the depot is sized badly.
//!
//! On a 256-CPU server running 4 KiB fio reads, sixteen threaded interrupt handlers, on
//! CPUs 0, 16, ..., 240, freed the I/O addresses that all 256 CPUs allocated. Until Linux
//! 6.6 the depot was a fixed array of 32 magazines of 127 page frames. The freeing CPUs
//! filled it and then returned every further magazine to the locked range tree; the
//! allocating CPUs found it empty and took the same lock one range at a time. Throughput
//! collapsed to 300-400K IOPS; with a depot that scales, the same machine did more than
//! 1.9M IOPS (openEuler 5.10), and mainline went from 1.6M to 1.98M.
//!
//! Linux 6.7 replaced the array by an unbounded list under a spinlock, shrunk by a delayed
//! work item that frees *one* magazine every 100 ms while the depot holds more magazines
//! than there are online CPUs. Bonwick and Adams' original magazine layer (USENIX 2001)
//! shrinks by *working set* instead: the fewest magazines the depot held during an
//! interval were not needed by anyone during it, so that many can go at once. tcmalloc
//! (its transfer cache releases the low-water mark) and jemalloc (its thread-cache garbage
//! collection frees three quarters of the low-water mark) do the same.
//!
//! This crate puts in one place what none of them combines: a lock-free depot (no lock on
//! the exchange path), growth on demand, working-set shrinking, per-CPU and per-thread
//! front ends, statistics, and model-checked growth and shrink races.
//!
//! # Vocabulary
//!
//! | term | meaning |
//! | --- | --- |
//! | item | what is cached: an id, a page frame number, a pointer, any `T: Send` |
//! | source | the slow backing allocator behind the cache ([`Source`]) |
//! | magazine | a fixed-capacity LIFO array of items, owned by exactly one party at a time |
//! | loaded, previous | the two magazines of a CPU slot or of a [`LocalCache`] handle |
//! | slot | the loaded and previous magazines of one CPU, owned by one thread at a time |
//! | depot | lock-free stacks shared by all slots (full, partly filled and empty magazines), and a shelf per CPU |
//! | shelf | one CPU's place in the depot for one full and one empty magazine, tried before the stacks |
//! | trim | one reclaim step ([`Cache::trim`]): surplus full magazines go back to the source |
//! | working set | the full magazines the depot's users needed during a trim interval; the rest, the fewest full magazines it held during the interval (its low-water mark), nobody needed, and that is what a `WorkingSet` trim releases |
//! | owner word | a slot's atomic word that says who holds it: `FREE`, `TAKEN` (held whole by a thread), a claim's token (restartable sequences), `PLAIN` (restartable sequences, before the slot's first `alloc`/`free`) |
//! | quiescent | no thread is inside a cache operation |
//!
//! # The invariants
//!
//! These are the properties the checkers establish and the docs promise. Each is upheld
//! by the types named under it.
//!
//! ## Invariant 1: conservation
//!
//! Every item handed to the cache is, whenever the cache is quiescent, in exactly one
//! place: a caller's hands, a magazine (in a slot, a handle or the depot), or the source.
//! None is lost and none is duplicated, also across trim, flush, handle drop, cache drop
//! and a panicking source.
//!
//! Upheld by the magazine (an item pushed is in it until popped), the loaded/previous
//! pair (exchanges move magazines, never copy items), the slot (only its owner touches
//! its magazines), [`LocalCache`] (its magazines are its own and go to the depot on drop),
//! and [`Cache`] (a magazine out of every slot and stack while the source runs is held by
//! a rescue guard that puts it back into the depot if the source panics).
//!
//! The cache conserves what it is *given*: it cannot tell an item freed twice or an item
//! that never came from its source (see [`obligations`](super::obligations)).
//!
//! ## Invariant 2: memory safety
//!
//! No magazine or depot node is freed while another thread may still read it: every
//! magazine is its own depot node, kept from push to push, and a node is freed (when its
//! magazine is dropped) through crossbeam-epoch, which frees it only after every thread
//! that could hold a pointer has left its critical section. There is no ABA: the depot
//! stack's head carries a tag that every push and pop bumps, so a pop whose read of the
//! head has gone stale cannot win its compare-and-swap, unless the tag wraps inside that
//! pop's window (2^22 operations on one stack on 64-bit targets). On targets where the
//! tagged head is not available, every push links a freshly allocated node instead, and
//! a node is never reused while a stale pointer to it could still win a compare-and-swap.
//!
//! Upheld by the depot's Treiber stack (`src/stack.rs`, which states the bound and the
//! targets). The epoch is a collector of the crate's own (`src/sync.rs`): its pins run
//! only the crate's deferred frees, so the code that can run inside a cache call is the
//! source, the cache's own, and those frees, never another library's garbage from
//! crossbeam-epoch's default collector ([`obligations`](super::obligations#inside-a-global-allocator)).
//!
//! ## Invariant 3: progress
//!
//! [`Cache::alloc`] and [`Cache::free`] never wait for another thread: no lock is held on
//! any path that a preempted thread could hold. A thread takes a CPU slot with one
//! compare-and-swap, or, with [restartable sequences](#restartable-sequences), a hit runs
//! as a sequence that the kernel aborts when the thread is preempted; a slot another thread
//! holds is a miss (without sequences the next free slot serves; then the depot's loose
//! path, else the source), never a wait. The depot is lock-free. The source is never
//! called while a slot is held.
//!
//! Upheld by the slot (`src/slot.rs`), [`LocalCache`] and the depot stacks. Exceptions,
//! by design, off the fast path: [`Cache::flush_cpu`], [`Cache::flush`] and
//! [`Cache::cached`] wait for a slot's owner to finish its bounded step (see
//! [`obligations`](super::obligations#callbacks-must-not-re-enter-the-cache) for the one
//! way to make that wait endless); with restartable sequences, a take of another CPU's
//! active slot waits up to 2 us for that CPU to acknowledge its claim, then fences that
//! CPU (bounded: see [Restartable sequences](#restartable-sequences)); and an allocation
//! that finds the source exhausted while another thread is flushing the cache keeps
//! looking for a cached item until that flush ends, rather than fail while items are on
//! their way back to the source (see [the exhaustion rule](#the-exhaustion-rule)). The
//! source itself may lock.
//!
//! ## Invariant 4: bounded memory
//!
//! With [`DepotPolicy::Dynamic`], once the load stops, repeated [`Cache::trim`] brings the
//! depot down to at most `target` full magazines. With [`Trim::WorkingSet`], one trim
//! releases every magazine that stayed unused for the whole interval since the previous
//! trim, and never more (a push in flight at the interval's low point can make it keep
//! one more). With [`DepotPolicy::Fixed`], the depot never holds more than `max_full`
//! full magazines, and in either policy never more than [`Options::max_full`] when it is
//! set (the same bounded push, `fixedcap.pml`). In every policy the stack of empty magazines is capped
//! ([`Options::max_empty`]); [CPU shelves](#cpu-shelves) add at most one full and one empty
//! magazine per slot, and a trim takes those of a shelf unused for a whole interval.
//!
//! So the items a cache holds are at most `cpus x 2 x magazine_size` in the slots, plus
//! `magazine_size` per full depot magazine (shelved ones included), plus two magazines per
//! live [`LocalCache`].
//! With [`Options::reclaim_idle_slots`] (on by default for `WorkingSet`), a trim also
//! takes the magazines of CPU slots that saw no operation during the whole interval into
//! the depot, where they are trimmed like any other; otherwise a trim shrinks the depot
//! only. [`Cache::flush_cpu`] empties a slot.
//!
//! Upheld by the depot (`src/depot.rs`: the caps and the trimming rules) and by the
//! working-set counter (`src/level.rs`), which keeps the count and its low-water mark in
//! one atomic word so that a trim never releases a magazine pushed during the interval.
//!
//! ## Invariant 5: accounting
//!
//! When the cache is quiescent, [`Stats::depot_full`] and [`Stats::depot_empty`] equal
//! the real lengths of the depot's stacks plus the magazines on its shelves.
//!
//! Upheld by the stacks' own counters (`src/stack.rs`: a push counts before it links, a
//! pop uncounts after it unlinks) and the depot, which reports them and counts the
//! occupied shelf places.
//!
//! ## Which checks hold each invariant
//!
//! Bounded checks explore every interleaving within stated bounds; the unbounded ones are
//! inductive invariants proved for any number of threads, CPUs, nodes, magazines and
//! items, of an abstract protocol (sequentially consistent; orderings are loom's). The
//! table in `proofs/README.md` ("Map") names the bounded runs, its section 6 the Ivy
//! models.
//!
//! - Invariant 1 (conservation): bounded by loom and shuttle (scenarios 1, 4, 6, 7, 8) and
//!   SPIN (`cache.pml`, `depot.pml`, `fixedcap.pml`, `rseq.pml`); unbounded by Ivy in two
//!   parts. `proofs/ivy/slot_rseq.ivy`: with restartable sequences, claims,
//!   acknowledgements, fences and plain takes, every item is in exactly one place (a
//!   slot's loaded or previous magazine, a thread's hands, outside the slots), and a
//!   sequence in flight that read `FREE` is the only one that can change its slot's loaded
//!   magazine, which no whole owner holds meanwhile. `proofs/ivy/depot_level.ivy`: every
//!   magazine is in exactly one place (one of the three stacks, a shelf place, a slot, a
//!   thread's hands) and every item in exactly one magazine, the program or the source.
//!   Not proved unbounded: the cache paths around the slots (loose paths, the exhaustion
//!   rule), which SPIN's `cache.pml` checks within its bounds.
//! - Invariant 2 (memory safety, no ABA): bounded by loom (scenario 1) and SPIN
//!   (`depot_tagged.pml`, `depot.pml`); unbounded by Ivy (`proofs/ivy/depot_stack.ivy`):
//!   a pop's CAS wins only on the head and the `next` it read, no pinned pop reads a freed
//!   node, every magazine's node is in exactly one place. Limit: the Ivy tag never wraps
//!   (the 2^22 bound above is the SPIN control's and the stack's docs').
//! - Invariant 3 (progress): bounded only (loom, shuttle, SPIN's `cache.pml`); Ivy proves
//!   safety, not progress.
//! - Invariant 4 (bounded memory): bounded by loom (scenarios 3, 4, 9) and SPIN
//!   (`trim.pml`, `fixedcap.pml`); the working-set part unbounded by Ivy
//!   (`proofs/ivy/depot_level.ivy`, with `Level`'s count and low-water mark as ghost sets
//!   of the same sizes): the low-water mark `restart_interval` returns is at most the
//!   interval's smallest count and at most the number of magazines that stayed in the
//!   stack all the interval, so a trim never releases more than stayed unused. Not
//!   proved unbounded: the `Fixed` and empty caps, the target re-check, two quiescent
//!   trims reaching `target`, the shelves' and idle slots' share of `unused`.
//! - Invariant 5 (accounting): bounded by loom (scenarios 1-3) and SPIN (`depot.pml`,
//!   `fixedcap.pml`, `trim.pml`); unbounded by Ivy for `Level`'s count
//!   (`proofs/ivy/depot_level.ivy`: count <= linked always, equal when no push or pop is
//!   in flight, and a claimed pop never finds the stack empty), not for `Stack::len`.
//!
//! # CPU shelves
//!
//! Every push or pop of a depot stack is a few read-modify-writes on that stack's cache
//! line, so two CPUs that exchange magazines with the depot at once pass the line back and
//! forth, and the exchange stops scaling with CPUs. With a `Dynamic` depot
//! ([`Options::cpu_shelves`]), each CPU slot has a *shelf* in the depot: one place for a
//! full magazine and one for an empty one, on a cache line of its own. A slot or a handle
//! puts a full magazine it spills on its CPU's shelf when the place is free, takes the
//! shelf's full magazine first when it refills, and keeps and takes empty magazines the
//! same way; everything else goes to the stacks. A place is one pointer, put with one
//! compare-and-swap against null and taken with one swap, so the winner of the swap owns
//! the magazine outright: no epoch pin, no ABA (`src/shelf.rs`).
//!
//! The shelves are part of the depot for every rule above. A refill that finds the stacks
//! empty takes a full magazine from any CPU's shelf before it goes to the source, and so
//! does the busy-slot path; a flush drains them; `Stats` counts them. A trim moves the
//! magazines of every shelf that saw no put or take during the whole interval to the
//! stacks (full ones count as unused for the working set; empty ones are freed). The trim
//! target is checked against the full stack alone, so shelves in use never make a trim
//! release below the target. A `Fixed` depot has no shelves: its cap counts the full stack
//! and must stay hard.
//!
//! # The exhaustion rule
//!
//! An allocation that finds its magazines and the depot empty asks the source for a
//! batch ([`Source::alloc_batch`], a whole magazine by default:
//! [`Options::source_batch`]), takes one item and keeps the rest as its slot's or
//! handle's loaded magazine, exactly as the flush below keeps what it finds; the source's
//! lock is then taken once per magazine in both directions (frees always went back a
//! magazine at a time). The batch is filled in a magazine held by a rescue guard, with no
//! slot held, so a source that panics half way loses none of what it handed.
//!
//! When the source has nothing left, items may still sit in other CPUs' magazines and in
//! the depot. [`Cache::alloc`] therefore ends as Linux's
//! `alloc_iova_fast(..., flush_rcache = true)` does, after trying what is cheaper:
//!
//! 1. when the source hands nothing (or handed nothing last time and has received no
//!    item since, as far as a racy flag tells: it is not asked first then, and is asked
//!    at the end, step 3), the allocation takes a depot magazine;
//! 2. without one, it flushes, one such flush at a time:
//!    - it takes the CPU slots in turn (skipping slots other threads hold) until it comes
//!      upon one that holds an item, else pops one depot magazine;
//!    - what it found is the allocation's: it takes an item and keeps the rest (both
//!      magazines of the slot when both held items) as its handle's or slot's magazines
//!      when both of those are empty, so that one take of a slot brings all it held; else
//!      they go to the depot (a `Fixed` depot at its cap sends them to the source);
//!    - the slots it took before held nothing, so it sends nothing to the source that it
//!      would take back one item at a time;
//!    - an allocation that arrives during another's flush *steals* meanwhile: it takes the
//!      magazines of the first other CPU slot that holds items, or a depot magazine,
//!      until that flush ends, and looks once more when it has ended (what the flush did
//!      not keep is in the depot then);
//!    - the flag that keeps flushes one at a time is cleared before the source runs (a
//!      `Fixed` depot's refusals go to it after the flush), so a source that allocates
//!      from its own cache never waits for the flush it is part of.
//! 3. Only when nothing was found does it ask the source once more, for a batch again
//!    (which also covers a flag that said "exhausted" after the source had received an
//!    item).
//!
//! The other CPUs' slots are looked at once per exhausted allocation, in the flush, not
//! before it as well: each take of a slot pulls its cache line, and its owner's next
//! operation pulls it back, so a consumer that polls an empty cache would otherwise slow
//! the producer it waits for (in `handoff/1->1` a poll used to take the producer's slot
//! three times: `BENCHMARKS.md` has the hand-off before and after).
//!
//! `None` after that means: each slot was empty or held by another thread when the flush
//! looked at it, the depot was empty when popped, and the source handed nothing when
//! asked last. The scan is not a snapshot: a thread that steals from a slot the flush has
//! not reached yet into one it has already passed keeps that item out of its sight, so with
//! as many items cached as allocators racing, one of them can get `None` (loom's
//! counterexample is in `loom-tests/README.md`, scenario `exhaustion_race`, which checks
//! what is promised). Linux's flush waits for each CPU's lock and returns every cached
//! item to the source before it asks again; this one never waits for a slot. Ending the flush at the first magazine found keeps the promise without what
//! the full flush costs in a closed pool. A consumer that outruns its producer would
//! otherwise send the producer's magazines, pushed during the flush, to the source (a
//! flush could chase a producer that pushes as fast as it drains), then take them back
//! one item at a time under the source's lock (in `handoff/1->1`, a third of the items
//! through `LocalCache` handles and a sixth through the per-CPU path went through the
//! source that way; none do now). [`Cache::try_flush`] and
//! [`Cache::flush`] are the full flushes, for callers that want every cached item back in
//! the source.
//! [`Stats::exhaustion_flushes`] counts the times the source was found exhausted.
//! [`LocalCache`] handles keep their own magazines through it.
//!
//! # Restartable sequences
//!
//! With [`Options::restartable_sequences`] on Linux x86_64 (glibc 2.35+, kernel 5.10+), a
//! [`Cache`]'s `alloc` and `free` hits run as restartable sequences (`src/rseq.rs`, which
//! documents the ABI next to the assembly): the thread reads its CPU from its rseq area,
//! finds that CPU's slot, checks that nobody owns it, moves the item, and commits with one
//! plain store of the magazine's length word, which counts the hit too (below). The kernel aborts the sequence if the thread is
//! preempted, migrated or signalled before the commit, so the slot belongs to the CPU: a
//! thread preempted in the middle of a hit holds up nobody, and a hit does no locked
//! instruction. Misses (an empty or full loaded magazine) take the slot with a third
//! sequence, whose commit stores `TAKEN` in the owner word, and then run the ordinary slow
//! path, which knows nothing of sequences.
//!
//! Two ways to keep a thread on another CPU out of a slot were open: (a) the sequences
//! check the owner word, a plain load, before their commit; (b) a thread that takes a slot
//! from elsewhere calls `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)` on that CPU,
//! which aborts the sequences in flight there. Neither suffices alone: (a) a sequence
//! that read `FREE` just before a remote compare-and-swap still commits after it; (b) a
//! fence that runs before the remote thread has marked the slot lets the next sequence
//! start on a slot it does not know is taken. The cache does both, in this order: the
//! remote thread *claims* the slot, writing a token of its own into the owner word with a
//! compare-and-swap from `FREE`, then fences the slot's CPU. Every sequence that starts
//! after the claim sees the token and misses; every sequence that read `FREE` before it
//! has been aborted or has committed when the fence returns. The take sequence of a miss
//! commits with a compare-and-swap of `FREE` to `TAKEN` (a `lock cmpxchg`: a commit is
//! one instruction, not necessarily a plain store), so it cannot overwrite a token: once
//! the claim's compare-and-swap succeeds, the token stays until its owner stores `FREE`.
//!
//! The fence has a cheaper stand-in: the slot's own CPU can *acknowledge* the claim.
//! When the take sequence reads a token (even) instead of `FREE`, its commit is a
//! compare-and-swap of the token to `token | 1`, after which it reports the slot busy.
//! That sequence ran on the slot's CPU, uninterrupted, from its read of the token to its
//! commit; only one thread runs on a CPU at a time, and a sequence that is preempted or
//! migrated is aborted, never committed. So every sequence that read `FREE` before the
//! claim has committed or will abort: what the fence ensures. (If the token it read
//! belonged to an earlier claim of the same thread, released and claimed again since, the
//! CPU was still this sequence's all along.) A thread that runs sequences on that CPU
//! acknowledges at its next operation, since every hit misses while the claim holds; the
//! claimant waits up to 2 us for it (`SlotClaim::take_whole`) and fences only when none comes:
//! the CPU is idle, or runs a thread that makes no call into the cache.
//!
//! The fence is needed for the loaded magazine only. Sequences touch nothing else of a
//! slot (its owner word, the loaded magazine's length word and cells),
//! so a claim alone, with no fence, owns the slot's `previous` magazine. A steal, which
//! wants a magazine with items, uses that: it claims the slot, takes `previous` when it
//! holds items and gives the claim back, and fences only when the items are all in the
//! loaded magazine, and then only when the slot's CPU does not acknowledge the claim in
//! time. A fence costs 9 us on the guest of `BENCHMARKS.md` (a system call and an
//! interrupt of the slot's CPU, against 0.4 us for the caller's own CPU). How often a
//! steal finds `previous` full depends on the thief: a consumer that polls as fast as the
//! one of `handoff/1->1` found it in 14-23% of its steals (2026-12-05 rounds, before the
//! acknowledgement existed; the rest fenced).
//!
//! A hit is counted by its commit. A count stored apart from the commit would be counted
//! twice when an abort between the two restarts the sequence; so the loaded magazine's
//! length word of a slot that runs sequences holds, above the 32-bit length, 15 bits of
//! allocation hits and 16 of free hits, and a pop adds `2^32 - 1` to it, a push `2^48 + 1`.
//! A hit that would overflow its field (a guard bit for allocations, the carry out of the
//! word for frees) does not commit: it misses, and the miss takes the slot. A pop tests its
//! new word once, for the guard and for the borrow out of an empty magazine's length (bit
//! 31, which no length below `2^31` sets). Whoever takes a slot whole moves the counts to
//! the slot's owner counters before touching the magazines (`Slot::fold_sequence_hits`),
//! so owners see a plain length, and at most one operation in `2^15` goes to the slow
//! path for it. `Stats` adds the counts not yet
//! folded, read with a racy look at the word. (The first design counted with a second,
//! short sequence after the commit; `BENCHMARKS.md` has the pair before and after.)
//!
//! The costs, measured on the 2-core machines of `BENCHMARKS.md`: the alloc/free pair on
//! one thread costs 2.4-3.9 ns, 0.20-0.45x the slot protocol's two compare-and-swaps and
//! 2.8-3.3x an owned `Vec` (2.9x since the commit counts the hit); each operation's
//! commit stores the length word that the next one loads. With more runnable threads
//! than CPUs it has no busy misses and runs at 5.7-24x the slot protocol's throughput (8
//! threads of pairs on 2 cores). Every fenced take costs a system call and an interrupt of the slot's CPU,
//! which aborts what runs there; an acknowledged one costs the claimant's wait and a miss
//! of the slot CPU's thread. Operations that take other CPUs' slots (`flush_cpu`,
//! `flush`, `cached`, trims that reclaim idle slots, steals and exhaustion flushes,
//! `alloc_on`/`free_on` for another CPU) are off the hot path except in one pattern: a
//! consumer that outruns its producer finds the source exhausted on every poll and steals
//! from the producer's CPU each time; the claims of `previous` and the acknowledgements
//! keep most of those steals off the fence (`handoff/1->1` runs at 3.6-4.3x an
//! `ArrayQueue` with sequences, 1.3-1.6x without). [`Stats::fenced_takes`] counts the fences.
//!
//! The switch is on by default, and slots start *plain*: their owner word holds `PLAIN`,
//! on which every sequence misses, and any thread takes a plain slot with an ordinary
//! compare-and-swap, no claim and no fence (no sequence has read `FREE` in the word, so
//! none is in flight). The first `alloc` or `free` on a CPU finds its slot plain, takes it
//! so, and gives it back as `FREE`: it *activates* the slot, and from then on the
//! protocol above applies. The `_on` calls never activate a slot, so a simulator that
//! drives all the slots from one thread with `alloc_on`/`free_on` (the seed simulation)
//! pays no fence, and a program that uses both pays
//! them only for the CPUs its threads ran `alloc`/`free` on. Only takes from `PLAIN` give
//! a slot back as `PLAIN`, so an active slot never turns plain again
//! (`Slot::try_take_plain`; the SPIN model `proofs/rseq.pml` checks the activation).
//!
//! Threads that want a slot's items (steals, the exhaustion flush, [`Cache::try_flush`],
//! idle reclaim) first look at the slot without taking it: racy loads of its owner word
//! and of its two magazines' lengths (`Slot::looks_empty`). A slot that looks owned or
//! empty is skipped with no fence. Skipping it is what a take at the moment of the look
//! would have done: an owned slot is busy and a take would miss; while the slot is free
//! only sequences change it, each with one store to the loaded magazine's length, so a
//! length read then was the slot's content then, and a free committed after the look
//! comes after it. An exhausted allocation then goes back to its own slot with a
//! sequence, not a fence. So a consumer that polls a cache holding nothing makes no
//! system call and interrupts no CPU (`tests/rseq.rs`,
//! `exhausted_allocations_fence_only_slots_with_items`); only a slot that holds items can
//! cost one.
//!
//! **Which slots, and what the CPU count decides.** The sequences run on the slot whose
//! index is the CPU id, for any id below the number of slots; so every slot of a cache
//! that runs them is fenced (claimed and fenced, or acknowledged, when taken from
//! elsewhere), whatever CPU count the system reports. The count
//! (`sysconf(_SC_NPROCESSORS_CONF)`) only decides whether the cache runs sequences at
//! all (a slot for every counted CPU), for speed: it can be below the highest CPU id + 1
//! (sparse or offline ids, a container whose `/sys/devices/system/cpu` is masked, where
//! glibc counts `/proc/stat`), and that costs fences, never soundness. (An earlier
//! version fenced only the slots below the count, while the sequences ran on every slot:
//! a CPU in the gap changed a slot that others took with a plain compare-and-swap, with
//! its hit counts read as part of a length. `tests/cpu_count_gap.rs` and the CI run with
//! `MAGAZINE_CPUS_CONF=1`, the crate's test seam that lowers the count, pin it down; the
//! variable is read once, at the first creation of a cache that may run the sequences,
//! so it must be set before the process starts threads, best in its environment.)
//!
//! **When the fence fails.** `membarrier` can fail after it was registered (a seccomp
//! filter that denies it). `rseq::fence_cpu` then has two other ways to the same
//! guarantee, both from the fact that one thread runs on a CPU at a time: a thread that
//! already runs on the slot's CPU needs no fence at all (a sequence that was in flight
//! there has committed, or was preempted or migrated, which aborts it), and a thread
//! elsewhere moves itself there for a moment (`sched_setaffinity`, then back). When that
//! fails too, the take gives its claim back instead of taking the loaded magazine: steals
//! and the exhaustion flush take `previous` alone, `alloc_on`/`free_on` for that slot miss
//! (the depot or another slot serves), and `flush_cpu`, `flush` and `cached` return with
//! the loaded magazine left cached (counted by a look). The slot's own CPU keeps using it,
//! and the cache's drop returns it. Nothing panics with a claim in the owner word
//! (`tests/fences.rs`).
//!
//! A thread that holds a slot through its miss path still makes the other threads on
//! that CPU miss (it was preempted while owning the slot); removing that
//! would need the miss path itself to run in sequences (exchanging whole magazines with
//! one commit, as tcmalloc's per-CPU caches do), which this version does not do.
//!
//! The protocol is checked by the SPIN model `proofs/rseq.pml` (aborts before any step,
//! migrations, a second thread on the same CPU, claims, acknowledgements and fenced takes;
//! controls without the owner check, without the fence, with the commit before the last
//! store, with a take that stores over a token, a claim that takes the loaded magazine,
//! and acknowledgements made outside a sequence or from another CPU) and by
//! `tests/rseq.rs` on the real assembly: 16 threads on two cores with forced migrations,
//! signals, and `flush_cpu`/`trim`/steals racing, against a tracking source. loom and shuttle
//! check the portable protocol, which the fallback and every other platform run.
//!
//! # The seed scenario and Linux
//!
//! The crate's main example (`examples/seed.rs`) replays the 256-CPU report on the real
//! cache code with a simulated clock: 256 virtual CPUs submit 4 KiB reads and allocate on
//! their own slot; the interrupt CPUs 0, 16, ..., 240 complete them in batches and free on
//! theirs; each virtual CPU keeps a fixed number of I/Os in flight; one size class. The
//! depot policies map onto Linux as follows:
//!
//! | Linux | policy here |
//! | --- | --- |
//! | <= 6.6: `MAX_GLOBAL_MAGS = 32` full magazines; an overflowing magazine goes back to the rbtree | `Fixed { max_full: 32 }` |
//! | the report's patch: a depot that scales with the CPU count | `Fixed { max_full: max(32, cpus) }` |
//! | >= 6.7: an unbounded list; every 100 ms one magazine is freed while `depot_size > num_online_cpus()` | `Dynamic { target: cpus, trim: OnePerTick }`, trimmed every 100 ms |
//! | not in Linux: Bonwick's working-set reap | `Dynamic { target: cpus, trim: WorkingSet }`, trimmed every 2 s |
//!
//! For each policy it reports slow-path allocations and frees per 1000 I/Os after
//! warm-up, the depot's peak length, the items held at the end of the load, and the items
//! held after the load stops and trims run. Time is the I/O count divided by the IOPS, so
//! a run is deterministic for its seed. The case study (`examples/seed/README.md` in the
//! repository) shows the results and
//! [`trimming`](super::trimming) the interval advice drawn from them.
//!
//! The IOVA allocator built on the cache ([`IovaDomain`]) follows the same mapping for a
//! whole domain: one cache per size class in front of a range tree.
//!
//! [`Source`]: crate::Source
//! [`LocalCache`]: crate::LocalCache
//! [`Cache`]: crate::Cache
//! [`Cache::trim`]: crate::Cache::trim
//! [`Cache::alloc`]: crate::Cache::alloc
//! [`Cache::free`]: crate::Cache::free
//! [`Cache::flush_cpu`]: crate::Cache::flush_cpu
//! [`Cache::flush`]: crate::Cache::flush
//! [`Cache::try_flush`]: crate::Cache::try_flush
//! [`Cache::cached`]: crate::Cache::cached
//! [`DepotPolicy::Dynamic`]: crate::DepotPolicy::Dynamic
//! [`DepotPolicy::Fixed`]: crate::DepotPolicy::Fixed
//! [`Trim::WorkingSet`]: crate::Trim::WorkingSet
//! [`Options::max_empty`]: crate::Options::max_empty
//! [`Options::max_full`]: crate::Options::max_full
//! [`Options::reclaim_idle_slots`]: crate::Options::reclaim_idle_slots
//! [`Options::cpu_shelves`]: crate::Options::cpu_shelves
//! [`Options::restartable_sequences`]: crate::Options::restartable_sequences
//! [`Options::source_batch`]: crate::Options::source_batch
//! [`Source::alloc_batch`]: crate::Source::alloc_batch
//! [`Stats::depot_full`]: crate::Stats::depot_full
//! [`Stats::depot_empty`]: crate::Stats::depot_empty
//! [`Stats::exhaustion_flushes`]: crate::Stats::exhaustion_flushes
//! [`Stats::fenced_takes`]: crate::Stats::fenced_takes
//! [`IovaDomain`]: crate::iova::IovaDomain
