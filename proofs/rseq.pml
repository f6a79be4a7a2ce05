/*
 * rseq.pml -- the restartable-sequence (Linux rseq) per-CPU fast path of src/rseq.rs
 * (the sequences alloc, free and take: enter_slot!, the one commit each; take's commit
 * is a lock cmpxchg of the owner word from the value it read: FREE to TAKEN, or a claim's
 * token to token | 1, the acknowledgement) against the claims of src/slot.rs
 * (Slot::try_claim: CAS FREE -> token; SlotClaim::previous; SlotClaim::take_whole = the
 * acknowledgement if a bounded wait sees it, else rseq::fence_cpu =
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, FLAG_CPU, cpu); Slot::try_take_fenced
 * = claim + fence, with no load of the owner word after it), as src/cache.rs (and
 * src/cache/exhaustion.rs) use them
 * (alloc_in_sequence / free_in_sequence, on a miss take_slot_in_sequence and the slot's
 * owner path, SlotGuard's Drop; Cache::steal / steal_from_slot as the remote thief,
 * Cache::flush_cpu as the remote flusher), with lazy activation (PLAIN, below).  The
 * step-to-function table is in proofs/README.md, section 5.
 *
 * State: per CPU c one slot: owner[c] (FREE 0, TAKEN 1, a claim's token naming one
 * thread: even, >= 2, (pid + 1) << 1; the token acknowledged: token | 1, odd, >= 3;
 * PLAIN 255, slot.rs PLAIN = usize::MAX: odd, never a token (<= 12 here) or token | 1),
 * the loaded magazine mlen[c] and cells items[c * CAP ..], the previous magazine plen[c]
 * and cells pitems[c * CAP ..] (CAP 2 each; a cell at or above its len may hold
 * anything: an old item, 0 = never written).  Items 1..NITEMS are distinct ids.
 * Sequences touch only owner[c] and the loaded magazine, never the previous one.
 *
 * The kernel (proctype kernel, plus run_here and membarrier):
 *   - a worker is in a sequence (inseq) from its read of cpu_id, step (1), until its
 *     commit or a miss exit; an abort (migration, preemption, signal, membarrier IPI)
 *     clears inseq and sets aborted: the worker's next step is its abort handler (the
 *     `unless` escape around each sequence), which restarts the sequence at (1).  Its
 *     stores before the commit, other than the commit, stay where they are (a cell
 *     at len, beyond the length);
 *   - the kernel process may, at any moment, migrate a worker to the other CPU (aborting
 *     its sequence, if any; MIGRATIONS in all), or abort a worker's sequence in flight
 *     (a signal, or preemption by a thread that is not modelled; INTERRUPTS in all);
 *   - every step of a worker that touches shared state runs on its CPU (run_here): any
 *     other worker's sequence in flight on that CPU is aborted (it was preempted to let
 *     this one run), so at most one sequence is in flight per CPU, and none while
 *     another worker runs there;
 *   - membarrier(c) aborts, in one step, the sequence in flight on CPU c, if any; one
 *     that committed before is done (the real fence's IPI arrives at some moment: a
 *     sequence that commits before it is this model's commit before the fence step).
 * The remote thread (thief and flusher) runs on a CPU of its own (not modelled): its
 * steps preempt nobody (on a modelled CPU it would only abort more sequences, a subset
 * of these behaviours).
 *
 * Steps of a sequence: (1)-(3) are one step (the rseq_cs store, the read of cpu_id,
 * the want check, the slot index, the owner load: cpu_id changes only by the worker's
 * own migration, which aborts), then for alloc and free (4) the len load, (5) the item
 * load (alloc) or the store of the item into the cell at len (free), (6) the commit,
 * each a step; for take, (1)-(3) load the owner word once and pick (expected, new):
 * (FREE, TAKEN), or (token, token | 1) for an even value >= 2, or exit Busy for an odd
 * one (TAKEN, a claim acknowledged); (4) the commit: lock cmpxchg [owner] from expected
 * to new.  The take owns the slot; the acknowledgement exits Busy after it; a failed CAS
 * exits Busy.  An item travels in a register (rseq.rs copies items of other
 * sizes with rep movsb into the caller's buffer or the cell beyond len: the same
 * non-commit stores).
 *
 * Holders of a slot (owner[c] != FREE): the take sequence's committer (TAKEN: the whole
 * slot), or a claimant (its token; Slot::try_claim's CAS FREE -> token).  A claimant
 * owns the previous magazine at once, not the loaded one: a sequence that read FREE
 * before the claim may still commit into it.  SlotClaim::take_whole upgrades it: when it sees
 * its token acknowledged (one step, guarded by owner == token | 1: the code's bounded
 * wait, which may end at any moment without it), or else after the membarrier on the
 * slot's CPU, the whole slot is its (a confirmed owner).  The acknowledgement suffices:
 * the take sequence that committed it ran on the slot's CPU, not aborted, from its read
 * of the token to its commit, so a sequence that read FREE before the claim (on that
 * CPU: it read FREE before the ack sequence read the token) has committed before it, or
 * was preempted, hence aborted, by then.  The same holds when the token it read was the
 * same thread's previous claim (ABA: the claimant released and claimed again within the
 * ack sequence's window): a sequence that read FREE before the new claim read it after
 * the release, inside that window, on a CPU that was the ack sequence's all along, so
 * it cannot have run.  Every write of a
 * value other than FREE is a CAS from the value its writer read (FREE; the token, for
 * an acknowledgement), so nothing overwrites a token, its acknowledgement or TAKEN, and
 * the fenced take does not look at the owner word again (it may hold token or
 * token | 1; the release stores FREE either way).
 *
 * Lazy activation (-DSTART_PLAIN: every owner word starts PLAIN, as Slot::new makes a
 * slot of a cache that runs sequences; without it every slot starts FREE, i.e. already
 * activated, and the plain steps below are left out: they would only load a word that
 * is never PLAIN, or fail a CAS from PLAIN).  PLAIN means free, and no sequence has
 * read FREE in the word: alloc / free sequences see it not FREE, the take sequence sees
 * it odd, so all three exit Busy with no commit.  Any thread takes a PLAIN slot whole
 * with a CAS PLAIN -> TAKEN (Slot::try_take_plain), no claim, no fence: no sequence on
 * it can be in flight.  The guard's release (SlotGuard::release) stores PLAIN again,
 * except after an activating take: a worker calling alloc / free (want ANY) whose take
 * sequence exited Busy CASes PLAIN -> TAKEN on its current CPU's slot (take_in_sequence's
 * Busy arm, sequence_slot(ANY) = current_cpu()) and releases FREE; from then on the slot
 * follows the protocol above.  alloc_on / free_on never activate: their Busy arm takes
 * with try_take_plain(false), and when is_plain() (a Relaxed load) sees PLAIN they skip
 * the sequences: take_slot (is_plain again, else take_slot_in_sequence), Slot::try_take,
 * then take_other_slot (try_take_plain(false) of the other slot).  Slot::try_take is
 * is_plain(), then try_take_plain(false) or the fenced take; the thief's look
 * (runs_sequences(), looks_empty) counts PLAIN as free, and a PLAIN slot goes to
 * take_victim -> try_take, both magazines to the thief.  Only takes from PLAIN store
 * PLAIN, so the word never returns to PLAIN (ghost activated[c], asserted).  That is
 * more than the plain CAS needs: PLAIN stored by any owner of the whole slot would do,
 * PLAIN stored by a claimant of previous alone would not (-DCLAIM_RELEASES_PLAIN).
 *
 * Processes: NW = 2 workers (worker 1 on CPU W1CPU, worker 2 on W2CPU), OPS operations
 * each: alloc, or free of an item it holds (Cache::alloc / free with sequences).
 *   alloc: the alloc sequence; on any miss (alloc_after_sequence) the take sequence
 *     (take_slot_in_sequence); with the slot taken, the owner path (refills one item
 *     from the outside into the loaded magazine, or not; then MagazinePair::alloc: pops
 *     one; when loaded is empty and previous holds items, swaps the two first; when
 *     both are empty, takes one from the outside), then the release store; when the
 *     take misses (Busy): an item from the outside (alloc_busy);
 *   free: the free sequence; on a miss the take sequence and the owner path
 *     (MagazinePair::free: when loaded is full, swaps it with previous if previous is
 *     not full, else spills loaded's top item to the outside; pushes the item), else
 *     the item to the outside (free_busy).
 * With -DW1WANT=c worker 1 calls alloc_on / free_on(c) instead: its sequences run only
 * on CPU c (else the Elsewhere miss), and a take sequence that finds it elsewhere takes
 * slot c with Slot::try_take (the fenced take, or the plain one), as
 * take_slot_in_sequence does.  The owner's steps on a
 * magazine are two each: the loads (and a store into the cell at len), then the stores
 * (the new len; a swap's cells and lengths).
 * The remote thread, on slot RSLOT (0): first STEALS steals (Cache::steal_from_slot:
 * a racy look at the owner word and both lengths, skipping a slot that is owned or holds
 * nothing (Slot::looks_empty); the claim; if previous holds items, the whole previous
 * magazine to the thief (MagazinePair::steal_magazine: out of the slot), and the release
 * store, no fence; else the fence (SlotClaim::take_whole), both magazines to the thief
 * (steal_from), the release store), then FLUSHES rounds of Cache::flush_cpu(c) for c in
 * 0 .. FLUSH_SLOTS-1 (the fenced take: claim + fence; every item of both magazines to
 * the outside; the release store; a missed claim stores nothing and moves on:
 * flush_cpu's Slot::take retries, a second round is that retry).  "Outside" (insrc)
 * stands for the source, the depot and the thief's own magazines: all that is neither
 * a slot's magazine nor in a thread's hands.
 *
 * Checked after every step that moves an item (check()):
 *   - conservation: every item in exactly one place (the outside, one thread's hands,
 *     one cell below mlen of a loaded magazine, one cell below plen of a previous
 *     magazine); every cell below a len holds a real item; lens <= CAP; an alloc commit
 *     hands out a real item nobody holds.
 * Checked at each commit, claim, acknowledgement and fence (skipped with
 * -DONLY_CONSERVATION):
 *   - mutual exclusion: a sequence never commits (alloc, free or take) on a slot while
 *     a confirmed owner holds it (confirmed[c]: the take sequence that committed TAKEN,
 *     or a claimant after its acknowledgement or its fence); a take commit and a claim
 *     find the slot held by nobody (held[c]); an acknowledgement's token is that of the
 *     thread holding the slot; a fence (or an acknowledgement seen) confirms only a slot
 *     nobody has confirmed;  (an acknowledgement may commit while its claimant is
 *     confirmed: it changes only the owner word's low bit, which the claimant's release
 *     overwrites)
 *   - previous in use: every step on a previous magazine is by a holder of the slot,
 *     and the steps of one use of it (a swap, a steal, a flush) never overlap another
 *     thread's (ghost prevuse[c]).
 *   - plain takes: a CAS PLAIN -> TAKEN finds nobody holding the slot and no sequence
 *     in flight on the slot's CPU (PLAIN_QUIET); its taker is a confirmed owner, so
 *     the exclusion above covers the sequences after it; PLAIN is stored only in a
 *     slot that never held FREE (MONOTONE, ghost activated[c]).
 * Always: owner steps on the loaded magazine assert they are a confirmed owner; claimant
 * steps assert they hold the slot.
 * Checked at the end: nobody holding, conservation, every owner word FREE or PLAIN
 * (without -DONLY_CONSERVATION: FREE if the slot was activated, else PLAIN).
 *
 * Negative controls (run with -DONLY_CONSERVATION: the trail ends at lost/duplicated
 * items, not at the exclusion assertions):
 * -DCOMMIT_NOT_LAST     the free sequence stores len + 1 first, then the item into the
 *                       cell (an abort in between leaves a garbage cell below len).
 * -DCOMMIT_BEFORE_READ  the alloc sequence stores len - 1 first, then reads the item
 *                       (an abort in between loses the item beyond len).
 * -DNO_OWNER_CHECK      the alloc and free sequences do not check the owner word.
 * -DNO_MEMBARRIER       SlotClaim::take_whole skips the fence (the crate's mutant
 *                       fence_skipped).
 * -DTAKE_STORES         the take sequence commits with a plain store (the old commit;
 *                       the crate's mutant take_commits_with_store): of TAKEN, or of
 *                       token | 1 for an acknowledgement, while the fenced take does
 *                       not re-check the owner word.
 * -DCLAIM_TOUCHES_LOADED the thief's claim takes both magazines with no fence (the
 *                       crate's mutant claim_takes_loaded).
 * -DCLAIM_NO_CAS        the claim loads the owner word, then stores its token if it was
 *                       FREE: two steps instead of one CAS.
 * -DACK_OUTSIDE_SEQUENCE the take sequence that reads a token exits Busy and the worker
 *                       acknowledges after it, with a CAS outside any sequence (from
 *                       the token it read, on whatever CPU it then runs).
 * -DACK_FROM_ELSEWHERE  a worker whose take sequence exits Elsewhere (alloc_on / free_on
 *                       of another CPU) loads its wanted slot's owner word and
 *                       acknowledges a token there, from its own CPU (the mutant
 *                       ack_from_elsewhere, tried in the crate and not kept).
 * -DACK_STORES          the acknowledgement commits with a plain store of token | 1, not
 *                       a CAS (the take's commit stays a CAS).
 * Lazy activation (with -DSTART_PLAIN):
 * -DPLAIN_TAKE_ACCEPTS_FREE the crate's mutant plain_take_accepts_free: Slot::try_take
 *                       always goes the plain way, and try_take_plain CASes from FREE
 *                       when a load sees FREE: an activated slot taken whole with no
 *                       claim and no fence (and released PLAIN).
 * -DSEQ_COMMITS_ON_PLAIN the alloc and free sequences' owner check lets PLAIN pass, as
 *                       FREE: they commit into a slot that plain takes take with no
 *                       fence (why PLAIN must look busy to them: the assembly's
 *                       cmp [owner], 0 does that).
 * -DCLAIM_RELEASES_PLAIN the thief's claim that took previous only releases PLAIN (a
 *                       release value picked from a stale is_plain(), say): PLAIN stored
 *                       by a holder that does not own the loaded magazine lets the next
 *                       plain take skip the fence that a sequence in flight needs.
 */

