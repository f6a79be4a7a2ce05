#!/usr/bin/env bash
# RUSTC_WRAPPER of on-malloc.sh: compiles the packages `magazine` and `magazine-malloc`
# (their libraries and test targets, and nothing else) with `--cfg magazine_test_malloc`.
# The same as putting that cfg in RUSTFLAGS, except that the dependencies are not rebuilt
# for it: they are the release builds that valgrind.sh, rseq.sh and bench-smoke.sh use.
rustc=$1
shift
case ${CARGO_PKG_NAME:-} in
  magazine | magazine-malloc) exec "$rustc" "$@" --cfg magazine_test_malloc ;;
esac
exec "$rustc" "$@"
