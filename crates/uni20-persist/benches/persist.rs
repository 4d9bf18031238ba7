//! Persistent store benchmarks.
//!
//! * `cache_hit/*`: latency of a load of a resident object (`load_wait`,
//!   `try_load_local`), including dropping the returned `PValue`. Goal: < 100 ns.
//! * `commit_flush/{store,raw}/<size>`: a disk store's `commit` + `flush` of one
//!   `Vec<u8>` object against a plain `File::create` + `write_all` + `sync_all` of the
//!   same bytes, in a tempdir on the same file system (set `TMPDIR` to choose it).
//!   The value handed to `commit` is built outside the timed region; the file is
//!   deleted outside it too. Goal: store throughput >= 80% of raw.
//!
//! Run: `cargo bench -p uni20-persist --bench persist`. After criterion's report the
//! bench prints `ratio store/raw` per size from its own interleaved measurement
//! (median of 15 alternating runs each), so both sides see the same disk conditions.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use uni20_persist::{Store, StoreOptions};

const SIZES: [usize; 2] = [1 << 20, 16 << 20];

fn payload(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()[7])
        .collect()
}

/// Time to write `bytes` to the new file `dir/name` and sync it (and then `dir`, when
/// `sync_dir`); the file is removed afterwards.
fn timed_file_write(dir: &Path, name: String, bytes: &[u8], sync_dir: bool) -> Duration {
    let path = dir.join(name);
    let t = Instant::now();
    let mut f = File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    drop(f);
    if sync_dir {
        File::open(dir).unwrap().sync_all().unwrap();
    }
    let d = t.elapsed();
    std::fs::remove_file(&path).unwrap();
    d
}

fn raw_write(dir: &Path, n: u64, bytes: &[u8]) -> Duration {
    timed_file_write(dir, format!("raw-{n}"), bytes, false)
}

fn store_commit(store: &Store, bytes: &[u8]) -> Duration {
    let v = bytes.to_vec();
    let t = Instant::now();
    let p = store.commit(v).unwrap();
    store.flush(p).unwrap();
    let d = t.elapsed();
    // Delete it again (untimed) so the directory does not grow.
    store.gc(&[]).unwrap();
    d
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cache_hit");
    let s = Store::in_memory(0);
    let p = s.commit(vec![1.0f64; 1024]).unwrap();
    g.bench_function("load_wait", |b| {
        b.iter(|| black_box(s.load_wait(black_box(p)).unwrap()))
    });
    g.bench_function("try_load_local", |b| {
        b.iter(|| black_box(s.try_load_local(black_box(p)).unwrap()))
    });
    let tmp = tempfile::tempdir().unwrap();
    let d = Store::open(tmp.path(), 0, StoreOptions::new().memory_budget(1 << 30)).unwrap();
    let q = d.commit(vec![1.0f64; 1024]).unwrap();
    g.bench_function("load_wait_disk_store_with_budget", |b| {
        b.iter(|| black_box(d.load_wait(black_box(q)).unwrap()))
    });
    g.finish();
    drop(d);

    let mut g = c.benchmark_group("commit_flush");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    let raw_dir = tmp.path().join("raw");
    std::fs::create_dir_all(&raw_dir).unwrap();
    for n in SIZES {
        let bytes = payload(n);
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(BenchmarkId::new("store", n), &bytes, |b, bytes| {
            b.iter_custom(|iters| (0..iters).map(|_| store_commit(&store, bytes)).sum())
        });
        let mut k = 0u64;
        g.bench_with_input(BenchmarkId::new("raw", n), &bytes, |b, bytes| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        k += 1;
                        raw_write(&raw_dir, k, bytes)
                    })
                    .sum()
            })
        });
    }
    g.finish();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn raw_write_dirsync(dir: &Path, n: u64, bytes: &[u8]) -> Duration {
    timed_file_write(dir, format!("rawd-{n}"), bytes, true)
}

fn store_batch(store: &Store, bytes: &[u8], k: usize) -> Duration {
    let vs: Vec<Vec<u8>> = (0..k).map(|_| bytes.to_vec()).collect();
    let t = Instant::now();
    for v in vs {
        store.commit(v).unwrap();
    }
    store.flush_all().unwrap();
    let d = t.elapsed();
    store.gc(&[]).unwrap();
    d
}

fn report(what: &str, mib: f64, st: Duration, raw: Duration, rawd: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what}: store {:.2} ms ({:.0} MiB/s); raw write+fsync {:.2} ms ({:.0} MiB/s), ratio {:.2}; raw write+fsync+dir fsync {:.2} ms, ratio {:.2}",
        ms(st),
        mib / st.as_secs_f64(),
        ms(raw),
        mib / raw.as_secs_f64(),
        raw.as_secs_f64() / st.as_secs_f64(),
        ms(rawd),
        rawd.as_secs_f64() / st.as_secs_f64()
    );
}

/// Interleaved store/raw runs (median of 15 each), so that all see the same disk state.
/// Ratios are store throughput / raw throughput.
fn ratio() {
    const BATCH: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    let raw_dir = tmp.path().join("raw");
    std::fs::create_dir_all(&raw_dir).unwrap();
    let mut k = 0u64;
    for n in SIZES {
        let bytes = payload(n);
        let (mut st, mut raw, mut rawd) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..15 {
            k += 1;
            st.push(store_commit(&store, &bytes));
            raw.push(raw_write(&raw_dir, k, &bytes));
            rawd.push(raw_write_dirsync(&raw_dir, k, &bytes));
        }
        let mib = n as f64 / (1 << 20) as f64;
        report(
            &format!("commit+flush 1 x {mib} MiB"),
            mib,
            median(st),
            median(raw),
            median(rawd),
        );
    }
    let n = SIZES[0];
    let bytes = payload(n);
    let (mut st, mut raw, mut rawd) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        st.push(store_batch(&store, &bytes, BATCH));
        let (mut r, mut rd) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..BATCH {
            k += 1;
            r += raw_write(&raw_dir, k, &bytes);
            rd += raw_write_dirsync(&raw_dir, k, &bytes);
        }
        raw.push(r);
        rawd.push(rd);
    }
    let mib = (BATCH * n) as f64 / (1 << 20) as f64;
    report(
        &format!("commit x {BATCH} + one flush_all, 1 MiB each (raw: {BATCH} separate write+fsync)"),
        mib,
        median(st),
        median(raw),
        median(rawd),
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !std::env::args().any(|a| a == "--list" || a == "--test") {
        ratio();
    }
}
