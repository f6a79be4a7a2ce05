/*
 * cache.pml -- the shared (per-CPU slot) protocol of src/cache.rs (with its slow path,
 * src/cache/exhaustion.rs, and src/cache/release.rs), src/slot.rs, src/pair.rs
 * and the loose paths of src/depot.rs: Cache::alloc_on / free_on (take_slot,
 * take_other_slot, the pair's alloc/free, alloc_miss with refill, free_miss with spill,
 * alloc_busy / free_busy with Depot::alloc_loose / free_loose), alloc_slow (source_dry,
 * take_cached, which steals only while another thread's flush runs, the `flushing` flag,
 * the exhaustion flush, the final source attempt), racing with Cache::flush_cpu or Cache::flush and Cache::trim
 * (reclaim_idle_slots, the depot trim).  The step-to-function table is in
 * proofs/README.md, section 4.
 *
 * The exhaustion flush (Cache::flush_until_found + Cache::keep_found, as in 5ea50b7;
 * unchanged since addc596), without restartable sequences (a claim of a slot's previous,
 * Victim::Previous, is rseq.pml's): the flag's winner takes each slot in turn (take_for_items -> take_victim,
 * busy ones skipped), takes its non-empty magazines out (MagazinePair::take_items, empty
 * ones in their place) and gives the slot back; the first slot that held items ends the
 * walk (found = its loaded, else its previous; rest = its previous when both held
 * items); with none, one Depot::pop_refill (found, no rest).  keep_found pops an item of
 * found, then takes its home slot again: when both of its magazines are empty, found
 * and rest become its loaded and previous and the two empties go to the depot; else
 * (home busy, Home::Busy, or not empty) found and rest go to the depot, a refused one
 * (Fixed cap) to the source, after every slot is given back.  Nothing else goes to the
 * source: the full flushes (Cache::flush, flush_cpu) are the admin's.  Cache::try_flush
 * (public, the full flush that skips busy slots) is no longer on the allocation path and
 * is not modelled.
 *
 * Abstractions (each justified by another model or by ownership):
 *   - every depot stack operation (pop, push with its cap) is one atomic step: depot.pml
 *     checks the Treiber stack, fixedcap.pml the cap reservation, trim.pml the counting.
 *     The one non-linearizable behaviour of Stack::pop (None while a push is in flight,
 *     README section 4, "Gap") is not modelled;
 *   - a step private to a slot's owner (the pair's alloc/free, a swap of magazines) is
 *     merged into the shared step before it (a standard reduction: nobody else may look
 *     at the slot's magazines, which is asserted at every access);
 *   - a source call is one atomic step (the source is the user's Sync type);
 *   - trim releases ANY number of full, partly filled and empty magazines
 *     (nondeterministic), and any slot may be found idle: a superset of the Fixed,
 *     OnePerTick and WorkingSet policies.
 *
 * Checked after every step that moves an item or a magazine (check()):
 *   - conservation (invariant 1): every item in exactly one place: the source, one
 *     process's hands, one place of one live magazine;
 *   - every live magazine in exactly one place: a slot (loaded or previous), the full,
 *     partial or empty stack, or one process's hands (in flight); full-stack magazines are
 *     non-empty, partial ones neither empty nor full, empty ones empty; the caps hold.
 * Checked at each access or call:
 *   - slot mutual exclusion: a process touches a slot's magazines only while it holds a
 *     guard of that slot and nobody else does (users[s] == its bit);
 *   - the source is never called while the calling process holds any slot;
 *   - one flush at a time: never two processes inside flush_until_found (keep_found
 *     included: the flag is cleared after it);
 *   - the exhaustion promise (ghost `quiet`): an alloc that returns None while no other
 *     process was inside an operation at any moment since the alloc began finds every
 *     item in some process's hands (nothing in the source, nothing cached).  The same
 *     statement as for the old flush that returned everything to the source: the new
 *     flush returns None only after taking every slot (all free when nothing else runs)
 *     and finding the depot's full and partial stacks empty, and the final source
 *     attempt follows (needed: source_dry is a racy hint, and a stale `true` makes
 *     alloc_slow skip its first source call; README section 4).
 * Checked at the end (all workers and the admin done): the flushing flag and the
 *   trimming flag are clear, no slot is held, conservation.
 * Bounds: -DSLOTS (1-2), -DITEMS (2-3), -DMAGSZ (1-2), -DOPS per worker, 2 workers (worker
 * 2 on CPU W2CPU), the admin (-DFLUSH=0/1/2, -DTRIM=0/1), -DPRELOAD, -DPRELOAD_PAIR or
 * -DSPILL (items cached at the start); the runs are in proofs/run.sh, their bounds in proofs/README.md.
 * Progress (invariant 3), with -DPROGRESS: the FREEZER may, once, at any point while a
 * worker is inside an operation, freeze every other process (Promela `provided` clauses).  The frozen-out
 * worker must then finish its operation alone within SOLO_BOUND of its own steps: a
 * blocking wait is an invalid end state, a spin fails the step assertion.  The one
 * documented wait (invariant 3's exception, the exhaustion rule): an allocation that lost
 * the flush flag keeps retrying take_cached while the flag is set; when the flag's holder
 * is really inside flush_until_found, the freeze ends there (the check cannot continue);
 * when nobody is flushing, the spin counts against SOLO_BOUND.
 *
 * Negative controls:
 * -DBUSY_WAITS     take_slot waits (blocks) until its own slot is free: invalid end state.
 * -DBUSY_SPINS     take_slot spins on try_take of its own slot, as Slot::take does (the
 *                  crate's mutant busy_slot_waits): SOLO_BOUND assertion.
 * -DFLAG_STAYS_SET the flushing flag is never cleared (mutant flush_flag_stays_set).
 * -DSTEAL_UNOWNED  take_victim does not take the victim's slot (mutant steal_unowned; it
 *                  covers steals, the exhaustion flush and idle reclaim).
 * -DDRAIN_IN_PLACE the exhaustion flush returns a slot's items to the source while it
 *                  holds the slot (the protocol before take_items, the removed
 *                  Cache::drain_slot), instead of taking them out.
 * -DFORGETS_REST   alloc_loose drops the rest of the magazine (mutant
 *                  alloc_loose_forgets_rest; needs MAGSZ >= 2).
 * -DFLUSH_DROPS_REST the exhaustion flush drops the second magazine (rest) of the slot it
 *                  found, items and all (mutant flush_drops_rest; needs a slot holding
 *                  items in both magazines: -DPRELOAD_PAIR).
 */

