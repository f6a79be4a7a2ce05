# Sourced by the nightly-only CI steps (miri.sh, sanitizers.sh, tool-mutants.sh). The crate
# itself builds and tests on stable; only these checks need the nightly toolchain with the
# miri and rust-src components (Miri, and `-Zbuild-std` for the sanitizers).
#
#   need_nightly miri|build-std
need_nightly() {
  local what=$1 sysroot
  if ! rustc +nightly --version >/dev/null 2>&1; then
    echo "::: $what: no nightly toolchain (rustup toolchain list); this step cannot run" >&2
    exit 1
  fi
  sysroot=$(rustc +nightly --print sysroot)
  if ! cargo +nightly miri --version >/dev/null 2>&1 \
    || [ ! -f "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" ]; then
    # A machine of the image may lack the components; rustup's ordinary client adds them
    # where its server is reachable (it was from this machine). Fail loudly otherwise.
    echo "::: $what: adding the nightly components miri and rust-src"
    if ! timeout 300 rustup component add --toolchain nightly miri rust-src; then
      echo "::: $what: nightly lacks miri/rust-src and rustup could not add them; this step cannot run" >&2
      exit 1
    fi
  fi
  rustc +nightly --version
}
