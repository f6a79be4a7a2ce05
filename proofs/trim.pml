/*
 * trim.pml -- the working-set rule of src/depot.rs: Depot::trim, restart_interval,
 * Depot::release_full, Depot::pop_full, Depot::push_full, racing each other.
 * The step-to-line table is in proofs/README.md.
 *
 * The full stack is abstracted to its two counts: `slen` (Stack::len, the counter the
 * rule reads) and `linked` (ghost: nodes reachable from head).  Stack::pop is one step
 * that unlinks a node (the Treiber CAS; depot.pml checks the list itself), followed by
 * its separate `len.fetch_sub`, followed by pop_full's separate `full_low.fetch_min`.
 * Stack::push is `len.fetch_add`, then the link.  Every Rust atomic is one Promela step.
 *
 * Processes: POPPERS poppers and PUSHERS pushers (OPS operations each), TRIMMERS
 * trimmers calling Depot::trim TRIMS times each (Dynamic { target: TARGET, WorkingSet }).
 * When every popper and pusher is done, one last process runs two quiescent trims.
 *
 * Ghost: `glow` is the minimum of Stack::len since the end of the last restart_interval
 * (the trim's third read); each trim snapshots it at its FIRST read of the length.  That
 * window [previous trim's last read, this trim's first read] is the most lenient one a
 * reader could call "the interval": any magazine count below it was really reached while
 * no restart was running.  `inflight` counts pops between their len.fetch_sub and their
 * full_low.fetch_min; each trim snapshots it at its swap.
 *
 * Properties (assert):
 *   default  released <= glow + inflight-at-swap        (what the Rust code guarantees)
 *   -DEXACT  released <= glow                           (the working-set rule as stated)
 *   always   the trimming flag admits one trim at a time; released <= linked popped;
 *            after the load stops, two trims leave at most TARGET full magazines
 *            (DESIGN.md invariant 4).
 * Variants of restart_interval:
 *   default        the exact code: swap(len()), fetch_min(len()), min(len())
 *   -DSINGLE_READ  negative control: `low.swap(stack.len())` alone
 *   -DPACKED       a proposed fix: len and the low-water mark in one atomic word, so a
 *                  pop lowers both in one step and a restart reads-and-resets in one step
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

byte slen = L0;      /* Stack::len (full stack) */
byte linked = L0;    /* ghost: nodes reachable from head */
byte full_low = L0;  /* Depot::full_low, as if a trim had just restarted at L0 */
bool trimming;       /* Depot::trimming */
byte glow = L0;      /* ghost: min of slen since the last restart ended */
byte inflight;       /* ghost: pops between len.fetch_sub and full_low.fetch_min */
bool in_trim;        /* ghost: a trim is between its swap and its flag release */
byte workers_done;

#define lower_glow()  if :: slen < glow -> glow = slen :: else fi

/* Depot::pop_full = Stack::pop (unlink; len.fetch_sub) + full_low.fetch_min.
 * got = 1 when a magazine was taken. */
inline pop_full(got, l) {
#ifndef PACKED
    d_step {                                    /* Stack::pop: the winning CAS, or None */
        if :: linked > 0 -> linked--; got = 1;
              printf("P%d pop: CAS unlinks a full magazine (linked %d)\n", _pid, linked)
           :: else -> got = 0 fi
    };
    if
    :: got ->
        d_step { slen--; l = slen; lower_glow(); inflight++;    /* Stack::pop: len.fetch_sub */
                 printf("P%d pop: len.fetch_sub -> len %d\n", _pid, slen) };
        d_step {                                /* pop_full: full_low.fetch_min(len) */
            if :: l < full_low -> full_low = l :: else fi; inflight--;
            printf("P%d pop: full_low.fetch_min(%d) -> full_low %d\n", _pid, l, full_low)
        }
    :: else
    fi
#else
    d_step {
        if :: linked > 0 -> linked--; got = 1 :: else -> got = 0 fi
    };
    if
    :: got ->
        d_step {                                /* one CAS on the packed (len, low) word */
            slen--; l = slen; lower_glow();
            if :: l < full_low -> full_low = l :: else fi
        }
    :: else
    fi
#endif
}

/* Depot::push_full, Dynamic policy: push_bounded with cap usize::MAX, then link */
inline push_full() {
    d_step { slen++;                            /* Stack::push_bounded: len.fetch_update */
             printf("P%d push: len.fetch_update -> len %d\n", _pid, slen) };
    d_step { linked++;                          /* Stack::link: the winning CAS */
             printf("P%d push: CAS links the magazine (linked %d)\n", _pid, linked) }
}

/* restart_interval(&full_low, &full): returns `unused` */
inline restart_interval(unused) {
#if defined(PACKED)
    d_step {                                    /* one CAS on the packed word */
        gsnap = glow; gin = inflight;
        ended = full_low; full_low = slen;
        unused = (ended < slen -> ended : slen);
        glow = slen
    }
#elif defined(SINGLE_READ)
    d_step { r = slen; gsnap = glow;            /* stack.len() */
             printf("P%d trim: len() = %d  [ghost: interval low-water %d]\n", _pid, r, gsnap) };
    d_step { ended = full_low; full_low = r; gin = inflight; glow = slen;  /* low.swap */
             printf("P%d trim: full_low.swap(%d) returns %d magazines to release\n", _pid, r, ended) };
    unused = ended
#else
    d_step { r = slen; gsnap = glow;            /* first stack.len() */
             printf("P%d trim: len() = %d  [ghost: interval low-water %d]\n", _pid, r, gsnap) };
    d_step { ended = full_low; full_low = r; gin = inflight;   /* low.swap(len) */
             printf("P%d trim: full_low.swap(%d) returns %d\n", _pid, r, ended) };
    d_step { r = slen; printf("P%d trim: len() = %d\n", _pid, r) };  /* second stack.len() */
    d_step { if :: r < full_low -> full_low = r :: else fi };   /* low.fetch_min(len) */
    d_step {                                    /* ended.min(stack.len()) */
        unused = (ended < slen -> ended : slen);
        printf("P%d trim: ended.min(len() = %d) = %d magazines to release\n", _pid, slen, unused);
        glow = slen
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
#ifdef EXACT
        assert(unused <= gsnap);
#else
        assert(unused <= gsnap + gin);
#endif
        released = 0;
        do                                      /* release_full */
        :: released < unused && slen > TARGET ->   /* while ... && full.len() > target */
            pop_full(got, l);
            if :: got -> released++; printf("P%d trim: released %d\n", _pid, released)
            :: else -> break fi
        :: else -> break
        od;
#ifdef EXACT
        assert(released <= gsnap);
#else
        assert(released <= gsnap + gin);
#endif
        in_trim = 0;
        trimming = 0                            /* TrimRunning::drop: store(false) */
    fi;
    busy = 0; unused = 0; released = 0; ended = 0; r = 0; gsnap = 0; gin = 0; got = 0; l = 0
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
    byte i, busy, unused, released, ended, r, gsnap, gin, got, l;
    do
    :: i < n -> trim(); i++
    :: else -> break
    od;
    workers_done++
}

/* after the load stops: two trims bring the depot to TARGET (invariant 4) */
proctype quiescent() {
    byte busy, unused, released, ended, r, gsnap, gin, got, l;
    workers_done == POPPERS + PUSHERS + TRIMMERS;
    trim();
    trim();
    assert(slen == linked && slen <= TARGET)
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