#ifndef SLOTS
#define SLOTS   1
#endif
#ifndef ITEMS
#define ITEMS   2
#endif
#ifndef OPS
#define OPS     2
#endif
#ifndef WORKERS
#define WORKERS 2
#endif
#ifndef MAGSZ
#define MAGSZ   1       /* Config::magazine_size */
#endif
#define FULLCAP  1      /* DepotPolicy::Fixed { max_full } (cap on the full stack) */
#define MAXEMPTY 1      /* Config::empty_cap: cap on the empty AND the partial stack */
#define NPROC   (WORKERS + 3)   /* init, workers, admin, freezer */
#define NMAG    (2 * SLOTS + FULLCAP + 2 * MAXEMPTY + 2 * WORKERS + 2)
#ifndef SOLO_BOUND
#define SOLO_BOUND 40
#endif
/* the admin process: FLUSH 0 = none, 1 = flush_cpu(0), 2 = flush(); TRIM 0/1 = trim()
 * (both: once each, in either order); ADMIN 0 when neither */
#ifndef FLUSH
#define FLUSH 1
#endif
#ifndef TRIM
#define TRIM 1
#endif
#if FLUSH > 0 || TRIM > 0
#define ADMIN 1
#else
#define ADMIN 0
#endif
#define BUSY 255        /* Home::Busy */

/* items 1..ITEMS */
bool insrc[ITEMS + 1];
byte hand[ITEMS + 1];           /* pid holding it, 0 = nobody */

/* magazines 1..NMAG */
bool alive[NMAG + 1];
byte mlen[NMAG + 1];
byte mit[(NMAG + 1) * MAGSZ];

/* slots */
bool owned[SLOTS];              /* Slot::owned */
byte users[SLOTS];              /* ghost: bit p set while process p holds a guard */
byte loaded[SLOTS];
byte prev[SLOTS];
byte nheld[NPROC];              /* ghost: slots held by each process */

/* depot stacks (LIFO arrays) */
byte dfull[FULLCAP];  byte full_n;
byte dpart[MAXEMPTY]; byte part_n;
byte dempty[MAXEMPTY]; byte empty_n;
bool trimming;                  /* Depot::trimming */

bool source_dry;                /* Cache::source_dry */
bool flushing;                  /* Cache::flushing */
byte nflush;                    /* ghost: processes inside flush_until_found */

byte hm[NPROC * 2];             /* magazines in flight, out of every slot and stack */

/* progress and the exhaustion promise */
byte frozen;                    /* 0, or the only pid allowed to run */
bool froze_once;
byte solo;                      /* steps taken by the frozen-out worker */
bool inop[NPROC];
byte quiet;                     /* bit p: nobody else has been inside an op since p's alloc began */
byte finished;

hidden byte ck_i, ck_m, ck_k, ck_c, ck_s, hk;             /* temporaries within one atomic step */

#define BIT      (1 << _pid)
#define H0       hm[_pid * 2]
#define H1       hm[_pid * 2 + 1]

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
        assert(ck_c == 1);              /* item ck_i in exactly one place */
        ck_i++
    od;
    assert(full_n <= FULLCAP && part_n <= MAXEMPTY && empty_n <= MAXEMPTY);
    /* magazines: exactly one place each */
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
        :: ck_k >= part_n -> break
        :: else -> if :: dpart[ck_k] == ck_m -> ck_c++; assert(mlen[ck_m] > 0 && mlen[ck_m] < MAGSZ) :: else fi; ck_k++
        od;
        ck_k = 0;
        do
        :: ck_k >= empty_n -> break
        :: else -> if :: dempty[ck_k] == ck_m -> ck_c++; assert(mlen[ck_m] == 0) :: else fi; ck_k++
        od;
        ck_k = 0;
        do
        :: ck_k >= NPROC * 2 -> break
        :: else -> if :: hm[ck_k] == ck_m -> ck_c++ :: else fi; ck_k++
        od;
        assert(ck_c == (alive[ck_m] -> 1 : 0));     /* magazine ck_m in exactly one place */
        ck_m++
    od;
    ck_m = 0        /* a break above must land inside the caller's d_step */
}

/* one step of a worker; bounded when it runs alone */
#define STEP  if :: frozen == _pid -> solo++; assert(solo <= SOLO_BOUND) :: else fi

/* ---- magazines ---- */

inline new_magazine(m) {                        /* Magazine::new: lowest unallocated id */
    m = 1;
    do
    :: m > NMAG -> assert(false)
    :: !alive[m] -> alive[m] = 1; mlen[m] = 0; break
    :: else -> m++
    od
}

