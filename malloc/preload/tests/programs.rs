//! Programs run with the library under `LD_PRELOAD`, their output compared with their run
//! on glibc's `malloc`: the dynamic loader's first allocations, C's `free` without a size,
//! threads that exit, `fork`, and the process's exit, under real callers. (The CI's
//! `malloc/preload/programs.sh` runs larger programs: Python's own test suite, Lua,
//! SQLite, Redis, Z3.)

mod common;

use std::process::{Command, Output};

/// Runs `program` with `args`, on glibc and under the library; both must succeed with the
/// same standard output.
fn same_on_both(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let run = |preload: Option<&std::path::Path>| {
        let mut command = Command::new(program);
        command.args(args).envs(env.iter().copied());
        if let Some(library) = preload {
            command.env("LD_PRELOAD", library);
        }
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("cannot be preloaded"), "{stderr}");
        assert!(
            output.status.success(),
            "{program} {args:?} (LD_PRELOAD {preload:?}): {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let glibc = run(None);
    let ours = run(Some(&common::library_path()));
    assert!(
        glibc.stdout == ours.stdout,
        "{program} {args:?}: the outputs differ ({} and {} bytes)",
        glibc.stdout.len(),
        ours.stdout.len()
    );
    ours
}

/// A Python interpreter, if the machine has one (`python3` on the path).
fn python() -> Option<&'static str> {
    let found = Command::new("python3").arg("-c").arg("pass").output();
    match found {
        Ok(output) if output.status.success() => Some("python3"),
        _ => {
            eprintln!("no python3 on this machine: its part of the test is skipped");
            None
        }
    }
}

#[test]
fn coreutils_sort_and_list() {
    let input = std::env::temp_dir().join(format!("preload-sort-{}", std::process::id()));
    let lines: String = (0..200_000u64)
        .map(|i| format!("{:x} {}\n", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20, i))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let path = input.to_str().unwrap();
    same_on_both("sort", &["-S", "1M", path], &[]);
    same_on_both("sort", &["-n", "-k2", "--parallel=4", path], &[]);
    std::fs::remove_file(&input).unwrap();
    same_on_both("ls", &["-lR", "/usr/include"], &[]);
}

/// Python with its small objects on `malloc` (`PYTHONMALLOC=malloc`): threads that
/// allocate and exit, blocks freed by other threads, `fork` with threads running, a
/// child process, and the interpreter's teardown.
#[test]
fn python_threads_fork_and_exit() {
    let Some(python) = python() else { return };
    let script = r#"
import json, os, subprocess, threading, queue
q = queue.Queue()
def produce(seed):
    for i in range(2000):
        q.put({"k": [str(seed * i)] * (i % 7), "v": "x" * (i % 300)})
def consume(out):
    n = 0
    for _ in range(8000):
        n += len(json.dumps(q.get()))
    out.append(n)
out = []
threads = [threading.Thread(target=produce, args=(s,)) for s in range(4)]
threads.append(threading.Thread(target=consume, args=(out,)))
for t in threads: t.start()
pid = os.fork()
if pid == 0:
    blocks = [bytearray(i % 5000) for i in range(20000)]
    os._exit(len(blocks) % 256)
for t in threads: t.join()
print(out, os.waitpid(pid, 0)[1] >> 8)
print(subprocess.run(["echo", "child"], capture_output=True).stdout)
big = [bytes(1 << k) for k in range(27)]
print(sum(map(len, big)), len({str(i): i for i in range(300000)}))
import sys
print("preloaded" if "libmagazine_preload" in open("/proc/self/maps").read() else "", file=sys.stderr)
"#;
    let output = same_on_both(python, &["-c", script], &[("PYTHONMALLOC", "malloc")]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("child"));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("preloaded"),
        "not preloaded"
    );
}

/// The allocator's own trims (every 100 ms unless `MAGAZINE_TRIM_MS` says otherwise; 0
/// turns them off): after a Python program frees 500,000 small strings and goes on with
/// other work (a 4 MiB buffer allocated and freed every 20 ms: a large block's path, where
/// the allocator reads the clock), what it keeps resident beyond its start falls, within
/// 10 s, below half of what it keeps with the trims off after a second of the same work
/// (spans whose blocks all came back through the depot's overflow are returned either
/// way; the trims return the rest).
#[test]
fn the_allocators_own_trims_give_freed_memory_back() {
    let Some(python) = python() else { return };
    let script = r#"
import sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
start = rss()
x = [str(i) * 3 for i in range(500000)]
del x
target = start + int(sys.argv[1])
deadline = time.monotonic() + float(sys.argv[2])
while rss() > target and time.monotonic() < deadline:
    buffer = bytearray(4 << 20)
    del buffer
    time.sleep(0.02)
print(rss() - start)
"#;
    // The resident KiB beyond the start, once below `target` (or after `seconds`).
    let kept = |trim_ms: Option<&str>, target: i64, seconds: u32| -> i64 {
        let mut command = Command::new(python);
        command
            .args(["-c", script, &target.to_string(), &seconds.to_string()])
            .env("PYTHONMALLOC", "malloc")
            .env("LD_PRELOAD", common::library_path());
        if let Some(ms) = trim_ms {
            command.env("MAGAZINE_TRIM_MS", ms);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap()
    };
    let untrimmed = kept(Some("0"), 0, 1);
    for trim_ms in [None, Some("50")] {
        let trimmed = kept(trim_ms, untrimmed / 2, 10);
        assert!(
            trimmed < untrimmed / 2,
            "{trimmed} KiB kept with trims every {trim_ms:?} ms, {untrimmed} KiB without"
        );
    }
}
