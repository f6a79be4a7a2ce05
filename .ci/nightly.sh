# Sourced by the nightly-only CI steps (miri.sh, sanitizers.sh, tool-mutants.sh). The crate
# itself builds and tests on stable; only these checks need the nightly toolchain with the
# miri and rust-src components (Miri, and `-Zbuild-std` for the sanitizers).
#
#   need_nightly miri|build-std
#
# Where the toolchain or its components cannot be had (no nightly, no reachable rustup
# server), the step is SKIPPED, loudly, and CI goes on: the stable checks do not depend on
# it. Where they can, a failure of the check fails CI.
skip() {
  echo "::: $what: SKIPPED: $1; this nightly-only check did not run" >&2
  exit 0
}

need_nightly() {
  local what=$1 sysroot
  if ! rustc +nightly --version >/dev/null 2>&1; then
    skip "no nightly toolchain (rustup toolchain list)"
  fi
  sysroot=$(rustc +nightly --print sysroot)
  if ! cargo +nightly miri --version >/dev/null 2>&1 \
    || [ ! -f "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" ]; then
    # A machine of the image may lack the components; rustup's ordinary client adds them
    # where its server is reachable (it was from this machine). Skip loudly otherwise.
    echo "::: $what: adding the nightly components miri and rust-src"
    if ! timeout 300 rustup component add --toolchain nightly miri rust-src; then
      skip "nightly lacks miri/rust-src and rustup could not add them"
    fi
  fi
  rustc +nightly --version
}

# tests/depot_epoch.rs's operations per worker under AddressSanitizer, in sanitizers.sh's
# run of the test command and tool-mutants.sh's mutant runs alike: 3 x 10^6 caught a depot
# pop that pins after its CAS in 4 runs of 4, where the test's default of 10^5 missed it
# in 18 of 18.
DEPOT_EPOCH_OPS=3000000

# The standard library rebuilt under a sanitizer (sanitizers.sh, tool-mutants.sh): `test`
# named beside `std`, so that the doc tests' build (which alone does not ask for `test`)
# links the same std units as the tests' and reuses every dependency built for them,
# instead of building them all a second time.
BUILD_STD=-Zbuild-std=std,test
