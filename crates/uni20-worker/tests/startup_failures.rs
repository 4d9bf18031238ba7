//! A rank whose store cannot be opened (a plain file where its directory
//! should be, a damaged store file, a directory another store holds) stops
//! the in-process universe at once, standalone and SPMD, with that rank's
//! own error: `rank R failed at start-up: opening the store in ...`. The
//! start-up timeout is left at 60 s, so a universe that waited for it would
//! fail the time bound. The MPI cases (root and worker, standalone, library
//! and SPMD mode) are `tests/mpi_startup.rs` and the start-up stage of
//! `cargo xtask test`.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use uni20_worker::{JobError, TransportChoice, UniverseBuilder};

/// What a damaged store directory looks like.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// A plain file named `rank-R`.
    PlainFile,
    /// `rank-R/nonce` holds garbage.
    BadNonce,
}

fn damage(dir: &Path, rank: usize, how: Damage) {
    let rank_dir = dir.join(format!("rank-{rank}"));
    match how {
        Damage::PlainFile => std::fs::write(&rank_dir, b"not a directory").unwrap(),
        Damage::BadNonce => {
            std::fs::create_dir_all(&rank_dir).unwrap();
            std::fs::write(rank_dir.join("nonce"), b"garbage").unwrap();
        }
    }
}

fn builder(dir: &Path) -> UniverseBuilder {
    UniverseBuilder::new()
        .ranks(3)
        .transport(TransportChoice::InProcess)
        .threads_per_rank(1)
        .startup_timeout(Duration::from_secs(60))
        .store_dir(dir)
}

/// Runs `f` on another thread; panics if it has not returned within 5 s.
fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the universe did not stop within 5 s");
    assert!(start.elapsed() < Duration::from_secs(5));
    out
}

fn check(m: &str, rank: usize, dir: &Path, cause: &str) {
    let want = format!("rank {rank} failed at start-up: opening the store in {}", dir.display());
    assert!(
        m.starts_with(&want) && m.contains(cause),
        "{m:?} lacks {want:?} / {cause:?}"
    );
}

#[test]
fn a_damaged_store_directory_stops_the_universe_at_once_with_the_rank_s_error() {
    for (rank, how, cause) in [
        (0, Damage::PlainFile, "create store directory"),
        (2, Damage::PlainFile, "create store directory"),
        (1, Damage::BadNonce, "bad nonce file"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        damage(&dir, rank, how);
        let d = dir.clone();
        let out = within_5s(move || builder(&d).run(|ctl| ctl.size()));
        let Err(JobError::Startup(m)) = out else {
            panic!("{how:?} on rank {rank}: {out:?}")
        };
        check(&m, rank, &dir, cause);

        let d = dir.clone();
        let out = within_5s(move || builder(&d).spmd(|ctx| ctx.rank()));
        let Err(JobError::Startup(m)) = out else {
            panic!("SPMD, {how:?} on rank {rank}: {out:?}")
        };
        check(&m, rank, &dir, cause);

        // Nothing else was damaged: with the damage removed, the same
        // directory runs.
        let rank_dir = dir.join(format!("rank-{rank}"));
        match how {
            Damage::PlainFile => std::fs::remove_file(&rank_dir).unwrap(),
            Damage::BadNonce => std::fs::remove_file(rank_dir.join("nonce")).unwrap(),
        }
        let d = dir.clone();
        assert_eq!(within_5s(move || builder(&d).run(|ctl| ctl.size())).unwrap(), 3);
    }
}

/// A rank directory that a live store holds cannot be opened by a universe
/// (in-process: the claim of this process; another process: its `flock`).
#[test]
fn a_held_store_directory_stops_the_universe_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let held = uni20_persist::Store::open(&dir, 1, uni20_persist::StoreOptions::new()).unwrap();
    let d = dir.clone();
    let out = within_5s(move || builder(&d).run(|ctl| ctl.size()));
    let Err(JobError::Startup(m)) = out else {
        panic!("{out:?}")
    };
    check(&m, 1, &dir, "is already open in this process");
    drop(held);
    let d = dir.clone();
    assert_eq!(within_5s(move || builder(&d).run(|ctl| ctl.size())).unwrap(), 3);
}