inline drop_magazine(m) { assert(mlen[m] == 0); alive[m] = 0; m = 0 }

inline mag_pop(m, it) {                         /* Magazine::pop */
    mlen[m]--; it = mit[m * MAGSZ + mlen[m]]; mit[m * MAGSZ + mlen[m]] = 0; hand[it] = _pid
}

inline mag_push(m, it) {                        /* Magazine::push */
    assert(mlen[m] < MAGSZ); mit[m * MAGSZ + mlen[m]] = it; mlen[m]++; hand[it] = 0
}

/* Cache::free_to_source (Source::free_batch): every item of m to the source */
inline to_source(m) {
    assert(nheld[_pid] == 0);                   /* the source never runs while we hold a slot */
    do
    :: mlen[m] == 0 -> break
    :: else -> mlen[m]--; insrc[mit[m * MAGSZ + mlen[m]]] = 1; mit[m * MAGSZ + mlen[m]] = 0
    od;
    source_dry = 0
}

/* Cache::source_alloc: the lowest item in the source, or 0 */
inline source_alloc(it) {
    d_step {
        assert(nheld[_pid] == 0);
        it = 0; hk = 1;
        do
        :: hk > ITEMS -> break
        :: insrc[hk] -> insrc[hk] = 0; hand[hk] = _pid; it = hk; break
        :: else -> hk++
        od;
        if :: it != 0 -> source_dry = 0 :: else fi;
        hk = 0;
        check()
    }
}

/* ---- slots ---- */

inline mine(s) { assert(users[s] == BIT) }

/* Slot::try_take: owned.compare_exchange(false, true, Acquire, Relaxed) */
inline try_take(s, got) {
    d_step {
        if
        :: !owned[s] -> owned[s] = 1; users[s] = users[s] | BIT; nheld[_pid]++; got = 1;
           printf("P%d takes slot %d\n", _pid, s)
        :: else -> got = 0; printf("P%d finds slot %d busy\n", _pid, s)
        fi
    }
}

/* Cache::take_victim: try_take; the mutant makes a guard without taking the slot */
inline take_victim(s, got) {
#ifdef STEAL_UNOWNED
    d_step { users[s] = users[s] | BIT; nheld[_pid]++; got = 1;
             printf("P%d takes a guard of slot %d WITHOUT taking it\n", _pid, s) }
#else
    try_take(s, got)
#endif
}

/* SlotGuard's Drop: owned.store(false, Release) */
inline give_back(s) {
    d_step {
        assert(users[s] & BIT);
        users[s] = users[s] & ~BIT; owned[s] = 0; nheld[_pid]--;
        printf("P%d gives slot %d back\n", _pid, s)
    }
}

/* Cache::take_slot: own slot, else take_other_slot, else none (the loose path) */
inline take_slot(cpu, s, got) {
#if defined(BUSY_SPINS)
    s = cpu;
    do                                          /* MUTANT: Slot::take, a spin on try_take */
    :: try_take(s, got); STEP; if :: got -> break :: else fi
    od
#elif defined(BUSY_WAITS)
    s = cpu;
    printf("P%d waits for slot %d\n", _pid, s);
    d_step { !owned[s] -> owned[s] = 1; users[s] = users[s] | BIT; nheld[_pid]++; got = 1;
             printf("P%d takes slot %d\n", _pid, s) };
    STEP
#else
    s = cpu; try_take(s, got); STEP;
    tk = 1;
    do
    :: got || tk >= SLOTS -> break
    :: else -> s = (cpu + tk) % SLOTS; try_take(s, got); STEP; tk++    /* take_other_slot */
    od;
    tk = 0
#endif
}

/* ---- depot ---- */

/* Depot::pop_refill (pop_full, else pop_partial) into H0 */
inline pop_refill(got) {
    if
    :: full_n > 0 -> full_n--; H0 = dfull[full_n]; dfull[full_n] = 0; got = 1
    :: full_n == 0 && part_n > 0 -> part_n--; H0 = dpart[part_n]; dpart[part_n] = 0; got = 1
    :: else -> got = 0
    fi
}

/* Depot::empty_magazine (pop_empty, else Magazine::new) into m */
inline empty_magazine(m) {
    if
    :: empty_n > 0 -> empty_n--; m = dempty[empty_n]; dempty[empty_n] = 0
    :: else -> new_magazine(m)
    fi
}

/* Depot::push_empty of H0: kept, or dropped at the cap */
inline push_empty() {
    d_step {
        assert(mlen[H0] == 0);
        if
        :: empty_n < MAXEMPTY -> dempty[empty_n] = H0; empty_n++; H0 = 0
        :: else -> drop_magazine(H0)
        fi;
        check()
    }
}

/* Depot::push_full of H0 (Fixed cap); refused: H0 stays in our hands */
inline push_full(ok) {
    d_step {
        assert(mlen[H0] > 0);
        if
        :: full_n < FULLCAP -> dfull[full_n] = H0; full_n++; H0 = 0; ok = 1
        :: else -> ok = 0
        fi;
        check()
    }
}

/* Depot::push_any of H0: empty stack, full stack, or partial stack (cap) else full stack */
inline push_any(ok) {
    if
    :: mlen[H0] == 0 -> push_empty(); ok = 1
    :: mlen[H0] == MAGSZ -> push_full(ok)
    :: mlen[H0] > 0 && mlen[H0] < MAGSZ ->
        d_step {                                /* push_partial */
            if
            :: part_n < MAXEMPTY -> dpart[part_n] = H0; part_n++; H0 = 0; ok = 1
            :: else -> ok = 0
            fi;
            check()
        };
        if :: !ok -> STEP; push_full(ok) :: else fi
    fi
}

