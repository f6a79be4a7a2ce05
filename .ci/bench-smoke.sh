#!/usr/bin/env bash
# Compiles every criterion bench in release mode and runs each benchmark once
# (criterion's `--test` mode: no measurement, no report). Catches benches that no longer
# build or that panic (every cache bench checks that no item was lost or left behind).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --workspace -- --test
