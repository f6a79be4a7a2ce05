/*
 * depot.pml -- the Treiber stack of src/stack.rs at e74670c (Stack::push_bounded: len
 * reservation, Stack::link, Level::add; Stack::pop: Level::claim, the Treiber loop,
 * len.fetch_sub) with crossbeam-epoch modelled as a grace-period rule.
 * The step-to-line table is in proofs/README.md.
 *
 * Three processes, three magazines, a pool of NNODE node addresses, OPS operations each
 * (push the magazine held, pop one, or release a held magazine to the source as trim
 * does after its pop).  The node allocator hands out ANY free address (nondeterministic),
 * so the model covers an allocator that reuses a freed address at once.
 *
 * Ghost state, changed in the same atomic step as the successful CAS:
 *   magloc[m]  where magazine m is: HELD(p) / STACK / SOURCE
 *   nstate[n]  FREE / PRIVATE (allocated by a pusher, unpublished) / LINKED /
 *              UNLINKED (popped, not yet deferred) / RETIRED (deferred, grace pending)
 *
 * Checked after every step that changes shared state (check()):
 *   - the list from head is acyclic, without repeats, every node on it is LINKED, and
 *     the nodes on it are exactly the LINKED ones;
 *   - the magazines on it are exactly those marked STACK (each magazine in one place);
 *   - len >= linked nodes (Stack::len is a hard bound) and Level's count <= linked
 *     nodes; at the end len == count == linked.
 * A pop whose claim succeeded must never read a null head (asserted: the branch of
 * stack.rs l.167-173 is unreachable).
 * Checked at every read of a node: the node is not FREE (no read after free).
 *
 * -DNO_GRACE      negative control: a popped node is freed at once (no epoch).
 * -DNO_UAF_CHECK  do not assert at a read of a freed node (a free-list allocator keeps
 *                 the memory readable), so the failure found is the ABA itself.
 */

#define NPROC 3
#define NNODE 5
#define NMAG  3
#ifndef OPS
#define OPS   2
#endif

/* node states */
#define FREE     0
#define PRIVATE  1
#define LINKED   2
#define UNLINKED 3
#define RETIRED  4

/* magazine locations; 1..NPROC = held by that process */
#define STACK  8
#define SOURCE 9

byte head;                 /* Stack::head, 0 = null */
byte slen;                 /* Stack::len (capacity counter) */
byte level;                /* Level's count: linked and not claimed */
byte next[NNODE + 1];      /* Node::next */
byte nmag[NNODE + 1];      /* Node::magazine */
byte nstate[NNODE + 1];    /* ghost */
byte waitmask[NNODE + 1];  /* ghost: processes pinned when the node was deferred */
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

/* Box::new(Node { .. }): any free address */
inline alloc_node(n) {
    if
    :: nstate[1] == FREE -> n = 1
    :: nstate[2] == FREE -> n = 2
    :: nstate[3] == FREE -> n = 3
    :: nstate[4] == FREE -> n = 4
    :: nstate[5] == FREE -> n = 5
    fi
}

inline push(me, m) {
    d_step { slen++ };                                    /* push_bounded: len.fetch_update */
    atomic { alloc_node(n); nstate[n] = PRIVATE; nmag[n] = m;  /* link: Box::new */
             printf("P%d push: new node at address %d for magazine %d\n", me, n, m) };
    h = head;                                            /* link: head.load */
    do
    :: next[n] = h;                                      /* link: (*node).next = head */
       d_step {                                          /* link: compare_exchange_weak */
           if
           :: head == h ->
               head = n; nstate[n] = LINKED; magloc[m] = STACK;
               printf("P%d push: CAS head %d -> node %d (magazine %d, next %d) won\n", me, h, n, m, h);
               check(); ok = 1
           :: else -> h = head; ok = 0
           fi
       };
       if :: ok -> break :: else fi
    od;
    h = 0;                                               /* (break lands outside the d_step) */
    d_step { level++; check() };                         /* push_bounded: level.add() */
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
        d_step { h = head;                                   /* pop: head.load(Acquire) */
                 printf("P%d pop: pinned, reads head = %d\n", me, h) };
        do
        :: h == 0 ->                                         /* pop: null head after a claim */
           printf("P%d pop: head is null after a successful claim\n", me);
           assert(h != 0); break                             /* (unreachable) */
        :: else ->
#ifndef NO_UAF_CHECK
           assert(nstate[h] != FREE);                        /* no read after free */
#endif
           d_step { nx = next[h];                            /* pop: (*head).next */
                    printf("P%d pop: reads (*%d).next = %d\n", me, h, nx) };
           d_step {                                          /* pop: compare_exchange_weak */
               if
               :: head == h ->
                   head = nx; nstate[h] = UNLINKED; magloc[nmag[h]] = me;
                   printf("P%d pop: CAS head %d -> %d won, takes magazine %d\n", me, h, nx, nmag[h]);
                   check(); ok = 1
               :: else -> h = head; ok = 0;
                   printf("P%d pop: CAS fails, head = %d\n", me, h)
               fi
           };
           if :: ok -> break :: else fi
        od;
        if
        :: h != 0 ->
           assert(nstate[h] == UNLINKED);
           m = nmag[h];                                      /* pop: ManuallyDrop::take */
           d_step { slen--; check() };                        /* pop: len.fetch_sub */
#ifdef NO_GRACE
           d_step { nstate[h] = FREE;                        /* freed at once */
                    printf("P%d pop: frees node %d at once (no grace period)\n", me, h) }
#else
           d_step { nstate[h] = RETIRED; waitmask[h] = pinned }  /* guard.defer_unchecked */
#endif
        :: else
        fi;
        d_step { unpin(me) };                                /* guard dropped */
        skip                                             /* (the d_step cannot end the branch) */
    :: else                                              /* pop: return None */
    fi;
    h = 0; nx = 0; ok = 0
}

proctype worker(byte me; byte start) {
    byte m = start;   /* magazine held, 0 = none */
    byte ops, h, nx, n, ok;
    do
    :: ops == OPS -> break
    :: else ->
        if
        :: m != 0 -> push(me, m); m = 0
        :: m == 0 -> pop(me, m)
        :: m != 0 -> atomic { magloc[m] = SOURCE;          /* trim: release to the source */
                              printf("P%d releases magazine %d to the source\n", me, m); m = 0 }
        fi;
        ops++
    od;
    done++
}

init {
    atomic {
        /* stack: head = node 1 (magazine 1) -> node 2 (magazine 2); process 1 holds 3 */
        head = 1; next[1] = 2; next[2] = 0;
        nmag[1] = 1; nmag[2] = 2;
        nstate[1] = LINKED; nstate[2] = LINKED;
        magloc[1] = STACK; magloc[2] = STACK; magloc[3] = 1;
        slen = 2; level = 2;
        run worker(1, 3);
        run worker(2, 0);
        run worker(3, 0)
    };
    done == NPROC;
    d_step { check(); assert(slen == ck_c && level == ck_c); assert(pinned == 0) }
}
