#!/usr/bin/env bash
# Runs the conservation stress test under valgrind memcheck with a small iteration count:
# zero errors and no definite leaks, or failure.
set -euo pipefail
command -v valgrind >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
bin=$(cargo test --release --test stress --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -x "$bin" ] || { echo "stress test binary not found"; exit 1; }
MAGAZINE_STRESS_OPS=20000 valgrind --error-exitcode=1 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite --quiet "$bin" --test-threads=1
