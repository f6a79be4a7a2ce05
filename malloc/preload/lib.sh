# shellcheck shell=bash disable=SC2034  # (variables set here are read by the scripts that source it)
# Helpers shared by programs.sh and bench.sh (sourced, not run): package installs,
# running a command with or without LD_PRELOAD, and a redis-server started on a free
# loopback port. The helpers themselves (python for parsing, redis-cli, awk) run
# without LD_PRELOAD: only the program under test gets the library.

preload_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
programs_dir=$preload_dir/programs
# Debian's python, never a python3 earlier on PATH (the test suite and the
# interpreter must match, and helpers must not depend on another install).
py=/usr/bin/python3

# ensure_packages PKG... : installs the Debian packages that are missing, quietly.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "::: installing ${missing[*]}"
  local log
  log=$(mktemp)
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o Dpkg::Use-Pty=0)
  if ! "${apt[@]}" install "${missing[@]}" >"$log" 2>&1; then
    # The package lists may be missing or stale: refresh them once and retry.
    if ! { apt-get update -qq && "${apt[@]}" install "${missing[@]}"; } >"$log" 2>&1; then
      cat "$log" >&2
      rm -f "$log"
      echo "error: could not install ${missing[*]}" >&2
      return 1
    fi
  fi
  rm -f "$log"
}

# abs_lib PATH : the absolute path of a shared library (LD_PRELOAD must not depend on
# the working directory, which the programs change).
abs_lib() {
  local lib=$1
  if [ ! -f "$lib" ]; then
    echo "error: no such library: $lib" >&2
    return 1
  fi
  realpath -s "$lib"
}

# with_lib LIB TIMEOUT CMD... : runs CMD with LD_PRELOAD=LIB (none when LIB is empty),
# killed after TIMEOUT seconds (status 124 then). timeout and env are outside the
# preload; CMD and everything it starts are inside it.
with_lib() {
  local lib=$1 secs=$2
  shift 2
  local pre=()
  [ -z "$lib" ] || pre=("LD_PRELOAD=$lib")
  timeout -k 5 "$secs" env "${pre[@]}" "$@"
}

# free_port : a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  "$py" -I -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

now() { echo "$EPOCHREALTIME"; }
# since START [DIGITS] : seconds elapsed since START (from now), DIGITS decimals (1).
since() { awk -v a="$1" -v b="$EPOCHREALTIME" -v d="${2:-1}" 'BEGIN { printf "%.*f", d, b - a }'; }

# redis_start LIB DIR : starts redis-server under LIB (empty: glibc) on a free port,
# no persistence, its files in DIR; sets redis_port, redis_pid (the server's own pid)
# and redis_job (the pid of its timeout wrapper, to wait for). Returns non-zero if the
# server does not answer PING within 20 s.
redis_start() {
  local lib=$1 dir=$2 i
  redis_port=$(free_port)
  with_lib "$lib" 600 redis-server --bind 127.0.0.1 --port "$redis_port" \
    --save '' --appendonly no --dir "$dir" --dbfilename dump.rdb \
    --enable-debug-command local --daemonize no --logfile "$dir/redis.log" \
    --loglevel notice --protected-mode yes &
  redis_job=$!
  for i in $(seq 200); do
    if [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ]; then
      redis_pid=$(redis-cli -p "$redis_port" info server | tr -d '\r' |
        sed -n 's/^process_id://p')
      return 0
    fi
    kill -0 "$redis_job" 2>/dev/null || break
    [ "$i" -lt 200 ] && sleep 0.1
  done
  echo "redis-server did not start (port $redis_port); its log:" >&2
  tail -20 "$dir/redis.log" >&2 || true
  kill "$redis_job" 2>/dev/null || true
  wait "$redis_job" 2>/dev/null || true
  return 1
}

# redis_stop : SHUTDOWN NOSAVE, then the server's exit status (124 if it had to be
# killed after 30 s).
redis_stop() {
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  local i
  for i in $(seq 300); do
    kill -0 "$redis_job" 2>/dev/null || break
    [ "$i" -lt 300 ] && sleep 0.1
  done
  if kill -0 "$redis_job" 2>/dev/null; then
    kill "$redis_job" 2>/dev/null || true
  fi
  local st=0
  wait "$redis_job" || st=$?
  return "$st"
}