/* Cache::release_to_source of H0: items to the source, then push_empty */
inline release_to_source() {
    d_step { to_source(H0); check() }; STEP;
    push_empty()
}

/* ---- the pair, under a held slot ---- */

/* MagazinePair::alloc */
inline pair_alloc(s, it) {
    mine(s);
    if
    :: mlen[loaded[s]] > 0 -> mag_pop(loaded[s], it)
    :: mlen[loaded[s]] == 0 && mlen[prev[s]] > 0 ->
        hk = loaded[s]; loaded[s] = prev[s]; prev[s] = hk; hk = 0;
        mag_pop(loaded[s], it)
    :: else -> it = 0
    fi
}

/* MagazinePair::refill: pop_refill, rotate, push_empty (the empty previous), then alloc */
inline refill_alloc(s, got, it) {
    d_step {
        mine(s);
        pop_refill(got);
        if
        :: got ->
            assert(mlen[loaded[s]] == 0 && mlen[prev[s]] == 0);
            hk = prev[s]; prev[s] = loaded[s]; loaded[s] = H0; H0 = hk; hk = 0
        :: else
        fi;
        check()
    };
    STEP;
    if
    :: got ->
        push_empty();
        d_step { pair_alloc(s, it); assert(it != 0); check() }; STEP
    :: else
    fi
}

/* Cache::steal into the pair of slot home (both its magazines empty); it = an item or 0.
 * take_victim (Cache::steal_from_slot -> take_for_items) each other slot from home + 1
 * on; steal_from (both of the victim's magazines, 16331d9); the victim's guard drops. */
inline steal(home, it) {
    st_i = 1; it = 0; stolen = 0;
    do
    :: st_i >= SLOTS || stolen -> break
    :: else ->
        st_v = (home + st_i) % SLOTS;
        take_victim(st_v, got); STEP;
        if
        :: got ->
            d_step {                            /* MagazinePair::steal_from */
                mine(home); mine(st_v);
                assert(mlen[loaded[home]] == 0 && mlen[prev[home]] == 0);
                if
                :: mlen[loaded[st_v]] > 0 || mlen[prev[st_v]] > 0 ->
                    /* mem::swap(self, victim): both magazines, ours (empty) in their place */
                    hk = loaded[home]; loaded[home] = loaded[st_v]; loaded[st_v] = hk;
                    hk = prev[home]; prev[home] = prev[st_v]; prev[st_v] = hk; stolen = 1
                :: else
                fi;
                hk = 0;
                if :: stolen -> printf("P%d steals from slot %d\n", _pid, st_v) :: else fi;
                check()
            };
            STEP;
            give_back(st_v); STEP
        :: else
        fi;
        st_i++
    od;
    if
    :: stolen -> d_step { pair_alloc(home, it); assert(it != 0); check() }
    :: else
    fi;
    st_i = 0; st_v = 0; stolen = 0
}

/* Depot::alloc_loose: pop_partial, else pop_full; one item; push_any the rest */
inline alloc_loose(it) {
    d_step {
        if
        :: part_n > 0 -> part_n--; H0 = dpart[part_n]; dpart[part_n] = 0; got = 1
        :: part_n == 0 && full_n > 0 -> full_n--; H0 = dfull[full_n]; dfull[full_n] = 0; got = 1
        :: else -> got = 0
        fi;
        if
        :: got -> mag_pop(H0, it); printf("P%d alloc_loose: item %d from magazine %d\n", _pid, it, H0)
        :: else -> it = 0
        fi;
#ifdef FORGETS_REST
        if
        :: got && mlen[H0] > 0 -> mlen[H0] = 0;                 /* MUTANT: a new empty magazine */
           printf("P%d alloc_loose (mutant): the rest of magazine %d is forgotten\n", _pid, H0)
        :: else
        fi;
#endif
        check()
    };
    STEP;
    if
    :: got ->
        push_any(ok); STEP;
        if :: !ok -> release_to_source(); STEP :: else fi
    :: else
    fi;
    got = 0; ok = 0
}

/* Depot::free_loose(item): pop_partial, else empty_magazine; push; push_any */
inline free_loose(item) {
    d_step {
        if
        :: part_n > 0 -> part_n--; H0 = dpart[part_n]; dpart[part_n] = 0
        :: else -> empty_magazine(H0)
        fi;
        mag_push(H0, item);
        printf("P%d free_loose: item %d into magazine %d\n", _pid, item, H0);
        check()
    };
    STEP;
    push_any(ok); STEP;
    if :: !ok -> release_to_source(); STEP :: else fi;       /* Cache::free_busy */
    ok = 0
}

/* MagazinePair::take_items on slot s: each non-empty magazine out (into H0 / H1),
 * an empty one (Depot::empty_magazine) in its place */
inline take_items(s) {
    d_step {
        mine(s);
        if :: mlen[loaded[s]] > 0 -> H0 = loaded[s]; empty_magazine(loaded[s]) :: else fi;
        check()
    };
    d_step {
        mine(s);
        if :: mlen[prev[s]] > 0 -> H1 = prev[s]; empty_magazine(prev[s]) :: else fi;
        check()
    }
}

/* Cache::release_each of H0, H1 (after the slot is given back) */
inline release_each() {
    if :: H0 != 0 -> release_to_source() :: else fi;
    if :: H1 != 0 -> d_step { H0 = H1; H1 = 0 }; release_to_source() :: else fi
}

