/*
 * trim.pml -- the working-set rule of src/depot.rs (Depot::trim with WorkingSet,
 * Depot::release_full, Depot::pop_full, Depot::push_full) over the two counts of
 * src/stack.rs / src/level.rs (commit e74670c), racing each other.
 * The step-to-line table is in proofs/README.md.
 *
 * The full stack is abstracted to its counters and `linked` (the number of nodes reachable
 * from head; depot.pml checks the list itself).  Every Rust atomic is one Promela step:
 *   slen          Stack::len, the capacity counter (reserved before the link, released
 *                 after the unlink); what release_full's `full.len() > target` reads
 *   count, low    Level: count (added after the link, claimed before the unlink) and the
 *                 low-water mark of count since the last restart_interval, one word
 * Stack::push_bounded (Dynamic policy: cap usize::MAX) = reserve slen; link; Level::add.
 * Stack::pop = Level::claim (None when count is 0); the Treiber loop (head load, CAS)
 * abstracted to one step that unlinks a node, or finds head null; len.fetch_sub.
 *
 * Processes: POPPERS poppers and PUSHERS pushers (OPS operations each), TRIMMERS
 * trimmers calling Depot::trim TRIMS times each (Dynamic { target: TARGET, WorkingSet }).
 * When every popper, pusher and trimmer is done, one last process runs two quiescent
 * trims.
 *
 * Ghost, computed from the model's own link and unlink steps, never from a counter the
 * code reads:
 *   content = linked + gpend   what the stack holds: linked nodes plus pushes that have
 *                              reserved and not yet linked (a push counts from its
 *                              reservation, the most lenient point); a pop leaves at its
 *                              unlinking CAS
 *   glk    minimum of content since the last restart_interval (reset to content there);
 *          each trim snapshots it (gsnap) at its restart
 *   glkL   (default variant) the same for `linked` alone, stricter still: in a LIFO stack
 *          min(linked) over the interval is exactly the number of magazines that stayed
 *          linked all of it (the bottom ones)
 *
 * Properties (assert):
 *   every variant  released <= gsnap  (a trim releases at most the interval's real
 *                  low-water mark); the trimming flag admits one trim at a time
 *   default        also unused <= gsnapL and released <= gsnapL; after every step
 *                  slen >= linked (the Fixed-cap reservation) and count <= linked; the
 *                  null-head branch of Stack::pop after a successful claim is never taken;
 *                  after the load stops, two trims leave slen == count == linked <= TARGET
 *                  (invariants 4 and 5 of magazine::docs::design)
 * Variants (negative controls, expected to fail released <= gsnap):
 *   -DOLD        the code before 58eb296: Stack::len alone (fetch_sub after the unlink),
 *                the low-water mark in a separate atomic (pop_full's fetch_min), and
 *                restart_interval = swap(len()), fetch_min(len()), min(len())
 *   -DPACKED     commit 58eb296: len and low in one word, but lowered after the unlink
 *                (Level::release), raised before the link (Level::reserve)
 *   -DADD_FIRST  the default with Level::add moved before the link (into the reservation):
 *                count <= linked is then not checked, and the null-head branch is reached
 */

#ifndef POPPERS
#define POPPERS  1
#endif
#ifndef PUSHERS
#define PUSHERS  1
#endif
#ifndef TRIMMERS
#define TRIMMERS 2
#endif
#ifndef TRIMS
#define TRIMS    2
#endif
#ifndef OPS
#define OPS      2
#endif
#define TARGET   0
#define L0       2   /* full magazines at the start of the first interval */

byte slen = L0;      /* Stack::len (capacity counter); OLD / PACKED: the only length */
byte linked = L0;    /* ghost: nodes reachable from head */
byte full_low = L0;  /* Level's low half (default), Level's low (PACKED), Depot::full_low (OLD) */
#if !defined(OLD) && !defined(PACKED)
byte count = L0;     /* Level's count */
#endif
bool trimming;       /* Depot::trimming */
byte gpend;          /* ghost: pushes between their reservation and their link */
byte glk = L0;       /* ghost: min of content (linked + gpend) since the last restart */
byte glkL = L0;      /* ghost: min of linked since the last restart */
bool in_trim;        /* ghost: a trim is between its restart and its flag release */
byte workers_done;