#ifndef NCPU
#define NCPU    2
#endif
#ifndef NW
#define NW      2
#endif
#ifndef OPS
#define OPS     2
#endif
#ifndef STEALS
#define STEALS  1       /* the remote thread's steals from slot RSLOT, first */
#endif
#ifndef FLUSHES
#define FLUSHES 1       /* then its rounds of flush_cpu(0 .. FLUSH_SLOTS-1) */
#endif
#ifndef FLUSH_SLOTS
#define FLUSH_SLOTS 1   /* the flusher flushes slots 0 .. FLUSH_SLOTS-1 */
#endif
#ifndef RSLOT
#define RSLOT   0       /* the thief's victim slot */
#endif
#ifndef PREV
#define PREV    1       /* 1: item 2 starts in slot 0's previous magazine */
#endif
#ifndef MIGRATIONS
#define MIGRATIONS 2    /* kernel: migrations of a worker, in all */
#endif
#ifndef INTERRUPTS
#define INTERRUPTS 1    /* kernel: aborts by a signal or an unmodelled thread, in all */
#endif
#ifndef W1CPU
#define W1CPU   0       /* the CPUs the workers start on */
#endif
#ifndef W2CPU
#define W2CPU   (NCPU - 1)
#endif
#ifndef W1WANT
#define W1WANT  ANY     /* worker 1: alloc / free (ANY), or alloc_on / free_on(W1WANT) */
#endif
#define CAP     2       /* Config::magazine_size */
#define NITEMS  3
#define NPROC   (NW + 3)        /* init, workers 1..NW, the remote thread, the kernel */

