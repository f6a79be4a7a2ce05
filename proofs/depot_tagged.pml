/*
 * depot_tagged.pml -- the Treiber stack of src/stack.rs in which every magazine is its own
 * node (Link) and the head is a tagged word (Stack::head: node address + tag, every
 * successful CAS adds one to the tag); crossbeam-epoch modelled as a grace-period rule
 * for the nodes' memory (Link::drop defers the free).  The step-to-function table is in
 * proofs/README.md.
 *
 * Three processes, three magazines, NNODE node addresses.  Each process does its number
 * of operations: push the magazine held, pop one, or release the held magazine to the
 * source (trim after its pop; the magazine is dropped, so its node is retired through
 * the epoch).  A magazine gets its node at its first push (Link::node): ANY free address,
 * so an address freed after its grace period is reused.  Magazines 1 and 2 start in the
 * stack (nodes 1 -> 2); process 1 holds magazine 3, which has no node yet.
 *
 * Ghost state, changed in the same atomic step as the successful CAS:
 *   magloc[m]  where magazine m is: HELD(p) / STACK / SOURCE
 *   nstate[n]  FREE / OWNED (a magazine's node, magazine outside it) / LINKED /
 *              RETIRED (its magazine dropped, free deferred, grace pending)
 *
 * Checked after every step that changes shared state (check()), as in depot.pml:
 *   - the list from head is acyclic, without repeats, every node on it is LINKED, and
 *     the nodes on it are exactly the LINKED ones;
 *   - the magazines on it are exactly those marked STACK;
 *   - len >= linked nodes and Level's count <= linked nodes; at the end
 *     len == count == linked and nobody is pinned.
 * A pop whose claim succeeded never reads a null head (asserted unreachable).
 * At every read of (*head).next: the node is not FREE (no read after free).
 *
 * -DTAGMOD=k      the tag counts modulo k (default 64: no wrap within these bounds).
 * -DNO_BUMP       negative control: the tag is never bumped (the head is a bare pointer
 *                 to recycled nodes): the ABA bug, mutant `tag_not_bumped`.
 * -DTAGMOD=4 -DOPS=3   negative control: a 2-bit tag, which wraps within one pop's
 *                 window when 4 operations fit in it (here, with 3 operations each).
 * -DNO_GRACE      negative control: a dropped magazine's node is freed at once.
 */

#define NPROC 3
#define NNODE 4
#define NMAG  3
#ifndef OPS
#define OPS   2
#endif
#ifndef TAGMOD
#define TAGMOD 64
#endif

#ifdef NO_BUMP
#define BUMP(t) (t)
#else
#define BUMP(t) (((t) + 1) % TAGMOD)
#endif

/* node states */
#define FREE     0
#define OWNED    1
#define LINKED   2
#define RETIRED  3

/* magazine locations; 1..NPROC = held by that process */
#define STACK  8
#define SOURCE 9

byte head;                 /* Stack::head, its node half; 0 = null */
byte htag;                 /* Stack::head, its tag half */
byte slen;                 /* Stack::len (capacity counter) */
byte level;                /* Level's count: linked and not claimed */
byte next[NNODE + 1];      /* Node::next */
byte nmag[NNODE + 1];      /* the magazine whose node it is (Node::magazine when linked) */
byte mnode[NMAG + 1];      /* Magazine::link: its node, 0 = none yet */
byte nstate[NNODE + 1];    /* ghost */
byte waitmask[NNODE + 1];  /* ghost: processes pinned when the node's free was deferred */
byte pinned;               /* ghost: bitmask of pinned processes (crossbeam-epoch) */
byte magloc[NMAG + 1];     /* ghost */
byte done;                 /* processes finished */

hidden byte ck_n, ck_c, ck_k, ck_seen;

inline check() {
    ck_n = head; ck_c = 0; ck_seen = 0;
    do
    :: ck_n == 0 -> break
    :: else ->
        assert(nstate[ck_n] == LINKED);
        assert((ck_seen & (1 << ck_n)) == 0);   /* acyclic, no repeats */
        ck_seen = ck_seen | (1 << ck_n);
        assert(magloc[nmag[ck_n]] == STACK);
        ck_c++;
        ck_n = next[ck_n]
    od;
    /* the list is exactly the LINKED nodes */
    ck_k = 1;
    do
    :: ck_k > NNODE -> break
    :: else ->
        assert((nstate[ck_k] == LINKED) == ((ck_seen & (1 << ck_k)) != 0));
        ck_k++
    od;
    /* the magazines marked STACK are exactly those on the list */
    ck_k = 1; ck_n = 0;
    do
    :: ck_k > NMAG -> break
    :: else -> if :: magloc[ck_k] == STACK -> ck_n++ :: else fi; ck_k++
    od;
    assert(ck_n == ck_c);
    assert(slen >= ck_c);
    assert(level <= ck_c)
}

/* crossbeam-epoch as a grace-period rule: unpinning clears this process from every
 * deferred node's wait set; a node whose wait set is empty is freed. */
inline unpin(me) {
    pinned = pinned & ~(1 << me);
    ck_k = 1;
    do
    :: ck_k > NNODE -> break
    :: else ->
        if
        :: nstate[ck_k] == RETIRED ->
            waitmask[ck_k] = waitmask[ck_k] & ~(1 << me);
            if
            :: waitmask[ck_k] == 0 -> nstate[ck_k] = FREE;
               printf("P%d unpin: node %d freed (grace period over)\n", me, ck_k)
            :: else
            fi
        :: else
        fi;
        ck_k++
    od
}