/* Cache::drain_depot -> Depot::drain: every non-empty magazine released and dropped,
 * then every empty one dropped */
inline drain_depot() {
    do
    :: d_step { pop_refill(got); check() }; STEP;
       if
       :: got -> d_step { to_source(H0); drop_magazine(H0); check() }; STEP
       :: else -> break
       fi
    od;
    do
    :: d_step {
           if
           :: empty_n > 0 -> empty_n--; H0 = dempty[empty_n]; dempty[empty_n] = 0;
              drop_magazine(H0); got = 1
           :: else -> got = 0
           fi;
           check()
       };
       STEP;
       if :: got :: else -> break fi
    od;
    got = 0
}

/* Cache::give_to_depot of H0: Depot::push_any; a refused one (Fixed cap) to the source */
inline give_to_depot() {
    push_any(ok); STEP;
    if :: !ok -> release_to_source(); STEP :: else fi
}

/* Cache::keep_found(found = H0, rest = H1, home): an item of found; then, when home is a
 * slot taken again (Cache::retake) whose two magazines are empty, found and rest become
 * its loaded and previous (MagazinePair::install, mem::replace of previous) and the two
 * empties they replace go to the depot (push_empty) after the slot is given back; else
 * (home busy, or Home::Busy, or its magazines not empty) found and rest go to the depot
 * (give_to_depot) after the slot is given back.  No slot is held at a depot push or a
 * source call. */
inline keep_found(home, it) {
    d_step { mag_pop(H0, it); assert(it != 0);          /* found.pop() */
             printf("P%d keep_found: item %d of magazine %d\n", _pid, it, H0); check() };
    STEP;
    kf = 0;                                             /* 1: installed */
    if
    :: home != BUSY ->
        try_take(home, got); STEP;                      /* Cache::retake */
        if
        :: got ->
            d_step {                                    /* keep_found's install closure */
                mine(home);
                if
                :: mlen[loaded[home]] == 0 && mlen[prev[home]] == 0 ->
                    /* MagazinePair::install(found): previous = old loaded, loaded = found,
                     * returns the old previous */
                    hk = prev[home]; prev[home] = loaded[home]; loaded[home] = H0; H0 = hk;
                    /* rest: mem::replace(&mut previous, rest), returns the old loaded */
                    if :: H1 != 0 -> hk = prev[home]; prev[home] = H1; H1 = hk :: else fi;
                    hk = 0; kf = 1;
                    printf("P%d keep_found: installed in slot %d\n", _pid, home)
                :: else
                fi;
                check()
            };
            STEP;
            give_back(home); STEP
        :: else
        fi
    :: else
    fi;
    if
    :: kf ->                                            /* Ok(empties): push_empty each */
        push_empty(); STEP;
        if :: H1 != 0 -> d_step { H0 = H1; H1 = 0 }; push_empty(); STEP :: else fi
    :: else ->                                          /* Err((found, rest)): give_to_depot each */
        printf("P%d keep_found: found (and rest) to the depot\n", _pid);
        give_to_depot();
        if :: H1 != 0 -> d_step { H0 = H1; H1 = 0 }; give_to_depot() :: else fi
    fi;
    kf = 0; got = 0; ok = 0
}

/* Cache::source_refill(home), Options::source_batch = MAGSZ (the default, a whole
 * magazine): an empty magazine into H0 (Depot::empty_magazine), then one source call
 * (Source::alloc_batch, one atomic step) that moves up to MAGSZ items, the lowest first,
 * into it; when it handed none, the magazine goes back (push_empty) and it = 0; one, the
 * item is taken and the magazine goes back; else keep_found(home, it), as the exhaustion
 * flush keeps what it finds.  No slot is held at
 * the source call (asserted). -DBATCH_OF_ONE models Options::source_batch = Some(1):
 * Source::alloc, one item. */
inline source_refill(home, it) {
#ifdef BATCH_OF_ONE
    source_alloc(it); STEP
#else
    it = 0;
    d_step {
        /* Depot::empty_magazine and the source call in one step: the magazine is empty
         * and private until keep_found, so the only thing another process could see in
         * between is one empty magazine fewer in the empty stack, which changes only
         * whether its own empty_magazine pops one or makes one (no item moves) */
        assert(H0 == 0 && H1 == 0 && nheld[_pid] == 0);
        empty_magazine(H0);
        hk = 1;
        do
        :: hk > ITEMS || mlen[H0] == MAGSZ -> break
        :: insrc[hk] -> insrc[hk] = 0; mag_push(H0, hk); hk++
        :: else -> hk++
        od;
        hk = 0;
#ifdef REFILL_LOSES_ONE
        if                                      /* MUTANT: the batch's last item is lost */
        :: mlen[H0] > 1 -> mlen[H0]--; mit[H0 * MAGSZ + mlen[H0]] = 0
        :: else
        fi;
#endif
        if :: mlen[H0] > 0 -> source_dry = 0 :: else fi;
        printf("P%d source_refill: %d items in magazine %d\n", _pid, mlen[H0], H0);
        check()
    };
    STEP;
    if
    :: mlen[H0] == 0 -> push_empty(); STEP
    :: mlen[H0] == 1 ->                         /* one item: nothing to keep */
        d_step { mag_pop(H0, it); check() }; STEP;
        push_empty(); STEP
    :: else -> keep_found(home, it)
    fi
#endif
}

/* Cache::flush_until_found(home): each slot from 0 on that take_for_items (take_victim)
 * gets: take_items, give back; the first that held items ends the walk (found: its loaded,
 * else its previous; rest: its previous when both held items); else Depot::pop_refill
 * (found, no rest); then keep_found.  it = 0: nothing found.  No source call on the way
 * (but keep_found's give_to_depot of a magazine a Fixed depot refuses). */
