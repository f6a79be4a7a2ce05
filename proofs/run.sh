#!/usr/bin/env bash
# proofs/run.sh -- build and run every SPIN model of proofs/ (see proofs/README.md).
#
# For each run: spin -a <defines> model.pml; gcc pan.c; nice ./pan.  Prints one line per
# run (states stored, depth, memory, build time, pan time, errors) and, for every run expected to fail,
# SPIN's counterexample replayed with `spin -t` (the models' printf lines).
#
# Exit status: non-zero when a run expected to pass reports an error or an incomplete
# search, or when a run expected to fail (a negative control) reports no error.
#
# Builds in a temporary directory; nothing is written under proofs/.
# Usage: proofs/run.sh [name-filter]      e.g. proofs/run.sh cache
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
filter=${1:-}

command -v spin >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y spin) >/dev/null
command -v gcc >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y gcc) >/dev/null
command -v spin >/dev/null 2>&1 || { echo "run.sh: spin is not installed" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/magazine-proofs.XXXXXX")
trap 'rm -rf "$work"' EXIT

# -O1, not -O2: gcc 12.2 at -O2 (its tree-vrp pass) miscompiled a pan.c of cache.pml into
# a false assertion failure that -O0 and -O1 do not show; see README.md.
CFLAGS="-O1 -w"

failures=0
total_start=$SECONDS
printf '%-26s %-8s %-6s %12s %7s %10s %8s %8s %7s\n' \
    model expect result states depth "mem(MB)" "build(s)" "time(s)" errors

# check NAME EXPECT MODEL "SPIN -D flags" "extra gcc -D flags" "pan flags"
#   EXPECT: pass     a correct model: errors 0 and a complete search
#           fail     a negative control: SPIN must find the counterexample
# Prints the run's line (and any counterexample); returns 1 on an unexpected result.
check() {
    local name=$1 expect=$2 model=$3 defs=$4 ccdefs=$5 panflags=$6 failures=0
    local dir="$work/$name"
    mkdir -p "$dir"
    cp "$here/$model" "$dir/"
    (
        cd "$dir" || exit 1
        start=${EPOCHREALTIME/./}   # microseconds
        # shellcheck disable=SC2086
        spin $defs -a "$model" >spin.out 2>&1 || { cat spin.out; exit 1; }
        # shellcheck disable=SC2086
        gcc $CFLAGS $ccdefs -o pan pan.c >gcc.out 2>&1 || { cat gcc.out; exit 1; }
        echo $(( (${EPOCHREALTIME/./} - start) / 100000 )) >build.tenths
        # shellcheck disable=SC2086
        nice ./pan $panflags >pan.out 2>&1
        exit 0
    ) || { echo "$name: build failed"; return 1; }

    local out="$dir/pan.out"
    local states depth mem build secs errors incomplete=0
    build=$(cat "$dir/build.tenths")
    build=$((build / 10)).$((build % 10))
    states=$(awk '/states, stored/ {print $1; exit}' "$out")
    depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' "$out" | head -1)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
    mem=$(awk '/total actual memory usage/ {print $1; exit}' "$out")
    secs=$(awk '/elapsed time/ {print $4; exit}' "$out")
    if grep -qE 'max search depth too small|out of memory|Search not completed' "$out"; then
        incomplete=1
    fi
    : "${states:=?}" "${depth:=?}" "${errors:=?}" "${mem:=?}" "${secs:=?}"

    local result
    case $expect in
        pass)
            if [ "$errors" = 0 ] && [ $incomplete = 0 ]; then result=ok; else result=FAIL; fi ;;
        fail)
            if [ "$errors" != 0 ] && [ "$errors" != "?" ]; then result=ok; else result=FAIL; fi ;;
    esac
    printf '%-26s %-8s %-6s %12s %7s %10s %8s %8s %7s\n' \
        "$name" "$expect" "$result" "$states" "$depth" "$mem" "$build" "$secs" "$errors"
    if [ "$result" = FAIL ]; then
        failures=$((failures + 1))
        grep -E 'violated|invalid end state|too small|out of memory|not completed' "$out" | head -5 | sed 's/^/    /'
    fi
    if [ -n "$(ls "$dir"/*.trail 2>/dev/null)" ]; then   # controls, and any surprise
        echo "    counterexample ($name): $(grep -m1 -E '^pan:1: ' "$out" | sed 's/^pan:1: //')"
        # shellcheck disable=SC2086
        (cd "$dir" && spin $defs -t "$model" 2>&1) |
            awk '/^#processes/ {exit} /^[[:space:]]*$/ {next} {print}' |
            grep -vE '^\s+[a-z_]+(\[[0-9]+\])? = ' |
            awk '$0 == last {n++; next} {if (n) print "      (the line above " n " more times)"; n = 0; last = $0; print "      " $0}
                 END {if (n) print "      (the line above " n " more times)"}'
    fi
    [ "$failures" = 0 ]
}

