//! Crash test: SIGKILL a process that commits and flushes objects in a loop, reopen the
//! store, and check that every object reported as flushed loads with the reported
//! checksum and that nothing partial is ever served.
//!
//! `harness = false`: `main` is the parent; the same binary re-executed with
//! `UNI20_CRASH_CHILD=<dir>` is the child. The child commits `Vec<u8>` payloads whose
//! content is a pure function of their first 16 bytes (seed, length), so the parent can
//! check any loaded object independently of the store's own CRC. After each flush
//! returns, the child prints `<id> <crc32>` for every object of the batch (stdout is
//! flushed after each line). The parent kills the child at a random moment, reopens the
//! store and checks:
//!
//! * every reported ID loads, its CRC-32 equals the reported one, its content is intact;
//! * every object file in the directory either loads intact or fails with a fatal
//!   checksum/corruption error (never wrong data);
//! * a fresh commit after the restart never reuses a reported ID.
//!
//! The same directory is reused for all rounds, so later rounds also restart from
//! states left by earlier crashes. `UNI20_CRASH_SEED` fixes the random seed (printed).
//!
//! What a SIGKILL cannot test: a process kill keeps the kernel's page cache, so data
//! written but not fsynced survives it. Losing un-fsynced data needs a power cut or a
//! kernel crash, which this test does not simulate.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use uni20_persist::{ObjectId, PersistError, PersistentPtr, Store, StoreOptions};

const CHILD_ENV: &str = "UNI20_CRASH_CHILD";
const SEED_ENV: &str = "UNI20_CRASH_SEED";
const ROUNDS: usize = 20;
const TIME_BOUND: Duration = Duration::from_secs(60);
const RANK: u32 = 0;

/// xorshift64*: small deterministic generator (no external crates).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Payload: seed (8 LE) | total length (8 LE) | a 4 KiB block of the xorshift stream
/// of `seed`, repeated and cut to length (cheap to build and check even in debug builds).
fn payload(seed: u64, len: usize) -> Vec<u8> {
    const BLOCK: usize = 4096;
    let len = len.max(16);
    let mut block = Vec::with_capacity(BLOCK);
    let mut r = Rng::new(seed);
    while block.len() < BLOCK {
        block.extend_from_slice(&r.next().to_le_bytes());
    }
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&seed.to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
    while out.len() < len {
        let n = (len - out.len()).min(BLOCK);
        out.extend_from_slice(&block[..n]);
    }
    out
}

/// True if `bytes` is exactly a payload produced by [`payload`].
fn payload_intact(bytes: &[u8]) -> bool {
    if bytes.len() < 16 {
        return false;
    }
    let seed = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    len == bytes.len() as u64 && payload(seed, bytes.len()) == bytes
}

fn child(dir: &Path) -> ! {
    let seed: u64 = std::env::var(SEED_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut rng = Rng::new(seed);
    let store = Store::open(dir, RANK, StoreOptions::new()).expect("child: open store");
    let out = std::io::stdout();
    let mut batch_no = 0u64;
    loop {
        let n = 1 + rng.below(6) as usize;
        let mut batch = Vec::with_capacity(n);
        for _ in 0..n {
            // Mostly small objects; now and then a large one, to widen the window in
            // which the kill lands in the middle of a write.
            let len = if rng.below(3) == 0 {
                64 * 1024 + rng.below(2 * 1024 * 1024) as usize
            } else {
                16 + rng.below(16 * 1024) as usize
            };
            let bytes = payload(rng.next(), len);
            let crc = crc32fast::hash(&bytes);
            let p = store.commit(bytes).expect("child: commit");
            batch.push((p, crc));
        }
        batch_no += 1;
        // Exercise all three durability entry points.
        match batch_no % 3 {
            0 => {
                for (p, _) in &batch {
                    store.flush(*p).expect("child: flush");
                }
            }
            1 => {
                let ids: Vec<ObjectId> = batch.iter().map(|(p, _)| p.id()).collect();
                store.flush_ids(&ids).expect("child: flush_ids");
            }
            _ => store.flush_all().expect("child: flush_all"),
        }
        // Only now, after the flush returned, report the batch.
        let mut o = out.lock();
        for (p, crc) in &batch {
            writeln!(o, "{} {crc}", p.id()).expect("child: stdout");
        }
        o.flush().expect("child: stdout");
        drop(o);
    }
}

/// Runs one child, kills it after `kill_after`, returns the reported (id, crc) lines.
fn run_child(dir: &Path, seed: u64, kill_after: Duration) -> (Vec<(ObjectId, u32)>, bool) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut c = Command::new(exe)
        .env(CHILD_ENV, dir)
        .env(SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = c.stdout.take().expect("child stdout");
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill (no newline) is not a report.
                Ok(_) if buf.last() != Some(&b'\n') => break,
                Ok(_) => {
                    let s = std::str::from_utf8(&buf).expect("utf8 report").trim_end();
                    let (id, crc) = s.split_once(' ').expect("report format");
                    lines.push((id.parse::<ObjectId>().expect("id"), crc.parse::<u32>().expect("crc")));
                }
            }
        }
        lines
    });
    std::thread::sleep(kill_after);
    // `Child::kill` sends SIGKILL on Unix.
    let killed = matches!(c.try_wait(), Ok(None));
    let _ = c.kill();
    let status = c.wait().expect("wait child");
    if !killed {
        assert!(status.success(), "child failed on its own: {status:?}");
    }
    (reader.join().expect("reader thread"), killed)
}