#define FREE    0               /* Slot::owner: slot.rs FREE */
#define TAKEN   1               /* slot.rs TAKEN */
#define TOKEN   ((_pid + 1) << 1) /* Slot::claim: (thread_index() + 1) << 1: even, >= 2 */
#define ACKED   (TOKEN | 1)     /* the token acknowledged by the slot's CPU: odd, >= 3 */
#define PLAIN   255             /* slot.rs PLAIN (usize::MAX): odd (the take sequence: Busy),
                                 * not FREE (alloc / free sequences: Busy), and no token
                                 * (<= 12 here) or acknowledged token */
#define TOKEN_PID(t) (((t) >> 1) - 1)   /* the thread a token (or its acknowledged form) names */
#define BIT     (1 << _pid)
#define NOCPU   255

/* sequence results (rseq::Miss, and HIT for code 0) */
#define NONE      0
#define HIT       1
#define BUSY      2             /* Miss::Busy */
#define MISS      3             /* Miss::Magazine */
#define ELSEWHERE 4             /* Miss::Elsewhere */
#define ANY       255           /* rseq::ANY_CPU */

byte owner[NCPU];               /* Slot::owner */
byte mlen[NCPU];                /* the loaded magazine's len (slot offset LEN) */
byte items[NCPU * CAP];         /* the loaded magazine's cells (through ITEMS) */
byte plen[NCPU];                /* the previous magazine's len */
byte pitems[NCPU * CAP];        /* the previous magazine's cells */
bool insrc[NITEMS + 1];         /* ghost: the item is outside (source, depot, thief) */
byte hand[NITEMS + 1];          /* ghost: pid holding it, 0 = nobody */
byte held[NCPU];                /* ghost: bit p set while process p holds the slot (take or claim) */
byte confirmed[NCPU];           /* ghost: bit p set while process p owns the whole slot */
byte prevuse[NCPU];             /* ghost: bit p set while process p is in a use of previous */
bool activated[NCPU];           /* ghost: FREE has been in owner[c] (activated, or started FREE) */
byte cpu[NPROC];                /* the CPU each worker runs on (rseq cpu_id) */
bool inseq[NPROC];              /* in a sequence, not aborted, not yet committed */
bool aborted[NPROC];            /* its sequence was aborted: next step is the handler */
bool wdone[NPROC];
byte finished;
#if defined(COMMIT_NOT_LAST) || defined(COMMIT_BEFORE_READ)
byte nwindow;                   /* mutants: sequences between their two stores */
#endif

hidden byte ck_i, ck_c, ck_s, ck_k;     /* temporaries within one atomic step */

#ifdef ONLY_CONSERVATION
#define EXCL(c)         skip
#define NOBODY_HOLDS(c) skip
#define PREV_ENTER(c)   prevuse[c] = prevuse[c] | BIT
#else
#define EXCL(c)         assert(confirmed[c] == 0)       /* no confirmed owner at a commit */
#define NOBODY_HOLDS(c) assert(held[c] == 0)            /* a take commit, a claim */
#define PREV_ENTER(c)   assert(held[c] & BIT); assert(prevuse[c] == 0); prevuse[c] = prevuse[c] | BIT
#endif
#define PREV_EXIT(c)    prevuse[c] = prevuse[c] & ~BIT
#ifdef ONLY_CONSERVATION
#define ACK_HOLDER(c, t) skip
#define PLAIN_QUIET(c)   skip
#define MONOTONE(c)      skip
#define END_WORD(c)      skip
#else
#define ACK_HOLDER(c, t) assert(held[c] == (1 << TOKEN_PID(t)))   /* the ack's token: the holder's */
/* a plain take: no sequence on slot c's CPU is in flight (one in flight there has passed
 * its owner check, reading FREE or a token, and the word has been PLAIN all along) */
#define PLAIN_QUIET(c)   ck_k = 1; do :: ck_k > NW -> break :: else -> assert(!(inseq[ck_k] && cpu[ck_k] == c)); ck_k++ od; ck_k = 0
/* PLAIN is stored only in a slot that never held FREE (the design's monotone word) */
#define MONOTONE(c)      assert(!activated[c])
#define END_WORD(c)      assert(owner[c] == (activated[c] -> FREE : PLAIN))
#endif

#if defined(START_PLAIN) || defined(PLAIN_TAKE_ACCEPTS_FREE) || defined(SEQ_COMMITS_ON_PLAIN) || defined(CLAIM_RELEASES_PLAIN)
#define PLAINS  1               /* the plain steps are compiled in (they read PLAIN, which */
#else                           /* a run that starts FREE never sees: failed CASes, loads) */
#define PLAINS  0
#endif

inline check() {
#if defined(COMMIT_NOT_LAST) || defined(COMMIT_BEFORE_READ)
    if
    :: nwindow == 0 ->
#endif
    ck_s = 0;
    do
    :: ck_s >= NCPU -> break
    :: else ->
        assert(mlen[ck_s] <= CAP && plen[ck_s] <= CAP);
        ck_k = 0;
        do
        :: ck_k >= mlen[ck_s] -> break
        :: else -> assert(items[ck_s * CAP + ck_k] >= 1 && items[ck_s * CAP + ck_k] <= NITEMS); ck_k++
        od;
        ck_k = 0;
        do
        :: ck_k >= plen[ck_s] -> break
        :: else -> assert(pitems[ck_s * CAP + ck_k] >= 1 && pitems[ck_s * CAP + ck_k] <= NITEMS); ck_k++
        od;
        ck_s++
    od;
    ck_i = 1;
    do
    :: ck_i > NITEMS -> break
    :: else ->
        ck_c = (insrc[ck_i] -> 1 : 0) + (hand[ck_i] != 0 -> 1 : 0);
        ck_s = 0;
        do
        :: ck_s >= NCPU -> break
        :: else ->
            ck_k = 0;
            do
            :: ck_k >= mlen[ck_s] -> break
            :: else -> if :: items[ck_s * CAP + ck_k] == ck_i -> ck_c++ :: else fi; ck_k++
            od;
            ck_k = 0;
            do
            :: ck_k >= plen[ck_s] -> break
            :: else -> if :: pitems[ck_s * CAP + ck_k] == ck_i -> ck_c++ :: else fi; ck_k++
            od;
            ck_s++
        od;
        assert(ck_c == 1);              /* item ck_i in exactly one place */
        ck_i++
    od;
#if defined(COMMIT_NOT_LAST) || defined(COMMIT_BEFORE_READ)
    :: else
    fi;
#endif
    ck_i = 0; ck_c = 0; ck_s = 0; ck_k = 0  /* a break above must land inside the caller's d_step */
}