# run NAME ...: queues `check NAME ...`; `start_all` runs the queue in the background,
# JOBS at a time (each pan is single-threaded); each run's report and status go to
# $work/NAME.{out,status}, printed in the table's order by `report`.
JOBS=${PROOF_JOBS:-$(nproc)}
RUNS=()
declare -A QUEUED=()
run() {
    local name=$1
    if [ -n "$filter" ] && [[ $name != *"$filter"* ]]; then return; fi
    RUNS+=("$name")
    QUEUED[$name]=$(printf '%q ' "$@")
}

# The longest runs (pan time, measured) start first, so that the runs still going at the
# end are short ones and both cores stay busy to the end; then the rest in table order.
LONGEST_FIRST=(cache_2slots_flush_cpu cache_1slot_trim cache_1slot_flush cache_1slot_flush_cpu
    rseq_1cpu_3ops rseq_2cpus_flush_both rseq_2cpus_alloc_on cache_2slots_pair rseq_2cpus
    cache_progress_1slot depot_tagged_3ops cache_progress_2slots)
start_all() {
    local name
    for name in "${LONGEST_FIRST[@]}" "${RUNS[@]}"; do
        [ -n "${QUEUED[$name]:-}" ] || continue    # filtered out, or started already
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
        eval "set -- ${QUEUED[$name]}"
        unset "QUEUED[$name]"
        (check "$@" >"$work/$name.out" 2>&1; echo $? >"$work/$name.status") &
    done
}

report() {
    local name
    wait
    for name in "${RUNS[@]}"; do
        cat "$work/$name.out"
        [ "$(cat "$work/$name.status")" = 0 ] || failures=$((failures + 1))
    done
}

