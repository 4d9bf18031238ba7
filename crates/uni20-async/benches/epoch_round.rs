//! One read+write epoch round on an `Async<u64>` versus one `futures::channel::oneshot`
//! round, in the same run. Both are driven by polling once with a no-op waker (every step
//! is ready at once), so the figure is the bookkeeping cost of the epoch queue itself.
//!
//! Run: `cargo bench -p uni20-async --bench epoch_round -- --measurement-time 3`.
//! Besides criterion's report it prints `ratio epoch_round/oneshot_round = R`, measured
//! with a plain timing loop after the criterion groups.

use criterion::{criterion_group, Criterion};
use futures::channel::oneshot;
use std::future::{Future, IntoFuture};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Instant;
use uni20_async::Async;

fn poll_ready<F: Future>(f: F) -> F::Output {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("benchmark step was not ready"),
    }
}

/// read() the current epoch, get the value, release; write() the next epoch, set, release.
fn epoch_round(a: &Async<u64>) -> u64 {
    let r = a.read();
    let v = *poll_ready(r.get()).expect("value");
    drop(r);
    let w = a.write();
    let mut g = poll_ready(w.into_future()).expect("writer");
    g.set(v + 1);
    v
}

/// Create a channel, send, receive.
fn oneshot_round(v: u64) -> u64 {
    let (tx, rx) = oneshot::channel();
    tx.send(v + 1).expect("receiver alive");
    poll_ready(rx).expect("sender sent")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("round");
    let a = Async::new(0u64);
    g.bench_function("epoch_round", |b| b.iter(|| black_box(epoch_round(&a))));
    let mut v = 0u64;
    g.bench_function("oneshot_round", |b| {
        b.iter(|| {
            v = oneshot_round(black_box(v));
            v
        })
    });
    g.finish();
}

fn ratio() {
    const N: u32 = 2_000_000;
    let a = Async::new(0u64);
    for _ in 0..10_000 {
        black_box(epoch_round(&a));
    }
    let t = Instant::now();
    for _ in 0..N {
        black_box(epoch_round(&a));
    }
    let epoch_ns = t.elapsed().as_nanos() as f64 / f64::from(N);
    let mut v = 0u64;
    let t = Instant::now();
    for _ in 0..N {
        v = oneshot_round(black_box(v));
    }
    black_box(v);
    let oneshot_ns = t.elapsed().as_nanos() as f64 / f64::from(N);
    println!(
        "epoch_round {epoch_ns:.1} ns, oneshot_round {oneshot_ns:.1} ns, ratio epoch_round/oneshot_round = {:.2}",
        epoch_ns / oneshot_ns
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo test --benches` runs this binary with `--bench` absent: skip the timing loop.
    if std::env::args().any(|a| a == "--bench") {
        ratio();
    }
}