/* ---- the kernel ---- */

/* the calling worker runs on cpu[_pid]: a sequence of another worker in flight there has
 * been preempted, hence aborted (a no-op for the remote thread, which is on no modelled CPU) */
inline run_here() {
    ck_k = 1;
    do
    :: ck_k > NW -> break
    :: else ->
        if
        :: ck_k != _pid && inseq[ck_k] && cpu[ck_k] == cpu[_pid] ->
            inseq[ck_k] = 0; aborted[ck_k] = 1;
            printf("P%d runs on cpu %d: P%d's sequence there is preempted, aborted\n", _pid, cpu[_pid], ck_k)
        :: else
        fi;
        ck_k++
    od;
    ck_k = 0
}

/* rseq::fence_cpu(c): membarrier(PRIVATE_EXPEDITED_RSEQ, FLAG_CPU, c) */
inline membarrier(c) {
    d_step {
        run_here();
        printf("P%d membarrier(cpu %d)\n", _pid, c);
        ck_s = 1;
        do
        :: ck_s > NW -> break
        :: else ->
            if
            :: inseq[ck_s] && cpu[ck_s] == c ->
                inseq[ck_s] = 0; aborted[ck_s] = 1;
                printf("P%d membarrier: aborts P%d's sequence in flight on cpu %d\n", _pid, ck_s, c)
            :: else
            fi;
            ck_s++
        od;
        ck_s = 0
    }
}

inline migrate(t) {
    d_step {
        migs < MIGRATIONS && !wdone[t] -> migs++;
        cpu[t] = (cpu[t] + 1) % NCPU;
        if
        :: inseq[t] -> inseq[t] = 0; aborted[t] = 1;
           printf("kernel: migrates P%d to cpu %d, aborting its sequence\n", t, cpu[t])
        :: else -> printf("kernel: migrates P%d to cpu %d\n", t, cpu[t])
        fi
    }
}

inline interrupt(t) {
    d_step {
        ints < INTERRUPTS && inseq[t] -> ints++; inseq[t] = 0; aborted[t] = 1;
        printf("kernel: preempts / signals P%d inside its sequence: aborted\n", t)
    }
}

proctype kernel() {
    byte migs, ints;            /* kernel events so far (MIGRATIONS, INTERRUPTS in all) */
end:
    do
#if NCPU > 1
    :: migrate(1)
    :: migrate(2)
#if NW >= 3
    :: migrate(3)
#endif
#endif
    :: interrupt(1)
    :: interrupt(2)
#if NW >= 3
    :: interrupt(3)
#endif
    od
}

/* ---- the sequences (src/rseq.rs), run by a worker on the CPU it is on ---- */

/* the abort handler (abort_handler!, label 32): jmp 20b, i.e. restart at (1) */
inline handler() {
    d_step {
        aborted[_pid] = 0; l = 0; r = 0;
#if defined(COMMIT_NOT_LAST) || defined(COMMIT_BEFORE_READ)
        if :: window -> window = 0; nwindow-- :: else fi;
        check();
#endif
        printf("P%d abort handler: restarts the sequence at (1)\n", _pid)
    }
}

/* (1)-(3), enter_slot!: store rseq_cs, read cpu_id (the section starts), check it
 * against want, index the slot, load its owner word: != FREE exits Busy */
inline enter_slot(check_owner, kind) {
    d_step {
        run_here();
        inseq[_pid] = 1; c = cpu[_pid]; res = NONE;
        if
        :: want != ANY && want != c -> res = ELSEWHERE; inseq[_pid] = 0
        :: else ->
            if
#ifndef SEQ_COMMITS_ON_PLAIN
            :: kind != 3 && check_owner && owner[c] != FREE -> res = BUSY; inseq[_pid] = 0
#else
            :: kind != 3 && check_owner && owner[c] != FREE && owner[c] != PLAIN ->   /* MUTANT: PLAIN is free */
                res = BUSY; inseq[_pid] = 0
#endif
            :: kind == 3 && owner[c] == FREE -> l = FREE; r = TAKEN       /* the take */
            :: kind == 3 && owner[c] != FREE && (owner[c] & 1) == 0 ->    /* a claim: the ack */
#ifndef ACK_OUTSIDE_SEQUENCE
                l = owner[c]; r = owner[c] | 1
#else
                l = owner[c]; res = BUSY; inseq[_pid] = 0   /* MUTANT: Busy; the CAS comes after */
#endif
            :: kind == 3 && (owner[c] & 1) -> res = BUSY; inseq[_pid] = 0  /* TAKEN, or acked */
            :: else
            fi
        fi;
        if
        :: kind == 1 && res == ELSEWHERE -> printf("P%d alloc seq: cpu_id %d, cpu %d wanted: Elsewhere\n", _pid, c, want)
        :: kind == 1 && res == BUSY -> printf("P%d alloc seq: cpu_id %d, owner %d: Busy\n", _pid, c, owner[c])
        :: kind == 1 && res == NONE -> printf("P%d alloc seq: cpu_id %d, owner %d\n", _pid, c, owner[c])
        :: kind == 2 && res == ELSEWHERE -> printf("P%d free seq of item %d: cpu_id %d, cpu %d wanted: Elsewhere\n", _pid, x, c, want)
        :: kind == 2 && res == BUSY -> printf("P%d free seq of item %d: cpu_id %d, owner %d: Busy\n", _pid, x, c, owner[c])
        :: kind == 2 && res == NONE -> printf("P%d free seq of item %d: cpu_id %d, owner %d\n", _pid, x, c, owner[c])
        :: kind == 3 && res == ELSEWHERE -> printf("P%d take seq: cpu_id %d, cpu %d wanted: Elsewhere\n", _pid, c, want)
        :: kind == 3 && res == BUSY -> printf("P%d take seq: cpu_id %d, owner %d: Busy\n", _pid, c, owner[c])
        :: kind == 3 && res == NONE -> printf("P%d take seq: cpu_id %d, owner %d: will CAS %d -> %d\n", _pid, c, owner[c], l, r)
        fi
    }
}

#ifdef NO_OWNER_CHECK
#define SEQ_CHECKS_OWNER 0      /* MUTANT: alloc and free ignore the owner word */
#else
#define SEQ_CHECKS_OWNER 1
#endif