# name                       expect   model         spin defines                     gcc defines   pan flags
run depot_tagged             pass     depot_tagged.pml ""                              ""            "-m100000"
run depot_tagged_3ops        pass     depot_tagged.pml "-DOPS=3"                       "-DCOLLAPSE"  "-m100000 -w26"
run depot_tagged_no_bump     fail     depot_tagged.pml "-DNO_BUMP"                     "-DREACH"     "-m1000 -i"
run depot_tagged_2bit_wrap   fail     depot_tagged.pml "-DTAGMOD=4 -DOPS=3"            "-DREACH"     "-m1000 -i"
run depot_tagged_no_grace    fail     depot_tagged.pml "-DNO_GRACE"                    "-DREACH"     "-m1000 -i"
run depot                    pass     depot.pml     ""                                 ""            "-m100000"
run depot_no_grace_uaf       fail     depot.pml     "-DNO_GRACE"                       "-DREACH"     "-m1000 -i"
run depot_no_grace_aba       fail     depot.pml     "-DNO_GRACE -DNO_UAF_CHECK"        "-DREACH"     "-m1000 -i"
run trim                     pass     trim.pml      "-DOPS=3"                          "-DCOLLAPSE"  "-m100000 -w26"
run trim_2poppers            pass     trim.pml      "-DPOPPERS=2 -DTRIMMERS=1 -DOPS=3" "-DCOLLAPSE"  "-m100000 -w26"
run trim_2pushers            pass     trim.pml      "-DPUSHERS=2 -DTRIMMERS=1"         "-DCOLLAPSE"  "-m100000 -w26"
run trim_old_two_atomics     fail     trim.pml      "-DOLD"                            "-DREACH"     "-m1000 -i"
run trim_packed_58eb296      fail     trim.pml      "-DPACKED"                         "-DREACH"     "-m1000 -i"
run trim_add_before_link     fail     trim.pml      "-DADD_FIRST"                      "-DREACH"     "-m1000 -i"
run fixedcap                 pass     fixedcap.pml  "-DOPS=3"                          ""            "-m100000"
run fixedcap_split_cap       fail     fixedcap.pml  "-DSPLIT_CAP -DONLY_DEPOT_BOUND"   "-DREACH"     "-m1000 -i"
run fixedcap_dec_first       fail     fixedcap.pml  "-DDEC_FIRST -DONLY_DEPOT_BOUND"   "-DREACH"     "-m1000 -i"
# cache.pml at -O0 (the last -O wins): its pan.c takes ~20 s to compile at -O1, ~4 s at -O0,
# and runs ~1.4x slower; -O0 agrees with -O1 (README, "Why gcc -O1").
# Defaults: 1 slot, 2 items, 2 workers of 2 operations each, magazines of 1 item.
run cache_1slot_flush_cpu    pass     cache.pml     "-DFLUSH=1 -DTRIM=0"               "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_1slot_flush        pass     cache.pml     "-DFLUSH=2 -DTRIM=0"               "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_1slot_trim         pass     cache.pml     "-DFLUSH=0 -DTRIM=1"               "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_2slots_flush_cpu   pass     cache.pml     "-DSLOTS=2 -DW2CPU=1 -DFLUSH=1 -DTRIM=0" "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_magsz2_trim        pass     cache.pml     "-DBATCH_OF_ONE -DMAGSZ=2 -DITEMS=3 -DFLUSH=0 -DTRIM=1" "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_magsz2_batch       pass     cache.pml     "-DMAGSZ=2 -DITEMS=3 -DFLUSH=0 -DTRIM=0" "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_magsz2_preload     pass     cache.pml     "-DMAGSZ=2 -DITEMS=3 -DPRELOAD -DFLUSH=0 -DTRIM=0" "-O0" "-m1000000"
run cache_spill_refused      pass     cache.pml     "-DSPILL -DITEMS=4 -DFLUSH=0 -DTRIM=0" "-O0"       "-m1000000"
run cache_progress_1slot     pass     cache.pml     "-DPROGRESS -DFLUSH=0 -DTRIM=0"    "-O0"         "-m1000000"
run cache_progress_2slots    pass     cache.pml     "-DPROGRESS -DSLOTS=2 -DFLUSH=0 -DTRIM=0" "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_2slots_pair        pass     cache.pml     "-DPRELOAD_PAIR -DSLOTS=2 -DFLUSH=0 -DTRIM=0" "-O0 -DCOLLAPSE" "-m1000000 -w26"
run cache_busy_slot_waits    fail     cache.pml     "-DBUSY_SPINS -DPROGRESS -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_busy_slot_blocks   fail     cache.pml     "-DBUSY_WAITS -DPROGRESS -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_flush_flag_stays_set fail   cache.pml     "-DFLAG_STAYS_SET -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_steal_unowned      fail     cache.pml     "-DSTEAL_UNOWNED -DSLOTS=2 -DW2CPU=1 -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_flush_drains_in_place fail  cache.pml     "-DDRAIN_IN_PLACE -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_alloc_loose_forgets_rest fail cache.pml   "-DFORGETS_REST -DPRELOAD -DMAGSZ=2 -DITEMS=3 -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_flush_drops_rest   fail     cache.pml     "-DFLUSH_DROPS_REST -DPRELOAD_PAIR -DSLOTS=2 -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"
run cache_refill_loses_one   fail     cache.pml     "-DREFILL_LOSES_ONE -DMAGSZ=2 -DITEMS=3 -DFLUSH=0 -DTRIM=0" "-O0 -DREACH" "-m5000 -i"

