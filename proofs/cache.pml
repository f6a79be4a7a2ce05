/*
 * cache.pml -- the per-CPU slot protocol and the depot exchange of src/cache.rs,
 * src/slot.rs and src/pair.rs: Cache::alloc_on / free_on (take_slot, MagazinePair::alloc,
 * free, refill, spill, alloc_slow with try_flush, free_slow, release), racing with
 * Cache::flush_cpu and Cache::trim.  The step-to-line table is in proofs/README.md.
 *
 * Abstractions (each justified by another model or by ownership):
 *   - every depot operation (pop_full, push_full with the Fixed cap, pop_empty,
 *     push_empty with the empty cap) is one atomic step: depot.pml checks the Treiber
 *     stack, fixedcap.pml the cap reservation, trim.pml the counting;
 *   - the owner of a slot works on its magazines in atomic steps: nobody else may touch
 *     them (asserted at every access: the slot is owned, by this process);
 *   - a source call is one atomic step (the source is the user's Sync type);
 *   - trim releases ANY number of full and empty magazines (nondeterministic): a
 *     superset of what Fixed, OnePerTick and WorkingSet release, so conservation is
 *     checked for all three.
 *
 * Checked after every step that moves an item or a magazine (check()):
 *   - conservation (invariant 1 of magazine::docs::design): every item is in exactly one place: the
 *     source, one process's hands, or one slot of one allocated magazine;
 *   - every allocated magazine is in exactly one place: a slot (loaded or previous), the
 *     full stack, the empty stack, or one process's hands (a magazine in flight);
 *     full-stack magazines are non-empty, empty-stack ones empty, and the stacks stay
 *     within their caps (invariant 4, caps).
 * Progress (invariant 3): a process FREEZER may, once, at any point while a worker is
 * inside alloc_on/free_on, freeze every other process (Promela `provided` clauses).  The
 * frozen-out worker must then finish its operation alone: if it waited for a slot it
 * would block (pan reports an invalid end state), and a step counter asserts it finishes
 * within SOLO_BOUND steps (no spinning either).
 *
 * -DBUSY_WAITS  negative control: take_slot waits for a busy slot instead of missing
 *               (the mutant "the busy slot path waits for the owner" of issue 3):
 *               a blocking wait, found as an invalid end state.
 * -DBUSY_SPINS  negative control: the same wait as a spin on try_take (like Slot::take),
 *               found by the SOLO_BOUND step assertion.
 */

#ifndef SLOTS
#define SLOTS   1
#endif
#ifndef ITEMS
#define ITEMS   3
#endif
#ifndef OPS
#define OPS     3
#endif
#define MAGSZ   1       /* Config::magazine_size */
#define CAP     1       /* DepotPolicy::Fixed { max_full } (cap on the full stack) */
#define MAXEMPTY 1      /* Config::max_empty */
#define NMAG    (2 * SLOTS + ITEMS + MAXEMPTY + 3)
#define NPROC   5       /* init, 2 workers, admin, freezer */
#ifndef SOLO_BOUND
#define SOLO_BOUND 40
#endif

#define NONE 0

/* items 1..ITEMS */
bool insrc[ITEMS + 1];          /* in the source */
byte hand[ITEMS + 1];           /* pid holding it, 0 = nobody */

/* magazines 1..NMAG */
bool alive[NMAG + 1];           /* allocated (Magazine::new) and not dropped */
byte mlen[NMAG + 1];
byte mit[(NMAG + 1) * MAGSZ];   /* items of magazine m: mit[m*MAGSZ .. m*MAGSZ+mlen) */

/* slots */
bool owned[SLOTS];              /* Slot::owned */
byte owner[SLOTS];              /* ghost: pid of the owner */
byte loaded[SLOTS];
byte prev[SLOTS];

/* depot stacks (LIFO arrays) */
byte dfull[NMAG];  byte full_n;
byte dempty[NMAG]; byte empty_n;
bool trimming;

byte held[NPROC];               /* a magazine in flight, out of every slot and stack */

/* progress check */
byte frozen;                    /* 0, or the only pid allowed to run */
bool froze_once;
byte solo;                      /* steps taken by the frozen-out worker */
bool inop[NPROC];

hidden byte ck_i, ck_m, ck_k, ck_c, ck_s;

