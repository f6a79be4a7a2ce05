//! A child `fork`ed while other threads allocate, free and trim can use the heap: each
//! child allocates and frees blocks of several classes (ones the parent's threads cached
//! too) and large ones, frees blocks the parent allocated, trims, and exits. Without the
//! fork handlers (`malloc/src/fork.rs`) some children hang on a lock that a parent thread
//! held at the fork; the mutant `no_fork_handlers` shows it.
//!
//! One test function: the children are forks of the whole process.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

const FORKS: usize = 1000;
/// Parent threads that allocate, free and trim while the forks happen.
const THREADS: usize = 3;
/// Sizes of several classes, and two large ones (mappings of their own).
const SIZES: [usize; 9] = [8, 24, 64, 200, 1000, 3000, 20_000, 40_000, 200_000];
/// A child still running after this long is taken to hang: killed and counted.
const DEADLINE: Duration = Duration::from_secs(10);

/// A block of ours, its first and last bytes marked; freed when dropped.
struct Block {
    addr: usize,
    layout: Layout,
}

impl Block {
    fn new(size: usize, mark: u8) -> Block {
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: a nonzero size; written within it.
        unsafe {
            let ptr = alloc(layout);
            if ptr.is_null() {
                handle_alloc_error(layout);
            }
            ptr.write(mark);
            ptr.add(size - 1).write(mark);
            Block {
                addr: ptr as usize,
                layout,
            }
        }
    }

    /// Whether the marks are still `mark`.
    fn holds(&self, mark: u8) -> bool {
        let ptr = self.addr as *const u8;
        // SAFETY: a live block of ours of `layout.size()` bytes, both ends written.
        unsafe { ptr.read() == mark && ptr.add(self.layout.size() - 1).read() == mark }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated with `layout` by `new`, freed once.
        unsafe { dealloc(self.addr as *mut u8, self.layout) };
    }
}

/// A parent thread's loop: blocks of every size, half of them freed by the next thread,
/// a trim per round (which takes the class locks to give magazines back).
fn churn(
    id: usize,
    stop: &AtomicBool,
    to_next: mpsc::Sender<Block>,
    from_prev: mpsc::Receiver<Block>,
) {
    let heap = MagazineMalloc::new();
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let mut blocks: Vec<Block> = (0..32)
            .map(|i| Block::new(SIZES[(i + round + id) % SIZES.len()], i as u8))
            .collect();
        for (i, block) in blocks.drain(..).enumerate() {
            if i % 2 == 0 {
                // The receiver is gone only once the test is over.
                let _ = to_next.send(block);
            }
        }
        while let Ok(block) = from_prev.try_recv() {
            drop(block);
        }
        heap.trim();
        round += 1;
    }
}

/// The child's work; `false` when a block does not hold what was written.
fn child_work(inherited: Vec<Block>) -> bool {
    let heap = MagazineMalloc::new();
    let mut whole = inherited.iter().all(|block| block.holds(0xa5));
    drop(inherited);
    let mut kept = Vec::new();
    for round in 0..4u8 {
        for &size in &SIZES {
            kept.extend((0..4).map(|_| (Block::new(size, round), round)));
        }
        whole &= kept.iter().all(|(block, mark)| block.holds(*mark));
        if round % 2 == 1 {
            kept.clear();
        }
        heap.trim();
    }
    whole
}

/// How the children ended.
#[derive(Default)]
struct Outcome {
    hung: usize,
    failed: usize,
}

/// Reaps the children that ended, kills those past the deadline; with `all`, until none is
/// left.
fn reap(pending: &mut Vec<(libc::pid_t, Instant)>, outcome: &mut Outcome, all: bool) {
    loop {
        pending.retain(|&(pid, forked)| {
            let mut status = 0;
            // SAFETY: a child of ours not reaped yet; `status` is ours to write.
            match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
                0 if forked.elapsed() < DEADLINE => true,
                0 => {
                    // SAFETY: as above; the child is killed, then reaped.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, &mut status, 0);
                    }
                    outcome.hung += 1;
                    false
                }
                done if done == pid => {
                    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                        outcome.failed += 1;
                    }
                    false
                }
                _ => {
                    outcome.failed += 1;
                    false
                }
            }
        });
        if !all || pending.is_empty() {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Children forked less than a second ago and not reaped.
fn running(pending: &[(libc::pid_t, Instant)]) -> usize {
    pending
        .iter()
        .filter(|(_, forked)| forked.elapsed() < Duration::from_secs(1))
        .count()
}

#[test]
fn children_forked_while_threads_allocate_can_allocate() {
    let stop = Arc::new(AtomicBool::new(false));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel()).unzip();
    let threads: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(id, from_prev)| {
            let to_next = senders[(id + 1) % THREADS].clone();
            let stop = Arc::clone(&stop);
            thread::spawn(move || churn(id, &stop, to_next, from_prev))
        })
        .collect();
    drop(senders);

    // Blocks of the parent's, which each child frees.
    let mut inherited: Vec<Block> = SIZES.iter().map(|&size| Block::new(size, 0xa5)).collect();
    let mut pending = Vec::new();
    let mut outcome = Outcome::default();
    for _ in 0..FORKS {
        // SAFETY: the child runs only `child_work` (allocation, trims) and leaves with
        // `_exit`, which runs no atexit handler and unwinds nothing of the parent's.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let inherited = std::mem::take(&mut inherited);
            let code = match std::panic::catch_unwind(move || child_work(inherited)) {
                Ok(true) => 0,
                Ok(false) => 1,
                Err(_) => 2,
            };
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0, "fork failed");
        pending.push((pid, Instant::now()));
        reap(&mut pending, &mut outcome, false);
        // At most 64 children at work at once; one that hangs stops counting after a
        // second, so hung children do not hold the forks up until their deadline.
        while running(&pending) >= 64 {
            thread::sleep(Duration::from_millis(1));
            reap(&mut pending, &mut outcome, false);
        }
    }
    reap(&mut pending, &mut outcome, true);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(
        outcome.hung == 0 && outcome.failed == 0,
        "of {FORKS} children, {} hung and {} failed",
        outcome.hung,
        outcome.failed
    );
    drop(inherited);
}