fn check_store(dir: &Path, reported: &BTreeMap<ObjectId, u32>) -> (usize, usize) {
    let store = Store::open(dir, RANK, StoreOptions::new()).expect("reopen after crash");
    for (&id, &crc) in reported {
        let v = store
            .load_wait(PersistentPtr::<Vec<u8>>::from_id(id))
            .unwrap_or_else(|e| panic!("reported-flushed object {id} does not load: {e}"));
        assert_eq!(
            crc32fast::hash(&v),
            crc,
            "object {id}: checksum differs from the reported one"
        );
        assert!(payload_intact(&v), "object {id}: content damaged");
        assert_eq!(store.meta(id).expect("meta").checksum, crc);
        store.evict(id);
    }
    // Every object file, reported or not: intact data or a fatal error, never bad data.
    let rank_dir = store.dir().expect("disk store").to_owned();
    let (mut ok, mut damaged) = (0usize, 0usize);
    for ent in std::fs::read_dir(&rank_dir).expect("list dir") {
        let name = ent.expect("dir entry").file_name().into_string().expect("utf8 name");
        let Some(stem) = name.strip_suffix(".obj") else {
            continue;
        };
        // `<origin>-<seq>-<nonce as 16 hex digits>.obj`
        let parts: Vec<&str> = stem.split('-').collect();
        let [o, s, n] = parts[..] else {
            panic!("object file name {name}")
        };
        let id = ObjectId::with_nonce(
            o.parse().unwrap(),
            u64::from_str_radix(n, 16).unwrap(),
            s.parse().unwrap(),
        );
        assert_eq!(id.nonce, store.nonce(), "object file {name} of another nonce");
        match store.load_wait(PersistentPtr::<Vec<u8>>::from_id(id)) {
            Ok(v) => {
                assert!(payload_intact(&v), "object {id} served with damaged content");
                ok += 1;
            }
            Err(e @ (PersistError::Checksum { .. } | PersistError::Corrupt { .. })) => {
                assert!(!reported.contains_key(&id), "reported object {id} damaged: {e}");
                damaged += 1;
            }
            Err(e) => panic!("object file {name}: unexpected error {e}"),
        }
        store.evict(id);
    }
    assert!(ok >= reported.len());
    // A fresh ID after the restart never reuses a reported one.
    let p = store.commit(payload(7, 64)).expect("commit after restart");
    let max_seq = reported.keys().map(|i| i.seq).max().unwrap_or(0);
    assert!(reported.is_empty() || p.id().seq > max_seq, "ID {} reused", p.id());
    store.flush(p).expect("flush after restart");
    (ok, damaged)
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_sigkill_20_rounds: test");
        return;
    }
    // Honour a name filter the way libtest does (substring), so `cargo test -p
    // uni20-persist some_other_test` does not run this one.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "crash_sigkill_20_rounds".contains(f.as_str())) {
        return;
    }

    let start = Instant::now();
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(42)
        });
    println!("crash test seed {seed} (set {SEED_ENV} to reproduce)");
    let mut rng = Rng::new(seed);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut reported: BTreeMap<ObjectId, u32> = BTreeMap::new();
    let (mut kills, mut total_damaged, mut total_verified) = (0usize, 0usize, 0usize);
    for round in 0..ROUNDS {
        let kill_after = Duration::from_millis(5 + rng.below(400));
        let (lines, killed) = run_child(tmp.path(), rng.next(), kill_after);
        kills += usize::from(killed);
        let n_lines = lines.len();
        for (id, crc) in lines {
            if let Some(old) = reported.insert(id, crc) {
                assert_eq!(old, crc, "object {id} reported twice with different checksums");
            }
        }
        let leftovers = std::fs::read_dir(tmp.path().join(format!("rank-{RANK}")))
            .map(|rd| {
                rd.filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
                })
                .count()
            })
            .unwrap_or(0);
        let (ok, damaged) = check_store(tmp.path(), &reported);
        total_damaged += damaged;
        total_verified += reported.len();
        println!(
            "round {round:2}: kill after {:3} ms (killed: {killed}), {n_lines:3} new reports, {} reported total, {ok} objects intact, {damaged} damaged, {leftovers} temp files left by the kill",
            kill_after.as_millis(),
            reported.len(),
        );
        if reported.len() > 150 {
            // Keep the directory small over 20 rounds: gc everything but the 30 newest
            // reported objects, which later rounds keep checking across restarts.
            let keep: Vec<ObjectId> = reported.keys().rev().take(30).copied().collect();
            let store = Store::open(tmp.path(), RANK, StoreOptions::new()).expect("reopen for gc");
            store.gc(&keep).expect("gc");
            reported.retain(|id, _| keep.contains(id));
        }
        assert!(start.elapsed() < TIME_BOUND, "crash test exceeded {TIME_BOUND:?}");
    }
    assert_eq!(kills, ROUNDS, "the child loops until killed");
    assert!(
        !reported.is_empty(),
        "no object was ever reported flushed: the test proved nothing"
    );
    println!(
        "crash_sigkill_20_rounds ... ok ({total_verified} reported-object checks, {kills} kills, {total_damaged} damaged files refused, {:.1} s)",
        start.elapsed().as_secs_f64()
    );
}
