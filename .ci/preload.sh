#!/usr/bin/env bash
# The drop-in C malloc (`malloc/preload/`) under real programs: each of Python (part of
# its own regression suite, with PYTHONMALLOC=malloc), a Python object workload, Lua,
# SQLite, Redis and Z3 runs on glibc and under LD_PRELOAD of the library, and their
# outputs must be identical (`malloc/preload/programs.sh`, which installs the Debian
# packages it needs). Then a seeded bug in the C layer, `calloc_not_zeroed` (calloc hands
# a reused block out unzeroed), which the same comparison must catch.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
cargo build --release -p magazine-malloc-preload
bash malloc/preload/programs.sh target/release/libmagazine_preload.so

export RUSTC_WRAPPER=$PWD/loom-tests/mutant-rustc.sh
export CARGO_TARGET_DIR=target/preload-mutant
cargo clean -p magazine-malloc-preload --release >/dev/null 2>&1 || true
MAGAZINE_MUTANT=calloc_not_zeroed cargo build --release -p magazine-malloc-preload
if bash malloc/preload/programs.sh "$CARGO_TARGET_DIR/release/libmagazine_preload.so" \
  python-objects redis >/dev/null 2>&1; then
  echo "preload: MUTANT calloc_not_zeroed ESCAPED"
  exit 1
fi
echo "preload: caught calloc_not_zeroed (the programs' outputs differ)"
