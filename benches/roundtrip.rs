//! A no-op command round trip on the in-process universe (4 ranks: root -> 3 workers ->
//! root, `ctl.submit::<Noop>(&(), &ctl.compute_ranks())`) against a raw round trip over
//! `std::sync::mpsc` channels to 3 echo threads (same fan-out/fan-in pattern), in the same
//! criterion group.
//!
//! Run: `cargo bench --bench roundtrip -- --warm-up-time 1 --measurement-time 3`.
//!
//! Criterion's report is the primary figure. Afterwards the bench also times both sides
//! itself (interleaved batches, median batch) and prints
//! `ratio noop/channel: R (noop X us, channel Y us, ...)`.

use std::hint::black_box;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::Criterion;
use uni20::worker::commands::Noop;

/// Ranks of the in-process universe (root + 3 workers).
const RANKS: usize = 4;

/// Raw fan-out/fan-in: one request channel per echo thread, one shared reply channel.
struct EchoPool {
    requests: Vec<Sender<u64>>,
    replies: Receiver<(usize, u64)>,
    threads: Vec<JoinHandle<()>>,
}

impl EchoPool {
    /// Starts `n` threads that echo every request back with their index.
    fn new(n: usize) -> EchoPool {
        let (reply_tx, replies) = channel();
        let mut requests = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = channel::<u64>();
            let reply_tx = reply_tx.clone();
            requests.push(tx);
            threads.push(std::thread::spawn(move || {
                while let Ok(v) = rx.recv() {
                    if reply_tx.send((i, v)).is_err() {
                        break;
                    }
                }
            }));
        }
        EchoPool {
            requests,
            replies,
            threads,
        }
    }

    /// Sends `v` to every thread and waits for every echo.
    fn round(&self, v: u64) -> u64 {
        for tx in &self.requests {
            tx.send(v).expect("echo thread alive");
        }
        let mut sum = 0;
        for _ in 0..self.requests.len() {
            let (i, w) = self.replies.recv().expect("echo thread alive");
            sum += w + i as u64;
        }
        sum
    }

    /// Closes the request channels and joins the threads.
    fn stop(self) {
        drop(self.requests);
        for t in self.threads {
            t.join().expect("echo thread panicked");
        }
    }
}

/// Runs `a` and `b` in alternating batches of `batch` calls (after a warm-up batch each)
/// until `budget` has passed; returns the median per-call time of each and the batch count.
fn interleaved_medians(
    a: &mut dyn FnMut(),
    b: &mut dyn FnMut(),
    batch: u32,
    budget: Duration,
) -> (Duration, Duration, usize) {
    let time_batch = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        t.elapsed() / batch
    };
    time_batch(a);
    time_batch(b);
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while ta.len() < 5 || start.elapsed() < budget {
        ta.push(time_batch(a));
        tb.push(time_batch(b));
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let count = ta.len();
    (median(&mut ta), median(&mut tb), count)
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        // The default 100k bootstrap resamples plus plot rendering take over a minute per
        // benchmark on a busy 2-core machine; the medians do not need them.
        .nresamples(10_000)
        .without_plots()
        .configure_from_args();
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let pool = EchoPool::new(RANKS - 1);
    uni20::universe()
        .ranks(RANKS)
        .run(|ctl| {
            let workers = ctl.compute_ranks();
            assert_eq!(workers.len(), RANKS - 1);
            let mut noop = || {
                black_box(ctl.submit::<Noop>(&(), &workers).expect("noop round trip"));
            };
            let mut v = 0u64;
            let mut raw = || {
                v = pool.round(black_box(v)) % 1024;
            };
            let mut g = c.benchmark_group("roundtrip_4ranks");
            g.bench_function("noop_submit", |b| b.iter(&mut noop));
            g.bench_function("mpsc_channel", |b| b.iter(&mut raw));
            g.finish();
            if bench_mode {
                let (tn, tr, count) = interleaved_medians(&mut noop, &mut raw, 500, Duration::from_secs(4));
                println!(
                    "ratio noop/channel: {:.2} (noop {:.1} us, channel {:.1} us per round trip to {} workers, \
                     median of {count} batches of 500)",
                    tn.as_secs_f64() / tr.as_secs_f64(),
                    tn.as_secs_f64() * 1e6,
                    tr.as_secs_f64() * 1e6,
                    RANKS - 1,
                );
            }
        })
        .expect("universe");
    pool.stop();
    c.final_summary();
}
