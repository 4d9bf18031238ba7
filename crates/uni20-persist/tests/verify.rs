//! `Store::verify` and the storage `Verify` request: a missing object is
//! `Missing` / `NotFound`, a damaged file is `Damaged`, naming the file and
//! the check it failed (size, checksum, format, decode), after a reopen as
//! before it.

use std::fs;
use std::path::{Path, PathBuf};

use uni20_persist::*;

fn open(dir: &Path, rank: u32) -> Store {
    Store::open(dir, rank, StoreOptions::new()).unwrap()
}

/// A type whose decoder accepts only what its encoder writes for `ok`: a
/// payload that passes the size and checksum checks but does not decode.
#[derive(Debug, PartialEq)]
struct Strict(bool);

impl Persist for Strict {
    const TYPE_NAME: &'static str = "test.strict.v1";
    fn encode(&self) -> Vec<u8> {
        if self.0 {
            b"ok".to_vec()
        } else {
            b"no".to_vec()
        }
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        match bytes {
            b"ok" => Ok(Strict(true)),
            _ => Err(PersistError::Decode(format!("not a Strict: {bytes:?}"))),
        }
    }
}

/// Commits `vec![7u8; 4096]` and a `Strict(false)` on rank 2, flushes, and
/// closes the store: `(dir, bytes id, strict id)`.
fn written() -> (tempfile::TempDir, ObjectId, ObjectId, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path(), 2);
    let p = s.commit(vec![7u8; 4096]).unwrap();
    let q = s.commit(Strict(false)).unwrap();
    s.flush_all().unwrap();
    let path = s.object_path(p.id()).unwrap();
    (tmp, p.id(), q.id(), path)
}

fn damage(s: &Store, id: ObjectId) -> Damage {
    match s.verify(id).unwrap() {
        Integrity::Damaged(d) => d,
        other => panic!("expected damage of {id}, got {other:?}"),
    }
}

/// Asserts that `d` failed `check` with a detail that contains `detail`.
fn assert_damage(d: &Damage, check: FailedCheck, detail: &str) {
    assert_eq!(d.check, check, "{d}");
    assert!(d.detail.contains(detail), "{d}");
}

#[test]
fn intact_and_missing_objects() {
    let (tmp, p, _, _) = written();
    let s = open(tmp.path(), 2);
    assert_eq!(s.verify(p).unwrap(), Integrity::Intact);
    let absent = ObjectId::with_nonce(2, s.nonce(), 999);
    assert_eq!(s.verify(absent).unwrap(), Integrity::Missing);
    assert_eq!(s.serve(StorageRequest::Verify(p)), StorageResponse::Done);
    assert_eq!(
        s.serve(StorageRequest::Verify(absent)),
        StorageResponse::NotFound(absent)
    );
    // A released object is missing, not damaged.
    s.release(p).unwrap();
    assert_eq!(s.verify(p).unwrap(), Integrity::Missing);
}

#[test]
fn a_truncated_file_fails_the_size_check() {
    let (tmp, p, _, path) = written();
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 1000)
        .unwrap();
    let s = open(tmp.path(), 2);
    assert!(!s.contains(p), "a truncated file is not served");
    let d = damage(&s, p);
    assert_eq!((d.id, d.check, d.path.as_deref()), (p, FailedCheck::Size, Some(&*path)));
    assert!(
        d.detail.contains("3096 payload bytes") && d.detail.contains("records 4096") && d.detail.contains("truncated"),
        "{d}"
    );
    let text = d.to_string();
    assert!(
        text.contains(&path.display().to_string()) && text.contains("size check"),
        "{text}"
    );
    assert_eq!(s.serve(StorageRequest::Verify(p)), StorageResponse::Damaged(d));
    drop(s);
    // Cut inside the header: still the size check.
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10)
        .unwrap();
    assert_eq!(damage(&open(tmp.path(), 2), p).check, FailedCheck::Size);
}

#[test]
fn a_flipped_payload_byte_fails_the_checksum_check() {
    let (tmp, p, _, path) = written();
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    // Found at open? No: open reads headers only; verify reads the payload.
    let s = open(tmp.path(), 2);
    assert!(s.contains(p));
    let d = damage(&s, p);
    assert_eq!((d.check, d.path.as_deref()), (FailedCheck::Checksum, Some(&*path)));
    assert!(d.detail.contains("CRC-32"), "{d}");
    drop(s);
    // And a flipped header byte (found at open).
    bytes[n - 10] ^= 0xff;
    bytes[20] ^= 0x55;
    fs::write(&path, &bytes).unwrap();
    assert_damage(
        &damage(&open(tmp.path(), 2), p),
        FailedCheck::Checksum,
        "header checksum mismatch",
    );
}

#[test]
fn bad_magic_fails_the_format_check() {
    let (tmp, p, _, path) = written();
    let mut bytes = fs::read(&path).unwrap();
    bytes[0] = b'X';
    fs::write(&path, &bytes).unwrap();
    assert_damage(&damage(&open(tmp.path(), 2), p), FailedCheck::Format, "bad magic");
}

#[test]
fn an_undecodable_payload_fails_the_decode_check() {
    let (tmp, _, q, _) = written();
    let s = open(tmp.path(), 2);
    // Not registered in this store yet: size and checksum pass, nothing to decode with.
    assert_eq!(s.verify(q).unwrap(), Integrity::Intact);
    s.register::<Strict>();
    let d = damage(&s, q);
    assert_eq!(d.check, FailedCheck::Decode, "{d}");
    assert!(
        d.detail.contains("test.strict.v1") && d.detail.contains("not a Strict"),
        "{d}"
    );
    assert_eq!(d.path, s.object_path(q));
}

#[test]
fn failed_check_classifies_errors() {
    let id = ObjectId::new(0, 1);
    let sum = |expected_size, actual_size| PersistError::Checksum {
        id,
        expected: 1,
        actual: 2,
        expected_size,
        actual_size,
        path: None,
    };
    assert_eq!(sum(10, 5).failed_check(), Some(FailedCheck::Size));
    assert_eq!(sum(10, 10).failed_check(), Some(FailedCheck::Checksum));
    assert_eq!(
        PersistError::Decode("x".into()).failed_check(),
        Some(FailedCheck::Decode)
    );
    assert_eq!(PersistError::NotFound(id).failed_check(), None);
}
