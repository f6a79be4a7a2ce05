/*
 * fixedcap.pml -- the Fixed cap and the empty-stack cap: Stack::push_bounded (the
 * reservation `len.fetch_update(|len| (len < cap).then_some(len + 1))`, then the link,
 * then Level::add) against Stack::pop (Level::claim, None when nothing is counted; the
 * unlink; then `len.fetch_sub`), src/stack.rs at e74670c, as used by Depot::push_full /
 * Depot::pop_full with DepotPolicy::Fixed { max_full: CAP } and by Depot::push_empty /
 * Depot::pop_empty with Config::max_empty.  Overflow is Cache::free_on's refused path:
 * the magazine goes to the source.  The step-to-line table is in proofs/README.md.
 *
 * NPROC processes, OPS operations each: push the magazine held (bounded), or pop one.
 * The list structure is abstracted to `linked` (nodes reachable from head); depot.pml
 * checks the list, this model checks the counting.
 *
 * Checked after every step:
 *   linked <= CAP            the depot never holds more than max_full (inv. 4 of magazine::docs::design)
 *   slen <= CAP              the reservation never overshoots
 *   slen >= linked           Stack::len is a hard bound on the linked nodes (inv. 5)
 *   count <= linked          Level's count never exceeds the linked nodes, so a pop
 *                            whose claim succeeded always finds a node: the null-head
 *                            branch of Stack::pop (stack.rs l.167-173) is asserted
 *                            unreachable
 *   every magazine in exactly one place (a process, the stack, the source), and a
 *   refused magazine reaches the source exactly once
 * At the end: slen == count == linked (Stats lengths exact when quiescent, inv. 5).
 *
 * -DSPLIT_CAP  negative control: the cap check (load) and the increment (fetch_add) are
 *              two steps (the mutant "Fixed overflow that pushes without checking the cap
 *              atomically" of the loom-tests suite).
 * -DONLY_DEPOT_BOUND  with a control: assert only linked <= CAP, so the trail ends where
 *              the depot really holds more than max_full full magazines.
 * -DDEC_FIRST  negative control: pop decrements len BEFORE it unlinks (the counter-race
 *              mutant of the loom-tests suite; here after its claim), so len < linked for a moment and
 *              a push slips past.
 */

#define NPROC 3
#define NMAG  4
#define CAP   2
#ifndef OPS
#define OPS   2
#endif

#define STACK  8
#define SOURCE 9

byte slen = 1;            /* Stack::len */
byte count = 1;           /* Level's count (linked, not claimed) */
byte linked = 1;          /* ghost: nodes reachable from head */
byte magloc[NMAG + 1];    /* ghost: 1..NPROC held by that process, STACK, SOURCE */
byte done;

hidden byte ck_m, ck_s;

inline check() {
    assert(linked <= CAP);
#ifndef ONLY_DEPOT_BOUND
    assert(slen <= CAP);
    assert(slen >= linked);
    assert(count <= linked);
#endif
    ck_m = 1; ck_s = 0;
    do
    :: ck_m > NMAG -> break
    :: else ->
        assert(magloc[ck_m] >= 1 && (magloc[ck_m] <= NPROC || magloc[ck_m] == STACK || magloc[ck_m] == SOURCE));
        if :: magloc[ck_m] == STACK -> ck_s++ :: else fi;
        ck_m++
    od;
    assert(ck_s == linked)
}

/* Stack::push_bounded, then on Err the caller's release to the source */
inline push_bounded(me, m) {
#ifndef SPLIT_CAP
    d_step {                                        /* len.fetch_update(SeqCst, SeqCst, ..) */
        if :: slen < CAP -> slen++; ok = 1 :: else -> ok = 0 fi;
        check()
    };
#else
    d_step { ok = (slen < CAP);                     /* mutant: len.load() < cap */
             printf("P%d push (mutant): len.load() = %d < cap\n", me, slen) };
    if :: ok -> d_step { slen++; check();           /* mutant: len.fetch_add(1) */
                         printf("P%d push (mutant): len.fetch_add -> %d\n", me, slen) }
    :: else fi;
#endif
    if
    :: ok ->
        d_step { linked++; magloc[m] = STACK; check();    /* Stack::link: the winning CAS */
                 printf("P%d push_bounded: linked magazine %d (len %d, linked %d)\n", me, m, slen, linked) };
        d_step { count++; check() }                       /* Level::add */
    :: else ->
        d_step { magloc[m] = SOURCE; check();             /* Err(magazine): release to source */
                 printf("P%d push_bounded: refused magazine %d, its items go to the source\n", me, m) }
    fi;
    m = 0; ok = 0
}

/* Stack::pop: Level::claim (None when nothing is counted); the unlinking CAS takes the
 * lowest-numbered magazine in the stack (which one does not matter for counting), or
 * finds head null (asserted unreachable after a claim); then len.fetch_sub */
inline pop(me, m) {
    d_step {                                        /* Level::claim */
        if :: count > 0 -> count--; ok = 1;
              printf("P%d pop: level.claim() -> count %d\n", me, count)
           :: else -> ok = 0 fi;
        check()
    };
    if
    :: ok ->
#ifndef DEC_FIRST
        d_step {
            m = 1;
            do
            :: m > NMAG -> m = 0; break
            :: magloc[m] == STACK -> magloc[m] = me; linked--;
               printf("P%d pop: unlinked magazine %d (linked %d)\n", me, m, linked); break
            :: else -> m++
            od;
            assert(m != 0);                         /* head null after a claim: unreachable */
            check()
        };
        d_step { slen--; check() }                  /* len.fetch_sub(1, SeqCst) */
#else
        d_step { slen--;                            /* mutant: len.fetch_sub first */
                 printf("P%d pop (mutant): len.fetch_sub first -> len %d, linked %d\n", me, slen, linked);
                 check() };
        d_step {                                    /* then the unlinking CAS */
            m = 1;
            do
            :: m > NMAG -> m = 0; break
            :: magloc[m] == STACK -> magloc[m] = me; linked--; break
            :: else -> m++
            od;
            assert(m != 0);
            check()
        }
#endif
    :: else -> m = 0                                /* claim refused: None */
    fi;
    ok = 0
}

proctype worker(byte me; byte start) {
    byte m = start, ops, ok;
    do
    :: ops >= OPS -> break
    :: else ->
        if
        :: m != 0 -> push_bounded(me, m)
        :: m == 0 -> pop(me, m)
        fi;
        ops++
    od;
    done++
}

init {
    atomic {
        magloc[1] = STACK;
        run worker(1, 2); magloc[2] = 1;
        run worker(2, 3); magloc[3] = 2;
        run worker(3, 4); magloc[4] = 3
    };
    done == NPROC;
    d_step { check(); assert(slen == linked && count == linked) }
}