/* rseq::alloc */
inline alloc_seq() {
    do
    :: {
        enter_slot(SEQ_CHECKS_OWNER, 1);
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->                                /* (4) load len; 0 exits Magazine */
                run_here(); l = mlen[c];
                if
                :: l == 0 -> res = MISS; inseq[_pid] = 0; printf("P%d alloc seq: len 0: Magazine miss\n", _pid); c = 0
                :: else -> printf("P%d alloc seq: len %d\n", _pid, l)
                fi
           }
        fi;
#ifndef COMMIT_BEFORE_READ
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->                                /* (5) the item below len into a register */
                run_here(); r = items[c * CAP + l - 1];
                printf("P%d alloc seq: reads item %d at cell %d\n", _pid, r, l - 1)
           }
        fi;
        d_step {                                /* (6) THE COMMIT: len = l - 1 */
            run_here();
            EXCL(c);
            mlen[c] = l - 1;
            assert(r >= 1 && r <= NITEMS && hand[r] == 0);  /* a real item, nobody's */
            hand[r] = _pid; inseq[_pid] = 0; res = HIT;
            printf("P%d alloc seq: COMMIT len %d -> %d, item %d is P%d's\n", _pid, l, l - 1, r, _pid);
            l = 0; r = 0;
            check()
        };
#else
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->              /* MUTANT: the commit first */
            run_here();
            EXCL(c);
            mlen[c] = l - 1; window = 1; nwindow++;
            printf("P%d alloc seq (mutant): COMMIT len %d -> %d before reading the item\n", _pid, l, l - 1)
           }
        fi;
        d_step {                                /* then the item, still inside the section */
            run_here();
            r = items[c * CAP + l - 1];
            assert(r >= 1 && r <= NITEMS && hand[r] == 0);
            hand[r] = _pid; inseq[_pid] = 0; res = HIT; window = 0; nwindow--;
            printf("P%d alloc seq (mutant): reads item %d at cell %d, the sequence ends\n", _pid, r, l - 1);
            l = 0; r = 0;
            check()
        };
#endif
        break
       } unless { aborted[_pid] -> handler() }
    od
}

/* rseq::free of item x */
inline free_seq() {
    do
    :: {
        enter_slot(SEQ_CHECKS_OWNER, 2);
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->                                /* (4) load len; CAP exits Magazine */
                run_here(); l = mlen[c];
                if
                :: l >= CAP -> res = MISS; inseq[_pid] = 0; printf("P%d free seq: len %d: Magazine miss\n", _pid, l); c = 0; l = 0
                :: else -> printf("P%d free seq: len %d\n", _pid, l)
                fi
           }
        fi;
#ifndef COMMIT_NOT_LAST
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->                                /* (5) the item into the cell at len: invisible */
                run_here(); items[c * CAP + l] = x;
                printf("P%d free seq: writes item %d into cell %d (beyond len)\n", _pid, x, l)
           }
        fi;
        d_step {                                /* (6) THE COMMIT: len = l + 1 */
            run_here();
            EXCL(c);
            mlen[c] = l + 1;
            hand[x] = 0; inseq[_pid] = 0; res = HIT;
            printf("P%d free seq: COMMIT len %d -> %d, item %d is the magazine's\n", _pid, l, l + 1, x);
            l = 0;
            check()
        };
#else
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->              /* MUTANT: the commit first */
            run_here();
            EXCL(c);
            mlen[c] = l + 1; window = 1; nwindow++;
            printf("P%d free seq (mutant): COMMIT len %d -> %d before writing the item\n", _pid, l, l + 1)
           }
        fi;
        d_step {                                /* then the item, still inside the section */
            run_here();
            items[c * CAP + l] = x;
            hand[x] = 0; inseq[_pid] = 0; res = HIT; window = 0; nwindow--;
            printf("P%d free seq (mutant): writes item %d into cell %d, the sequence ends\n", _pid, x, l);
            l = 0;
            check()
        };
#endif
        break
       } unless { aborted[_pid] -> handler() }
    od
}

/* rseq::take: the owner word read once, in (1)-(3) (enter_slot, kind 3), picks the one
 * commit, lock cmpxchg [owner] from the value read (l) to r: FREE -> TAKEN (the take: the
 * caller then owns slot c wherever it runs next), or token -> token | 1 (the
 * acknowledgement of a claim: Busy after it); an odd value (TAKEN, a claim acknowledged)
 * exits Busy with no commit; a failed CAS (the word changed since the read) is Busy */
inline take_seq() {
    do
    :: {
        enter_slot(0, 3);
        if
        :: res != NONE -> break
        :: d_step { res == NONE ->                                /* (4) THE COMMIT */
                run_here();
#ifndef TAKE_STORES
                if
                :: owner[c] == l && l == FREE ->
                    EXCL(c); NOBODY_HOLDS(c);
                    owner[c] = TAKEN; held[c] = held[c] | BIT; confirmed[c] = confirmed[c] | BIT;
                    inseq[_pid] = 0; res = HIT;
                    printf("P%d take seq: COMMIT cmpxchg owner[%d] FREE -> TAKEN\n", _pid, c)
#ifndef ACK_STORES
                :: owner[c] == l && l != FREE ->
#else
                :: l != FREE ->                 /* MUTANT: the ack is a plain store */
#endif
                    ACK_HOLDER(c, l);
                    owner[c] = r; inseq[_pid] = 0; res = BUSY;
                    printf("P%d take seq: COMMIT cmpxchg owner[%d] %d -> %d (the ack): Busy\n", _pid, c, l, r)
                :: else ->
                    inseq[_pid] = 0; res = BUSY;
                    printf("P%d take seq: cmpxchg %d -> %d fails (owner[%d] = %d): Busy\n", _pid, l, r, c, owner[c])
                fi;
#else
                if                              /* MUTANT: the old plain store */
                :: l == FREE ->
                    EXCL(c); NOBODY_HOLDS(c);
                    owner[c] = TAKEN; held[c] = held[c] | BIT; confirmed[c] = confirmed[c] | BIT;
                    inseq[_pid] = 0; res = HIT;
                    printf("P%d take seq (mutant): COMMIT owner[%d] = TAKEN (a plain store)\n", _pid, c)
                :: else ->
                    owner[c] = r; inseq[_pid] = 0; res = BUSY;
                    printf("P%d take seq (mutant): COMMIT owner[%d] = %d (a plain store): Busy\n", _pid, c, r)
                fi;
#endif
                l = 0; r = 0
           }
        fi;
        break
       } unless { aborted[_pid] -> handler() }
    od;
#ifdef ACK_OUTSIDE_SEQUENCE
    if
    :: l != FREE ->                             /* MUTANT: the ack after the sequence, a plain CAS */
        d_step {
            run_here();
            if
            :: owner[c] == l -> owner[c] = l | 1;
               printf("P%d (cpu %d) after its take seq: CAS owner[%d] %d -> %d (the ack, outside)\n", _pid, cpu[_pid], c, l, l | 1)
            :: else ->
               printf("P%d (cpu %d) after its take seq: CAS owner[%d] %d -> %d fails\n", _pid, cpu[_pid], c, l, l | 1)
            fi;
            l = 0
        }
    :: else
    fi
#endif
}

/* ---- claims (Slot::try_claim, SlotClaim), the fence, and the owner's steps ---- */

