//! Workloads that run real libraries' code (crates.io releases, `malloc/Cargo.toml`'s
//! dev-dependencies), not ports written for the bench: what allocates, how much and in
//! which order is the libraries' own doing.
//!
//! | workload | what runs | one operation |
//! |---|---|---|
//! | `serde-json` | `serde_json::from_str` of a 1 MB document into a `Value`, `to_string` of it | a document parsed and printed |
//! | `syn` | `syn::parse_file` of each of the workspace's `src/**/*.rs`, printed back through `quote::ToTokens` | a source byte parsed and printed |
//! | `regex` | 50 patterns compiled, each run over a 100 KB text (`find_iter`, `captures_iter`) | a round of 50 patterns |
//! | `channel` | producers send records (`BTreeMap<String, String>` + `Vec<String>`) through a bounded `crossbeam_channel`, consumers read and drop them | a record |
//! | `rayon-sort` | rounds: rayon collects 10^6 formatted `String`s into a `Vec`, `par_sort`s it, drops it | a string |
//! | `bigvec` | `serde_json::to_writer` into fresh `Vec<u8>`s that grow to 64 KiB-4 MiB, the last few kept alive | a buffer written |
//!
//! The inputs are built at start-up (inside the timed run; building them is a small part
//! of it) from the seeded RNG, except `syn`'s, which is this workspace's source read at
//! run time. Each workload prints a checksum of its results to stderr, so the optimiser
//! cannot drop the work and runs under different allocators can be checked to agree.
//! `serde-json`, `syn`, `regex` and `bigvec` are sequential libraries: one thread by
//! default, with `--threads N` each of N threads does the whole work on the shared input.

use super::{scaled, splitmix, Rng, Workload};
use crossbeam_channel::bounded;
use quote::ToTokens;
use rayon::prelude::*;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::thread;

/// The real-library workloads. `channel` splits its threads like `xmalloc` (2x the cores:
/// half produce, half consume); `rayon-sort` sizes rayon's global pool.
pub(super) const WORKLOADS: &[Workload] = &[
    Workload {
        name: "serde-json",
        default_threads: |_| 1,
        run: serde_json_round_trips,
    },
    Workload {
        name: "syn",
        default_threads: |_| 1,
        run: syn_parse_print,
    },
    Workload {
        name: "regex",
        default_threads: |_| 1,
        run: regex_rounds,
    },
    Workload {
        name: "channel",
        default_threads: |c| 2 * c,
        run: channel_records,
    },
    Workload {
        name: "rayon-sort",
        default_threads: |c| c,
        run: rayon_sort,
    },
    Workload {
        name: "bigvec",
        default_threads: |_| 1,
        run: bigvec,
    },
];

/// Words for generated strings and texts; a few are not ASCII, so that UTF-8 and Unicode
/// classes have something to do.
const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "über", "naïve", "café", "東京",
    "señor", "Ωmega",
];

fn word(rng: &mut Rng) -> &'static str {
    WORDS[rng.index(WORDS.len())]
}

/// `count` words separated by spaces.
fn words(rng: &mut Rng, count: usize) -> String {
    let mut s = String::new();
    for i in 0..count {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(word(rng));
    }
    s
}

/// Prints a workload's checksum (stderr: bench.sh keeps it in its log).
fn report(workload: &str, checksum: u64) {
    eprintln!("{workload}: checksum {:016x}", black_box(checksum));
}

/// Runs `work(thread index)` on `threads` threads; sums the operations they return and
/// mixes their checksums.
fn on_threads(threads: usize, work: impl Fn(u64) -> (u64, u64) + Sync) -> (u64, u64) {
    let work = &work;
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| s.spawn(move || work(t)))
            .collect();
        handles.into_iter().fold((0u64, 0u64), |(ops, sum), h| {
            let (o, c) = h.join().expect("workload thread");
            (ops + o, sum.wrapping_add(c))
        })
    })
}

// ---------------------------------------------------------------------------------------
// JSON documents (serde-json, bigvec).

