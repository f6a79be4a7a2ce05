//! Sets `cfg(magazine_model)` when the crate is built for a model checker (`--cfg loom`, or
//! the `shuttle` feature): one name for "the sync facade is a model checker's", instead of
//! `any(loom, feature = "shuttle")` at every use.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(magazine_model)");
    println!("cargo::rerun-if-changed=build.rs");
    // Cargo passes the target's cfgs (those from RUSTFLAGS included) and the enabled
    // features to build scripts as environment variables.
    let loom = std::env::var_os("CARGO_CFG_LOOM").is_some();
    let shuttle = std::env::var_os("CARGO_FEATURE_SHUTTLE").is_some();
    if loom || shuttle {
        println!("cargo::rustc-cfg=magazine_model");
    }
}