inline check() {
    /* items: exactly one place each */
    ck_i = 1;
    do
    :: ck_i > ITEMS -> break
    :: else ->
        ck_c = (insrc[ck_i] -> 1 : 0) + (hand[ck_i] != 0 -> 1 : 0);
        ck_m = 1;
        do
        :: ck_m > NMAG -> break
        :: else ->
            if
            :: alive[ck_m] ->
                ck_k = 0;
                do
                :: ck_k >= mlen[ck_m] -> break
                :: else -> if :: mit[ck_m * MAGSZ + ck_k] == ck_i -> ck_c++ :: else fi; ck_k++
                od
            :: else -> assert(mlen[ck_m] == 0)
            fi;
            ck_m++
        od;
        assert(ck_c == 1);
        ck_i++
    od;
    /* magazines: exactly one place each */
    assert(full_n <= CAP && empty_n <= MAXEMPTY);
    ck_m = 1;
    do
    :: ck_m > NMAG -> break
    :: else ->
        ck_c = 0;
        ck_s = 0;
        do
        :: ck_s >= SLOTS -> break
        :: else ->
            ck_c = ck_c + (loaded[ck_s] == ck_m -> 1 : 0) + (prev[ck_s] == ck_m -> 1 : 0);
            ck_s++
        od;
        ck_k = 0;
        do
        :: ck_k >= full_n -> break
        :: else -> if :: dfull[ck_k] == ck_m -> ck_c++; assert(mlen[ck_m] > 0) :: else fi; ck_k++
        od;
        ck_k = 0;
        do
        :: ck_k >= empty_n -> break
        :: else -> if :: dempty[ck_k] == ck_m -> ck_c++; assert(mlen[ck_m] == 0) :: else fi; ck_k++
        od;
        ck_k = 0;
        do
        :: ck_k >= NPROC -> break
        :: else -> if :: held[ck_k] == ck_m -> ck_c++ :: else fi; ck_k++
        od;
        assert(ck_c == (alive[ck_m] -> 1 : 0));
        ck_m++
    od;
    ck_m = 0        /* a break above must land inside the caller's d_step */
}

/* one step of a worker; bounded when it runs alone */
#define STEP  if :: frozen == _pid -> solo++; assert(solo <= SOLO_BOUND) :: else fi

/* Magazine::new: the lowest unallocated id */
inline new_magazine(m) {
    m = 1;
    do
    :: m > NMAG -> assert(false)                /* NMAG too small for the bounds */
    :: !alive[m] -> alive[m] = 1; mlen[m] = 0; break
    :: else -> m++
    od
}

inline drop_magazine(m) {
    assert(mlen[m] == 0);
    alive[m] = 0
}

/* magazine m's items -> the source (Cache::free_to_source; Source::free_batch) */
inline to_source(m) {
    do
    :: mlen[m] == 0 -> break
    :: else -> mlen[m]--; insrc[mit[m * MAGSZ + mlen[m]]] = 1; mit[m * MAGSZ + mlen[m]] = 0
    od
}

inline mag_pop(m, it) {      /* Magazine::pop */
    mlen[m]--; it = mit[m * MAGSZ + mlen[m]]; mit[m * MAGSZ + mlen[m]] = 0; hand[it] = _pid
}

inline mag_push(m, it) {     /* Magazine::push */
    mit[m * MAGSZ + mlen[m]] = it; mlen[m]++; hand[it] = 0
}

inline mine(s) { assert(owned[s] && owner[s] == _pid) }

/* Slot::try_take: owned.swap(true, Acquire) */
inline try_take(s, got) {
    d_step {
        if
        :: !owned[s] -> owned[s] = 1; owner[s] = _pid; got = 1;
           printf("P%d takes slot %d\n", _pid, s)
        :: else -> got = 0; printf("P%d finds slot %d busy\n", _pid, s)
        fi
    }
}

/* SlotGuard::drop: owned.store(false, Release) */
inline give_back(s) {
    d_step { mine(s); owner[s] = 0; owned[s] = 0; printf("P%d gives slot %d back\n", _pid, s) }
}

/* Cache::take_slot: own slot, else the next free one, else None (a busy miss) */
inline take_slot(cpu, s, got) {
#if !defined(BUSY_WAITS) && !defined(BUSY_SPINS)
    s = cpu; try_take(s, got); STEP;
    k = 1;
    do
    :: got || k >= SLOTS -> break
    :: else -> s = (cpu + k) % SLOTS; try_take(s, got); STEP; k++    /* take_other_slot */
    od
#elif defined(BUSY_SPINS)
    s = cpu;
    do                                          /* spins on try_take until it wins */
    :: try_take(s, got); STEP; if :: got -> break :: else fi
    od
#else
    s = cpu;
    printf("P%d waits for slot %d\n", _pid, s);
    d_step { !owned[s] -> owned[s] = 1; owner[s] = _pid; got = 1 };  /* waits */
    STEP
#endif
}

