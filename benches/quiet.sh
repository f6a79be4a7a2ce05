# Sourced by the benchmark scripts (benches/rounds.sh, malloc/bench.sh): waits before a
# round until the 1-minute load average is below QUIET_LOAD (default 0.3), so that each
# round starts on a quiet machine, not on the tail of the round before (the average
# decays over minutes). Gives up after QUIET_WAIT seconds (default 600), saying so.
wait_for_quiet() {
  local limit=${QUIET_LOAD:-0.3} waited=0 load
  while true; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    awk -v load="$load" -v limit="$limit" 'BEGIN { exit !(load < limit) }' && return
    if [ "$waited" -ge "${QUIET_WAIT:-600}" ]; then
      echo "::: load still $load after $waited s: starting anyway" >&2
      return
    fi
    sleep 10
    waited=$((waited + 10))
  done
}
