//! Regression tests, one per defect found in review, each named after the bug it pins
//! down. Each failed on the code before its fix.

#[cfg(magazine_test_malloc)]
use magazine_malloc as _; // the suite on MagazineMalloc (.ci/run)
use std::panic::{self, AssertUnwindSafe};

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use magazine::{Cache, Config, DepotPolicy, Source, Trim};

/// A source whose first `free_batch` (the reaper's trim) stops at a gate until the test
/// lets it go, and whose every later `free_batch` (the cache's drop) panics.
struct GatedSource {
    next: AtomicU32,
    calls: AtomicUsize,
    /// Two rendezvous: "the trim is inside the source", then "go on".
    gate: Barrier,
}

const DROP_PANIC: &str = "gated source: panic in the cache's drop";

impl Source for GatedSource {
    type Item = u32;

    fn alloc(&self) -> Option<u32> {
        Some(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.gate.wait();
            self.gate.wait();
            items.for_each(drop);
        } else {
            panic!("{DROP_PANIC}");
        }
    }
}

/// The reaper held a strong reference during `trim()`; when the user dropped the last
/// `Arc` meanwhile, the cache's `Drop` ran on the reaper thread and a panicking source
/// there was swallowed by the join in `Reaper::stop`/`drop`. Now the cache is still
/// dropped as soon as that trim ends (not kept alive any longer), and `stop` re-raises the
/// panic.
#[test]
fn reaper_last_arc_dropped_during_trim_reraises_the_drop_panic() {
    let source = Arc::new(GatedSource {
        next: AtomicU32::new(0),
        calls: AtomicUsize::new(0),
        gate: Barrier::new(2),
    });
    let config = Config {
        magazine_size: 2,
        cpus: 1,
        // One magazine per trim, from the first trim on.
        depot: DepotPolicy::Dynamic {
            target: 0,
            trim: Trim::OnePerTick,
        },
    };
    let cache = Arc::new(Cache::with_config(Arc::clone(&source), config));
    let ids: Vec<u32> = (0..12).map(|_| cache.alloc_on(0).unwrap()).collect();
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    assert!(
        cache.stats().depot_full >= 2,
        "a trim leaves items for the drop"
    );

    let reaper = cache.start_reaper(Duration::from_millis(1));
    source.gate.wait(); // the reaper's trim is inside the source
    drop(cache); // the user's last `Arc`, while the trim runs
    source.gate.wait();

    // Not kept alive: the reaper drops the cache when its trim ends, without `stop`.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Arc::strong_count(&source) > 1 {
        assert!(Instant::now() < deadline, "the reaper kept the cache alive");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stopped = panic::catch_unwind(AssertUnwindSafe(|| reaper.stop()));
    let payload = stopped.expect_err("the panic of the cache's drop was swallowed");
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied());
    assert_eq!(message, Some(DROP_PANIC));
}

/// The IOVA domain allocated fast-path misses from the tree itself, past each class's
/// `ClassSource` (whose `Source::alloc` was dead code that would have created ranges
/// nobody recorded): every class's `source_allocs` and `exhaustion_flushes` stayed 0. Now
/// the class's source allocates on a miss and counts it, and counts the flushes its
/// misses cause.
#[cfg(feature = "iova")]
#[test]
fn iova_class_stats_count_tree_allocations_and_exhaustion_flushes() {
    use magazine::iova::IovaDomain;

    // pfns 1..=4 under the limit: four 1-page ranges fill the space.
    let domain = IovaDomain::with_cpus(4096, 1, 2);
    let limit = 4;
    let pfns: Vec<u64> = (0..4)
        .map(|_| domain.alloc_fast_on(0, 1, limit).unwrap())
        .collect();
    pfns.iter()
        .for_each(|&pfn| domain.free_fast_on(0, pfn, 1).unwrap());
    let stats = domain.stats();
    assert_eq!(
        stats.rcaches[0].source_allocs, 4,
        "four misses of the 1-page class"
    );
    assert_eq!(stats.rcaches[0].free_hits, 4);

    // A 2-page request on the other CPU: nothing cached in its class, the tree is full of
    // cached 1-page ranges, so the miss flushes every cache and retries.
    let pfn = domain.alloc_fast_on(1, 2, limit).unwrap();
    assert_eq!(pfn, 2);
    let stats = domain.stats();
    assert_eq!(stats.exhaustion_flushes, 1);
    assert_eq!(
        stats.rcaches[1].exhaustion_flushes, 1,
        "the 2-page class caused it"
    );
    assert_eq!(stats.rcaches[1].source_allocs, 1);
    assert_eq!(stats.rcaches[0].exhaustion_flushes, 0);
    assert_eq!(
        stats.rcaches[0].source_frees, 4,
        "the flush returned the cached pages"
    );
    domain.free_fast_on(1, pfn, 2).unwrap();
    domain.check().unwrap();
}