/// A string for a JSON document: mostly one or two words (names, keys), some sentences,
/// a few long texts; 1 in 20 carries characters that must be escaped.
fn json_string(rng: &mut Rng) -> String {
    let count = match rng.below(10) {
        0..=5 => rng.range(1, 2),
        6..=8 => rng.range(3, 12),
        _ => rng.range(20, 150),
    };
    let mut s = words(rng, count);
    if rng.below(20) == 0 {
        s.push_str(" \"quoted\"\n\t\\");
    }
    s
}

/// A JSON value: numbers, strings, literals, and (above `depth` 4) arrays and objects of
/// up to 8 members.
fn json_value(rng: &mut Rng, depth: u32) -> Value {
    let kinds = if depth >= 4 { 4 } else { 6 };
    match rng.below(kinds) {
        0 => {
            let n = (rng.next() >> rng.range(1, 63)) as i64;
            Value::from(if rng.below(4) == 0 { -n } else { n })
        }
        1 => Value::from(rng.below(1 << 40) as f64 / 1024.0),
        2 => Value::String(json_string(rng)),
        3 => [Value::Null, Value::Bool(true), Value::Bool(false)][rng.index(3)].clone(),
        4 => (0..rng.range(0, 8))
            .map(|_| json_value(rng, depth + 1))
            .collect(),
        _ => {
            let members = rng.range(0, 8);
            json_object(rng, depth + 1, members)
        }
    }
}

fn json_object(rng: &mut Rng, depth: u32, members: usize) -> Value {
    let mut map = Map::new();
    for i in 0..members {
        let key = format!("{}_{i}", word(rng));
        map.insert(key, json_value(rng, depth));
    }
    Value::Object(map)
}

/// Records (objects of 3-10 members) until their compact JSON adds up to `bytes`; each
/// record with its compact length.
fn json_records(seed: u64, bytes: usize) -> Vec<(Value, usize)> {
    let mut rng = Rng::new(seed);
    let mut records = Vec::new();
    let mut total = 0;
    while total < bytes {
        let members = rng.range(3, 10);
        let record = json_object(&mut rng, 1, members);
        let len = serde_json::to_string(&record).expect("to_string").len();
        total += len + 1;
        records.push((record, len));
    }
    records
}

// ---------------------------------------------------------------------------------------
// serde-json: parse and print a document.

/// Round trips per thread at scale 1.
const SERDE_JSON_DOCS: u64 = 150;
/// The document's size.
const SERDE_JSON_BYTES: usize = 1 << 20;

/// A service reading and writing JSON: parses a 1 MB document (nested objects and arrays,
/// strings of 1-150 words, numbers) into a `serde_json::Value` (a `BTreeMap` per object, a
/// `String` per string) and prints it again; the tree and the text are freed each time.
fn serde_json_round_trips(threads: usize, scale: f64) -> u64 {
    let docs = scaled(SERDE_JSON_DOCS, scale);
    let records = json_records(0x5000, SERDE_JSON_BYTES);
    let text = serde_json::to_string(&Value::Array(
        records.into_iter().map(|(record, _)| record).collect(),
    ))
    .expect("to_string");
    let (ops, checksum) = on_threads(threads, |_| {
        let mut checksum = 0u64;
        for _ in 0..docs {
            let value: Value = serde_json::from_str(&text).expect("generated JSON parses");
            let out = serde_json::to_string(&value).expect("to_string");
            checksum = checksum.wrapping_add(out.len() as u64);
        }
        (docs, checksum)
    });
    report("serde-json", checksum);
    ops
}

// ---------------------------------------------------------------------------------------
// syn: parse and print Rust source.

/// Passes over the workspace's source per thread at scale 1.
const SYN_PASSES: u64 = 30;

/// The `magazine` crate's `src/**/*.rs`, in path order (read at run time, so the input is
/// the source tree as it is when the bench runs).
fn workspace_sources() -> Vec<String> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f:?}: {e}")))
        .collect()
}