inline flush_until_found(home, it) {
    it = 0; tf_s = 0;
    do
    :: tf_s >= SLOTS || H0 != 0 || H1 != 0 -> break
    :: else ->
        take_victim(tf_s, got); STEP;                   /* Cache::take_for_items */
        if
        :: got ->
#ifdef DRAIN_IN_PLACE
            /* the old protocol (Cache::drain_slot): items to the source in place */
            d_step { mine(tf_s); to_source(loaded[tf_s]); check() }; STEP;
            d_step { mine(tf_s); to_source(prev[tf_s]); check() }; STEP;
            give_back(tf_s); STEP
#else
            take_items(tf_s); STEP;
            give_back(tf_s); STEP                       /* the victim's guard drops */
#endif
        :: else
        fi;
        tf_s++
    od;
    tf_s = 0;
    d_step {
        if
        :: H0 == 0 && H1 != 0 -> H0 = H1; H1 = 0        /* (None, Some(found)) */
        :: else
        fi;
#ifdef FLUSH_DROPS_REST
        if
        :: H1 != 0 ->                                   /* MUTANT: drop(rest), items and all */
            printf("P%d flush (mutant): drops the rest, magazine %d\n", _pid, H1);
            do
            :: mlen[H1] == 0 -> break
            :: else -> mlen[H1]--; mit[H1 * MAGSZ + mlen[H1]] = 0
            od;
            alive[H1] = 0; H1 = 0
        :: else
        fi;
#endif
        if
        :: H0 == 0 -> pop_refill(got)                   /* self.depot.pop_refill()? */
        :: else -> printf("P%d flush: found magazine %d (rest %d) in a slot\n", _pid, H0, H1)
        fi;
        check()
    };
    STEP;
    if
    :: H0 != 0 -> keep_found(home, it)
    :: else -> printf("P%d flush: nothing found\n", _pid)
    fi;
    got = 0
}

/* Cache::take_cached(home, steal); home = a slot index or BUSY; steal: whether it may
 * take other slots (only while another thread's flush runs) */
inline take_cached(home, it, stealing) {
    it = 0; got = 0;
    if
    :: home != BUSY ->
        try_take(home, got); STEP;
        if
        :: got ->                               /* in_pair, with the slot taken again */
            d_step { pair_alloc(home, it); check() }; STEP;
            if :: it == 0 -> refill_alloc(home, got, it) :: else fi;
            if :: it == 0 && stealing -> steal(home, it); STEP :: else fi;
            give_back(home); STEP;
            got = 1                             /* the answer is in_pair's, even None */
        :: else
        fi
    :: else
    fi;
    if
    :: !got ->
        alloc_loose(it);
        tc_s = 0;
        do                                      /* slots.iter().find_map(try_take, alloc) */
        :: it != 0 || tc_s >= SLOTS || !stealing -> break
        :: else ->
            try_take(tc_s, got); STEP;
            if
            :: got -> d_step { pair_alloc(tc_s, it); check() }; STEP; give_back(tc_s); STEP
            :: else
            fi;
            tc_s++
        od;
        tc_s = 0
    :: else
    fi;
    got = 0
}

/* Cache::alloc_slow(home): the source unless it is known dry; take_cached (no steal);
 * the flush flag (the winner runs flush_until_found and clears it after keep_found; a
 * loser retries take_cached, stealing, while it is set); the source unless the flush
 * found an item */
inline alloc_slow(home, it) {
    it = 0;
    if
    :: !source_dry -> source_refill(home, it)
    :: else
    fi;
    if
    :: it == 0 ->
        source_dry = 1;
        won = 2;                                /* 2: before the compare_exchange */
        do
        :: take_cached(home, it, won != 2);
           if :: it != 0 -> break :: else fi;
           if
           :: won == 2 ->
               d_step {                         /* flushing.compare_exchange(false, true) */
                   if
                   :: !flushing -> flushing = 1; won = 1;
                      nflush++; assert(nflush == 1); printf("P%d wins the flush flag: flush_until_found\n", _pid)
                   :: else -> won = 0; printf("P%d finds the flush flag set\n", _pid)
                   fi
               };
               STEP;
               if
               :: won == 1 ->
                   flush_until_found(home, it);
                   d_step {
                       nflush--;
#ifndef FLAG_STAYS_SET
                       flushing = 0;            /* ClearOnDrop */
#endif
                       won = 0
                   };
                   break
               :: else
               fi
           :: else
           fi;
           d_step {                             /* while flushing.load(Acquire) */
               if
               :: flushing && frozen == _pid && nflush > 0 ->
                   /* invariant 3's exception: a wait for a flush in progress */
                   printf("P%d waits for a flush in progress: the freeze ends\n", _pid);
                   frozen = 0; solo = 0; got = 1
               :: flushing -> got = 1
               :: else -> got = 0
               fi
           };
           STEP;
           if
           :: got -> got = 0
           :: else ->
               /* the flag is clear: a loser looks once more (what the flush did not
                * keep is in the depot now) */
               if :: won == 0 && it == 0 -> take_cached(home, it, 1) :: else fi;
               break
           fi
        od;
        won = 0;
        if :: it == 0 -> source_refill(home, it) :: else fi
    :: else
    fi
}