/* Link::node: Box::new(Node { .. }) at any free address */
inline alloc_node(n) {
    if
    :: nstate[1] == FREE -> n = 1
    :: nstate[2] == FREE -> n = 2
    :: nstate[3] == FREE -> n = 3
    :: nstate[4] == FREE -> n = 4
    fi
}

inline push(me, m) {
    if                                                   /* Link::node, before counting */
    :: mnode[m] == 0 ->
       atomic { alloc_node(n); nstate[n] = OWNED; nmag[n] = m; mnode[m] = n;
                printf("P%d push: magazine %d gets its node at address %d\n", me, m, n) }
    :: else
    fi;
    n = mnode[m];
    d_step { slen++ };                                    /* reserve_then_link: len.fetch_update */
    d_step { h = head; t = htag };                        /* link: head.load(Relaxed) */
    do
    :: d_step { next[n] = h;                             /* link: (*node).next.store */
                printf("P%d push: writes (*%d).next = %d\n", me, n, h) };
       d_step {                                          /* link: compare_exchange_weak */
           if
           :: head == h && htag == t ->
               head = n; htag = BUMP(t); nstate[n] = LINKED; magloc[m] = STACK;
               printf("P%d push: CAS (%d,t%d) -> (node %d,t%d) (magazine %d, next %d) won\n", me, h, t, n, htag, m, h);
               check(); ok = 1
           :: else -> h = head; t = htag; ok = 0
           fi
       };
       if :: ok -> break :: else fi
    od;
    h = 0; t = 0;                                        /* (break lands outside the d_step) */
    d_step { level++; check() };                         /* reserve_then_link: level.add() */
    n = 0; ok = 0
}

inline pop(me, m) {
    d_step {                                             /* pop: level.claim() */
        if :: level > 0 -> level--; ok = 1;
              printf("P%d pop: level.claim() -> count %d\n", me, level)
           :: else -> ok = 0 fi
    };
    if
    :: ok ->                                             /* claimed */
        ok = 0;
        d_step { pinned = pinned | (1 << me) };              /* pop: sync::pin() */
        d_step { h = head; t = htag;                         /* pop: head.load(Acquire) */
                 printf("P%d pop: pinned, reads head = (%d,t%d)\n", me, h, t) };
        do
        :: h == 0 ->                                         /* pop: null head after a claim */
           printf("P%d pop: head is null after a successful claim\n", me);
           assert(h != 0); break                             /* (unreachable) */
        :: else ->
           assert(nstate[h] != FREE);                        /* no read after free */
           d_step { nx = next[h];                            /* pop: (*node).next.load */
                    printf("P%d pop: reads (*%d).next = %d\n", me, h, nx) };
           d_step {                                          /* pop: compare_exchange_weak */
               if
               :: head == h && htag == t ->
                   head = nx; htag = BUMP(t); nstate[h] = OWNED; magloc[nmag[h]] = me;
                   printf("P%d pop: CAS (%d,t%d) -> (%d,t%d) won, takes magazine %d\n", me, h, t, nx, htag, nmag[h]);
                   check(); ok = 1
               :: else -> h = head; t = htag; ok = 0;
                   printf("P%d pop: CAS fails, head = (%d,t%d)\n", me, h, t)
               fi
           };
           if :: ok -> break :: else fi
        od;
        if
        :: h != 0 ->
           assert(nstate[h] == OWNED);
           m = nmag[h];                                      /* pop: assume_init_read */
           d_step { slen--; check() }                        /* pop: len.fetch_sub */
        :: else
        fi;
        d_step { unpin(me) };                                /* guard dropped */
        skip
    :: else                                              /* pop: return None */
    fi;
    h = 0; t = 0; nx = 0; ok = 0
}

/* Trim releases the magazine's items to the source and drops the magazine: Link::drop
 * retires its node through the epoch (a pin of its own, which adds no one to wait for). */
inline release(me, m) {
    d_step {
        magloc[m] = SOURCE;
        printf("P%d releases magazine %d to the source, drops it\n", me, m);
        if
        :: mnode[m] != 0 ->
#ifdef NO_GRACE
           nstate[mnode[m]] = FREE;
           printf("P%d drop: frees node %d at once (no grace period)\n", me, mnode[m])
#else
           waitmask[mnode[m]] = pinned;
           if
           :: pinned == 0 -> nstate[mnode[m]] = FREE
           :: else -> nstate[mnode[m]] = RETIRED
           fi
#endif
        :: else
        fi;
        check()
    }
}

proctype worker(byte me; byte start; byte nops) {
    byte m = start;   /* magazine held, 0 = none */
    byte ops, h, t, nx, n, ok;
    do
    :: ops == nops -> break
    :: else ->
        if
        :: m != 0 -> push(me, m); m = 0
        :: m == 0 -> pop(me, m)
        :: m != 0 -> release(me, m); m = 0
        fi;
        ops++
    od;
    done++
}

init {
    atomic {
        /* stack: head = node 1 (magazine 1) -> node 2 (magazine 2); process 1 holds 3 */
        head = 1; htag = 0; next[1] = 2; next[2] = 0;
        nmag[1] = 1; nmag[2] = 2; mnode[1] = 1; mnode[2] = 2;
        nstate[1] = LINKED; nstate[2] = LINKED;
        magloc[1] = STACK; magloc[2] = STACK; magloc[3] = 1;
        slen = 2; level = 2;
        run worker(1, 3, OPS);
        run worker(2, 0, OPS);
        run worker(3, 0, OPS)
    };
    done == NPROC;
    d_step { check(); assert(slen == ck_c && level == ck_c); assert(pinned == 0) }
}