/// The docs cited numbered invariants of a design document that was not in the project.
/// The design now lives in `src/docs/design.rs` and the citations are rustdoc links such as
/// `crate::docs::design#invariant-1-conservation`. Rustdoc checks the path of such a link
/// but not its `#fragment`, so this test does: every fragment into a `docs` module, in
/// every Rust source of the package (and the model-check crate), must be the id rustdoc
/// gives one of that module's headings.
#[test]
#[cfg_attr(
    miri,
    ignore = "reads the sources from disk; Miri's isolation has no file system"
)]
fn design_doc_links_name_existing_headings() {
    use std::collections::BTreeSet;
    use std::fs;
    use std::path::{Path, PathBuf};

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    let mut dirs: Vec<PathBuf> = ["src", "tests", "examples", "benches", "loom-tests"]
        .iter()
        .map(|dir| root.join(dir))
        .collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.map(|entry| entry.unwrap().path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                sources.push(path);
            }
        }
    }

    // Rustdoc's heading ids: lower case, letters, digits, `-` and `_` kept, spaces to `-`.
    let heading_ids = |module: &str| -> BTreeSet<String> {
        let text = fs::read_to_string(root.join("src/docs").join(format!("{module}.rs")))
            .unwrap_or_else(|_| panic!("no docs module {module}"));
        text.lines()
            .filter_map(|line| line.trim_start().strip_prefix("//!"))
            .filter_map(|line| line.trim_start().strip_prefix('#'))
            .map(|heading| {
                heading
                    .trim_start_matches('#')
                    .trim()
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect()
            })
            .collect()
    };

    let mut checked = 0;
    for path in &sources {
        let text = fs::read_to_string(path).unwrap();
        // Inside `src/docs` the modules link to each other as `super::`.
        let prefix = match path.parent() == Some(&root.join("src/docs")) {
            true => "super::",
            false => "docs::",
        };
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + prefix.len()..];
            let link: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '#' | '-'))
                .collect();
            let Some((module, fragment)) = link.split_once('#') else {
                continue;
            };
            assert!(
                heading_ids(module).contains(fragment),
                "{}: `docs::{link}` names no heading of src/docs/{module}.rs",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "only {checked} links found: is the scan broken?"
    );
}

/// The sources of the library, as (module, text) pairs: `src/x.rs` and `src/x/*.rs` belong
/// to module `x`; the crate root and the long-form docs are left out.
fn library_modules() -> Vec<(String, String)> {
    use std::fs;
    use std::path::Path;

    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if name == "lib" || name == "docs" {
            continue;
        }
        let files = match path.is_dir() {
            true => fs::read_dir(&path)
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .collect(),
            false => vec![path],
        };
        for file in files {
            modules.push((name.clone(), fs::read_to_string(file).unwrap()));
        }
    }
    assert!(modules.len() >= 15, "src/ scan found too little");
    modules
}

/// Mutants are `cfg!(magazine_mutant = "...")` expressions whose arms both type-check, not
/// `#[cfg]` twins of fields, methods or statements in production types; and the model
/// checkers' builds are named once (`cfg(magazine_model)`, set by `build.rs`).
#[test]
#[cfg_attr(miri, ignore = "reads files, which Miri's isolation forbids")]
fn production_sources_have_no_mutant_only_items() {
    for (module, text) in library_modules() {
        for line in text.lines() {
            let line = line.trim_start();
            assert!(
                !(line.starts_with("#[cfg") && line.contains("magazine_mutant")),
                "{module}: mutant-only item `{line}`"
            );
            assert!(
                !line.contains("any(loom, feature = \"shuttle\")"),
                "{module}: `{line}` should say `magazine_model`"
            );
        }
    }
}