/// A code generator's or linter's front end: each source file of the workspace (about
/// 0.5 MB in all) parsed by `syn::parse_file` (one file at a time: modules do not
/// concatenate into one valid file) into a syntax tree, printed back into a token
/// string; trees, token streams and strings freed per file.
fn syn_parse_print(threads: usize, scale: f64) -> u64 {
    let passes = scaled(SYN_PASSES, scale);
    let sources = workspace_sources();
    let bytes: u64 = sources.iter().map(|s| s.len() as u64).sum();
    let (ops, checksum) = on_threads(threads, |_| {
        let mut checksum = 0u64;
        for _ in 0..passes {
            for source in &sources {
                let file = syn::parse_file(source).expect("workspace source parses");
                let printed = file.to_token_stream().to_string();
                checksum = checksum.wrapping_add(printed.len() as u64);
            }
        }
        (passes * bytes, checksum)
    });
    report("syn", checksum);
    ops
}

// ---------------------------------------------------------------------------------------
// regex: compile and search.

/// Rounds (50 patterns compiled and run) per thread at scale 1.
const REGEX_ROUNDS: u64 = 25;
const REGEX_PATTERNS: usize = 50;
const REGEX_TEXT_BYTES: usize = 100_000;

/// 50 patterns of ten kinds (literals, alternations, case-insensitive words, captures of
/// e-mail addresses, dates, identifiers and key-value pairs, Unicode classes, multi-line
/// anchors, numbers), their words and bounds drawn from the RNG.
fn regex_patterns() -> Vec<String> {
    let mut rng = Rng::new(0x6000);
    (0..REGEX_PATTERNS)
        .map(|i| match i % 10 {
            0 => regex::escape(word(&mut rng)),
            1 => {
                let alternatives: Vec<_> = (0..rng.range(3, 8))
                    .map(|_| regex::escape(word(&mut rng)))
                    .collect();
                format!(r"\b(?:{})\b", alternatives.join("|"))
            }
            2 => format!("(?i){}s?", regex::escape(word(&mut rng))),
            3 => {
                let last = (b'a' + rng.below(26) as u8) as char;
                format!(r"([a-{last}.]+)@([a-z]+)\.(com|org|net)")
            }
            4 => format!(r"(\d{{4}})-({:02})-(\d{{2}})", rng.range(1, 12)),
            5 => format!(
                r"({})_(\d{{1,{}}})",
                regex::escape(word(&mut rng)),
                rng.range(2, 6)
            ),
            6 => format!(r#"(\w*{})=("[^"]*"|\d+)"#, rng.below(10)),
            7 => format!(r"\p{{L}}{{{},}}", rng.range(4, 9)),
            8 => format!(r"(?m)^{}.*$", regex::escape(word(&mut rng))),
            _ => [
                r"[A-Z][a-z]+ [A-Z][a-z]+",
                r"\d+\.\d+",
                r"0x[0-9a-f]{4,}",
                r"(\w+)\s+(\w+)\s+(\w+)",
                r"[^\x00-\x7F]+",
            ][i / 10]
                .to_string(),
        })
        .collect()
}

/// Lines of words (some capitalised), numbers, dates, e-mail addresses, `name_123`
/// identifiers, `key=value` pairs and hex numbers, 100 KB in all.
fn regex_text() -> String {
    let mut rng = Rng::new(0x6001);
    let mut text = String::with_capacity(REGEX_TEXT_BYTES + 200);
    while text.len() < REGEX_TEXT_BYTES {
        for _ in 0..rng.range(4, 16) {
            let w = word(&mut rng);
            let token = match rng.below(12) {
                0 => format!(
                    "{}-{:02}-{:02}",
                    rng.range(1990, 2030),
                    rng.range(1, 12),
                    rng.range(1, 28)
                ),
                1 => format!("{w}.{}@{}.com", word(&mut rng), word(&mut rng)),
                2 => format!("{w}_{}", rng.below(100_000)),
                3 => format!("{w}{}=\"{}\"", rng.below(10), word(&mut rng)),
                4 => format!("{w}{}={}", rng.below(10), rng.below(1000)),
                5 => format!("0x{:x}", rng.next() >> rng.range(0, 48)),
                6 => format!("{}.{}", rng.below(1000), rng.below(1000)),
                7 => {
                    let mut chars = w.chars();
                    chars.next().map_or_else(String::new, |c| {
                        c.to_uppercase().chain(chars).collect::<String>()
                    })
                }
                _ => w.to_string(),
            };
            text.push_str(&token);
            text.push(' ');
        }
        text.push('\n');
    }
    text
}

/// A log filter or search tool: compiles 50 patterns (each compile builds its parser's
/// tree, NFA and lazy DFA tables afresh), counts each pattern's matches in a 100 KB text
/// and walks its captures; the compiled regexes are freed at the end of the round.
fn regex_rounds(threads: usize, scale: f64) -> u64 {
    let rounds = scaled(REGEX_ROUNDS, scale);
    let patterns = regex_patterns();
    let text = regex_text();
    let (ops, checksum) = on_threads(threads, |_| {
        let mut checksum = 0u64;
        for _ in 0..rounds {
            let compiled: Vec<Regex> = patterns
                .iter()
                .map(|p| Regex::new(p).unwrap_or_else(|e| panic!("{p}: {e}")))
                .collect();
            for re in &compiled {
                checksum = checksum.wrapping_add(re.find_iter(&text).count() as u64);
                for caps in re.captures_iter(&text) {
                    let len: usize = caps.iter().flatten().map(|m| m.len()).sum();
                    checksum = checksum.wrapping_add(len as u64);
                }
            }
        }
        (rounds, checksum)
    });
    report("regex", checksum);
    ops
}

// ---------------------------------------------------------------------------------------
// channel: records between threads.

/// Records over all producers at scale 1.
const CHANNEL_RECORDS: u64 = 500_000;
/// Records that may wait in the channel before producers block.
const CHANNEL_BOUND: usize = 256;

/// A message of a pipeline: string fields and tags of varied sizes.
struct Record {
    fields: BTreeMap<String, String>,
    tags: Vec<String>,
}

impl Record {
    /// 1-16 fields of 0-23 words each, 0-8 tags.
    fn new(rng: &mut Rng, id: u64) -> Record {
        let mut fields = BTreeMap::new();
        fields.insert("id".to_string(), id.to_string());
        for _ in 0..rng.range(1, 16) {
            let count = rng.range(0, 23);
            fields.insert(format!("field-{}", rng.below(64)), words(rng, count));
        }
        let tags = (0..rng.range(0, 8))
            .map(|_| word(rng).to_uppercase())
            .collect();
        Record { fields, tags }
    }

    /// Reads every string (what a consumer that serialises or indexes the record does).
    fn weight(&self) -> u64 {
        let fields: usize = self.fields.iter().map(|(k, v)| k.len() + v.len()).sum();
        let tags: usize = self.tags.iter().map(String::len).sum();
        (fields + tags) as u64
    }
}

/// A processing pipeline: half of the threads build records and send them through one
/// bounded multi-producer multi-consumer `crossbeam_channel`; the other half receive them,
/// read them and drop them, so nearly every free is of memory another thread allocated.
fn channel_records(threads: usize, scale: f64) -> u64 {
    let producers = (threads / 2).max(1);
    let consumers = threads.saturating_sub(producers).max(1);
    let per_producer = scaled(CHANNEL_RECORDS, scale).div_ceil(producers as u64);
    let (sender, receiver) = bounded::<Record>(CHANNEL_BOUND);
    let checksum = thread::scope(|s| {
        let readers: Vec<_> = (0..consumers)
            .map(|_| {
                let receiver = receiver.clone();
                s.spawn(move || receiver.iter().map(|r| r.weight()).sum::<u64>())
            })
            .collect();
        drop(receiver);
        for p in 0..producers as u64 {
            let sender = sender.clone();
            s.spawn(move || {
                let mut rng = Rng::new(0x7000 + p);
                for i in 0..per_producer {
                    let record = Record::new(&mut rng, p << 32 | i);
                    sender.send(record).expect("consumers alive");
                }
            });
        }
        drop(sender);
        readers
            .into_iter()
            .map(|h| h.join().expect("consumer"))
            .sum::<u64>()
    });
    report("channel", checksum);
    per_producer * producers as u64
}

// ---------------------------------------------------------------------------------------
// rayon-sort: parallel collect and sort.

/// Strings over all rounds at scale 1.
const RAYON_STRINGS: u64 = 2_000_000;
/// Strings per round (fewer in the last round, or at small scales).
const RAYON_ROUND: u64 = 1_000_000;

/// A formatted string for rayon-sort: a decimal or hex number, a word pair, or a number
/// with a word; 2-40 bytes.
fn sort_key(x: u64) -> String {
    let w = |k: u64| WORDS[(k % WORDS.len() as u64) as usize];
    match x % 4 {
        0 => (x >> 2).to_string(),
        1 => format!("{:x}", x >> (x % 48)),
        2 => format!("{}-{}", w(x >> 8), w(x >> 16)),
        _ => format!("{}:{}", w(x >> 8), (x >> 32) % 100_000),
    }
}

/// A batch job on rayon's global pool (`--threads` sizes it): each round collects 10^6
/// formatted `String`s in parallel into one `Vec`, sorts it with `par_sort` (a merge sort
/// with a buffer of the vector's size) and drops it on the main thread, freeing strings
/// that the pool's threads allocated. One operation is a string.
fn rayon_sort(threads: usize, scale: f64) -> u64 {
    let total = scaled(RAYON_STRINGS, scale);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon's global pool not yet built");
    let mut checksum = 0u64;
    for round in 0..total.div_ceil(RAYON_ROUND) {
        let count = RAYON_ROUND.min(total - round * RAYON_ROUND);
        let mut strings: Vec<String> = (0..count)
            .into_par_iter()
            .map(|i| sort_key(splitmix(round << 32 | i)))
            .collect();
        strings.par_sort();
        for i in [0, strings.len() / 2, strings.len() - 1] {
            let hash = strings[i]
                .bytes()
                .fold(i as u64, |h, b| splitmix(h ^ u64::from(b)));
            checksum = checksum.wrapping_add(hash);
        }
        drop(strings);
    }
    report("rayon-sort", checksum);
    total
}

// ---------------------------------------------------------------------------------------
// bigvec: large growing buffers.

/// Buffers written per thread at scale 1.
const BIGVEC_BUFFERS: u64 = 400;
/// Buffers kept alive (the newest ones) while the next is written.
const BIGVEC_KEEP: usize = 3;
/// The largest buffer's size; the smallest is 64 KiB.
const BIGVEC_MAX: usize = 4 << 20;

/// A server writing large responses: each buffer is a fresh `Vec<u8>` into which
/// `serde_json::to_writer` writes the first records of one shared document, as many as
/// make 64 KiB-4 MiB (drawn log-uniformly), so the vector grows by reallocation through
/// large sizes; the last three buffers stay
/// alive while the next one is written (responses in flight), older ones are freed.
fn bigvec(threads: usize, scale: f64) -> u64 {
    let buffers = scaled(BIGVEC_BUFFERS, scale);
    let records = json_records(0x8000, BIGVEC_MAX);
    // ends[n]: compact length of the first n records as a JSON array.
    let ends: Vec<usize> = records
        .iter()
        .scan(1, |end, (_, len)| {
            *end += len + 1;
            Some(*end)
        })
        .collect();
    let values: Vec<Value> = records.into_iter().map(|(value, _)| value).collect();
    let (ops, checksum) = on_threads(threads, |t| {
        let mut rng = Rng::new(0x8100 + t);
        let mut in_flight: VecDeque<Vec<u8>> = VecDeque::new();
        let mut checksum = 0u64;
        for _ in 0..buffers {
            // 64 KiB * 2^(0..6): log-uniform up to 4 MiB.
            let target = ((64 << 10) as f64 * 2f64.powf(rng.below(6001) as f64 / 1000.0)) as usize;
            let n = ends.partition_point(|&end| end < target) + 1;
            let records = &values[..n.min(values.len())];
            let mut buffer = Vec::new();
            serde_json::to_writer(&mut buffer, records).expect("write to Vec");
            checksum =
                checksum.wrapping_add(buffer.len() as u64 ^ u64::from(buffer[buffer.len() / 2]));
            in_flight.push_back(buffer);
            if in_flight.len() > BIGVEC_KEEP {
                in_flight.pop_front();
            }
        }
        (buffers, checksum)
    });
    report("bigvec", checksum);
    ops
}
