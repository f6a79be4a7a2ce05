#!/usr/bin/env bash
# The seed scenario, shortened, with its properties checked in every mode (`--check` exits 1
# when one fails): with the default flags, with the case study's lower-target flags (examples/seed/README.md) and with 12
# unpinned jobs. Then `--threads` on 2 threads (it also measures the tree lock's capacity),
# and `--threads 0` must be refused. Prints the tables and the time taken. Run from
# anywhere: `bash .ci/seed.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
seconds="${SEED_SECONDS:-2}"
cargo build --release --example seed
cargo run --release --example seed -- --seconds "$seconds" --check
cargo run --release --example seed -- --seconds "$seconds" --check \
    --target 16 --working-set-ms 2000,100,1000
cargo run --release --example seed -- --seconds 1 --check --unpinned-jobs 12
cargo run --release --example seed -- --threads 2 --seconds 1
if cargo run --release --example seed -- --threads 0 2>/dev/null; then
    echo "::: seed: --threads 0 was accepted" >&2
    exit 1
fi
echo "::: seed: ok in $((SECONDS - start)) s (build included)"
