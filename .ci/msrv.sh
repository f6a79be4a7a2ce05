#!/usr/bin/env bash
# The declared minimum Rust version (Cargo.toml `rust-version`) is the one the library
# builds and tests on: build it with and without its default features and run
# `cargo test -p magazine` on exactly that toolchain (installed when missing).
#
# Only the library's promise is checked. Its dev-dependencies are resolved for that version
# by Cargo's MSRV-aware resolver, in a copy of the tracked files with a lockfile of its own
# (the project's lockfile pins versions that need a newer compiler, and the old cargo cannot
# even read some of their manifests). criterion is dropped from the copy: 0.8 needs Rust
# 1.86 and only the benches use it, so the benches are not built here (the stable steps
# build them). 1.81 fails: the restartable sequences use const operands in inline assembly,
# stable since 1.82.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "msrv: no rust-version in Cargo.toml" >&2; exit 1; }
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$msrv" --profile minimal
fi
# The copy and its builds stay under target/ at a fixed path (the tests read sources
# through CARGO_MANIFEST_DIR), with the files' times kept, so a second run is incremental.
export CARGO_TARGET_DIR=$PWD/target/msrv
copy=$CARGO_TARGET_DIR/tree
rm -rf "$copy"
mkdir -p "$copy"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$copy"
sed -i '/^criterion = /d' "$copy/Cargo.toml"
touch -r Cargo.toml "$copy/Cargo.toml"
cd "$copy"
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo generate-lockfile --quiet
cargo "+$msrv" build -p magazine --no-default-features
cargo "+$msrv" build -p magazine
cargo "+$msrv" test -p magazine
echo "msrv: the library builds and its tests pass on Rust $msrv"