/* Depot::pop_full: the top full magazine to held[_pid] */
inline pop_full(got) {
    d_step {
        if
        :: full_n > 0 -> full_n--; held[_pid] = dfull[full_n]; dfull[full_n] = 0; got = 1
        :: else -> got = 0
        fi;
        check()
    }
}

/* Depot::push_empty: keep held[_pid] (empty) or drop it at the cap */
inline push_empty() {
    d_step {
        assert(mlen[held[_pid]] == 0);
        if
        :: empty_n < MAXEMPTY -> dempty[empty_n] = held[_pid]; empty_n++
        :: else -> drop_magazine(held[_pid])
        fi;
        held[_pid] = 0;
        check()
    }
}

/* Cache::release of held[_pid], then drop it (trim, drain) */
inline release_and_drop() {
    d_step { to_source(held[_pid]); check() };
    d_step { drop_magazine(held[_pid]); held[_pid] = 0; check() }
}

/* Depot::drain (from Cache::try_flush) */
inline depot_drain() {
    do
    :: pop_full(got); STEP;
       if :: got -> release_and_drop(); STEP :: else -> break fi
    od;
    do
    :: d_step {
           if
           :: empty_n > 0 -> empty_n--; held[_pid] = dempty[empty_n]; dempty[empty_n] = 0; got = 1
           :: else -> got = 0
           fi
       };
       STEP;
       if :: got -> d_step { drop_magazine(held[_pid]); held[_pid] = 0; check() } :: else -> break fi
    od
}

/* Cache::drain_slot: both magazines to the source, in place */
inline drain_slot(s) {
    d_step { mine(s); to_source(loaded[s]); check() };
    d_step { mine(s); to_source(prev[s]); check() }
}

/* Cache::source_alloc: the lowest item in the source */
inline source_alloc(got) {
    d_step {
        got = 0; k = 1;
        do
        :: k > ITEMS -> break
        :: insrc[k] -> insrc[k] = 0; hand[k] = _pid; got = 1; break
        :: else -> k++
        od;
        check()
    }
}

/* Cache::alloc_on(cpu) */
inline alloc_on(cpu) {
    take_slot(cpu, s, got);
    if
    :: got ->
        d_step {                                 /* MagazinePair::alloc */
            mine(s);
            if
            :: mlen[loaded[s]] > 0 -> mag_pop(loaded[s], it); done = 1
            :: mlen[loaded[s]] == 0 && mlen[prev[s]] > 0 ->
                k = loaded[s]; loaded[s] = prev[s]; prev[s] = k;
                mag_pop(loaded[s], it); done = 1
            :: else -> done = 0
            fi;
            check()
        };
        STEP;
        if
        :: !done ->                              /* MagazinePair::refill */
            pop_full(got); STEP;
            if
            :: got ->
                d_step {
                    mine(s);
                    assert(mlen[loaded[s]] == 0 && mlen[prev[s]] == 0);
                    k = prev[s]; prev[s] = loaded[s]; loaded[s] = held[_pid]; held[_pid] = k;
                    check()
                };
                push_empty(); STEP;
                d_step { mine(s); mag_pop(loaded[s], it); check() };  /* take(&mut loaded) */
                done = 1
            :: else
            fi
        :: else
        fi;
        give_back(s); STEP
    :: else -> done = 0
    fi;
    if
    :: !done ->                                  /* Cache::alloc_slow */
        source_alloc(got); STEP;
        if
        :: !got ->                               /* exhausted: try_flush, retry once */
            k2 = 0;
            do
            :: k2 >= SLOTS -> break
            :: else ->
                try_take(k2, got); STEP;
                if :: got -> drain_slot(k2); STEP; give_back(k2); STEP :: else fi;
                k2++
            od;
            depot_drain();
            source_alloc(got); STEP
        :: else
        fi
    :: else
    fi
}