/* Cache::alloc_on(cpu) */
inline alloc_on(cpu, it) {
    take_slot(cpu, s, got);
    if
    :: got ->
        d_step { pair_alloc(s, it); check() }; STEP;
        if
        :: it != 0 -> give_back(s); STEP        /* a hit */
        :: else ->                              /* Cache::alloc_miss */
            refill_alloc(s, got, it);
            give_back(s); STEP;
            if :: it == 0 -> alloc_slow(s, it) :: else fi
        fi
    :: else ->                                  /* Cache::alloc_busy */
        alloc_loose(it);
        if :: it == 0 -> alloc_slow(BUSY, it) :: else fi
    fi;
    if
    :: it == 0 ->
        printf("P%d alloc returns None\n", _pid);
        d_step {                                /* the exhaustion promise */
            if
            :: quiet & BIT ->
                hk = 1;
                do
                :: hk > ITEMS -> break
                :: else -> assert(hand[hk] != 0); hk++
                od;
                hk = 0
            :: else
            fi
        }
    :: else -> printf("P%d alloc returns item %d\n", _pid, it)
    fi
}

/* Cache::free_on(cpu, item) */
inline free_on(cpu, item) {
    take_slot(cpu, s, got);
    if
    :: got ->
        d_step {                                /* MagazinePair::free */
            mine(s);
            if
            :: mlen[loaded[s]] < MAGSZ -> mag_push(loaded[s], item); ok = 1
            :: mlen[loaded[s]] == MAGSZ && mlen[prev[s]] < MAGSZ ->
                hk = loaded[s]; loaded[s] = prev[s]; prev[s] = hk; hk = 0;
                mag_push(loaded[s], item); ok = 1
            :: else -> ok = 0
            fi;
            check()
        };
        STEP;
        if
        :: ok -> give_back(s); STEP
        :: else ->                              /* Cache::free_miss -> MagazinePair::spill */
            d_step {                            /* empty_magazine; full = previous; push */
                mine(s);
                empty_magazine(hk);
                H0 = prev[s]; prev[s] = loaded[s]; loaded[s] = hk; hk = 0;
                mag_push(loaded[s], item);
                check()
            };
            STEP;
            push_full(ok); STEP;
            give_back(s); STEP;
            if :: !ok -> release_to_source(); STEP :: else fi
        fi
    :: else ->                                  /* Cache::free_busy */
        free_loose(item)
    fi
}

inline op_begin(is_alloc) {
    d_step {
        inop[_pid] = 1;
        quiet = 0;                              /* nobody else is quiet any more */
        hk = 0; ck_s = 0;
        do
        :: hk >= NPROC -> break
        :: else -> if :: hk != _pid && inop[hk] -> ck_s = 1 :: else fi; hk++
        od;
        if :: is_alloc && !ck_s -> quiet = BIT :: else fi;
        hk = 0; ck_s = 0
    }
}

inline op_end() {
    d_step {
        inop[_pid] = 0;
        quiet = quiet & ~BIT;
        if :: frozen == _pid -> frozen = 0; solo = 0 :: else fi;
        assert(nheld[_pid] == 0 && H0 == 0 && H1 == 0);
        s = 0; got = 0; ok = 0; it = 0; hk = 0; won = 0; item = 0
    }
}

proctype worker(byte cpu) provided (frozen == 0 || frozen == _pid) {
    byte ops, s, got, ok, it, tk, won, item, st_i, st_v, stolen, tf_s, tc_s, kf;
    do
    :: ops >= OPS -> break
    :: else ->
        if
        :: op_begin(1); printf("P%d alloc_on(%d)\n", _pid, cpu); alloc_on(cpu, it)
        :: hand[1] == _pid -> item = 1
        :: hand[2] == _pid -> item = 2
#if ITEMS >= 3
        :: hand[3] == _pid -> item = 3
#endif
#if ITEMS >= 4
        :: hand[4] == _pid -> item = 4
#endif
        fi;
        if
        :: item != 0 -> op_begin(0); printf("P%d free_on(%d, item %d)\n", _pid, cpu, item);
           free_on(cpu, item)
        :: else
        fi;
        op_end();
        ops++
    od;
    finished++
}

/* Cache::flush_cpu(cpu) / Cache::flush, and Cache::trim, once each, in either order */
proctype admin() provided (frozen == 0) {
    byte s, got, ok, it, tk, won, item, did, st_i, st_v, stolen, tf_s, tc_s, kf;
    did = (FLUSH == 0 -> 1 : 0) + (TRIM == 0 -> 2 : 0);
    do
    :: did == 3 -> break
    :: (did & 1) == 0 ->
        op_begin(0);
#if FLUSH == 1
        printf("P%d flush_cpu(0)\n", _pid);
        s = 0;
#else
        printf("P%d flush()\n", _pid);
        s = 0;
        do
        :: s >= SLOTS -> break
        :: else ->
#endif
        do                                      /* Slot::take: may wait (not alloc/free) */
        :: try_take(s, got); if :: got -> break :: else fi
        od;
        take_items(s);
        give_back(s);
        release_each();
#if FLUSH != 1
        s++
        od;
        drain_depot();
#endif
        op_end();
        did = did | 1
    :: (did & 2) == 0 ->                        /* Cache::trim -> Depot::trim */
        op_begin(0);
        printf("P%d trim()\n", _pid);
        d_step { if :: trimming -> got = 0 :: else -> trimming = 1; got = 1 fi };
        if
        :: got ->
            s = 0;
            do                                  /* reclaim_idle_slots: any slot may be idle */
            :: s >= SLOTS -> break
            :: else ->
                if
                :: take_victim(s, got);
                   if
                   :: got ->
                       take_items(s);
                       give_back(s);
                       if :: H0 != 0 -> push_full(ok); if :: ok -> H0 = 0 :: else fi :: else fi;
                       if :: H1 != 0 ->
                           d_step { hk = H0; H0 = H1; H1 = hk; hk = 0 };
                           push_full(ok);
                           d_step { hk = H0; H0 = H1; H1 = hk; hk = 0 }
                       :: else fi;
                       release_each()           /* the refused ones */
                   :: else
                   fi
                :: skip                         /* not idle */
                fi;
                s++
            od;
            do                                  /* release_full: any number */
            :: d_step { if :: full_n > 0 -> full_n--; H0 = dfull[full_n]; dfull[full_n] = 0; got = 1
                           :: else -> got = 0 fi; check() };
               if :: got -> release_to_source() :: else -> break fi
            :: break
            od;
            do                                  /* unused partly filled: any number */
            :: d_step { if :: part_n > 0 -> part_n--; H0 = dpart[part_n]; dpart[part_n] = 0; got = 1
                           :: else -> got = 0 fi; check() };
               if :: got -> release_to_source() :: else -> break fi
            :: break
            od;
            do                                  /* unused empties: any number */
            :: d_step { if :: empty_n > 0 -> empty_n--; H0 = dempty[empty_n]; dempty[empty_n] = 0;
                              drop_magazine(H0); check()
                           :: else fi }
            :: break
            od;
            trimming = 0                        /* TrimRunning's Drop */
        :: else
        fi;
        op_end();
        did = did | 2
    od;
    finished++
}