/* Slot::claim: owner.compare_exchange(FREE, token); got = whether it holds the slot */
inline claim(s, got) {
#ifndef CLAIM_NO_CAS
    d_step {
        run_here();
        if
        :: owner[s] == FREE ->
            NOBODY_HOLDS(s);
            owner[s] = TOKEN; held[s] = held[s] | BIT; got = 1;
            printf("P%d claims slot %d: CAS FREE -> token %d\n", _pid, s, TOKEN)
        :: else -> got = 0;
            printf("P%d claim of slot %d: CAS fails (owner %d): miss\n", _pid, s, owner[s])
        fi
    }
#else
    d_step {                                    /* MUTANT: a load ... */
        run_here();
        if
        :: owner[s] == FREE -> got = 1;
            printf("P%d claim of slot %d (mutant): loads FREE\n", _pid, s)
        :: else -> got = 0;
            printf("P%d claim of slot %d (mutant): loads owner %d: miss\n", _pid, s, owner[s])
        fi
    };
    if
    :: got ->
        d_step {                                /* ... then a plain store of the token */
            run_here();
            NOBODY_HOLDS(s);
            owner[s] = TOKEN; held[s] = held[s] | BIT;
            printf("P%d claim of slot %d (mutant): stores token %d\n", _pid, s, TOKEN)
        }
    :: else
    fi
#endif
}

/* SlotClaim::take_whole: the claim acknowledged (owner = token | 1, seen by the claimant's
 * bounded wait), else rseq::fence_cpu(s); then the whole slot is the claimant's, with no
 * further load of the owner word (it may hold token or token | 1) */
inline fence(s) {
    if
    :: d_step { owner[s] == ACKED ->
        assert(held[s] & BIT);
        EXCL(s); confirmed[s] = confirmed[s] | BIT;
        printf("P%d owns slot %d (token %d acknowledged: no fence)\n", _pid, s, ACKED);
       }
    :: else ->                                  /* the wait ends without the ack */
#ifndef NO_MEMBARRIER
        membarrier(s);
#else
        printf("P%d fence (mutant): no membarrier\n", _pid);
#endif
        d_step {
            assert(held[s] & BIT);
            EXCL(s); confirmed[s] = confirmed[s] | BIT;
            printf("P%d owns slot %d (token %d, fenced)\n", _pid, s, TOKEN)
        }
    fi
}

/* Slot::try_take_fenced: the claim, then the fence */
inline fenced_take(s, got) {
    claim(s, got);
    if
    :: got -> fence(s)
    :: else
    fi
}

/* Slot::try_take_plain(act)'s CAS, inside the caller's d_step: owner.compare_exchange(
 * PLAIN, TAKEN, Acquire): the whole slot, no claim, no fence; the guard's release value
 * (SlotGuard::release) is FREE when act (the activating take), else PLAIN */
inline plain_cas(s, got, act) {
    if
    :: owner[s] == PLAIN ->
        NOBODY_HOLDS(s); PLAIN_QUIET(s);
        owner[s] = TAKEN; held[s] = held[s] | BIT; confirmed[s] = confirmed[s] | BIT;
        got = 1; rel = (act -> FREE : PLAIN);
        if
        :: act -> printf("P%d plain take of slot %d: CAS PLAIN -> TAKEN (activating: will release FREE)\n", _pid, s)
        :: else -> printf("P%d plain take of slot %d: CAS PLAIN -> TAKEN (will release PLAIN)\n", _pid, s)
        fi
    :: else -> got = 0;
        printf("P%d plain take of slot %d: CAS fails (owner %d)\n", _pid, s, owner[s])
    fi
}

/* Slot::try_take_plain(act): a load (not PLAIN: a miss), then the CAS from PLAIN; one
 * step here (a load that misses is a CAS that fails at that moment) */
inline plain_take(s, got, act) {
#ifndef PLAIN_TAKE_ACCEPTS_FREE
    d_step { run_here(); plain_cas(s, got, act) }
#else
    d_step {                                    /* MUTANT: the load picks FREE or PLAIN */
        run_here(); got = (owner[s] == FREE -> 1 : (owner[s] == PLAIN -> 2 : 0));
        printf("P%d plain take of slot %d (mutant): loads owner %d\n", _pid, s, owner[s])
    };
    if
    :: got == 1 ->
        d_step {
            run_here();
            if
            :: owner[s] == FREE ->              /* an active slot: no claim, no fence */
                NOBODY_HOLDS(s);
                owner[s] = TAKEN; held[s] = held[s] | BIT; confirmed[s] = confirmed[s] | BIT;
                got = 1; rel = (act -> FREE : PLAIN);
                printf("P%d plain take of slot %d (mutant): CAS FREE -> TAKEN, no fence\n", _pid, s)
            :: else -> got = 0;
                printf("P%d plain take of slot %d (mutant): CAS fails (owner %d)\n", _pid, s, owner[s])
            fi
        }
    :: got == 2 -> d_step { run_here(); plain_cas(s, got, act) }
    :: else                                     /* got == 0: a miss, no CAS */
    fi
#endif
}

/* Slot::try_take on a slot of a cache that runs sequences: is_plain() (a Relaxed load),
 * then try_take_plain(false) or try_take_fenced (claim + take_whole).  A stale is_plain
 * only makes the CAS fail (the word never returns to PLAIN; a claim needs FREE). */
inline try_take(s, got) {
#if PLAINS
#ifndef PLAIN_TAKE_ACCEPTS_FREE
    d_step { run_here(); got = (owner[s] == PLAIN) };
#else
    got = 1;                                    /* MUTANT: always the plain way */
#endif
    if
    :: got -> plain_take(s, got, 0)
    :: else -> fenced_take(s, got)
    fi
#else
    fenced_take(s, got)                         /* never PLAIN: is_plain() is false */
#endif
}

inline mine(s) { assert(confirmed[s] & BIT) }

/* SlotGuard's Drop and SlotClaim's Drop: owner.store(rel, Release): FREE, or PLAIN for
 * a guard of try_take_plain(false) (SlotGuard::release) */
inline release(s) {
    d_step {
        run_here(); assert(held[s] & BIT);
        held[s] = held[s] & ~BIT; confirmed[s] = confirmed[s] & ~BIT; owner[s] = rel;
        if
        :: rel == PLAIN -> MONOTONE(s)
        :: else -> activated[s] = 1
        fi;
        if
        :: rel == PLAIN -> printf("P%d releases slot %d: owner = PLAIN\n", _pid, s)
        :: else -> printf("P%d releases slot %d: owner = FREE\n", _pid, s)
        fi;
        rel = FREE
    }
}

/* The owner's steps on slot s's magazines: plain loads and stores, as MagazinePair's
 * methods do them, in two steps each: the loads (and a store into the cell at len,
 * invisible below len), then the stores.  l and r are the registers. */

/* a refill: the lowest outside item taken, then pushed (the depot's magazine, abstracted) */
inline own_refill(s) {
    d_step {
        mlen[s] < CAP && (insrc[1] || insrc[2] || insrc[3]) ->
        run_here(); mine(s);
        l = mlen[s];
        r = (insrc[1] -> 1 : (insrc[2] -> 2 : 3));
        insrc[r] = 0; hand[r] = _pid;           /* out of the depot / source, in hand */
        items[s * CAP + l] = r;
        printf("P%d owner of slot %d: len %d, writes outside item %d into cell %d\n", _pid, s, l, r, l);
        check()
    };
    d_step {
        run_here(); mine(s);
        assert(l < CAP);
        mlen[s] = l + 1; hand[r] = 0;
        printf("P%d owner of slot %d: len = %d (refilled item %d)\n", _pid, s, l + 1, r);
        l = 0; r = 0;
        check()
    }
}

/* mem::swap(loaded, previous) (MagazinePair::alloc / free): the lengths loaded, then
 * both magazines' cells and lengths stored swapped */
