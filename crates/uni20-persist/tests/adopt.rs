//! `Store::adopt`: an object left in another rank's directory under the same
//! root is copied in, verified, and durable in the adopting store; a missing
//! file, a damaged file and an in-memory store are typed errors.

use std::fs;
use std::path::Path;

use uni20_persist::*;

fn open(dir: &Path, rank: u32) -> Store {
    Store::open(dir, rank, StoreOptions::new()).unwrap()
}

/// Commits `payload` on rank 3 of a fresh root, flushes and closes that
/// store: `(root, id, path of the object file)`.
fn left_by_rank3(payload: Vec<u8>) -> (tempfile::TempDir, ObjectId, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path(), 3);
    let p = s.commit(payload).unwrap();
    s.flush_all().unwrap();
    let path = s.object_path(p.id()).unwrap();
    (tmp, p.id(), path)
}

#[test]
fn adopted_object_loads_and_survives_a_reopen() {
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let (tmp, id, _) = left_by_rank3(payload.clone());
    let s = open(tmp.path(), 1);
    assert!(!s.contains(id));
    let size = s.adopt(3, id).unwrap();
    assert_eq!(size, s.meta(id).unwrap().size);
    let p = PersistentPtr::<Vec<u8>>::from_id(id);
    assert_eq!(*s.load_wait(p).unwrap(), payload);
    // A second adoption of the same object changes nothing.
    assert_eq!(s.adopt(3, id).unwrap(), size);
    drop(s);
    // Durable in rank 1's own directory: present after a reopen, even with
    // rank 3's directory gone.
    fs::remove_dir_all(tmp.path().join("rank-3")).unwrap();
    let s = open(tmp.path(), 1);
    assert_eq!(s.verify(id).unwrap(), Integrity::Intact);
    assert_eq!(*s.load_wait(p).unwrap(), payload);
}

#[test]
fn missing_file_names_the_path() {
    let (tmp, id, path) = left_by_rank3(vec![1u8; 64]);
    fs::remove_file(&path).unwrap();
    let s = open(tmp.path(), 0);
    match s.adopt(3, id) {
        Err(PersistError::Remote { id: got, reason }) => {
            assert_eq!(got, id);
            assert!(reason.contains(&path.display().to_string()), "{reason}");
        }
        other => panic!("expected Remote, got {other:?}"),
    }
    assert!(!s.contains(id));
    // The wrong source rank is the same finding.
    let (tmp, id, _) = left_by_rank3(vec![1u8; 64]);
    let s = open(tmp.path(), 0);
    assert!(matches!(s.adopt(2, id), Err(PersistError::Remote { .. })));
}

#[test]
fn damaged_file_is_refused_and_nothing_is_adopted() {
    let (tmp, id, path) = left_by_rank3(vec![9u8; 4096]);
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let s = open(tmp.path(), 1);
    match s.adopt(3, id) {
        Err(PersistError::Checksum {
            id: got, path: Some(p), ..
        }) => {
            assert_eq!(got, id);
            assert_eq!(p, path);
        }
        other => panic!("expected Checksum, got {other:?}"),
    }
    assert!(!s.contains(id));
}

#[test]
fn in_memory_store_cannot_adopt() {
    let (_tmp, id, _) = left_by_rank3(vec![1u8; 8]);
    let s = Store::in_memory(0);
    assert!(matches!(s.adopt(3, id), Err(PersistError::Remote { .. })));
}
