//! Many short-lived threads that allocate, hand blocks to other threads to free, and exit
//! with thread-locals whose destructors allocate and free: some registered before the
//! thread's first epoch pin (so they run after crossbeam-epoch's own thread-local is
//! gone), some after.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use magazine_malloc::MagazineMalloc;

#[cfg(not(magazine_test_malloc))]
#[global_allocator]
static GLOBAL: MagazineMalloc = MagazineMalloc::new();

static DESTRUCTORS: AtomicUsize = AtomicUsize::new(0);

/// Allocates and frees in its destructor: enough blocks of several classes to miss the
/// magazines and reach the depot, so that the cache pins the epoch during thread exit.
struct Busy(Vec<u64>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut kept: Vec<Box<[u8]>> = Vec::new();
        for round in 0..2 {
            for size in [24, 64, 200, 1000, 5000] {
                kept.extend((0..100).map(|i| vec![(i + round) as u8; size].into_boxed_slice()));
            }
            kept.retain(|b| b[0] % 2 == 0);
        }
        let strings: Vec<String> = (0..500).map(|i| format!("{i}:{}", self.0.len())).collect();
        assert_eq!(strings[499], format!("499:{}", self.0.len()));
        assert!(kept.iter().all(|b| b.iter().all(|&x| x == b[0])));
        DESTRUCTORS.fetch_add(1, Ordering::Relaxed);
    }
}

thread_local! {
    static EARLY: RefCell<Option<Busy>> = const { RefCell::new(None) };
    static LATE: RefCell<Option<Busy>> = const { RefCell::new(None) };
}

#[test]
fn short_lived_threads_allocate_free_elsewhere_and_exit() {
    const WAVES: usize = 25;
    const PER_WAVE: usize = 8;
    let (sender, receiver) = mpsc::channel::<Vec<Box<[u8]>>>();
    // A long-lived thread frees what the short-lived ones made, checking it first.
    let freer = thread::spawn(move || {
        let mut freed = 0usize;
        for blocks in receiver {
            for block in blocks {
                assert!(block.iter().all(|&b| b == block.len() as u8));
                freed += 1;
            }
        }
        freed
    });
    for _ in 0..WAVES {
        let (pass, take) = mpsc::channel::<Vec<Box<[u8]>>>();
        let take = std::sync::Mutex::new(take);
        thread::scope(|scope| {
            for t in 0..PER_WAVE {
                let sender = sender.clone();
                let pass = pass.clone();
                let take = &take;
                scope.spawn(move || {
                    // Registered before this thread's first pin: destroyed after the
                    // epoch's thread-local.
                    EARLY.with(|slot| *slot.borrow_mut() = Some(Busy(vec![1; 10])));
                    let made: Vec<Box<[u8]>> = (0..400)
                        .map(|i| {
                            let len = [8, 48, 100, 700, 3000, 9000][(i + t) % 6];
                            vec![len as u8; len].into_boxed_slice()
                        })
                        .collect();
                    // Half to the long-lived freer, half to a sibling that exits too.
                    let (to_freer, to_sibling): (Vec<_>, Vec<_>) =
                        made.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
                    sender
                        .send(to_freer.into_iter().map(|(_, b)| b).collect())
                        .unwrap();
                    pass.send(to_sibling.into_iter().map(|(_, b)| b).collect())
                        .unwrap();
                    let theirs = take.lock().unwrap().recv().unwrap();
                    assert!(theirs.iter().all(|b| b.iter().all(|&x| x == b.len() as u8)));
                    drop(theirs);
                    // Registered after the pins: destroyed before the epoch's.
                    LATE.with(|slot| *slot.borrow_mut() = Some(Busy(vec![2; 20])));
                });
            }
        });
    }
    drop(sender);
    let freed = freer.join().unwrap();
    assert_eq!(freed, WAVES * PER_WAVE * 400 / 2);
    // A scope ends when its threads' closures have returned; their thread-locals'
    // destructors may still be running.
    let deadline = Instant::now() + Duration::from_secs(60);
    while DESTRUCTORS.load(Ordering::Relaxed) < 2 * WAVES * PER_WAVE {
        assert!(
            Instant::now() < deadline,
            "thread-local destructors did not finish"
        );
        thread::sleep(Duration::from_millis(10));
    }
    let stats = MagazineMalloc::new().stats();
    assert!(stats.totals().0 > 0, "served by MagazineMalloc: {stats}");
    assert!(
        stats.metadata_in_use > 0,
        "the class caches themselves are counted"
    );
}