proctype freezer() {
end:
    do
    :: d_step { !froze_once && frozen == 0 && inop[1] -> frozen = 1; froze_once = 1; solo = 0;
                 printf("freeze every process but P1\n") }
    :: d_step { !froze_once && frozen == 0 && inop[2] -> frozen = 2; froze_once = 1; solo = 0;
                 printf("freeze every process but P2\n") }
#if WORKERS >= 3
    :: d_step { !froze_once && frozen == 0 && inop[3] -> frozen = 3; froze_once = 1; solo = 0;
                 printf("freeze every process but P3\n") }
#endif
    od
}

#ifndef W2CPU
#define W2CPU 0
#endif

init {
    byte i;
    d_step {
        i = 1;
        do :: i > ITEMS -> break :: else -> insrc[i] = 1; i++ od;
        i = 0;
        do                                      /* MagazinePair::new: two empty magazines */
        :: i >= SLOTS -> break
        :: else ->
            loaded[i] = 2 * i + 1; prev[i] = 2 * i + 2;
            alive[2 * i + 1] = 1; alive[2 * i + 2] = 1;
            i++
        od;
#ifdef SPILL
        /* SPILL (MAGSZ 1, ITEMS 4): slot 0 full (items 1, 2), the full stack at its cap
         * (item 3), item 4 in worker 1's hands: its free spills and is refused */
        mit[loaded[0] * MAGSZ] = 1; mlen[loaded[0]] = 1; insrc[1] = 0;
        mit[prev[0] * MAGSZ] = 2; mlen[prev[0]] = 1; insrc[2] = 0;
        alive[2 * SLOTS + 1] = 1; mit[(2 * SLOTS + 1) * MAGSZ] = 3; mlen[2 * SLOTS + 1] = 1;
        dfull[0] = 2 * SLOTS + 1; full_n = 1; insrc[3] = 0;
        insrc[4] = 0; hand[4] = 1;
#endif
#ifdef PRELOAD_PAIR
        /* PRELOAD_PAIR (MAGSZ 1, ITEMS 2): items 1 and 2 in the last slot's loaded and
         * previous magazines: an exhaustion flush that finds the slot takes both */
        mit[loaded[SLOTS - 1] * MAGSZ] = 1; mlen[loaded[SLOTS - 1]] = 1; insrc[1] = 0;
        mit[prev[SLOTS - 1] * MAGSZ] = 2; mlen[prev[SLOTS - 1]] = 1; insrc[2] = 0;
#endif
#ifdef PRELOAD
        /* PRELOAD: item 1 cached in the last slot, item 2 (and 3 when MAGSZ >= 2) in a
         * magazine on the depot's full stack */
        mit[loaded[SLOTS - 1] * MAGSZ] = 1; mlen[loaded[SLOTS - 1]] = 1; insrc[1] = 0;
        alive[2 * SLOTS + 1] = 1; mit[(2 * SLOTS + 1) * MAGSZ] = 2; mlen[2 * SLOTS + 1] = 1;
        dfull[0] = 2 * SLOTS + 1; full_n = 1; insrc[2] = 0;
#if MAGSZ >= 2 && ITEMS >= 3
        mit[(2 * SLOTS + 1) * MAGSZ + 1] = 3; mlen[2 * SLOTS + 1] = 2; insrc[3] = 0;   /* a full one */
#endif
#endif
        i = 0
    };
    atomic {
        run worker(0);          /* pid 1 */
        run worker(W2CPU);      /* pid 2 */
#if WORKERS >= 3
        run worker(0);          /* pid 3 */
#endif
#if ADMIN > 0
        run admin();
#endif
#ifdef PROGRESS
        run freezer();
#endif
        skip
    };
#if ADMIN > 0
    finished == WORKERS + 1;
#else
    finished == WORKERS;
#endif
    printf("end: every worker and the admin are done; checking flags, slots, items\n");
    d_step {
        assert(!flushing && !trimming && nflush == 0);
        i = 0;
        do :: i >= SLOTS -> break :: else -> assert(!owned[i] && users[i] == 0); i++ od;
        check()
    }
}