#define content (linked + gpend)
#define lower_ghost() \
    if :: content < glk -> glk = content :: else fi; \
    if :: linked < glkL -> glkL = linked :: else fi

#if !defined(OLD) && !defined(PACKED)
#ifndef ADD_FIRST
#define check() assert(slen >= linked && count <= linked && full_low <= count)
#else
#define check() assert(slen >= linked && full_low <= count)
#endif
#else
#define check() assert(slen >= linked)
#endif

/* the unlinking CAS of Stack::pop (with the node it takes) or None */
#define UNLINK(got) \
    if :: linked > 0 -> linked--; got = 1; lower_ghost(); check(); \
          printf("P%d pop: CAS unlinks a full magazine (linked %d)\n", _pid, linked) \
       :: else -> got = 0 fi

/* Depot::pop_full = Stack::pop; got = 1 when a magazine was taken */
inline pop_full(got, l) {
#if defined(OLD)
    d_step { UNLINK(got) };                     /* Stack::pop: the winning CAS, or None */
    if
    :: got ->
        d_step { slen--; l = slen; check();     /* Stack::pop: len.fetch_sub */
                 printf("P%d pop: len.fetch_sub -> len %d\n", _pid, slen) };
        d_step {                                /* pop_full: full_low.fetch_min(len) */
            if :: l < full_low -> full_low = l :: else fi;
            printf("P%d pop: full_low.fetch_min(%d) -> full_low %d\n", _pid, l, full_low)
        }
    :: else
    fi
#elif defined(PACKED)
    d_step { UNLINK(got) };                     /* Stack::pop: the winning CAS, or None */
    if
    :: got ->
        d_step {                                /* Level::release: one CAS on (len, low) */
            slen--; if :: slen < full_low -> full_low = slen :: else fi; check();
            printf("P%d pop: level.release() -> len %d, low %d\n", _pid, slen, full_low)
        }
    :: else
    fi
#else
    d_step {                                    /* Level::claim (stack.rs l.158) */
        if :: count > 0 -> count--; if :: count < full_low -> full_low = count :: else fi;
              got = 1; check();
              printf("P%d pop: level.claim() -> count %d, low %d\n", _pid, count, full_low)
           :: else -> got = 0;
              printf("P%d pop: level.claim() refused: None\n", _pid)
        fi
    };
    if
    :: got ->
        d_step {                                /* head.load / failed CAS / winning CAS */
            if
            :: linked > 0 -> UNLINK(got)
            :: else ->                          /* l.167-173: head is null after a claim */
                printf("P%d pop: head is null after a successful claim\n", _pid);
                assert(linked > 0)
            fi
        };
        d_step { slen--; check();               /* len.fetch_sub (l.196) */
                 printf("P%d pop: len.fetch_sub -> len %d\n", _pid, slen) }
    :: else
    fi
#endif
}

/* Depot::push_full, Dynamic policy: Stack::push_bounded with cap usize::MAX */
inline push_full() {
#if defined(PACKED)
    d_step { slen++; gpend++; check();          /* Level::reserve: one CAS on (len, low) */
             printf("P%d push: level.reserve -> len %d\n", _pid, slen) };
#elif defined(ADD_FIRST)
    d_step { slen++; gpend++; check();          /* len.fetch_update */
             printf("P%d push: len.fetch_update -> len %d\n", _pid, slen) };
    d_step { count++; check();                  /* mutant: Level::add before the link */
             printf("P%d push (mutant): level.add() before the link -> count %d\n", _pid, count) };
#else
    d_step { slen++; gpend++; check();          /* len.fetch_update (l.105-109) */
             printf("P%d push: len.fetch_update -> len %d\n", _pid, slen) };
#endif
    d_step { linked++; gpend--; check();        /* Stack::link: the winning CAS */
             printf("P%d push: CAS links the magazine (linked %d)\n", _pid, linked) };
#if !defined(OLD) && !defined(PACKED) && !defined(ADD_FIRST)
    d_step { count++; check();                  /* Level::add (l.119) */
             printf("P%d push: level.add() -> count %d\n", _pid, count) }
#endif
}

