#!/usr/bin/env bash
# proofs/ivy/run.sh -- prove every Ivy model of proofs/ivy/ and check that every negative
# control fails where it should (see proofs/README.md, "Ivy models").
#
# Installs Ivy (the ms-ivy wheel and its Python dependencies, z3 included) with pip into
# $IVY_HOME (default ~/.cache/magazine-ivy) when it is not there; nothing is written under
# proofs/. Each run is `python3 -m ivy.ivy_check FILE.ivy` on the model, or on a copy
# that a sed script turns into a control.
#
# A model passes when ivy_check prints OK (every invariant holds initially and is
# preserved by every action, every assertion holds). A control passes when ivy_check
# fails AND one of its failed checks is the expected one (action:invariant): the bug's
# counterexample to induction, not some other weakness.
#
# Prints one line per run (model, expected, result, seconds) and the total time; exits
# non-zero on any unexpected result. IVY_JOBS (default 2) runs at a time.
#
# `run.sh probes` runs, instead, the reachability probes (not in CI: 1-3 min each): each
# puts `assert false` at one step of a passing model and asks Ivy's bounded model checker
# (`ivy_check method=bmc[N]`) for a trace from the initial state that reaches it, so that
# the step is shown reachable and the proof is not vacuous there.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
script_start=$EPOCHREALTIME
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
IVY_HOME=${IVY_HOME:-$HOME/.cache/magazine-ivy}
PY=${PYTHON:-python3}

ivy_ok() { PYTHONPATH="$IVY_HOME" "$PY" -c 'import ivy.ivy_check, z3' >/dev/null 2>&1; }

