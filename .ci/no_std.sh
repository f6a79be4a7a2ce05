#!/usr/bin/env bash
# The crate without its default features is `no_std` + `alloc`: build it for the host (the
# library then links only `core` and `alloc`) and, when rustup can install it, for a
# bare-metal target that has no `std` at all.
set -euo pipefail
cargo build -p magazine --no-default-features
target=thumbv7em-none-eabihf
if rustup target list --installed 2>/dev/null | grep -qx "$target" \
  || timeout 300 rustup target add "$target" >/dev/null 2>&1; then
  cargo build -p magazine --no-default-features --target "$target"
  echo "no_std: built for $target"
else
  echo "no_std: rustup could not install $target; checked the host no_std build only"
fi
