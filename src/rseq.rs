//! The kernel's restartable-sequence area of the calling thread, as glibc registers it: the
//! id of the CPU the thread runs on, read from it, and the restartable sequences of the
//! per-CPU fast path (`Options::restartable_sequences`), all the assembly of the crate.
//!
//! # The ABI
//!
//! Since Linux 4.18 a thread can register a `struct rseq` with the kernel (the `rseq`
//! system call); glibc 2.35 and later register one for every thread it creates and export
//! where it is:
//!
//! - `__rseq_offset` (`ptrdiff_t`): the area's offset from the thread pointer, the same
//!   for every thread;
//! - `__rseq_size` (`unsigned int`): 0 when glibc did not register areas (an older kernel,
//!   `GLIBC_TUNABLES=glibc.pthread.rseq=0`, or a program that registers its own).
//!
//! The area starts with `u32 cpu_id_start; u32 cpu_id; ...`. The kernel writes `cpu_id`
//! before the thread returns to user space on a CPU, so a load of it is the current CPU
//! (what glibc's `sched_getcpu` returns, without the call). A thread whose registration
//! failed (valgrind, for one, does not implement `rseq`) reads `-1` (not yet registered) or
//! `-2` (registration failed) there; both are negative as `i32`, and the caller falls back
//! to `sched_getcpu`.
//!
//! On x86_64 the thread pointer is the `fs` base, so `fs:[__rseq_offset]` addresses the
//! area of the calling thread, and the sequences keep the offset in a register. The
//! symbols are looked up once with `dlsym`: a program linked against an older glibc, or a
//! static one, finds none and keeps using `sched_getcpu`. Other architectures and C
//! libraries use `sched_getcpu` as well.
//!
//! # Restartable sequences
//!
//! The area's `rseq_cs` field (a `u64` at offset 8) names the critical section the
//! thread is in: a descriptor `struct rseq_cs { u32 version; u32 flags; u64 start_ip;
//! u64 post_commit_offset; u64 abort_ip; }`, 32-byte aligned. When the kernel preempts
//! the thread, migrates it, or delivers a signal to it, and its instruction pointer is in
//! `[start_ip, start_ip + post_commit_offset)`, it moves the instruction pointer to
//! `abort_ip` before the thread runs again (and clears `rseq_cs`). The four bytes before
//! `abort_ip` must be the signature the area was registered with: glibc registers
//! `RSEQ_SIG = 0x53053053` on x86_64 (written here as the operand of a `ud1`, so that a
//! disassembler reads an instruction, as in the kernel's selftests). A sequence stores its
//! descriptor's address in `rseq_cs`, reads `cpu_id`, does its work with loads and stores
//! that nobody can see yet, and ends with exactly one store, the *commit* (for [`take`],
//! a `lock cmpxchg`, which stores or does not, in one instruction): either the
//! thread ran on that CPU from the read of `cpu_id` to the commit without any other
//! thread running there, or the commit never happens. Every abort handler here jumps back
//! to the store of `rseq_cs` and starts over.
//!
//! The sequences ([`alloc`](fn@alloc), [`free`], [`take`]) run on the slot of the CPU they run on.
//! They may clobber only the registers the `asm!` blocks name; they use no stack, and
//! leave the direction flag clear (`rep movsb` copies forwards). An item of one word
//! travels in a register; items of other sizes are copied with `rep movsb` inside the
//! section: an abort in the middle leaves a partial copy in memory that is not an item
//! yet (beyond the magazine's length, or in the caller's output buffer), so it is never
//! read.
//!
//! Threads on other CPUs cannot be excluded by a sequence; they claim the slot
//! (`src/slot.rs`, `Slot::owner`: a compare-and-swap of their token, which gives them
//! the `previous` magazine, untouched by sequences) and, to take the loaded magazine
//! too, fence it with [`fence_cpu`]:
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, cpu)`
//! (Linux 5.10), which returns once every sequence in flight on `cpu` has been aborted
//! or has committed, and its stores are visible. A fence costs a system call and an
//! interrupt of that CPU (9 us on the 2-core guest of `BENCHMARKS.md`, 0.4 us for the
//! caller's own CPU), so only operations off the hot path fence: flushes, trims, steals
//! that find `previous` empty, and `alloc_on`/`free_on` for a CPU the caller is not on.
//!
//! The ordering the sequences rely on is x86's: a load is not reordered with older loads,
//! nor a store with older stores, so a sequence that reads `FREE` in the owner word then
//! sees everything the last owner wrote before its Release store of `FREE`, and a
//! committed store is seen after the stores before it.

use core::mem::{size_of, ManuallyDrop, MaybeUninit};
use core::ptr;
use core::sync::atomic::{AtomicIsize, AtomicU8, AtomicUsize, Ordering};

/// `__rseq_offset` once looked up; [`UNKNOWN`] before, [`ABSENT`] when there is no
/// registered area to read.
///
/// | value     | meaning                         | transition                               |
/// |-----------|---------------------------------|------------------------------------------|
/// | `UNKNOWN` | not looked up yet               | the first call stores the result, Relaxed (every caller computes the same value) |
/// | `ABSENT`  | no area: use `sched_getcpu`     | final                                    |
/// | other     | the areas' offset from the thread pointer | final                          |
static OFFSET: AtomicIsize = AtomicIsize::new(UNKNOWN);

const UNKNOWN: isize = isize::MIN;
const ABSENT: isize = isize::MIN + 1;

/// The CPU the calling thread runs on, read from its rseq area; `None` when there is no
/// area to read (see the module docs) or the kernel has not filled it in.
#[inline]
pub(crate) fn current_cpu() -> Option<usize> {
    let offset = offset()?;
    let cpu: i32;
    // SAFETY: glibc registered an area of at least the original 32 bytes (`__rseq_size`
    // is not 0) at `fs:[offset]` for this thread, for the thread's lifetime; `cpu_id` is
    // its second `u32`, aligned. The load writes nothing. Not `pure`: the kernel rewrites
    // `cpu_id` behind the compiler's back (on migration), so every call must load it.
    unsafe {
        core::arch::asm!(
            "mov {cpu:e}, dword ptr fs:[{offset} + 4]",
            offset = in(reg) offset,
            cpu = out(reg) cpu,
            options(nostack, preserves_flags, readonly),
        )
    };
    usize::try_from(cpu).ok()
}

/// `__rseq_offset`, if glibc registers rseq areas.
#[inline]
fn offset() -> Option<isize> {
    match OFFSET.load(Ordering::Relaxed) {
        UNKNOWN => Some(look_up()).filter(|&offset| offset != ABSENT),
        ABSENT => None,
        offset => Some(offset),
    }
}

/// The rseq areas' offset from the thread pointer, for the sequences on a [`Layout`]'s
/// slots: the sequences address the calling thread's area as `fs:[offset]`.
///
/// Read from its static rather than from the layout, so that the load depends on nothing
/// and the sequence's read of `cpu_id` need not wait for the cache's address: a shorter
/// chain of dependent loads on every hit. Relaxed suffices: a layout exists only after
/// [`offset`] found the areas (`Layout::new`), on the thread that built it or on one
/// that read the offset another stored, and the layout reaches other threads only
/// through whatever shares its cache, which orders that load before ours; by
/// coherence, ours then reads the offset too (every store stores the same value).
#[inline(always)]
fn area_offset() -> isize {
    let offset = OFFSET.load(Ordering::Relaxed);
    debug_assert!(offset != UNKNOWN && offset != ABSENT);
    offset
}

/// Looks up `__rseq_offset` and `__rseq_size` and caches what they say.
#[cold]
fn look_up() -> isize {
    let symbol = |name: &core::ffi::CStr| {
        // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only searches the
        // loaded objects' symbol tables; it returns null when the name is not there.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
    };
    let (offset, size) = (symbol(c"__rseq_offset"), symbol(c"__rseq_size"));
    let found = if offset.is_null() || size.is_null() {
        ABSENT
    } else {
        // SAFETY: glibc defines the two symbols as a `ptrdiff_t` and an `unsigned int`,
        // written once by the dynamic loader before `main`, read-only afterwards.
        let (offset, size) = unsafe { (*(offset as *const isize), *(size as *const u32)) };
        match size {
            0 => ABSENT,
            _ => offset,
        }
    };
    OFFSET.store(found, Ordering::Relaxed);
    found
}

/// `want` for a sequence that runs on whatever CPU the thread is on.
pub(crate) const ANY_CPU: usize = usize::MAX;

/// The offsets of a slot's fields that the sequences use, the same for every item type:
/// `Slot`, `MagazinePair` and `Magazine` are `repr(C)` and start with these word-sized
/// fields (`Layout::new` checks them).
const OWNER: usize = 0;
const ITEMS: usize = 8;
const CAPACITY: usize = 16;
const LEN: usize = 24;

/// The distance between slots, as its logarithm: the size of a `CachePadded<Slot<T>>` on
/// x86_64, 256 bytes for every item type (a slot holds its items behind pointers; the
/// cache checks it when it compiles, `Layout::new` when it runs). A constant, so that
/// finding a CPU's slot is one shift by an immediate, with no load.
pub(crate) const STRIDE_LOG2: u32 = 8;

/// The loaded magazine's length word of a slot whose CPU runs sequences also counts their
/// hits, so that a hit's commit, one store, counts it too (a count stored apart from the
/// commit would be counted again when an abort between the two restarts the sequence).
///
/// | bits   | field |
/// |--------|-------|
/// | 0-31   | the length |
/// | 32-46  | allocation hits |
/// | 47     | guard: set by the hit that would overflow the allocation hits |
/// | 48-63  | free hits (the hit that would overflow them carries out of the word) |
///
/// A pop adds [`POP_STEP`] (length - 1, allocation hits + 1), a push [`PUSH_STEP`]; a
/// sequence whose addition sets the guard or carries does not commit and reports
/// [`Miss::Counters`]. Owners keep the word a plain length: whoever takes the slot whole
/// first moves the counts to the slot's counters ([`split`],
/// `Slot::fold_sequence_hits`), so every `2^15` hits or so one operation takes the slot.
const POP_STEP: usize = (1 << 32) - 1;
const PUSH_STEP: usize = (1 << 48) + 1;
const ALLOC_HITS_SHIFT: u32 = 32;
const ALLOC_HITS_MASK: usize = (1 << 15) - 1;
const FREE_HITS_SHIFT: u32 = 48;
// `count_pop!` and `POP_MISSES` test bit 47 as the guard.
const _: () = assert!((ALLOC_HITS_MASK + 1) << ALLOC_HITS_SHIFT == 1 << 47);

/// The largest magazine the sequences serve: a pop tells an empty magazine by the borrow
/// out of the length field, bit 31 of the new word (see [`POP_MISSES`]), which no length up
/// to this one sets.
pub(crate) const MAX_MAGAZINE_SIZE: usize = i32::MAX as usize;

/// The length field of a length word.
const LENGTH_MASK: usize = u32::MAX as usize;

/// The bits of a pop's new length word ([`POP_STEP`] added) that forbid its commit: bit
/// 31, the borrow out of an empty magazine's length (a length of 0 becomes `u32::MAX`,
/// and no carry counts a hit), and the guard, bit 47. One test covers both misses.
const POP_MISSES: usize = (1 << 31) | (1 << 47);

/// The hits that sequences counted in a length word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hits {
    pub(crate) alloc: usize,
    pub(crate) free: usize,
}

/// A loaded magazine's length word, split into the length and the hits it counts (see
/// [`POP_STEP`]).
#[inline]
pub(crate) fn split(word: usize) -> (usize, Hits) {
    let hits = Hits {
        alloc: (word >> ALLOC_HITS_SHIFT) & ALLOC_HITS_MASK,
        free: word >> FREE_HITS_SHIFT,
    };
    (word & LENGTH_MASK, hits)
}

/// Where a cache's slots are, for the sequences: the first slot's address, their number,
/// and the size of an item (the distance between slots is [`STRIDE_LOG2`]). They stay
/// the same for the cache's lifetime (the slots are one boxed slice). The sequences read
/// it through a pointer, at the offsets written next to the fields. A layout exists only where glibc
/// registers rseq areas: the sequences find them at [`area_offset`], which is the same
/// for every cache.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    base: usize,      // 0
    slots: usize,     // 8
    item_size: usize, // 16
    /// [`POP_STEP`], [`PUSH_STEP`] and [`POP_MISSES`], which no instruction takes as an
    /// immediate.
    pop_step: usize, // 24
    push_step: usize, // 32
    pop_misses: usize, // 40
}

/// The addresses of one slot's fields (see [`Layout`]).
pub(crate) struct SlotFields {
    pub(crate) slot: usize,
    pub(crate) owner: usize,
    pub(crate) items: usize,
    pub(crate) len: usize,
    pub(crate) capacity: usize,
}

impl Layout {
    /// The layout of `slots` slots `stride` bytes apart (`2^STRIDE_LOG2`), the first of
    /// which has `first`'s fields, holding items of `item_size` bytes in magazines of
    /// `magazine_size`; `None` when glibc registers no rseq areas (see [`available`]) or
    /// the magazines are larger than [`MAX_MAGAZINE_SIZE`].
    pub(crate) fn new(
        first: SlotFields,
        stride: usize,
        slots: usize,
        item_size: usize,
        magazine_size: usize,
    ) -> Option<Self> {
        let offsets =
            [first.owner, first.items, first.capacity, first.len].map(|field| field - first.slot);
        assert_eq!(
            offsets,
            [OWNER, ITEMS, CAPACITY, LEN],
            "magazine: a slot's fields are not where the restartable sequences look"
        );
        assert_eq!(
            stride,
            1 << STRIDE_LOG2,
            "magazine: slots are not as far apart as the restartable sequences assume"
        );
        (offset().is_some() && magazine_size <= MAX_MAGAZINE_SIZE).then_some(Self {
            base: first.slot,
            slots,
            item_size,
            pop_step: POP_STEP,
            push_step: PUSH_STEP,
            pop_misses: match cfg!(magazine_mutant = "pop_ignores_empty") {
                // MUTANT: a pop's test misses the borrow out of an empty magazine's length:
                // it reads a cell far past the storage and commits a length of `u32::MAX`.
                true => POP_MISSES & !(1 << 31),
                false => POP_MISSES,
            },
        })
    }
}

/// Why a sequence did not do its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    /// The slot is owned (by a thread in its miss path, or one on another CPU).
    Busy,
    /// The loaded magazine is empty (`alloc`) or full (`free`).
    Magazine,
    /// The hit counters in the loaded magazine's length word are full (see [`POP_STEP`]):
    /// the slot's owner must fold them.
    Counters,
    /// The thread is not on the CPU asked for, or on a CPU without a slot, or its area
    /// is not registered.
    Elsewhere,
}

fn miss(code: usize) -> Miss {
    match code {
        1 => Miss::Busy,
        2 => Miss::Magazine,
        4 => Miss::Counters,
        _ => Miss::Elsewhere,
    }
}

/// The checks of the CPU that `enter_slot!` read into `rax` against `want` (`r10`),
/// which jump to 27 (elsewhere) when it does not fit: none when `want` is [`ANY_CPU`]
/// (`any_cpu`), equality when it names a CPU (`want_cpu`), and either (`either_cpu`).
macro_rules! any_cpu {
    () => {
        ""
    };
}
macro_rules! want_cpu {
    () => {
        "cmp rax, r10\njne 27f\n"
    };
}
macro_rules! either_cpu {
    () => {
        "cmp r10, -1\nje 22f\ncmp rax, r10\njne 27f\n22:\n"
    };
}

/// The start of every hit sequence: `enter_cpu!` (below), then a jump to 26 (busy) when the
/// slot's owner word is not `FREE`.
macro_rules! enter_slot {
    ($check:ident) => {
        concat!(
            enter_cpu!($check),
            "cmp qword ptr [rdx + {owner}], 0\n",
            "jne 26f\n",
        )
    };
}

/// The start of every sequence: stores the descriptor (label 30) in the area's
/// `rseq_cs` (`fs:[r8 + 8]`, `r8` being the area's offset), reads `cpu_id` into `rax`,
/// checks it against the layout (`r9`) and with `$check`, and leaves the slot's address
/// in `rdx`; jumps to 27 (elsewhere) when the CPU does not fit (an unregistered area
/// reads as a huge CPU). The section starts at 21; the abort handler (32) jumps back to
/// 20.
macro_rules! enter_cpu {
    ($check:ident) => {
        concat!(
            "20:\n",
            "lea rcx, [rip + 30f]\n",
            "mov qword ptr fs:[r8 + 8], rcx\n",
            "21:\n",
            "mov eax, dword ptr fs:[r8 + 4]\n",
            "cmp rax, qword ptr [r9 + 8]\n",
            "jae 27f\n",
            $check!(),
            "mov rdx, rax\n",
            "shl rdx, {stride_log2}\n",
            "add rdx, qword ptr [r9]\n",
        )
    };
}

/// After a hit's commit (label 23): the exits, the abort handler and the descriptor.
/// `eax` is 0 for a hit, 1 busy, 2 magazine, 3 elsewhere, 4 counters full.
macro_rules! exit {
    () => {
        concat!(
            "23:\n",
            "xor eax, eax\n",
            exits!(),
            "39:\n",
            descriptor!(30, "21b", "23b", "32b"),
        )
    };
}

/// The miss exits (24, 25, 26, 27) and the sequence's abort handler (32), out of the
/// hot path's instruction stream: a hit falls through to 39, the end.
macro_rules! exits {
    () => {
        concat!(
            ".pushsection .text.unlikely, \"ax\", @progbits\n",
            "24:\n",
            "mov eax, 4\n",
            "jmp 39f\n",
            "25:\n",
            "mov eax, 2\n",
            "jmp 39f\n",
            "26:\n",
            "mov eax, 1\n",
            "jmp 39f\n",
            "27:\n",
            "mov eax, 3\n",
            "jmp 39f\n",
            ".popsection\n",
            abort_handler!(32, "20b"),
        )
    };
}

/// An abort handler at label `$label` that restarts at `$restart`, preceded by the
/// signature, in a section of its own: out of the hot path's instruction stream.
macro_rules! abort_handler {
    ($label:literal, $restart:literal) => {
        concat!(
            ".pushsection __rseq_failure, \"ax\", @progbits\n",
            ".byte 0x0f, 0xb9, 0x3d\n",
            ".long 0x53053053\n",
            $label,
            ":\n",
            // MUTANT (abort_skips_rearm): the restart jumps past the store of `rseq_cs`
            // (to 21, which every `enter_cpu!` defines), which the kernel cleared when it
            // aborted the section: the retry runs unprotected, and a second preemption or
            // signal inside it lets a stale commit through. An assembler conditional, so
            // that the real build's machine code is the same with or without it.
            ".ifc ",
            cfg!(magazine_mutant = "abort_skips_rearm"),
            ",true\n",
            "jmp 21b\n",
            ".else\n",
            "jmp ",
            $restart,
            "\n",
            ".endif\n",
            ".popsection\n",
        )
    };
}

/// A `struct rseq_cs` at label `$label`: version 0, flags 0, the section from `$start`
/// to `$post_commit`, and the abort handler `$abort`.
macro_rules! descriptor {
    ($label:literal, $start:literal, $post_commit:literal, $abort:literal) => {
        concat!(
            ".pushsection __rseq_cs, \"aw\", @progbits\n",
            ".balign 32\n",
            $label,
            ":\n",
            ".long 0, 0\n",
            ".quad ",
            $start,
            ", ",
            $post_commit,
            " - ",
            $start,
            ", ",
            $abort,
            "\n",
            ".popsection\n",
        )
    };
}

/// The new length word of a pop (`$word` holds the old one): [`POP_STEP`] added, and a
/// jump to 24 (counters full) when that sets the guard bit.
macro_rules! count_pop {
    ($word:literal) => {
        concat!(
            "add ",
            $word,
            ", qword ptr [r9 + 24]\n",
            "bt ",
            $word,
            ", 47\n",
            "jc 24f\n",
        )
    };
}

/// The new length word of a push (`$word` holds the old one): [`PUSH_STEP`] added, and a
/// jump to 24 (counters full) when that carries out of the word.
macro_rules! count_push {
    ($word:literal) => {
        concat!("add ", $word, ", qword ptr [r9 + 32]\n", "jc 24f\n")
    };
}

/// The end of a pop of a one-word item: the load of the item at the new length (in
/// `rcx`) out of the storage (`rsi`) into `r11`, then the commit, the store of the new
/// length word (`rdi`).
macro_rules! read_then_commit {
    () => {
        concat!(
            "mov r11, qword ptr [rsi + 8 * rcx]\n",
            // The commit.
            "mov qword ptr [rdx + {len}], rdi\n",
        )
    };
}

/// MUTANT: the commit comes before the load of the item, so an abort between the two
/// loses the item (the sequence restarts and pops another).
macro_rules! commit_then_read {
    () => {
        concat!(
            "mov qword ptr [rdx + {len}], rdi\n",
            "mov r11, qword ptr [rsi + 8 * rcx]\n",
        )
    };
}

/// A hit's sequence on the slot `$check` accepts: `enter_slot!`, the operation's `$body`
/// (which ends with the commit), then `exit!`. The operand lists differ only in the
/// item's register (`r11`: `$item`) and in the offsets the body names (`$fields`, besides
/// `owner`); `$code` gets the outcome.
macro_rules! sequence {
    (
        $check:ident,
        [$($body:expr),* $(,)?],
        ($($fields:tt)*),
        ($($item:tt)*),
        $offset:expr,
        $layout:expr,
        $want:expr,
        $code:ident
    ) => {
        core::arch::asm!(
            enter_slot!($check),
            $($body,)*
            exit!(),
            owner = const OWNER,
            stride_log2 = const STRIDE_LOG2,
            $($fields)*
            in("r8") $offset,
            in("r9") $layout,
            in("r10") $want,
            $($item)*,
            out("rax") $code,
            out("rcx") _,
            out("rdx") _,
            out("rsi") _,
            out("rdi") _,
            options(nostack),
        )
    };
}

/// The pop of a one-word item on the slot `$check` accepts, ending with `$end` (the load
/// of the item and the commit): sets `$word` to the item and `$code` to the outcome.
macro_rules! pop_word {
    ($check:ident, $end:ident, $offset:expr, $layout:expr, $want:expr, $word:ident, $code:ident) => {
        sequence!(
            $check,
            [
                "mov rdi, qword ptr [rdx + {len}]",
                "add rdi, qword ptr [r9 + 24]",
                // Empty, or the counters full (see `POP_MISSES`): which one, out of line.
                "test rdi, qword ptr [r9 + 40]",
                "jnz 28f",
                ".pushsection .text.unlikely, \"ax\", @progbits",
                "28:",
                "bt rdi, 31",
                "jc 25f",
                "jmp 24f",
                ".popsection",
                "mov rsi, qword ptr [rdx + {items}]",
                // The new length (the word's low half), the index of the item.
                "mov ecx, edi",
                $end!(),
            ],
            (items = const ITEMS, len = const LEN,),
            (out("r11") $word),
            $offset,
            $layout,
            $want,
            $code
        )
    };
}

/// The pop of an item of `item_size` bytes (`[r9 + 16]`) on the slot `$check` accepts,
/// copied to `$out` inside the section. The new length word (in `rcx`) is counted by
/// `count_pop!`, or by `@count`'s instructions in the mutant `alloc_hits_overflow`.
macro_rules! pop_bytes {
    ($check:ident, $offset:expr, $layout:expr, $want:expr, $out:expr, $code:ident) => {
        pop_bytes!(@count count_pop!("rcx"), $check, $offset, $layout, $want, $out, $code)
    };
    (@count $count:expr, $check:ident, $offset:expr, $layout:expr, $want:expr, $out:expr, $code:ident) => {
        sequence!(
            $check,
            [
                "mov rdi, qword ptr [rdx + {len}]",
                "test edi, edi",
                "jz 25f",
                // The length alone, less one: the index.
                "dec edi",
                "mov rcx, qword ptr [r9 + 16]",
                "mov rsi, rdi",
                "imul rsi, rcx",
                "add rsi, qword ptr [rdx + {items}]",
                "mov rdi, r11",
                "rep movsb",
                // The length word again: no register is left to keep it (`r10` must still
                // hold `want` if the section restarts).
                "mov rcx, qword ptr [rdx + {len}]",
                $count,
                // The commit.
                "mov qword ptr [rdx + {len}], rcx",
            ],
            (items = const ITEMS, len = const LEN,),
            (in("r11") $out),
            $offset,
            $layout,
            $want,
            $code
        )
    };
}

/// The push of a one-word item (at the address in `r11`) on the slot `$check` accepts.
macro_rules! push_word {
    ($check:ident, $offset:expr, $layout:expr, $want:expr, $word:expr, $code:ident) => {
        sequence!(
            $check,
            [
                "mov rdi, qword ptr [rdx + {len}]",
                // The length is the word's low half (see `POP_STEP`), the capacity too.
                "cmp edi, dword ptr [rdx + {capacity}]",
                "jae 25f",
                "mov rsi, qword ptr [rdx + {items}]",
                "mov ecx, edi",
                // The item's bytes, from its address in `r11` (`rax` is free until the exit).
                "mov rax, qword ptr [r11]",
                "mov qword ptr [rsi + 8 * rcx], rax",
                count_push!("rdi"),
                // The commit.
                "mov qword ptr [rdx + {len}], rdi",
            ],
            (items = const ITEMS, capacity = const CAPACITY, len = const LEN,),
            (in("r11") $word),
            $offset,
            $layout,
            $want,
            $code
        )
    };
}

/// The push of an item of `item_size` bytes at `$item` on the slot `$check` accepts,
/// copied into the cell inside the section. The new length word (in `rcx`) is counted by
/// `count_push!`; in the mutant `count_before_commit`, `@count` gives instructions to run
/// early and the count instead.
macro_rules! push_bytes {
    ($check:ident, $offset:expr, $layout:expr, $want:expr, $item:expr, $code:ident) => {
        push_bytes!(@count "", count_push!("rcx"), $check, $offset, $layout, $want, $item, $code)
    };
    (@count $early:expr, $count:expr, $check:ident, $offset:expr, $layout:expr, $want:expr, $item:expr, $code:ident) => {
        sequence!(
            $check,
            [
                "mov rdi, qword ptr [rdx + {len}]",
                "cmp edi, dword ptr [rdx + {capacity}]",
                "jae 25f",
                $early,
                // The length alone: the index.
                "mov edi, edi",
                "mov rcx, qword ptr [r9 + 16]",
                "imul rdi, rcx",
                "add rdi, qword ptr [rdx + {items}]",
                "mov rsi, r11",
                "rep movsb",
                // The length word again: no register is left to keep it (`r10` must still
                // hold `want` if the section restarts).
                "mov rcx, qword ptr [rdx + {len}]",
                $count,
                // The commit.
                "mov qword ptr [rdx + {len}], rcx",
            ],
            (items = const ITEMS, capacity = const CAPACITY, len = const LEN,),
            (in("r11") $item),
            $offset,
            $layout,
            $want,
            $code
        )
    };
}

/// Pops an item from the loaded magazine of the slot of the CPU the thread runs on (or
/// only of `want`, unless it is [`ANY_CPU`]), if nobody owns the slot; the commit counts
/// the hit in the length word (see [`POP_STEP`]).
///
/// # Safety
///
/// `layout` describes live slots whose magazines hold `T`s (`item_size` is
/// `size_of::<T>()`), and every thread that takes or changes them follows `Slot::owner`'s
/// protocol for a cache with restartable sequences.
#[inline(always)]
pub(crate) unsafe fn alloc<T>(layout: &Layout, want: usize) -> Result<T, Miss> {
    debug_assert_eq!(layout.item_size, size_of::<T>());
    let (offset, layout_ptr) = (area_offset(), layout as *const Layout);
    let code: usize;
    if size_of::<T>() == 8 {
        // An item of one word comes back in a register: through memory, each hand-over
        // costs a store-to-load forwarding, and the pair is a chain of them.
        let word: u64;
        // SAFETY: `offset` is where glibc registered this thread's rseq area (module
        // docs); the sequence reads the layout, and, in the slot it indexes, the owner
        // word, the loaded magazine's fields, and the item below its length; its one
        // commit lowers the length (and counts the hit in the same word), so the item is
        // this thread's exactly when the commit happened, which is what code 0 says. It
        // runs on the CPU's slot only while nobody owns it, and everyone else excludes it
        // as `Slot::owner` says (the caller's promise).
        unsafe {
            match (want, cfg!(magazine_mutant = "commit_before_read")) {
                (ANY_CPU, false) => {
                    pop_word!(
                        any_cpu,
                        read_then_commit,
                        offset,
                        layout_ptr,
                        want,
                        word,
                        code
                    )
                }
                (_, false) => {
                    pop_word!(
                        want_cpu,
                        read_then_commit,
                        offset,
                        layout_ptr,
                        want,
                        word,
                        code
                    )
                }
                (ANY_CPU, true) => {
                    pop_word!(
                        any_cpu,
                        commit_then_read,
                        offset,
                        layout_ptr,
                        want,
                        word,
                        code
                    )
                }
                (_, true) => {
                    pop_word!(
                        want_cpu,
                        commit_then_read,
                        offset,
                        layout_ptr,
                        want,
                        word,
                        code
                    )
                }
            }
        }
        return match code {
            // SAFETY: the commit happened: `word` holds the bytes of the item it removed
            // from the magazine, a `T` of 8 bytes (read unaligned: `T` may be less aligned).
            0 => Ok(unsafe { ptr::read_unaligned(ptr::addr_of!(word).cast::<T>()) }),
            code => Err(miss(code)),
        };
    }
    let mut item = MaybeUninit::<T>::uninit();
    let out = item.as_mut_ptr();
    // SAFETY: as above; the sequence copies the item into `item`.
    unsafe {
        match want {
            ANY_CPU if cfg!(magazine_mutant = "alloc_hits_overflow") => {
                // MUTANT: no guard bit: the allocation hit after `2^15 - 1` unfolded ones
                // carries into the free hits.
                pop_bytes!(
                    @count "add rcx, qword ptr [r9 + 24]",
                    any_cpu,
                    offset,
                    layout_ptr,
                    want,
                    out,
                    code
                )
            }
            ANY_CPU => pop_bytes!(any_cpu, offset, layout_ptr, want, out, code),
            _ => pop_bytes!(want_cpu, offset, layout_ptr, want, out, code),
        }
    }
    match code {
        // SAFETY: the commit happened: `item` holds the item it removed from the magazine.
        0 => Ok(unsafe { item.assume_init() }),
        code => Err(miss(code)),
    }
}

/// Pushes `item` onto the loaded magazine of the slot of the CPU the thread runs on (or
/// only of `want`), if nobody owns the slot; the commit counts the hit. Hands the item
/// back on a miss.
///
/// # Safety
///
/// As [`alloc`](fn@alloc).
#[inline(always)]
pub(crate) unsafe fn free<T>(layout: &Layout, want: usize, item: T) -> Result<(), (T, Miss)> {
    debug_assert_eq!(layout.item_size, size_of::<T>());
    let (offset, layout_ptr) = (area_offset(), layout as *const Layout);
    let item = ManuallyDrop::new(item);
    let code: usize;
    if size_of::<T>() == 8 {
        // The item's address, not its bytes as a `u64`: a `T` of 8 bytes may have padding
        // (`(u32, u16)`), which Rust may not read as an integer; the sequence's own load
        // copies the 8 bytes whatever they are (it stays ours until the commit below says
        // otherwise).
        let word = ptr::addr_of!(item).cast::<u64>();
        // SAFETY: as in `alloc`; the sequence stores the item in the cell at the
        // magazine's length (uninitialised, and invisible to everyone until the commit
        // raises the length over it), so the item belongs to the magazine exactly when
        // the commit happened.
        unsafe {
            match want {
                ANY_CPU => push_word!(any_cpu, offset, layout_ptr, want, word, code),
                _ => push_word!(want_cpu, offset, layout_ptr, want, word, code),
            }
        }
    } else {
        let source = &*item as *const T;
        // SAFETY: as above; the sequence copies the item into the cell.
        unsafe {
            match want {
                ANY_CPU if cfg!(magazine_mutant = "count_before_commit") => {
                    // MUTANT: the hit is counted with a store of its own, before the
                    // commit (which then adds only the length): an abort in between counts
                    // it again when the section restarts.
                    push_bytes!(
                        @count "mov rcx, qword ptr [r9 + 32]\ndec rcx\nadd qword ptr [rdx + {len}], rcx",
                        "inc rcx",
                        any_cpu,
                        offset,
                        layout_ptr,
                        want,
                        source,
                        code
                    )
                }
                ANY_CPU => push_bytes!(any_cpu, offset, layout_ptr, want, source, code),
                _ => push_bytes!(want_cpu, offset, layout_ptr, want, source, code),
            }
        }
    }
    match code {
        0 => Ok(()),
        code => Err((ManuallyDrop::into_inner(item), miss(code))),
    }
}

/// The take sequence with `$commit`, its commit. It reads the owner word into `rax` (the
/// value the commit expects) and picks what to store in `rcx`: `TAKEN` over `FREE` (label
/// 40), or the token's acknowledged form, `token | 1`, over a token (label 41); an odd value (`TAKEN`, or a claim already acknowledged) is busy. After the commit
/// the zero flag tells whether it stored. Sets `$code` (0 taken, 1 busy, 3 elsewhere) and
/// `$index` (the slot's).
macro_rules! take_sequence {
    ($commit:literal, $layout:expr, $want:expr, $code:ident, $index:ident) => {
        core::arch::asm!(
            enter_cpu!(either_cpu),
            "mov rsi, rax",
            "mov rax, qword ptr [rdx + {owner}]",
            "test rax, rax",
            "jz 40f",
            "test al, 1",
            "jnz 26f",
            "lea rcx, [rax + 1]",
            "jmp 41f",
            "40:",
            "mov ecx, 1",
            "41:",
            $commit,
            "23:",
            "jne 26f",
            // An acknowledgement leaves the slot to its claimant: busy for us.
            "cmp rcx, 1",
            "jne 26f",
            "xor eax, eax",
            exits!(),
            "39:",
            descriptor!(30, "21b", "23b", "32b"),
            owner = const OWNER,
            stride_log2 = const STRIDE_LOG2,
            in("r8") area_offset(),
            in("r9") $layout as *const Layout,
            in("r10") $want,
            out("rax") $code,
            out("rcx") _,
            out("rdx") _,
            out("rsi") $index,
            options(nostack),
        )
    };
}

/// Takes the slot of the CPU the thread runs on (or only of `want`) if nobody owns it,
/// with a compare-and-swap of `FREE` to `TAKEN` as the commit; returns the slot's index.
/// The caller then owns the slot (`Slot::owner`), wherever it runs next. A
/// compare-and-swap, not a plain store, so that the commit cannot overwrite the token of
/// a thread on another CPU that claimed the slot after this sequence read `FREE`: such a
/// claim owns the slot's `previous` magazine without a fence (`Slot::try_claim`).
///
/// When the sequence finds a claim instead, not yet acknowledged, its commit
/// acknowledges it (a compare-and-swap of the token to `token | 1`) and it reports the
/// slot busy. The acknowledgement is the claimant's fence, made by the slot's own CPU:
/// this sequence ran there, uninterrupted, from its read of the token to its commit, so
/// any sequence that read `FREE` before the claim has committed or was preempted or
/// migrated on the way, which aborts it. (Also when the token is the same thread's next
/// claim, made after this sequence read the previous one: the CPU was this sequence's
/// all along.) `SlotClaim::take_whole` waits a moment for it before it makes a system call.
///
/// # Safety
///
/// As [`alloc`](fn@alloc).
#[inline]
pub(crate) unsafe fn take(layout: &Layout, want: usize) -> Result<usize, Miss> {
    let (code, index): (usize, usize);
    // SAFETY: as in `alloc`; the sequence writes only the owner word, with its commit.
    unsafe {
        if cfg!(magazine_mutant = "take_commits_with_store") {
            // MUTANT: a plain store (the zero flag still set by the `test` before it),
            // which overwrites the token of a claim made after the owner word was read.
            take_sequence!(
                "mov qword ptr [rdx + {owner}], rcx",
                layout,
                want,
                code,
                index
            )
        } else {
            // When the compare-and-swap fails, the owner word changed since it was read:
            // busy.
            take_sequence!(
                "lock cmpxchg qword ptr [rdx + {owner}], rcx",
                layout,
                want,
                code,
                index
            )
        }
    }
    match code {
        0 => Ok(index),
        code => Err(miss(code)),
    }
}

/// Loads a word that sequences on another CPU (or a slot's owner) may be writing, for a
/// thief's look at a slot it has not taken (`Slot::looks_empty`). An `asm!` load: the
/// race is the machine's, where an aligned word is read whole (one value that was
/// stored there at some point), not a data race in Rust's memory model.
///
/// # Safety
///
/// `word` is aligned and points to memory that stays allocated during the call.
#[inline]
pub(crate) unsafe fn peek(word: *const usize) -> usize {
    let value: usize;
    // SAFETY: the caller's contract; the load writes nothing.
    unsafe {
        core::arch::asm!(
            "mov {value}, qword ptr [{word}]",
            word = in(reg) word,
            value = out(reg) value,
            options(nostack, preserves_flags, readonly),
        )
    };
    value
}

/// Whether this process can run the sequences for a cache of `slots` slots: glibc
/// registered an area for the calling thread, the kernel provides the `membarrier` rseq
/// fence (registered for the process here, once), and every CPU the system may bring up
/// ([`configured_cpus`]) has a slot of its own.
///
/// The count is advice, not a bound the protocol relies on: every slot of such a cache
/// is fenced (sequences run on any slot whose index is a CPU id, and takes of an active
/// slot are fenced whatever its index), so a count below the highest CPU id + 1 (sparse
/// ids, CPUs offline at start-up, a count taken from `/proc/stat` where
/// `/sys/devices/system/cpu` is masked) costs fences, never soundness. With fewer slots
/// than CPUs, threads on CPUs without a slot would fence other CPUs' slots on every
/// operation, so the cache runs the slot protocol instead.
pub(crate) fn available(slots: usize) -> bool {
    static STATE: AtomicU8 = AtomicU8::new(0); // 0 unknown, 1 yes, 2 no
    let supported = match STATE.load(Ordering::Relaxed) {
        0 => {
            let supported = probe();
            STATE.store(if supported { 1 } else { 2 }, Ordering::Relaxed);
            supported
        }
        state => state == 1,
    };
    supported && configured_cpus().is_some_and(|cpus| cpus <= slots)
}

/// The number of CPUs the system may bring up, as glibc counts them
/// (`sysconf(_SC_NPROCESSORS_CONF)`), lowered to `MAGAZINE_CPUS_CONF` when that variable
/// holds a smaller positive number: a test seam that reproduces hosts whose count is
/// below their highest CPU id + 1 (any value is sound; see [`available`]).
///
/// Both are read once, at the first call (the first creation of a cache that may run the
/// sequences), and kept for the life of the process: the variable must be set before
/// the process starts threads (in its environment, best), since `getenv` races with a
/// `std::env::set_var` on another thread, and a later change is not seen.
pub(crate) fn configured_cpus() -> Option<usize> {
    // 0: not read yet; `usize::MAX`: `sysconf` failed. Two first calls that race both
    // read and store the same value.
    static CPUS: AtomicUsize = AtomicUsize::new(0);
    match CPUS.load(Ordering::Relaxed) {
        0 => {
            let cpus = read_configured_cpus();
            CPUS.store(cpus.unwrap_or(usize::MAX), Ordering::Relaxed);
            cpus
        }
        usize::MAX => None,
        cpus => Some(cpus),
    }
}

/// [`configured_cpus`], read from the system and the environment.
#[cold]
fn read_configured_cpus() -> Option<usize> {
    // SAFETY: `sysconf` has no preconditions; it returns -1 on failure.
    let cpus = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) })
        .ok()
        .filter(|&cpus| cpus > 0 && cpus != usize::MAX)?;
    // `getenv`, not `std::env::var`: no `String` and no lock of std's, so a cache can be
    // built inside a global allocator (`docs::obligations`, "Inside a global allocator").
    // SAFETY: a NUL-terminated name; the result is null or a NUL-terminated string that
    // stays valid while nobody changes the environment, and it is read at once. A thread
    // changing it meanwhile breaks `std::env::set_var`'s own safety contract (no other
    // thread may read the environment then); this read happens once per process. Nothing
    // here can fail or unwind.
    let value = unsafe { libc::getenv(c"MAGAZINE_CPUS_CONF".as_ptr()) };
    let lowered = (!value.is_null())
        // SAFETY: non-null, NUL-terminated (above).
        .then(|| unsafe { core::ffi::CStr::from_ptr(value) })
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
        .filter(|&value| value > 0);
    Some(lowered.map_or(cpus, |lowered| lowered.min(cpus)))
}

const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 7;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 8;
const MEMBARRIER_CMD_FLAG_CPU: libc::c_uint = 1 << 0;

fn membarrier(command: libc::c_int, flags: libc::c_uint, cpu: libc::c_int) -> libc::c_long {
    // SAFETY: `membarrier` reads no memory of ours; an unknown command fails with EINVAL.
    unsafe { libc::syscall(libc::SYS_membarrier, command, flags, cpu) }
}

#[cold]
fn probe() -> bool {
    if current_cpu().is_none() {
        return false;
    }
    let commands = membarrier(MEMBARRIER_CMD_QUERY, 0, 0);
    let needed = libc::c_long::from(
        MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
    );
    commands >= 0
        && commands & needed == needed
        && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0
}

/// Returns `true` once every sequence in flight on `cpu` (of any thread of the process)
/// has been aborted or has committed, with its stores visible to the caller; `false` when
/// nothing here can make sure of it. Never panics.
///
/// In order: the caller already runs on `cpu` (then no other thread runs there, so a
/// sequence that was in flight has committed, or was preempted or migrated, which aborts
/// it when it resumes); `membarrier` for that CPU, else for all of them; else the
/// caller moves itself to `cpu` for a moment (`sched_setaffinity`), which proves the same
/// as the first case once it runs there. The last is for processes whose `membarrier`
/// fails after it was registered (a seccomp filter that denies it, say).
pub(crate) fn fence_cpu(cpu: usize) -> bool {
    if current_cpu() == Some(cpu) {
        return true;
    }
    let on_cpu = libc::c_int::try_from(cpu).is_ok_and(|cpu| {
        membarrier(
            MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
            MEMBARRIER_CMD_FLAG_CPU,
            cpu,
        ) == 0
    });
    // A CPU the kernel does not know fails the first call (it cannot run a sequence either).
    on_cpu || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0 || visit(cpu)
}

/// Runs the calling thread on `cpu` for a moment, then restores its affinity; `true` when
/// it ran there (see [`fence_cpu`]).
#[cold]
fn visit(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    let size = size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let (mut saved, mut there): (libc::cpu_set_t, libc::cpu_set_t) =
        unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
    // SAFETY: 0 is the calling thread; `saved` is a valid set of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut saved) } != 0 {
        return false;
    }
    // SAFETY: `cpu` is below `CPU_SETSIZE`.
    unsafe { libc::CPU_SET(cpu, &mut there) };
    // SAFETY: as above; the kernel moves the thread before the call returns.
    if unsafe { libc::sched_setaffinity(0, size, &there) } != 0 {
        return false;
    }
    let arrived = current_cpu() == Some(cpu);
    // SAFETY: as above; `saved` is the set the thread had, which the kernel accepted a
    // moment ago. (Should it fail now, the thread stays on `cpu`: slower, not wrong; no
    // panic, which would leave the caller's claim in the owner word.)
    unsafe { libc::sched_setaffinity(0, size, &saved) };
    arrived
}

#[cfg(test)]
mod tests {
    use super::{
        split, Hits, ALLOC_HITS_MASK, ALLOC_HITS_SHIFT, MAX_MAGAZINE_SIZE, POP_MISSES, POP_STEP,
        PUSH_STEP,
    };

    /// The arithmetic of the length word that the sequences' commits do with `add`: pops
    /// and pushes move the length and count, the allocation hit that would overflow its
    /// field sets the guard bit, and the free hit that would overflow carries out.
    #[test]
    fn the_length_word_counts_hits_until_a_field_is_full() {
        let mut word = 5;
        for _ in 0..3 {
            word += POP_STEP;
        }
        for _ in 0..2 {
            word += PUSH_STEP;
        }
        assert_eq!(split(word), (4, Hits { alloc: 3, free: 2 }));

        let allocs_full = 7 + (ALLOC_HITS_MASK << ALLOC_HITS_SHIFT);
        assert_eq!(split(allocs_full).1.alloc, ALLOC_HITS_MASK);
        assert_eq!((allocs_full + POP_STEP) >> 47 & 1, 1, "the guard bit");
        assert_eq!(split(allocs_full - POP_STEP).1.alloc, ALLOC_HITS_MASK - 1);

        let frees_full = 7 + (usize::MAX << 48);
        assert_eq!(
            split(frees_full),
            (
                7,
                Hits {
                    alloc: 0,
                    free: 0xffff
                }
            )
        );
        assert_eq!(frees_full.checked_add(PUSH_STEP), None, "the carry");
    }

    /// A pop's one test of its new length word: it forbids the commit exactly for an empty
    /// magazine (whatever the hits) and for full allocation hits, at every length a
    /// magazine the sequences serve can have.
    #[test]
    fn one_test_tells_a_pop_that_may_not_commit() {
        let may_commit = |word: usize| (word + POP_STEP) & POP_MISSES == 0;
        let hits = [0, 1, ALLOC_HITS_MASK - 1]
            .map(|alloc| alloc << ALLOC_HITS_SHIFT)
            .into_iter()
            .chain([0xfffe << 48, 0xffff << 48]);
        for counted in hits {
            assert!(!may_commit(counted), "an empty magazine");
            for length in [1, 2, 1 << 20, MAX_MAGAZINE_SIZE - 1, MAX_MAGAZINE_SIZE] {
                assert!(
                    may_commit(counted | length),
                    "length {length}, hits {counted:#x}"
                );
                assert_eq!(split((counted | length) + POP_STEP).0, length - 1);
            }
        }
        let allocs_full = ALLOC_HITS_MASK << ALLOC_HITS_SHIFT;
        for length in [0, 1, MAX_MAGAZINE_SIZE] {
            assert!(
                !may_commit(allocs_full | length),
                "the guard, length {length}"
            );
        }
    }
    /// Pins the thread to each CPU it may run on in turn: the area must name that CPU
    /// (when glibc registered one), as `sched_getcpu` does.
    #[test]
    fn the_area_names_the_cpu_the_thread_is_pinned_to() {
        // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
        let mut allowed: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        let size = core::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: 0 is the calling thread; `allowed` is a valid set of `size` bytes.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut allowed) }, 0);
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below `CPU_SETSIZE`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) })
            .collect();
        std::thread::spawn(move || {
            for &cpu in &cpus {
                // SAFETY: as above.
                let mut one: libc::cpu_set_t = unsafe { core::mem::zeroed() };
                // SAFETY: `cpu` is below `CPU_SETSIZE`.
                unsafe { libc::CPU_SET(cpu, &mut one) };
                // SAFETY: 0 is the calling thread; `one` is a valid set.
                assert_eq!(unsafe { libc::sched_setaffinity(0, size, &one) }, 0);
                // The kernel moves the thread before `sched_setaffinity` returns.
                if let Some(read) = super::current_cpu() {
                    assert_eq!(read, cpu, "the rseq area names another CPU");
                }
                // SAFETY: no preconditions.
                assert_eq!(unsafe { libc::sched_getcpu() }, cpu as i32);
            }
        })
        .join()
        .unwrap();
    }
}