# rseq.pml (README section 5): 2 workers of 2 operations each, the remote thread (a steal
# from slot 0, then flush_cpu(0)); item 2 starts in slot 0's previous magazine; the kernel
# migrates workers twice and interrupts a sequence once, in all.  A claimant's upgrade
# (SlotClaim::fence) takes the acknowledgement (token | 1, committed by a take sequence on
# the slot's CPU) when it is there, else the membarrier.
run rseq_1cpu_3ops           pass     rseq.pml      "-DNCPU=1 -DOPS=3 -DFLUSHES=0"     "-DCOLLAPSE"  "-m100000 -w26"
run rseq_1cpu_2flushes       pass     rseq.pml      "-DNCPU=1 -DFLUSHES=2"             "-DCOLLAPSE"  "-m100000 -w26"
run rseq_2cpus               pass     rseq.pml      "-DNCPU=2 -DFLUSHES=0"             "-DCOLLAPSE"  "-m100000 -w26"
run rseq_2cpus_flush_both    pass     rseq.pml      "-DNCPU=2 -DSTEALS=0 -DFLUSH_SLOTS=2 -DMIGRATIONS=1" "-DCOLLAPSE" "-m100000 -w26"
run rseq_2cpus_alloc_on      pass     rseq.pml      "-DNCPU=2 -DFLUSHES=0 -DW1WANT=0 -DW1CPU=1 -DW2CPU=0" "-DCOLLAPSE" "-m100000 -w26"
# Lazy activation (-DSTART_PLAIN: every slot starts PLAIN; the rows above start FREE, i.e.
# activated): plain takes by the thief and the flusher race the workers' activating takes.
run rseq_plain_1cpu          pass     rseq.pml      "-DNCPU=1 -DSTART_PLAIN"           "-DCOLLAPSE"  "-m100000 -w26"
run rseq_plain_2cpus         pass     rseq.pml      "-DNCPU=2 -DFLUSHES=0 -DMIGRATIONS=1 -DSTART_PLAIN" "-DCOLLAPSE" "-m100000 -w26"
run rseq_plain_2cpus_alloc_on pass    rseq.pml      "-DNCPU=2 -DFLUSHES=0 -DMIGRATIONS=1 -DW1WANT=0 -DW1CPU=1 -DW2CPU=0 -DSTART_PLAIN" "-DCOLLAPSE" "-m100000 -w26"
# The short controls at -O0: rseq.pml's pan.c takes three times the CPU to compile at -O1
# (5.5 s against 1.9 s), which pays only where pan runs longer than a few seconds (-O0 ran
# rseq_plain_claim_releases in 30 s against 12 s: it, rseq_ack_stores and
# rseq_plain_take_accepts_free stay at -O1). The same states and errors at both levels.
run rseq_commit_not_last     fail     rseq.pml      "-DNCPU=1 -DCOMMIT_NOT_LAST -DONLY_CONSERVATION"      "-O0 -DREACH" "-m1000 -i"
run rseq_commit_before_read  fail     rseq.pml      "-DNCPU=1 -DCOMMIT_BEFORE_READ -DONLY_CONSERVATION"   "-O0 -DREACH" "-m1000 -i"
run rseq_no_owner_check      fail     rseq.pml      "-DNCPU=1 -DNO_OWNER_CHECK -DONLY_CONSERVATION"       "-O0 -DREACH" "-m1000 -i"
run rseq_no_membarrier       fail     rseq.pml      "-DNCPU=1 -DNO_MEMBARRIER -DONLY_CONSERVATION"        "-O0 -DREACH" "-m1000 -i"
run rseq_take_stores         fail     rseq.pml      "-DNCPU=1 -DTAKE_STORES -DONLY_CONSERVATION"          "-O0 -DREACH" "-m1000 -i"
run rseq_claim_touches_loaded fail    rseq.pml      "-DNCPU=1 -DFLUSHES=0 -DCLAIM_TOUCHES_LOADED -DONLY_CONSERVATION" "-O0 -DREACH" "-m1000 -i"
run rseq_claim_no_cas        fail     rseq.pml      "-DNCPU=1 -DCLAIM_NO_CAS -DONLY_CONSERVATION"         "-O0 -DREACH" "-m1000 -i"
run rseq_ack_outside_sequence fail    rseq.pml      "-DNCPU=2 -DOPS=1 -DW2CPU=0 -DMIGRATIONS=1 -DINTERRUPTS=0 -DACK_OUTSIDE_SEQUENCE -DONLY_CONSERVATION" "-O0 -DREACH" "-m1000 -i"
run rseq_ack_from_elsewhere  fail     rseq.pml      "-DNCPU=2 -DSTEALS=0 -DMIGRATIONS=0 -DINTERRUPTS=0 -DW1WANT=0 -DW1CPU=1 -DW2CPU=0 -DACK_FROM_ELSEWHERE -DONLY_CONSERVATION" "-O0 -DREACH" "-m1000 -i"
run rseq_ack_stores          fail     rseq.pml      "-DNCPU=1 -DFLUSHES=0 -DACK_STORES -DONLY_CONSERVATION" "-DREACH" "-m1000 -i"
# Lazy activation's controls: each lets a sequence that read FREE (or PLAIN) commit into a
# slot that a plain take, with no fence, owns whole: a plain CAS from FREE (the crate's
# mutant plain_take_accepts_free), sequences that commit on PLAIN, and PLAIN stored by a
# claim that owned previous alone.
run rseq_plain_take_accepts_free fail rseq.pml      "-DNCPU=1 -DSTART_PLAIN -DPLAIN_TAKE_ACCEPTS_FREE -DONLY_CONSERVATION" "-DREACH" "-m1000 -i"
run rseq_plain_seq_commits   fail     rseq.pml      "-DNCPU=1 -DSTART_PLAIN -DSEQ_COMMITS_ON_PLAIN -DONLY_CONSERVATION" "-O0 -DREACH" "-m1000 -i"
run rseq_plain_claim_releases fail    rseq.pml      "-DNCPU=1 -DSTART_PLAIN -DINTERRUPTS=0 -DCLAIM_RELEASES_PLAIN -DONLY_CONSERVATION" "-DREACH" "-m1000 -i"

start_all
report
echo "proofs: $failures unexpected result(s), $((SECONDS - total_start)) s in all"
[ "$failures" = 0 ]
