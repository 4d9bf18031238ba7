//! Release: the owner no longer needs an object. Freed from memory and disk unless
//! pinned (explicit pin, live PValue) or reachable from a named root.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uni20_persist::*;

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, 0, StoreOptions::new()).unwrap()
}

/// A new temporary directory and rank 0's store in it (the directory must outlive the store).
fn fresh_store() -> (tempfile::TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path());
    (tmp, s)
}

/// A payload whose drops are counted, to see exactly when its memory goes.
struct Tracked {
    bytes: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

static DROPS: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();

fn drops() -> Arc<AtomicUsize> {
    DROPS.get_or_init(|| Arc::new(AtomicUsize::new(0))).clone()
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

impl Persist for Tracked {
    const TYPE_NAME: &'static str = "test.tracked.v1";
    fn encode(&self) -> Vec<u8> {
        self.bytes.clone()
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        Ok(Tracked {
            bytes: bytes.to_vec(),
            drops: drops(),
        })
    }
}

/// A `Tracked` value with its own drop counter.
fn tracked(bytes: Vec<u8>) -> (Tracked, Arc<AtomicUsize>) {
    let d = Arc::new(AtomicUsize::new(0));
    (
        Tracked {
            bytes,
            drops: d.clone(),
        },
        d,
    )
}

#[test]
fn release_frees_memory_and_file() {
    let (tmp, s) = fresh_store();
    let a = s.commit(vec![1u8; 1000]).unwrap();
    let b = s.commit(vec![2u8; 10]).unwrap();
    s.flush_all().unwrap();
    let path = s.object_path(a.id()).unwrap();
    assert!(path.exists());
    let before = s.stats();
    let r = s.release(a).unwrap();
    assert_eq!(
        (r.released, r.freed, r.deferred, r.retained, r.not_found),
        (1, 1, 0, 0, 0)
    );
    assert_eq!(r.bytes_freed, 1000);
    assert_eq!(r.files_removed, 1);
    assert!(!path.exists());
    assert!(!s.contains(a.id()));
    assert!(s.meta(a.id()).is_none());
    assert!(matches!(s.load_wait(a), Err(PersistError::NotFound(id)) if id == a.id()));
    assert!(matches!(s.encoded(a.id()), Err(PersistError::NotFound(_))));
    assert_eq!(&*s.load_wait(b).unwrap(), &[2u8; 10]);
    let st = s.stats();
    assert_eq!(st.releases, before.releases + 1);
    assert_eq!(st.disk_deletes, before.disk_deletes + 1);
    assert_eq!(st.bytes_resident, before.bytes_resident - 1000);
    // A flush makes the deletion durable: one directory fsync, nothing written.
    let io = s.stats().io_ops;
    s.flush_all().unwrap();
    assert_eq!(s.stats().io_ops, io + 1);
    s.flush_all().unwrap();
    assert_eq!(s.stats().io_ops, io + 1, "nothing left to make durable");
    // Released twice: nothing more to do.
    let r = s.release(a).unwrap();
    assert_eq!((r.released, r.not_found, r.freed), (0, 1, 0));
    // Still gone after a restart.
    drop(s);
    let s = open(tmp.path());
    assert!(!s.contains(a.id()) && s.contains(b.id()));
}

#[test]
fn release_many_reports_the_batch() {
    let s = Store::in_memory(0);
    let ps: Vec<_> = (0..5u8)
        .map(|i| s.commit(vec![i; 100 + usize::from(i)]).unwrap())
        .collect();
    let missing = ObjectId::new(0, 999);
    let r = s
        .release_many(&[ps[0].id(), ps[2].id(), ps[0].id(), missing, ps[4].id()])
        .unwrap();
    assert_eq!(r.released, 3, "{r:?}");
    assert_eq!(r.not_found, 1);
    assert_eq!(r.freed, 3);
    assert_eq!(r.bytes_freed, 100 + 102 + 104);
    assert_eq!(r.files_removed, 0, "an in-memory store has no files");
    assert_eq!(s.ids(), vec![ps[1].id(), ps[3].id()]);
    assert_eq!(s.stats().bytes_resident, 101 + 103);
}

#[test]
fn a_pvalue_keeps_a_released_object_until_the_last_one_drops() {
    let (_tmp, s) = fresh_store();
    let (value, dropped) = tracked(vec![7u8; 4096]);
    let p = s.commit(value).unwrap();
    let v = s.load_wait(p).unwrap();
    let v2 = v.clone();
    let path = s.object_path(p.id()).unwrap();
    let r = s.release(p).unwrap();
    assert_eq!((r.released, r.deferred, r.freed), (1, 1, 0), "{r:?}");
    // The holders need no file; it was never written (commits are written behind).
    assert_eq!(r.files_removed, 0);
    assert!(!path.exists());
    // Still loadable and servable while pinned, the same allocation.
    assert!(s.contains(p.id()) && s.is_pinned(p.id()));
    let again = s.load_wait(p).unwrap();
    assert!(std::ptr::eq(&*again, &*v));
    assert_eq!(s.encoded(p.id()).unwrap().1.len(), 4096);
    assert_eq!(s.stats().bytes_resident, 0, "the store no longer charges it");
    // A flush does not write a released object back.
    s.flush_all().unwrap();
    s.flush(p).unwrap();
    assert!(!path.exists());
    drop(again);
    drop(v);
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "never freed under a holder");
    assert_eq!(v2.bytes[4095], 7);
    drop(v2);
    // The memory went with the last PValue, without any further store call.
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(!s.contains(p.id()));
    assert!(matches!(s.load_wait(p), Err(PersistError::NotFound(_))));
    // The next commit sweeps the entry itself.
    s.commit(vec![0u8]).unwrap();
    assert_eq!(s.stats().releases, 1);
}

#[test]
fn an_explicit_pin_defers_release_until_unpin() {
    let (_tmp, s) = fresh_store();
    let (value, dropped) = tracked(vec![3u8; 100]);
    let p = s.commit(value).unwrap();
    s.pin(p.id()).unwrap();
    let r = s.release(p).unwrap();
    assert_eq!((r.deferred, r.freed), (1, 0));
    assert!(s.contains(p.id()));
    assert_eq!(s.load_wait(p).unwrap().bytes[0], 3);
    assert_eq!(
        s.serve(StorageRequest::Get(p.id())),
        StorageResponse::Object {
            meta: s.meta(p.id()).unwrap(),
            bytes: vec![3u8; 100]
        }
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    assert!(s.unpin(p.id()));
    // Unpin does no I/O, but the memory goes at once.
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(!s.contains(p.id()));
    assert!(!s.object_path(p.id()).unwrap().exists());
    assert_eq!(s.stats().bytes_resident, 0);
}

#[test]
fn named_roots_keep_released_objects_they_reach() {
    let (_tmp, s) = fresh_store();
    let a = s.commit(vec![1u32; 10]).unwrap();
    let b = s.commit(vec![2u32; 10]).unwrap();
    let set = s.commit(ObjectSet::new().with(a).with_meta("step", 1)).unwrap();
    s.set_root("checkpoint/latest", set).unwrap();
    s.flush_all().unwrap();
    let r = s.release_many(&[a.id(), b.id(), set.id()]).unwrap();
    assert_eq!((r.released, r.retained, r.freed, r.deferred), (3, 2, 1, 0), "{r:?}");
    assert!(!s.contains(b.id()));
    assert_eq!(&*s.load_wait(a).unwrap(), &[1u32; 10]);
    assert!(s.object_path(a.id()).unwrap().exists(), "a root keeps the file too");
    // A new root that no longer reaches `a` frees it and the old set.
    let set2 = s.commit(ObjectSet::new().with_meta("step", 2)).unwrap();
    s.set_root("checkpoint/latest", set2).unwrap();
    assert!(!s.contains(a.id()) && !s.contains(set.id()));
    assert!(!s.object_path(a.id()).unwrap().exists());
    assert!(!s.object_path(set.id()).unwrap().exists());
    assert!(s.contains(set2.id()), "never released");
    assert_eq!(s.stats().releases, 3);
}

#[test]
fn removing_the_root_frees_what_it_kept() {
    let s = Store::in_memory(0);
    let a = s.commit(vec![1u8]).unwrap();
    let list = s.commit(vec![a.id()]).unwrap();
    s.set_root("r", list).unwrap();
    let r = s.release(a).unwrap();
    assert_eq!(r.retained, 1);
    assert!(s.contains(a.id()));
    s.remove_root("r").unwrap();
    assert!(!s.contains(a.id()));
    assert!(s.contains(list.id()), "the list itself was never released");
}

/// A type whose references a store cannot find unless it is registered.
struct Opaque(Vec<ObjectId>);
impl Persist for Opaque {
    const TYPE_NAME: &'static str = "test.opaque_refs.v1";
    fn encode(&self) -> Vec<u8> {
        encode_postcard(&self.0)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        decode_postcard(bytes).map(Opaque)
    }
    fn references(&self) -> Vec<ObjectId> {
        self.0.clone()
    }
}

#[test]
fn unknown_root_references_keep_released_objects() {
    let src = Store::in_memory(1);
    let s = Store::in_memory(0);
    let x = s.commit(vec![5u8; 8]).unwrap();
    let y = s.commit(vec![6u8; 8]).unwrap();
    // A byte-only root of a type `s` has never seen, referencing `x`.
    let root = src.commit(Opaque(vec![x.id()])).unwrap();
    let (meta, bytes) = src.encoded(root.id()).unwrap();
    s.insert_replica(meta, bytes.to_vec()).unwrap();
    s.set_root("opaque", root).unwrap();
    let r = s.release_many(&[x.id(), y.id()]).unwrap();
    assert_eq!((r.retained, r.freed), (2, 0), "conservative: {r:?}");
    // Once the type is known, the next release settles exactly.
    s.register::<Opaque>();
    let r = s.release_many(&[]).unwrap();
    assert_eq!(r.freed, 1, "{r:?}");
    assert!(s.contains(x.id()) && !s.contains(y.id()));
}

#[test]
fn a_long_job_stays_bounded() {
    // Each step makes a block, reads it, and releases it while still reading it.
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), 0, StoreOptions::new().memory_budget(64 * 1024)).unwrap();
    let keep = s.commit(vec![9u64; 16]).unwrap();
    s.set_root("keep", keep).unwrap();
    for step in 0..300u64 {
        let p = s.commit(vec![step; 1024]).unwrap();
        let v = s.load_wait(p).unwrap();
        let r = s.release(p).unwrap();
        assert_eq!(r.deferred, 1, "step {step}");
        assert_eq!(v[1023], step);
        drop(v);
        let ids = s.ids();
        assert!(ids.len() <= 2, "step {step}: {} objects", ids.len());
    }
    let files = std::fs::read_dir(s.dir().unwrap())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".obj"))
        .count();
    assert!(files <= 2, "{files} object files left");
    let st = s.stats();
    assert!(st.releases >= 299, "{st:?}");
    assert!(st.bytes_resident <= 64 * 1024);
    assert_eq!(s.load_wait(keep).unwrap()[0], 9);
}