inline own_swap(s) {
    d_step {
        run_here(); mine(s); PREV_ENTER(s);
        l = mlen[s]; r = plen[s];
        printf("P%d owner of slot %d: swap: loaded len %d, previous len %d\n", _pid, s, l, r)
    };
    d_step {
        run_here(); mine(s);
        ck_i = items[s * CAP]; items[s * CAP] = pitems[s * CAP]; pitems[s * CAP] = ck_i;
        ck_i = items[s * CAP + 1]; items[s * CAP + 1] = pitems[s * CAP + 1]; pitems[s * CAP + 1] = ck_i;
        mlen[s] = r; plen[s] = l; PREV_EXIT(s);
        printf("P%d owner of slot %d: swap: loaded len = %d, previous len = %d\n", _pid, s, r, l);
        l = 0; r = 0;
        check()
    }
}

/* loaded's top item to the outside (free_miss's spill, abstracted: with 3 items and
 * magazines of 2, loaded and previous are never both full) */
inline own_spill(s) {
    d_step {
        run_here(); mine(s);
        l = mlen[s]; r = items[s * CAP + l - 1];
        printf("P%d owner of slot %d: len %d, reads item %d\n", _pid, s, l, r)
    };
    d_step {
        run_here(); mine(s);
        assert(r >= 1 && r <= NITEMS && !insrc[r]);
        mlen[s] = l - 1; insrc[r] = 1;
        printf("P%d owner of slot %d: len = %d, item %d out\n", _pid, s, l - 1, r);
        l = 0; r = 0;
        check()
    }
}

/* MagazinePair::alloc (alloc_miss, alloc_slow merged): pop the top item; loaded empty
 * and previous not: swap first; both empty: take one from the outside */
inline own_alloc(s) {
    if
    :: mlen[s] == 0 && plen[s] > 0 -> own_swap(s)
    :: else
    fi;
    d_step {
        run_here(); mine(s);
        l = mlen[s];
        if
        :: l > 0 -> r = items[s * CAP + l - 1];
           printf("P%d owner of slot %d: len %d, reads item %d\n", _pid, s, l, r)
        :: else
        fi
    };
    d_step {
        run_here(); mine(s);
        if
        :: l > 0 ->
            mlen[s] = l - 1;
            assert(r >= 1 && r <= NITEMS && hand[r] == 0); hand[r] = _pid;
            printf("P%d owner of slot %d: len = %d, item %d is P%d's\n", _pid, s, l - 1, r, _pid)
        :: else ->
            ck_i = 1;
            do
            :: ck_i > NITEMS -> break
            :: insrc[ck_i] -> insrc[ck_i] = 0; hand[ck_i] = _pid;
               printf("P%d owner of slot %d: empty, item %d from the outside\n", _pid, s, ck_i); break
            :: else -> ck_i++
            od
        fi;
        l = 0; r = 0;
        check()
    }
}

/* MagazinePair::free of x (loaded full: swap with previous if it is not full, else a
 * spill), then the push */
inline own_free(s) {
    if
    :: mlen[s] >= CAP && plen[s] < CAP -> own_swap(s)
    :: mlen[s] >= CAP && plen[s] >= CAP -> own_spill(s)
    :: else
    fi;
    d_step {
        run_here(); mine(s);
        l = mlen[s]; assert(l < CAP);
        items[s * CAP + l] = x;
        printf("P%d owner of slot %d: len %d, writes item %d into cell %d\n", _pid, s, l, x, l)
    };
    d_step {
        run_here(); mine(s);
        mlen[s] = l + 1; hand[x] = 0;
        printf("P%d owner of slot %d: len = %d, item %d is the magazine's\n", _pid, s, l + 1, x);
        l = 0;
        check()
    }
}

/* the items below len l (loaded) / r (previous) of slot s to the outside, lengths 0 */
inline out_items(s) {
    ck_k = 0;
    do
    :: ck_k >= l -> break
    :: else ->
        ck_i = items[s * CAP + ck_k];
        assert(ck_i >= 1 && ck_i <= NITEMS && !insrc[ck_i]); insrc[ck_i] = 1; ck_k++
    od;
    ck_k = 0;
    do
    :: ck_k >= r -> break
    :: else ->
        ck_i = pitems[s * CAP + ck_k];
        assert(ck_i >= 1 && ck_i <= NITEMS && !insrc[ck_i]); insrc[ck_i] = 1; ck_k++
    od;
    ck_k = 0; ck_i = 0
}

/* a whole owner's take of both magazines (steal_from after the fence; flush_cpu's
 * take_items): the lengths loaded, then every item out and both lengths 0 */
inline own_take_all(s) {
    d_step {
        run_here(); mine(s); PREV_ENTER(s);
        l = mlen[s]; r = plen[s];
        printf("P%d owner of slot %d: loaded len %d, previous len %d\n", _pid, s, l, r)
    };
    d_step {
        run_here(); mine(s);
        out_items(s);
        mlen[s] = 0; plen[s] = 0; PREV_EXIT(s);
        printf("P%d owner of slot %d: both magazines out (%d + %d items), lens = 0\n", _pid, s, l, r);
        l = 0; r = 0;
        check()
    }
}

/* ---- the workers: Cache::alloc / free with sequences ---- */

/* take_slot_in_sequence(want) (take_in_sequence): the take sequence; Elsewhere:
 * Slot::try_take of want; Busy (owned, or PLAIN): Slot::try_take_plain(want == ANY) of
 * sequence_slot(want) (current_cpu(), or want), which activates a PLAIN slot for alloc /
 * free, never for alloc_on / free_on */
inline take_slot() {
    take_seq();
    if
    :: res == ELSEWHERE ->
#ifdef ACK_FROM_ELSEWHERE
        d_step {                                /* MUTANT: acks want's claim from this CPU */
            run_here();
            if
            :: owner[want] >= 2 && (owner[want] & 1) == 0 ->
               printf("P%d (cpu %d) acks slot %d's claim from elsewhere: owner %d -> %d\n", _pid, cpu[_pid], want, owner[want], owner[want] | 1);
               owner[want] = owner[want] | 1
            :: else
            fi
        };
#endif
        c = want; try_take(c, got); res = (got -> HIT : BUSY)
#if PLAINS
    :: res == BUSY ->                           /* take_in_sequence's Busy arm */
#ifndef PLAIN_TAKE_ACCEPTS_FREE
        d_step { run_here(); c = (want == ANY -> cpu[_pid] : want); plain_cas(c, got, want == ANY) };
#else
        c = (want == ANY -> cpu[_pid] : want); plain_take(c, got, want == ANY);
#endif
        res = (got -> HIT : BUSY)
#endif
    :: else
    fi
}

#if PLAINS && W1WANT != ANY
/* alloc_on / free_on(want) that saw is_plain(want): alloc_from / free_into(take_slot(want)):
 * is_plain again (else take_slot_in_sequence), Slot::try_take, then take_other_slot
 * (try_take_unfenced = try_take_plain(false) of the other slot) */
inline take_slot_on() {
    d_step { run_here(); c = want; got = (owner[want] == PLAIN) };
    if
    :: !got -> take_slot()
    :: else ->
        try_take(c, got);
        if
        :: !got && NCPU > 1 -> c = (want + 1) % NCPU; plain_take(c, got, 0)
        :: else
        fi;
        res = (got -> HIT : BUSY)
    fi
}
#endif