/* Cache::free_on(cpu, item) */
inline free_on(cpu, item) {
    take_slot(cpu, s, got);
    if
    :: !got ->                                   /* Cache::free_slow */
        d_step { insrc[item] = 1; hand[item] = 0; check() }; STEP
    :: got ->
        d_step {                                 /* MagazinePair::free */
            mine(s);
            if
            :: mlen[loaded[s]] < MAGSZ -> mag_push(loaded[s], item); done = 1
            :: mlen[loaded[s]] == MAGSZ && mlen[prev[s]] < MAGSZ ->
                k = loaded[s]; loaded[s] = prev[s]; prev[s] = k;
                mag_push(loaded[s], item); done = 1
            :: else -> done = 0
            fi;
            check()
        };
        STEP;
        if
        :: !done ->                              /* MagazinePair::spill */
            d_step {                             /* depot.pop_empty() or Magazine::new */
                if
                :: empty_n > 0 -> empty_n--; held[_pid] = dempty[empty_n]; dempty[empty_n] = 0
                :: else -> new_magazine(k); held[_pid] = k
                fi;
                check()
            };
            STEP;
            d_step {                             /* full = previous; previous = loaded; loaded = empty; push */
                mine(s);
                k = prev[s]; prev[s] = loaded[s]; loaded[s] = held[_pid]; held[_pid] = k;
                mag_push(loaded[s], item);
                check()
            };
            STEP;
            d_step {                             /* depot.push_full(full): Fixed cap */
                if
                :: full_n < CAP -> dfull[full_n] = held[_pid]; full_n++; held[_pid] = 0; done = 1
                :: else -> done = 0              /* refused: stays in our hands */
                fi;
                check()
            };
            STEP;
            give_back(s); STEP;                  /* drop(slot) */
            if
            :: !done ->                          /* release(full); push_empty(empty) */
                d_step { to_source(held[_pid]); check() }; STEP;
                push_empty(); STEP
            :: else
            fi
        :: else -> give_back(s); STEP
        fi
    fi
}

proctype worker(byte cpu) provided (frozen == 0 || frozen == _pid) {
    byte ops, s, got, done, it, k, k2, item;
    do
    :: ops >= OPS -> break
    :: else ->
        inop[_pid] = 1;
        if
        :: printf("P%d alloc_on(%d)\n", _pid, cpu); alloc_on(cpu)
        :: hand[1] == _pid -> item = 1; printf("P%d free_on(%d, item 1)\n", _pid, cpu); free_on(cpu, item)
        :: hand[2] == _pid -> item = 2; printf("P%d free_on(%d, item 2)\n", _pid, cpu); free_on(cpu, item)
#if ITEMS >= 3
        :: hand[3] == _pid -> item = 3; printf("P%d free_on(%d, item 3)\n", _pid, cpu); free_on(cpu, item)
#endif
        fi;
        d_step {
            inop[_pid] = 0;
            if :: frozen == _pid -> frozen = 0; solo = 0 :: else fi;
            s = 0; got = 0; done = 0; it = 0; k = 0; k2 = 0; item = 0
        };
        ops++
    od
}

/* Cache::flush_cpu and Cache::trim, once each, in either order */
proctype admin(byte cpu) provided (frozen == 0) {
    byte s, got, k, n, did;
    do
    :: did == 3 -> break
    :: (did & 1) == 0 ->                         /* flush_cpu(cpu) */
        s = cpu; printf("P%d flush_cpu(%d)\n", _pid, cpu);
        do                                       /* Slot::take: may wait */
        :: try_take(s, got); if :: got -> break :: else fi
        od;
        drain_slot(s);
        give_back(s);
        did = did | 1
    :: (did & 2) == 0 ->                         /* trim() */
        printf("P%d trim()\n", _pid);
        d_step { if :: trimming -> got = 0 :: else -> trimming = 1; got = 1 fi };
        if
        :: got ->
            do                                   /* release_full: any count */
            :: pop_full(got);
               if :: got -> release_and_drop() :: else -> break fi
            :: break
            od;
            do                                   /* unused empties: any count */
            :: d_step {
                   if
                   :: empty_n > 0 -> empty_n--; held[_pid] = dempty[empty_n]; dempty[empty_n] = 0;
                      drop_magazine(held[_pid]); held[_pid] = 0; check()
                   :: else
                   fi
               }
            :: break
            od;
            trimming = 0
        :: else
        fi;
        did = did | 2
    od
}

proctype freezer() {
end:
    do
    :: d_step { !froze_once && frozen == 0 && inop[1] -> frozen = 1; froze_once = 1; solo = 0;
                 printf("freeze every process but P1\n") }
    :: d_step { !froze_once && frozen == 0 && inop[2] -> frozen = 2; froze_once = 1; solo = 0;
                 printf("freeze every process but P2\n") }
    od
}

init {
    d_step {
        byte i;
        i = 1;
        do :: i > ITEMS -> break :: else -> insrc[i] = 1; i++ od;
        /* every slot starts with two empty magazines (MagazinePair::new) */
        i = 0;
        do
        :: i >= SLOTS -> break
        :: else ->
            loaded[i] = 2 * i + 1; prev[i] = 2 * i + 2;
            alive[2 * i + 1] = 1; alive[2 * i + 2] = 1;
            i++
        od
    };
    atomic {
        run worker(0);          /* pid 1 */
        run worker(0);          /* pid 2: the same CPU slot */
        run admin(0);           /* pid 3 */
        run freezer()           /* pid 4 */
    }
}
