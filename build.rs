//! Two cfg aliases, each a name for a condition that would otherwise be spelt out at every
//! use:
//!
//! - `magazine_model`: the crate is built for a model checker (`--cfg loom`, or the
//!   `shuttle` feature), so the sync facade is the checker's.
//! - `magazine_tagged_head`: the depot stack's head is a tagged 64-bit word over recycled
//!   nodes (`src/stack.rs`, "Platforms"): targets with 64-bit atomics whose pointers are
//!   32 bits, or 64 bits on x86_64 and aarch64 (not Android, whose allocator tags the top
//!   byte of heap pointers). Elsewhere the stack falls back to a fresh node per push.
//! - `magazine_rseq`: the CPU id can be read from glibc's restartable-sequence area
//!   (`src/rseq.rs`): Linux, x86_64 with 64-bit pointers (not x32), glibc, feature `std`,
//!   not a model-checker build, not a ThreadSanitizer build.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(magazine_model)");
    println!("cargo::rustc-check-cfg=cfg(magazine_tagged_head)");
    println!("cargo::rustc-check-cfg=cfg(magazine_rseq)");
    println!("cargo::rerun-if-changed=build.rs");
    // Cargo passes the target's cfgs (those from RUSTFLAGS included) and the enabled
    // features to build scripts as environment variables.
    let loom = std::env::var_os("CARGO_CFG_LOOM").is_some();
    let shuttle = std::env::var_os("CARGO_FEATURE_SHUTTLE").is_some();
    if loom || shuttle {
        println!("cargo::rustc-cfg=magazine_model");
    }

    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let atomic64 = var("CARGO_CFG_TARGET_HAS_ATOMIC")
        .split(',')
        .any(|width| width == "64");
    let arch = var("CARGO_CFG_TARGET_ARCH");
    let tagged = match var("CARGO_CFG_TARGET_POINTER_WIDTH").as_str() {
        "32" => atomic64,
        "64" => {
            atomic64
                && (arch == "x86_64"
                    || (arch == "aarch64" && var("CARGO_CFG_TARGET_OS") != "android"))
        }
        _ => false,
    };
    if tagged {
        println!("cargo::rustc-cfg=magazine_tagged_head");
    }

    let rseq = var("CARGO_CFG_TARGET_OS") == "linux"
        && arch == "x86_64"
        // The sequences' offsets and length word assume 8-byte words: not x32
        // (`x86_64-unknown-linux-gnux32`, 32-bit pointers on x86_64).
        && var("CARGO_CFG_TARGET_POINTER_WIDTH") == "64"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && std::env::var_os("CARGO_FEATURE_STD").is_some()
        && !(loom || shuttle)
        // ThreadSanitizer cannot see the sequences' synchronisation (a commit in
        // assembly, a `membarrier`), so it would report their hand-offs as races: under
        // it the slot protocol runs, which it checks.
        && !var("CARGO_CFG_SANITIZE").split(',').any(|s| s == "thread");
    if rseq {
        println!("cargo::rustc-cfg=magazine_rseq");
    }
}