/* alloc_from(slot): the owner path and the release, else alloc_busy */
inline alloc_from() {
    if
    :: res == HIT ->
        if :: own_refill(c) :: skip fi;
        own_alloc(c);
        release(c)
    :: else ->
        d_step {
            run_here();
            ck_i = 1;
            do
            :: ck_i > NITEMS -> break
            :: insrc[ck_i] -> insrc[ck_i] = 0; hand[ck_i] = _pid;
               printf("P%d alloc_busy: item %d from the outside\n", _pid, ck_i); break
            :: else -> ck_i++
            od;
            check()
        }
    fi
}

/* free_into(slot, x): the owner path and the release, else free_busy */
inline free_into() {
    if
    :: res == HIT -> own_free(c); release(c)
    :: else ->
        d_step {
            run_here();
            hand[x] = 0; insrc[x] = 1;
            printf("P%d free_busy: item %d to the outside\n", _pid, x);
            check()
        }
    fi
}

/* alloc_on / free_on's is_plain(want) (a Relaxed load): a plain slot is taken without
 * sequences (take_slot_on) */
#if PLAINS && W1WANT != ANY
#define ON_PLAIN(body)  if :: d_step { want != ANY && owner[want] == PLAIN -> run_here() } -> body :: else ->
#define ON_PLAIN_END    fi
#else
#define ON_PLAIN(body)
#define ON_PLAIN_END
#endif

inline alloc_op() {
    ON_PLAIN(take_slot_on(); alloc_from())
    alloc_seq();
    if
    :: res == HIT
    :: else -> take_slot(); alloc_from()        /* alloc_after_sequence */
    fi
    ON_PLAIN_END
}

inline free_op() {
    ON_PLAIN(take_slot_on(); free_into())
    free_seq();
    if
    :: res == HIT
    :: else -> take_slot(); free_into()         /* free_after_sequence */
    fi
    ON_PLAIN_END
}

proctype worker() {
    byte ops, c, l, r, res, x, got, rel;       /* rel: the guard's release value */
    byte want = (_pid == 1 -> W1WANT : ANY);   /* ANY: alloc / free; else alloc_on / free_on(want) */
    bool window;
    do
    :: ops >= OPS -> break
    :: else ->
        if
        :: alloc_op()
        :: hand[1] == _pid -> x = 1; free_op()
        :: hand[2] == _pid -> x = 2; free_op()
        :: hand[3] == _pid -> x = 3; free_op()
        fi;
        c = 0; l = 0; r = 0; res = 0; x = 0; got = 0;
        ops++
    od;
    atomic { wdone[_pid] = 1; finished++ }
}

/* ---- the remote thread: Cache::steal_from_slot(RSLOT), then Cache::flush_cpu ---- */

/* Cache::steal_from_slot(s) on a slot that runs sequences */
inline steal(s) {
    d_step {                                    /* runs_sequences(), Slot::looks_empty: racy loads */
        if
        :: (owner[s] != FREE && owner[s] != PLAIN) || (mlen[s] == 0 && plen[s] == 0) -> got = 0;
           printf("P%d steal: slot %d looks empty (owner %d, lens %d, %d): skipped\n", _pid, s, owner[s], mlen[s], plen[s])
        :: else -> got = (owner[s] == PLAIN -> 2 : 1)
        fi
    };
#if PLAINS
    if
    :: got == 2 ->                              /* PLAIN: take_victim -> try_take_for_items */
        try_take(s, got);
        if
        :: got -> own_take_all(s); release(s)   /* steal_from, the guard's Drop */
        :: else
        fi;
        got = 0
    :: else
    fi;
#endif
    if
    :: got -> claim(s, got)
    :: else
    fi;
    if
    :: got ->
#ifndef CLAIM_TOUCHES_LOADED
        d_step {                                /* claim.previous(): its len */
            PREV_ENTER(s);
            r = plen[s];
            if
            :: r > 0 -> printf("P%d claimant of slot %d: previous len %d\n", _pid, s, r)
            :: else -> PREV_EXIT(s); printf("P%d claimant of slot %d: previous empty\n", _pid, s)
            fi
        };
        if
        :: r > 0 ->                             /* steal_magazine: previous out, no fence */
            d_step {
                assert(held[s] & BIT); l = 0;
                out_items(s);
                plen[s] = 0; PREV_EXIT(s);
                printf("P%d claimant of slot %d: previous magazine (%d items) out, previous len = 0\n", _pid, s, r);
                r = 0;
                check()
            };
#ifdef CLAIM_RELEASES_PLAIN
            rel = PLAIN;                        /* MUTANT: a claim's release stores PLAIN */
#endif
            release(s)
        :: else ->                              /* claim.take_whole(), then steal_from */
            fence(s);
            own_take_all(s);
            release(s)
        fi
#else
        d_step {                                /* MUTANT: the whole slot, no fence */
            confirmed[s] = confirmed[s] | BIT;
            printf("P%d steal (mutant): takes slot %d's magazines with no fence\n", _pid, s)
        };
        own_take_all(s);
        release(s)
#endif
    :: else
    fi;
    got = 0
}

proctype remote() {
    byte c, got, rounds, l, r, rel;
    do
    :: rounds >= STEALS -> break
    :: else -> steal(RSLOT); rounds++
    od;
    rounds = 0;
    do
    :: rounds >= FLUSHES -> break
    :: else ->
        c = 0;
        do
        :: c >= FLUSH_SLOTS -> break
        :: else ->                              /* Cache::flush_cpu(c) */
            try_take(c, got);
            if
            :: got -> own_take_all(c); release(c)
            :: else
            fi;
            got = 0;
            c++
        od;
        rounds++
    od;
    finished++
}

init {
    d_step {
        /* item 1 in slot 0's loaded magazine; item 2 in slot 0's previous (PREV), else
         * outside (one CPU) or in slot 1's loaded magazine (two); item 3 in worker 1's
         * hands */
        ck_s = 0;
        do
        :: ck_s >= NCPU -> break
        :: else ->
#ifdef START_PLAIN
            owner[ck_s] = PLAIN;                /* Slot::new with a fenced_cpu */
#else
            activated[ck_s] = 1;                /* every slot already activated */
#endif
            ck_s++
        od;
        ck_s = 0;
        items[0] = 1; mlen[0] = 1;
#if PREV
        pitems[0] = 2; plen[0] = 1;
#else
#if NCPU > 1
        items[CAP] = 2; mlen[1] = 1;
#else
        insrc[2] = 1;
#endif
#endif
        hand[3] = 1;
        cpu[1] = W1CPU; cpu[2] = W2CPU;
#if NW >= 3
        cpu[3] = 0;
#endif
        cpu[NW + 1] = NOCPU; cpu[NW + 2] = NOCPU;
        check()
    };
    atomic {
        run worker();           /* pid 1 */
        run worker();           /* pid 2 */
#if NW >= 3
        run worker();           /* pid 3 */
#endif
        run remote();           /* pid NW + 1 */
        run kernel()            /* pid NW + 2 */
    };
    finished == NW + 1;
    printf("end: every worker and the remote thread are done\n");
    d_step {
        ck_s = 0;
        do
        :: ck_s >= NCPU -> break
        :: else -> assert(held[ck_s] == 0 && confirmed[ck_s] == 0 && prevuse[ck_s] == 0);
            assert(owner[ck_s] == FREE || owner[ck_s] == PLAIN);
            END_WORD(ck_s); ck_s++
        od;
        check()
    }
}