/// The modules of the library form no import cycle (e.g. the per-CPU front end and the
/// per-thread handle once imported each other).
#[test]
#[cfg_attr(miri, ignore = "reads files, which Miri's isolation forbids")]
fn library_modules_have_no_import_cycle() {
    use std::collections::{BTreeMap, BTreeSet};

    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in library_modules() {
        let code = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"));
        for line in code {
            for (at, _) in line.match_indices("crate::") {
                let used: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !used.is_empty() && used != module {
                    uses.entry(module.clone()).or_default().insert(used);
                }
            }
        }
    }
    assert!(uses.len() >= 10, "import scan found too little: {uses:?}");
    // Depth-first search for a back edge.
    fn visit<'a>(
        module: &'a str,
        uses: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|&m| m == module) {
            panic!("import cycle: {} -> {module}", path[at..].join(" -> "));
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for used in uses.get(module).into_iter().flatten() {
            visit(used, uses, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in uses.keys() {
        visit(module, &uses, &mut Vec::new(), &mut done);
    }
}

/// A source that frees new items into its own cache from `free_batch`, the way a program
/// whose other threads keep freeing looks to a flush: each returned magazine brings a new
/// one into the depot. `Cache::flush` drained the depot until it found it empty, so it
/// chased such producers without end (38 s in a reproducer, returning only once the
/// producer stopped); now it takes the depot's magazines as many as were there when it
/// got to them.
#[test]
fn flush_ends_while_frees_keep_coming() {
    use std::sync::{OnceLock, Weak};

    struct Refilling {
        next: AtomicU32,
        cache: OnceLock<Weak<Cache<Arc<Refilling>>>>,
        refills: AtomicUsize,
    }

    impl Source for Refilling {
        type Item = u32;

        fn alloc(&self) -> Option<u32> {
            Some(self.next.fetch_add(1, Ordering::Relaxed))
        }

        fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
            items.for_each(drop);
            let cache = self.cache.get().and_then(Weak::upgrade);
            if let Some(cache) = cache {
                // A full magazine's worth, and one more: the slot spills one to the depot.
                if self.refills.fetch_add(1, Ordering::Relaxed) < 1_000_000 {
                    for _ in 0..3 {
                        cache.free_on(0, self.next.fetch_add(1, Ordering::Relaxed));
                    }
                }
            }
        }
    }

    let source = Arc::new(Refilling {
        next: AtomicU32::new(0),
        cache: OnceLock::new(),
        refills: AtomicUsize::new(0),
    });
    let config = Config {
        magazine_size: 1,
        cpus: 1,
        ..Config::default()
    };
    let cache = Arc::new(Cache::with_config(Arc::clone(&source), config));
    let ids: Vec<u32> = (0..8).map(|_| cache.alloc_on(0).unwrap()).collect();
    ids.into_iter().for_each(|id| cache.free_on(0, id));
    assert!(cache.stats().depot_full >= 4);
    let _ = source.cache.set(Arc::downgrade(&cache));
    cache.flush();
    let refills = source.refills.load(Ordering::Relaxed);
    assert!(
        refills < 1_000_000,
        "the flush chased the frees {refills} times"
    );
}

/// A source whose `free_batch` allocates from its own cache, under contention (many
/// threads on one slot, a small pool, a `Fixed` depot of one magazine): no slot and no
/// flush flag is held while the source runs (the exhaustion flush used to keep its
/// one-flush-at-a-time flag while it returned the magazines a `Fixed` depot refused, so
/// such an allocation could wait for the flush it was part of), so nothing hangs and
/// nothing is lost. (The refusal inside a flush needs a racing push: this test reaches
/// it rarely, and is a conservation test of re-entry above all.)
#[test]
fn a_source_may_allocate_from_its_own_cache() {
    use std::cell::Cell;
    use std::sync::{Mutex, OnceLock, Weak};

    thread_local! {
        static INSIDE: Cell<bool> = const { Cell::new(false) };
    }

    struct Borrowing {
        free: Mutex<Vec<u32>>,
        cache: OnceLock<Weak<Cache<Arc<Borrowing>>>>,
        borrowing: std::sync::atomic::AtomicBool,
        borrowed: Mutex<Vec<u32>>,
    }

    impl Source for Borrowing {
        type Item = u32;

        fn alloc(&self) -> Option<u32> {
            self.free.lock().unwrap().pop()
        }

        fn free_batch(&self, items: &mut dyn Iterator<Item = u32>) {
            self.free.lock().unwrap().extend(items);
            if INSIDE.with(|inside| inside.replace(true)) {
                return;
            }
            let borrowing = self.borrowing.load(Ordering::Relaxed);
            if let Some(cache) = self
                .cache
                .get()
                .and_then(Weak::upgrade)
                .filter(|_| borrowing)
            {
                let borrowed = cache.alloc();
                self.borrowed.lock().unwrap().extend(borrowed);
            }
            INSIDE.with(|inside| inside.set(false));
        }
    }

    let source = Arc::new(Borrowing {
        free: Mutex::new((0..16).collect()),
        cache: OnceLock::new(),
        borrowing: std::sync::atomic::AtomicBool::new(true),
        borrowed: Mutex::new(Vec::new()),
    });
    let config = Config {
        magazine_size: 2,
        cpus: 1,
        depot: DepotPolicy::Fixed { max_full: 1 },
    };
    let mut options = magazine::Options::default();
    options.max_empty = Some(0);
    let cache = Arc::new(Cache::with_options(Arc::clone(&source), config, options));
    let _ = source.cache.set(Arc::downgrade(&cache));
    std::thread::scope(|s| {
        for seed in 0..4u32 {
            let cache = &cache;
            s.spawn(move || {
                let mut held = Vec::new();
                let rounds = if cfg!(miri) { 300 } else { 20_000u32 };
                for round in 0..rounds {
                    match (round.wrapping_mul(2_654_435_761) ^ seed) % 3 {
                        0 => held.pop().into_iter().for_each(|id| cache.free(id)),
                        _ => held.extend(cache.alloc()),
                    }
                }
                held.into_iter().for_each(|id| cache.free(id));
            });
        }
    });
    source.borrowing.store(false, Ordering::Relaxed);
    let borrowed = std::mem::take(&mut *source.borrowed.lock().unwrap());
    borrowed.into_iter().for_each(|id| cache.free(id));
    drop(cache);
    let mut home = source.free.lock().unwrap().clone();
    home.sort_unstable();
    assert_eq!(home, (0..16).collect::<Vec<_>>(), "ids lost or duplicated");
}