/* Stack::restart_interval / Level::restart_interval (default, PACKED), or the two-atomics
 * restart_interval(&full_low, &full) of depot.rs before 58eb296 (OLD): returns `unused` */
inline restart_interval(unused) {
#if defined(OLD)
    d_step { r = slen; gsnap = glk; gsnapL = glkL;      /* first stack.len() */
             printf("P%d trim: len() = %d  [ghost: interval low-water %d]\n", _pid, r, gsnap) };
    d_step { ended = full_low; full_low = r;            /* low.swap(len) */
             printf("P%d trim: full_low.swap(%d) returns %d\n", _pid, r, ended) };
    d_step { r = slen; printf("P%d trim: len() = %d\n", _pid, r) };  /* second stack.len() */
    d_step { if :: r < full_low -> full_low = r :: else fi };   /* low.fetch_min(len) */
    d_step {                                    /* ended.min(stack.len()) */
        unused = (ended < slen -> ended : slen);
        printf("P%d trim: ended.min(len() = %d) = %d magazines to release\n", _pid, slen, unused);
        glk = content; glkL = linked            /* the next interval starts here */
    }
#else
    d_step {                                    /* one fetch_update on the packed word */
        gsnap = glk; gsnapL = glkL;
#if defined(PACKED)
        ended = full_low; full_low = slen;
#else
        ended = full_low; full_low = count;
#endif
        unused = ended;
        glk = content; glkL = linked;
        printf("P%d trim: restart_interval() returns %d  [ghost: low-water of what the stack holds %d]\n", _pid, unused, gsnap)
    }
#endif
}

/* Depot::trim with Dynamic { target: TARGET, trim: WorkingSet } */
inline trim() {
    d_step {                                    /* trimming.swap(true, Acquire) */
        if :: trimming -> busy = 1 :: else -> trimming = 1; busy = 0 fi
    };
    if
    :: busy -> skip                             /* another trim runs: return 0 */
    :: else ->
        assert(!in_trim); in_trim = 1;
        restart_interval(unused);
#if !defined(OLD) && !defined(PACKED) && !defined(ADD_FIRST)
        assert(unused <= gsnapL);
#endif
        released = 0;
        do                                      /* release_full */
        :: released < unused && slen > TARGET ->   /* while ... && full.len() > target */
            pop_full(got, l);
            if :: got -> released++;
                  printf("P%d trim: releases a magazine (%d released; len %d, linked %d)\n", _pid, released, slen, linked)
            :: else -> break fi
        :: else -> break
        od;
        assert(released <= gsnap);
#if !defined(OLD) && !defined(PACKED) && !defined(ADD_FIRST)
        assert(released <= gsnapL);
#endif
        in_trim = 0;
        trimming = 0                            /* TrimRunning::drop: store(false) */
    fi;
    busy = 0; unused = 0; released = 0; ended = 0; r = 0; gsnap = 0; gsnapL = 0; got = 0; l = 0
}

proctype popper() {
    byte i, got, l;
    do
    :: i < OPS -> pop_full(got, l); got = 0; l = 0; i++
    :: else -> break
    od;
    workers_done++
}

proctype pusher() {
    byte i;
    do
    :: i < OPS -> push_full(); i++
    :: else -> break
    od;
    workers_done++
}

proctype trimmer(byte n) {
    byte i, busy, unused, released, ended, r, gsnap, gsnapL, got, l;
    do
    :: i < n -> trim(); i++
    :: else -> break
    od;
    workers_done++
}

/* after the load stops: two trims bring the depot to TARGET (invariant 4) */
proctype quiescent() {
    byte busy, unused, released, ended, r, gsnap, gsnapL, got, l;
    workers_done == POPPERS + PUSHERS + TRIMMERS;
    trim();
    trim();
#if !defined(OLD) && !defined(PACKED)
    assert(slen == linked && count == linked && slen <= TARGET)
#else
    assert(slen == linked && slen <= TARGET)
#endif
}

init {
    atomic {
        byte k;
        k = 0; do :: k < POPPERS -> run popper(); k++ :: else -> break od;
        k = 0; do :: k < PUSHERS -> run pusher(); k++ :: else -> break od;
        k = 0; do :: k < TRIMMERS -> run trimmer(TRIMS); k++ :: else -> break od;
        run quiescent()
    }
}