#[test]
fn concurrent_loads_and_releases_never_see_wrong_data() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), 0, StoreOptions::new().memory_budget(16 * 1024)).unwrap();
    let ps: Vec<_> = (0..64u64).map(|i| s.commit(vec![i; 128]).unwrap()).collect();
    let ps = Arc::new(ps);
    let hs: Vec<_> = (0..4usize)
        .map(|t| {
            let s = s.clone();
            let ps = ps.clone();
            std::thread::spawn(move || {
                let mut gone = 0;
                for round in 0..3 {
                    for (i, p) in ps.iter().enumerate() {
                        match s.load_wait(*p) {
                            Ok(v) => assert!(v.iter().all(|&x| x == i as u64)),
                            Err(PersistError::NotFound(_)) => gone += 1,
                            Err(e) => panic!("object {i}: {e}"),
                        }
                        if (i + t + round) % 4 == 0 {
                            s.release(*p).unwrap();
                        }
                    }
                }
                gone
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    // Every object was released by some thread and nothing pins it now.
    s.release_many(&ps.iter().map(|p| p.id()).collect::<Vec<_>>()).unwrap();
    assert!(s.ids().is_empty(), "{:?}", s.ids());
    let files = std::fs::read_dir(s.dir().unwrap())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".obj"))
        .count();
    assert_eq!(files, 0);
}