if ! ivy_ok; then
    echo "run.sh: installing Ivy into $IVY_HOME" >&2
    mkdir -p "$IVY_HOME"
    # The ms-ivy wheel is tagged cp310 but is pure Python (with a bundled libz3); install
    # it without its dependencies for that tag, then the dependencies for this Python.
    "$PY" -m pip install --quiet --disable-pip-version-check --target "$IVY_HOME" \
        --python-version 3.10 --only-binary=:all: --no-deps ms-ivy >&2 &&
    "$PY" -m pip install --quiet --disable-pip-version-check --target "$IVY_HOME" \
        ordered-set ply pydot pyparsing tarjan z3-solver >&2
    ivy_ok || { echo "run.sh: could not install Ivy into $IVY_HOME" >&2; exit 2; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/magazine-ivy.XXXXXX")
trap 'rm -rf "$work"' EXIT

jobs=${IVY_JOBS:-2}
order=()

# run NAME MODEL.ivy EXPECT [SED-SCRIPT]
#   EXPECT: pass                  ivy_check must print OK
#           fail:ACTION:INVARIANT ivy_check must fail, with INVARIANT failing in ACTION
# Starts the run in the background ($jobs at a time); its report goes to $work/NAME.report
# and its verdict (ok or bad) to $work/NAME.verdict.
run() {
    order+=("$1")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    one "$@" &
}

one() {
    local name=$1 model=$2 expect=$3 script=${4:-}
    local file="$work/$name.ivy" out="$work/$name.out" start secs status result verdict=ok
    if [ -n "$script" ]; then
        sed -e "$script" "$here/$model" >"$file"
        if cmp -s "$here/$model" "$file"; then
            echo "$name: the control's sed script changed nothing" >"$work/$name.report"
            echo bad >"$work/$name.verdict"
            return
        fi
    else
        cp "$here/$model" "$file"
    fi
    start=$EPOCHREALTIME
    (cd "$work" && PYTHONPATH="$IVY_HOME" nice -n 5 "$PY" -m ivy.ivy_check "$name.ivy") >"$out" 2>&1
    status=$?
    secs=$(elapsed "$start")
    # the failed checks, as action:invariant
    local failed
    failed=$(awk '/^ *\(internal\) / {act=$2} / \.\.\. FAIL$/ {n=$(NF-2); print act ":" n}' "$out" | sort -u)
    if [ "$expect" = pass ]; then
        if [ $status -eq 0 ] && grep -q '^OK$' "$out"; then result=proved; else result=FAILED; verdict=bad; fi
    else
        local want=${expect#fail:}
        if [ $status -ne 0 ] && grep -qx "$want" <<<"$failed"; then
            result=fails
        else
            result=UNEXPECTED
            verdict=bad
        fi
    fi
    {
        printf '%-24s %-40s %-10s %8s\n' "$name" "$expect" "$result" "$secs"
        if [ $verdict = bad ]; then
            grep -E 'error|FAIL' "$out" | head -20
        elif [ "$expect" != pass ]; then
            echo "    failed checks: $(echo $failed)"
        fi
    } >"$work/$name.report"
    echo $verdict >"$work/$name.verdict"
}

# probe NAME MODEL.ivy DEPTH SED-ADDRESS: `assert false` after the line SED-ADDRESS matches;
# the bounded search must find a trace of at most DEPTH actions that reaches it
probe() {
    order+=("$1")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    one_probe "$@" &
}

one_probe() {
    local name=$1 model=$2 depth=$3 address=$4 start secs verdict=ok result trace
    sed -e "${address}a\\    assert false;   # reachability probe" "$here/$model" >"$work/$name.ivy"
    if cmp -s "$here/$model" "$work/$name.ivy"; then
        echo "$name: the probe's address matched nothing" >"$work/$name.report"
        echo bad >"$work/$name.verdict"
        return
    fi
    start=$EPOCHREALTIME
    (cd "$work" && PYTHONPATH="$IVY_HOME" nice -n 5 "$PY" -m ivy.ivy_check "method=bmc[$depth]" "$name.ivy") \
        >"$work/$name.out" 2>&1
    secs=$(elapsed "$start")
    if grep -q 'found a counter-example' "$work/$name.out"; then
        result=reached
        trace=$(awk '/^call / {print $2} /^fail call / {print $3}' "$work/$name.out" | tr '\n' ' ')
    else
        result=UNREACHED
        verdict=bad
    fi
    {
        printf '%-24s %-40s %-10s %8s\n' "$name" "reach within $depth steps" "$result" "$secs"
        [ $verdict = ok ] && echo "    trace: $trace"
    } >"$work/$name.report"
    echo $verdict >"$work/$name.verdict"
}

if [ "${1:-}" = probes ]; then
    # the acknowledgement path; an alloc sequence's commit; a pop's winning CAS; the
    # unlink that swaps a claim's role with the top magazine's
    probe probe_ack slot_rseq.ivy 4 '/require owner(c) = w_acked & token(c, t);/'
    probe probe_alloc_commit slot_rseq.ivy 6 '/require sq(t) = q_alloc_item & sitem(t, i);  *#@OK/'
    probe probe_pop_cas depot_stack.ivy 8 '/assert linked(h) & nxt(h, nx);/'
    probe probe_unlink_swap depot_level.ivy 7 '/^    if h ~= x {/'
else

# the tagged Treiber stack with epoch reclamation
run depot_stack depot_stack.ivy pass
run depot_stack_no_bump depot_stack.ivy fail:pop_cas:pop_fresh 's/^\(.*\)#@NO_BUMP$/# \1/'
run depot_stack_no_grace depot_stack.ivy fail:drop_magazine:epoch \
    's/waits(n, T) := pinned(T);.*#@NO_GRACE$/waits(n, T) := false;/'

# the depot's stacks, shelves and slots with each stack's working-set count
run depot_level depot_level.ivy pass
run depot_level_add_first depot_level.ivy fail:add_before_link:cnt_on \
    's/^\(.*\)#@OK$/# \1/; s/^#@ADD_FIRST//'

# the slot protocol with restartable sequences
run slot_rseq slot_rseq.ivy pass
run slot_rseq_no_fence slot_rseq.ivy fail:take_whole_fenced:read_free_excl 's/^\(.*\)#@NO_FENCE$/# \1/'
run slot_rseq_commit_first slot_rseq.ivy fail:alloc_commit:somewhere \
    's/^\(.*\)#@OK$/# \1/; s/^#@COMMIT_FIRST//'
fi

wait
failures=0
printf '%-24s %-40s %-10s %8s\n' model expect result "time(s)"
for name in "${order[@]}"; do
    cat "$work/$name.report" 2>/dev/null || echo "$name: no report"
    [ "$(cat "$work/$name.verdict" 2>/dev/null)" = ok ] || failures=$((failures + 1))
done
printf 'total %s s (install included, %s runs at a time), %d unexpected\n' \
    "$(elapsed "$script_start")" "$jobs" "$failures"
[ $failures -eq 0 ]
