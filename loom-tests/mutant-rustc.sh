#!/usr/bin/env bash
# RUSTC_WRAPPER used by mutants.sh: compiles the `magazine`, `magazine_malloc` and `magazine_preload` crates (and nothing else) with
# `--cfg magazine_mutant="$MAGAZINE_MUTANT"`. The same as putting that cfg in RUSTFLAGS,
# except that the dependencies (loom, shuttle, crossbeam) are not rebuilt for each mutant.
rustc=$1
shift
prev=
for arg in "$@"; do
  if [ "$prev" = --crate-name ] && { [ "$arg" = magazine ] || [ "$arg" = magazine_malloc ] || [ "$arg" = magazine_preload ]; } &&
    [ -n "${MAGAZINE_MUTANT:-}" ]; then
    exec "$rustc" "$@" --cfg "magazine_mutant=\"$MAGAZINE_MUTANT\""
  fi
  prev=$arg
done
exec "$rustc" "$@"
