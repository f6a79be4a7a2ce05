#!/usr/bin/env bash
# The seed scenario, shortened, with its properties checked (`--check` exits 1 when one
# fails). Prints the table and the time taken. Run from anywhere: `bash .ci/seed.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
cargo build --release --example seed
cargo run --release --example seed -- --seconds "${SEED_SECONDS:-2}" --check
echo "::: seed: ok in $((SECONDS - start)) s (build included)"
