//! Disk-backed store: durability, restart, corruption, budget, spill, gc.

mod common;

use std::fs;

use uni20_persist::*;

fn open(dir: &std::path::Path, rank: u32) -> Store {
    Store::open(dir, rank, StoreOptions::new()).unwrap()
}

/// A new temporary directory and rank 0's store in it with a memory budget of `budget`
/// bytes (the directory must outlive the store).
fn budgeted_store(budget: u64) -> (tempfile::TempDir, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::open(tmp.path(), 0, StoreOptions::new().memory_budget(budget)).unwrap();
    (tmp, s)
}

/// Rank 0's store under `root`, opened after the file `name` holding `bytes` was put
/// in its directory (created by opening the store once before); also the directory.
fn open_with_file(root: &std::path::Path, name: &str, bytes: &[u8]) -> (std::path::PathBuf, Store) {
    let dir = open(root, 0).dir().unwrap().to_owned();
    fs::write(dir.join(name), bytes).unwrap();
    (dir, open(root, 0))
}

#[test]
fn restart_after_flush_serves_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let mut ptrs = Vec::new();
    {
        let s = open(tmp.path(), 3);
        for i in 0..20u64 {
            ptrs.push(s.commit(vec![i; (i as usize) + 1]).unwrap());
        }
        s.flush(ptrs[0]).unwrap();
        s.flush_all().unwrap();
        assert!(s.object_path(ptrs[0].id()).unwrap().exists());
    }
    let s = open(tmp.path(), 3);
    assert_eq!(s.stats().objects, 20);
    for (i, p) in ptrs.iter().enumerate() {
        assert!(s.try_load_local(*p).is_none(), "nothing resident after open");
        let v = s.load_wait(*p).unwrap();
        assert_eq!(v.len(), i + 1);
        assert!(v.iter().all(|&x| x == i as u64));
    }
    assert_eq!(s.stats().disk_reads, 20);
    // New IDs never collide with old ones.
    let q = s.commit(vec![0u64]).unwrap();
    assert!(ptrs.iter().all(|p| p.id() != q.id()));
    assert!(q.id().seq > ptrs.last().unwrap().id().seq);
}

#[test]
fn reopened_store_keeps_its_nonce_and_issues_fresh_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let (nonce, old) = {
        let s = open(tmp.path(), 2);
        assert_ne!(s.nonce(), ObjectId::NIL_NONCE);
        let old: Vec<_> = (0..5u32).map(|i| s.commit(vec![i; 3]).unwrap()).collect();
        s.flush_all().unwrap();
        (s.nonce(), old)
    };
    assert!(old.iter().all(|p| p.id().nonce == nonce && p.id().origin == 2));
    let s = open(tmp.path(), 2);
    assert_eq!(s.nonce(), nonce, "the nonce is kept across reopen");
    for (i, p) in old.iter().enumerate() {
        assert_eq!(
            &*s.load_wait(*p).unwrap(),
            &[i as u32; 3],
            "old ID {} still served",
            p.id()
        );
    }
    let fresh: Vec<_> = (0..5u32).map(|i| s.commit(vec![i]).unwrap().id()).collect();
    for id in &fresh {
        assert_eq!(id.nonce, nonce);
        assert!(old.iter().all(|p| p.id() != *id), "fresh ID {id} repeats an old one");
    }
    // Another directory (another job) of the same rank: another nonce, so even its
    // first IDs differ from this store's.
    let tmp2 = tempfile::tempdir().unwrap();
    let other = open(tmp2.path(), 2);
    assert_ne!(other.nonce(), nonce);
    let q = other.commit(vec![0u32; 3]).unwrap();
    assert_eq!(q.id().seq, old[0].id().seq);
    assert_ne!(q.id(), old[0].id());
    assert!(!s.contains(q.id()));
}

#[test]
fn ids_never_reused_even_without_flush_or_files() {
    let tmp = tempfile::tempdir().unwrap();
    let first = {
        let s = open(tmp.path(), 0);
        let p = s.commit(vec![1u8]).unwrap();
        // Unflushed: written behind, so a crash now leaves no file of it.
        assert!(!s.object_path(p.id()).unwrap().exists());
        p
    };
    let s = open(tmp.path(), 0);
    assert!(!s.contains(first.id()));
    let q = s.commit(vec![2u8]).unwrap();
    assert!(q.id().seq > first.id().seq);
}

#[test]
fn ranks_use_separate_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let a = open(tmp.path(), 0);
    let b = open(tmp.path(), 1);
    let p = a.commit(vec![1u8]).unwrap();
    let q = b.commit(vec![2u8]).unwrap();
    assert_ne!(p.id(), q.id());
    assert_ne!(a.dir().unwrap(), b.dir().unwrap());
    assert!(!b.contains(p.id()));
}

#[test]
fn truncated_file_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, path) = {
        let s = open(tmp.path(), 0);
        let p = s.commit(vec![3.0f64; 1000]).unwrap();
        s.flush_all().unwrap();
        (p, s.object_path(p.id()).unwrap())
    };
    let len = fs::metadata(&path).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 100).unwrap();
    drop(f);
    let s = open(tmp.path(), 0);
    let e = s.load_wait(p).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(&p.id().to_string()), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(s.try_load_local(p).is_none());
    assert!(s.encoded(p.id()).is_err());
    // Never reuses the damaged object's ID.
    assert!(s.commit(vec![0f64]).unwrap().id().seq > p.id().seq);
}

#[test]
fn corrupted_payload_is_detected_on_load() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path(), 0);
    let p = s.commit(vec![7u8; 4096]).unwrap();
    s.flush(p).unwrap();
    let path = s.object_path(p.id()).unwrap();
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    // Resident copy is still fine...
    assert_eq!(s.load_wait(p).unwrap()[0], 7);
    // ...but once evicted, the disk copy is checked.
    assert!(s.evict(p.id()));
    assert!(s.contains(p.id()));
    match s.load_wait(p) {
        Err(PersistError::Checksum { id, path: Some(f), .. }) => {
            assert_eq!(id, p.id());
            assert_eq!(f, path);
        }
        other => panic!("expected checksum error, got {other:?}"),
    }
}

#[test]
fn corrupted_header_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, path) = {
        let s = open(tmp.path(), 0);
        let p = s.commit(vec![1u8; 10]).unwrap();
        s.flush_all().unwrap();
        (p, s.object_path(p.id()).unwrap())
    };
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 0x55;
    fs::write(&path, &bytes).unwrap();
    let s = open(tmp.path(), 0);
    assert!(matches!(s.load_wait(p), Err(PersistError::Corrupt { .. })));
    // A verified replica repairs it.
    let meta = ObjectMeta::of_bytes(p.id(), "uni20.bytes.v1", &[1u8; 10]);
    s.insert_replica(meta, vec![1u8; 10]).unwrap();
    assert_eq!(&*s.load_wait(p).unwrap(), &[1u8; 10]);
}

#[test]
fn leftover_temp_files_are_removed_and_never_served() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, s) = open_with_file(tmp.path(), ".tmp-0-5-1-1", b"partial");
    assert!(!dir.join(".tmp-0-5-1-1").exists());
    assert_eq!(s.stats().objects, 0);
}

#[test]
fn pinned_survive_eviction_under_pressure() {
    let (_tmp, s) = budgeted_store(64 * 1024);
    let first = s.commit(vec![1u8; 16 * 1024]).unwrap();
    let pin = s.load_wait(first).unwrap();
    let mut others = Vec::new();
    for i in 0..50u8 {
        others.push(s.commit(vec![i; 16 * 1024]).unwrap());
    }
    let st = s.stats();
    assert!(st.evictions > 0);
    assert!(st.bytes_resident <= 64 * 1024, "{st:?}");
    assert!(s.is_resident(first.id()) && s.is_pinned(first.id()));
    assert_eq!(pin[100], 1);
    // Everything evicted reloads.
    for (i, p) in others.iter().enumerate() {
        let v = s.load_wait(*p).unwrap();
        assert!(v.iter().all(|&x| x == i as u8));
    }
    assert!(s.is_resident(first.id()));
    drop(pin);
    for p in &others {
        let _ = s.load_wait(*p).unwrap();
    }
    assert!(!s.is_resident(first.id()), "unpinned LRU entry evicted");
}

#[test]
fn spilled_replicas_reload_bit_identical() {
    let src = Store::in_memory(7);
    let (tmp, s) = budgeted_store(10_000);
    let mut sent = Vec::new();
    for i in 0..40u32 {
        let v: Vec<f64> = (0..500).map(|k| (k as f64) * 0.1 + i as f64).collect();
        let p = src.commit(v).unwrap();
        let (m, b) = src.encoded(p.id()).unwrap();
        s.insert_replica(m.clone(), b.to_vec()).unwrap();
        sent.push((p, m, b));
    }
    let st = s.stats();
    assert!(st.spills > 0 && st.evictions > 0, "{st:?}");
    assert!(st.bytes_resident <= 10_000);
    for (p, m, b) in &sent {
        let (m2, b2) = s.encoded(p.id()).unwrap();
        assert_eq!(&m2, m);
        assert_eq!(&*b2, &**b, "bit-identical bytes");
        let v = s.load_wait(*p).unwrap();
        assert_eq!(v.encode(), b.to_vec());
    }
    // And after a restart.
    s.flush_all().unwrap();
    drop(s);
    let s = open(tmp.path(), 0);
    for (p, m, b) in &sent {
        assert_eq!(s.meta(p.id()).as_ref(), Some(m));
        assert_eq!(&*s.encoded(p.id()).unwrap().1, &**b);
    }
}

#[test]
fn sixteen_threads_load_from_disk_once() {
    let tmp = tempfile::tempdir().unwrap();
    let p = {
        let s = open(tmp.path(), 0);
        let p = s.commit((0..200_000u32).collect::<Vec<_>>()).unwrap();
        s.flush_all().unwrap();
        p
    };
    let s = open(tmp.path(), 0);
    let loader = s.clone();
    let vals = common::at_once(16, move |i| {
        if i % 4 == 0 {
            common::block_on(loader.load(p)).unwrap()
        } else {
            loader.load_wait(p).unwrap()
        }
    });
    let st = s.stats();
    assert_eq!(st.materializations, 1);
    assert_eq!(st.disk_reads, 1);
    assert!(vals.iter().all(|v| std::ptr::eq(&**v, &*vals[0])));
}

#[test]
fn gc_removes_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (keep, gone, root) = {
        let s = open(tmp.path(), 0);
        let keep = s.commit(vec![1u8]).unwrap();
        let gone = s.commit(vec![2u8]).unwrap();
        let root = s.commit(vec![keep.id()]).unwrap();
        s.flush_all().unwrap();
        (keep, gone, root)
    };
    // After restart, references come from the file headers.
    let s = open(tmp.path(), 0);
    let r = s.gc(&[root.id()]).unwrap();
    assert_eq!(r.removed, 1);
    assert_eq!(r.files_removed, 1);
    assert!(!s.object_path(gone.id()).unwrap().exists());
    assert!(s.object_path(keep.id()).unwrap().exists());
    drop(s);
    let s = open(tmp.path(), 0);
    assert!(s.contains(keep.id()) && !s.contains(gone.id()));
}

#[test]
fn concurrent_commit_load_evict_under_budget() {
    let (_tmp, s) = budgeted_store(32 * 1024);
    let hs: Vec<_> = (0..8u64)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..40u64 {
                    let p = s.commit(vec![t * 1000 + i; 256]).unwrap();
                    mine.push((p, t * 1000 + i));
                    let (q, x) = mine[(i as usize * 7) % mine.len()];
                    let v = s.load_wait(q).unwrap();
                    assert!(v.iter().all(|&y| y == x));
                    if i % 5 == 0 {
                        s.evict(q.id());
                    }
                }
                mine
            })
        })
        .collect();
    let all: Vec<_> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    for (p, x) in all {
        assert!(s.load_wait(p).unwrap().iter().all(|&y| y == x));
    }
    assert!(s.stats().bytes_resident <= 32 * 1024);
}

#[test]
fn one_store_per_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path(), 0);
    assert!(matches!(
        Store::open(tmp.path(), 0, StoreOptions::new()),
        Err(PersistError::AlreadyOpen { .. })
    ));
    let clone = s.clone();
    drop(s);
    // Still open through the clone.
    assert!(Store::open(tmp.path(), 0, StoreOptions::new()).is_err());
    drop(clone);
    let _again = open(tmp.path(), 0);
}

#[test]
fn flushed_replicas_survive_restart() {
    let src = Store::in_memory(5);
    let p = src.commit(String::from("replica")).unwrap();
    let (m, b) = src.encoded(p.id()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    {
        let s = open(tmp.path(), 0);
        s.insert_replica(m.clone(), b.to_vec()).unwrap();
        assert!(!s.object_path(p.id()).unwrap().exists(), "replicas are written lazily");
        s.flush(p).unwrap();
        assert!(s.object_path(p.id()).unwrap().exists());
    }
    let s = open(tmp.path(), 0);
    assert_eq!(s.meta(p.id()), Some(m));
    assert_eq!(&*s.load_wait(p).unwrap(), "replica");
    // Foreign-origin files do not move this rank's counter.
    assert_eq!(s.commit(String::new()).unwrap().id().origin, 0);
}

#[test]
fn format_1_files_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    // A format-1 object file (`<origin>-<seq>.obj`, IDs without a nonce) is ignored.
    let (dir, s) = open_with_file(tmp.path(), "0-5.obj", b"U20OBJ\0\x01 whatever");
    assert_eq!(s.stats().objects, 0);
    // A format-1 object file under a current name is corrupt, and says why.
    let id = ObjectId::with_nonce(0, s.nonce(), 7);
    let path = s.object_path(id).unwrap();
    drop(s);
    fs::write(&path, b"U20OBJ\0\x01 and more bytes").unwrap();
    let s = open(tmp.path(), 0);
    match s.load_wait(PersistentPtr::<Vec<u8>>::from_id(id)) {
        Err(e @ PersistError::Corrupt { .. }) => assert!(e.to_string().contains("format 1"), "{e}"),
        other => panic!("expected a corrupt-file error, got {other:?}"),
    }
    drop(s);
    // A format-1 roots file stops the open with a corrupt-file error naming the format.
    fs::write(dir.join("roots"), b"U20ROOT\x01\0\0\0\0").unwrap();
    match Store::open(tmp.path(), 0, StoreOptions::new()) {
        Err(e @ PersistError::Corrupt { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("format 1") && msg.contains("roots"), "{msg}");
        }
        other => panic!("expected a corrupt-file error, got {other:?}"),
    }
}

/// Usage figures recomputed from the per-object queries.
fn usage(s: &Store) -> (u64, u64, u64, u64, u64, u64) {
    let (mut resident, mut bytes_resident, mut pinned, mut bytes_pinned, mut spilled, mut bytes_spilled) =
        (0, 0, 0, 0, 0, 0);
    for id in s.ids() {
        let size = s.meta(id).unwrap().size;
        if s.is_resident(id) {
            resident += 1;
            bytes_resident += size;
        }
        if s.is_pinned(id) {
            pinned += 1;
            bytes_pinned += size;
        } else if !s.is_resident(id) {
            spilled += 1;
            bytes_spilled += size;
        }
    }
    (resident, bytes_resident, pinned, bytes_pinned, spilled, bytes_spilled)
}

#[test]
fn stats_report_usage_and_io() {
    let (_tmp, s) = budgeted_store(10_000);
    let mut ps = Vec::new();
    for i in 0..20u32 {
        ps.push(s.commit(vec![i; 250 + i as usize]).unwrap()); // 1000 + 4i bytes
    }
    let held = s.load_wait(ps[19]).unwrap();
    s.pin(ps[18].id()).unwrap();
    // A replica (bytes) and a released object that a PValue still holds.
    let src = Store::in_memory(3);
    let r = src.commit(vec![1u8; 500]).unwrap();
    let (m, b) = src.encoded(r.id()).unwrap();
    s.insert_replica(m, b.to_vec()).unwrap();
    let gone = s.load_wait(ps[17]).unwrap();
    s.release(ps[17]).unwrap();

    let st = s.stats();
    let (resident, bytes_resident, pinned, bytes_pinned, spilled, bytes_spilled) = usage(&s);
    assert_eq!(st.objects, s.ids().len() as u64);
    assert_eq!(st.objects, 21, "20 commits (one released, still held), one replica");
    assert_eq!(st.resident_objects, resident);
    assert_eq!(st.bytes_resident, bytes_resident);
    assert!(st.bytes_resident <= 10_000, "{st:?}");
    assert_eq!(st.pinned_objects, pinned);
    assert_eq!(pinned, 3, "PValue, explicit pin, released-but-held");
    assert_eq!(st.bytes_pinned, bytes_pinned);
    assert_eq!(st.bytes_pinned, (1000 + 4 * 19) + (1000 + 4 * 18) + (1000 + 4 * 17));
    assert_eq!(st.spilled_objects, spilled);
    assert_eq!(st.bytes_spilled, bytes_spilled);
    assert!(st.spilled_objects > 0 && st.evictions > 0);
    assert_eq!(st.releases_pending, 1);
    assert_eq!(st.releases, 0);
    // Commits are written behind: the only files written are the budget's spills
    // (one per object that left memory); the released object was still resident,
    // never written, so its release deleted no file.
    assert_eq!(st.disk_writes, st.spills);
    assert!(st.spills >= st.spilled_objects && st.spills < 20, "{st:?}");
    assert_eq!(st.disk_deletes, 0);
    assert_eq!(st.object_io(), st.disk_reads + st.spills);
    assert!(st.io_ops >= st.object_io());

    // Loading an object only on disk reads exactly one file.
    let cold = *ps[..17].iter().find(|p| !s.is_resident(p.id())).unwrap();
    let before = s.stats();
    let _v = s.load_wait(cold).unwrap();
    let after = s.stats();
    assert_eq!(after.disk_reads, before.disk_reads + 1);
    assert!(after.io_ops > before.io_ops);
    drop(gone);
    drop(held);
    s.commit(vec![0u32]).unwrap(); // sweeps the release
    let st = s.stats();
    assert_eq!((st.releases, st.releases_pending), (1, 0));
    assert_eq!(st.objects, 21, "21 commits, one freed, one replica");
    assert_eq!(Store::in_memory(0).stats().io_ops, 0);
}

/// Commits `x` and `y` to `s` and evicts both: they are then only on disk (each
/// evict spills its object: two file writes).
fn two_on_disk(s: &Store, x: Vec<u8>, y: Vec<u8>) -> (PersistentPtr<Vec<u8>>, PersistentPtr<Vec<u8>>) {
    let (x, y) = (s.commit(x).unwrap(), s.commit(y).unwrap());
    assert!(s.evict(x.id()) && s.evict(y.id()));
    (x, y)
}

/// Commits `payloads` to a new in-memory store of rank 1 and inserts each into `s` as a
/// replica (resident, no file yet); returns that store and the objects.
fn replicas<const N: usize>(s: &Store, payloads: [Vec<u8>; N]) -> (Store, [PersistentPtr<Vec<u8>>; N]) {
    let src = Store::in_memory(1);
    let ptrs = payloads.map(|v| src.commit(v).unwrap());
    let ids: Vec<ObjectId> = ptrs.iter().map(|p| p.id()).collect();
    common::replicate(&src, s, &ids);
    (src, ptrs)
}

#[test]
fn try_load_local_never_does_io() {
    let (_tmp, s) = budgeted_store(1000);
    let (d, cold) = two_on_disk(&s, vec![4u8; 500], vec![5u8; 10]);
    let (_src, [r, q]) = replicas(&s, [vec![6u8; 450], vec![7u8; 100]]);
    // Pinning by ID reads the file and checks no budget: the cache is now over its
    // budget, and the only evictable entries are replicas, which need a spill.
    s.pin(d.id()).unwrap();
    let before = s.stats();
    assert_eq!(before.bytes_resident, 500 + 450 + 100);
    assert_eq!(before.spills, 2, "the two evicts");

    let v_q = s.try_load_local(q).expect("resident replica decodes");
    let v_d = s.try_load_local(d).expect("pinned bytes decode");
    assert!(s.try_load_local(cold).is_none(), "only on disk: a miss, not a read");
    assert!(s
        .try_load_local(PersistentPtr::<Vec<u8>>::from_id(ObjectId::new(9, 9)))
        .is_none());
    let after = s.stats();
    assert_eq!(after.io_ops, before.io_ops, "try_load_local touched the disk");
    assert_eq!(after.object_io(), before.object_io());
    assert_eq!((after.spills, after.evictions), (before.spills, before.evictions));
    assert_eq!(after.materializations, before.materializations + 2);
    assert_eq!(after.bytes_resident, 1050, "eviction work is left for later");
    assert_eq!((&v_q[..], &v_d[..]), (&[7u8; 100][..], &[4u8; 500][..]));

    // The next I/O load does it: the unpinned replica `q` is spilled and evicted.
    drop(v_q);
    let v_r = s.load_wait(r).unwrap();
    let later = s.stats();
    assert_eq!(later.spills, 3, "{later:?}");
    assert!(later.bytes_resident <= 1000, "{later:?}");
    assert!(!s.is_resident(q.id()) && s.object_path(q.id()).unwrap().exists());
    assert_eq!(v_r[0], 6);
    assert_eq!(&*s.load_wait(q).unwrap(), &[7u8; 100]);
}

#[test]
fn a_failed_spill_does_not_poison_the_store() {
    let (_tmp, s) = budgeted_store(1000);
    // Two unrelated objects, only on disk.
    let (a, b) = two_on_disk(&s, vec![1u8; 200], vec![2u8; 200]);
    // A replica: resident, no file, so evicting it needs a spill.
    let (src, [r]) = replicas(&s, [vec![3u8; 700]]);
    let bytes = src.encoded(r.id()).unwrap().1;
    let r_path = s.object_path(r.id()).unwrap();

    // The disk is full for the next two spills.
    s.inject_spill_failures(2);
    // Loading `a` fits (900 bytes); loading `b` goes over: the spill of `r` (oldest)
    // fails, `a` is evicted instead, and the load of `b` succeeds.
    drop(s.load_wait(a).unwrap());
    assert_eq!(&*s.load_wait(b).unwrap(), &[2u8; 200]);
    let st = s.stats();
    assert_eq!(st.spill_failures, 1, "{st:?}");
    assert_eq!(st.spills, 2, "only the two evicts");
    assert!(s.is_resident(r.id()) && !r_path.exists(), "the replica stays resident");
    assert!(st.bytes_resident <= 1000, "{st:?}");
    // The failure is reported once, naming the object and its file.
    match s.take_background_error() {
        Some(PersistError::Io { op, path, source }) => {
            assert!(op.contains(&r.id().to_string()), "{op}");
            assert_eq!(path, r_path);
            assert_eq!(source.raw_os_error(), Some(28), "ENOSPC");
        }
        other => panic!("expected the spill error, got {other:?}"),
    }
    assert!(s.take_background_error().is_none());
    // Still full: unrelated objects keep loading, the replica stays servable.
    assert_eq!(&*s.load_wait(a).unwrap(), &[1u8; 200]);
    assert_eq!(s.stats().spill_failures, 2);
    assert_eq!(&*s.encoded(r.id()).unwrap().1, &*bytes);
    // Space again: the next budget check spills the replica.
    let c = s.commit(vec![4u8; 300]).unwrap();
    let st = s.stats();
    assert_eq!((st.spills, st.spill_failures), (3, 2), "{st:?}");
    assert!(!s.is_resident(r.id()) && r_path.exists());
    assert!(st.bytes_resident <= 1000, "{st:?}");
    assert!(
        s.take_background_error().is_some(),
        "the second failure, kept after the first was taken"
    );
    // And it reloads from its file, bit-identical.
    assert_eq!(&*s.encoded(r.id()).unwrap().1, &*bytes);
    assert_eq!(&*s.load_wait(c).unwrap(), &[4u8; 300]);
}

/// A disk store writes commits behind: nothing is on disk until a flush,
/// and `flush_reachable` writes exactly the named objects and what they
/// reference, durably (a reopened store serves them and only them).
#[test]
fn commits_are_written_behind_and_flush_reachable_writes_only_what_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (set, a, b, other) = {
        let s = open(tmp.path(), 0);
        let a = s.commit(vec![1u8; 100]).unwrap();
        let b = s.commit(vec![2u8; 200]).unwrap();
        let other = s.commit(vec![3u8; 300]).unwrap();
        let set = s.commit(ObjectSet::new().with(a).with(b)).unwrap();
        for id in [a.id(), b.id(), other.id(), set.id()] {
            assert!(!s.object_path(id).unwrap().exists(), "{id} written at commit");
        }
        assert_eq!(s.stats().disk_writes, 0);
        assert_eq!(s.flush_reachable(&[set.id()]).unwrap(), 3);
        assert_eq!(s.stats().disk_writes, 3);
        assert!(!s.object_path(other.id()).unwrap().exists());
        assert_eq!(s.unflushed(), vec![other.id()]);
        // Durable already: a second call writes nothing.
        assert_eq!(s.flush_reachable(&[set.id()]).unwrap(), 3);
        assert_eq!(s.stats().disk_writes, 3);
        // An object this store does not hold is refused, naming it.
        let missing = ObjectId::new(0, 1 << 40);
        assert!(matches!(
            s.flush_reachable(&[a.id(), missing]),
            Err(PersistError::NotFound(id)) if id == missing
        ));
        (set, a, b, other)
    };
    let s = open(tmp.path(), 0);
    assert_eq!(s.load_wait(set).unwrap().objects, vec![a.id(), b.id()]);
    assert_eq!(&*s.load_wait(a).unwrap(), &[1u8; 100]);
    assert_eq!(&*s.load_wait(b).unwrap(), &[2u8; 200]);
    assert!(!s.contains(other.id()), "never flushed: not kept");
}

/// `evict` of an object this store committed and never wrote spills it
/// first (it stays servable from its file); a failed spill keeps it
/// resident and reports the error.
#[test]
fn evict_spills_an_unwritten_commit_first() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(tmp.path(), 0);
    let p = s.commit(vec![9u8; 64]).unwrap();
    s.inject_spill_failures(1);
    assert!(!s.evict(p.id()), "the spill failed: nothing dropped");
    assert!(s.is_resident(p.id()) && !s.object_path(p.id()).unwrap().exists());
    assert!(matches!(s.take_background_error(), Some(PersistError::Io { .. })));
    assert!(s.evict(p.id()));
    assert!(!s.is_resident(p.id()) && s.object_path(p.id()).unwrap().exists());
    assert_eq!(s.stats().spills, 1);
    assert_eq!(&*s.load_wait(p).unwrap(), &[9u8; 64]);
}

/// Objects committed under a name given before they existed (the root's,
/// pipelined submission: this rank as origin, the universe's nonce) are
/// the store's own: evicted, they are written to disk, not forgotten as a
/// replica would be; they are served after a restart. A name with another
/// origin, the nil nonce or the store's own nonce, or a name used twice, is
/// refused, and fresh IDs are unaffected.
#[test]
fn named_commits_are_own_objects_and_foreign_names_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let namer = 0x5eed_0000_0000_0001u64;
    let id = ObjectId::with_nonce(2, namer, 0);
    {
        let s = open(tmp.path(), 2);
        assert_ne!(s.nonce(), namer);
        let fresh = s.commit(vec![1u64; 4]).unwrap().id();
        let p = s.commit_as(id, vec![7u64; 32]).unwrap();
        assert_eq!(p.id(), id);
        assert_eq!(s.commit(vec![2u64; 4]).unwrap().id().seq, fresh.seq + 1);
        for bad in [
            id,
            ObjectId::with_nonce(1, namer, 5),
            ObjectId::new(2, 5),
            ObjectId::with_nonce(2, s.nonce(), fresh.seq + 100),
        ] {
            assert!(
                matches!(s.commit_as(bad, vec![8u64; 1]), Err(PersistError::Conflict(_))),
                "{bad}"
            );
        }
        assert!(s.evict(id));
        assert!(s.object_path(id).unwrap().exists(), "spilled, not dropped");
        assert_eq!(*s.load_wait(p).unwrap(), vec![7u64; 32]);
        // A replica of the same shape under another namer's ID is dropped.
        let replica = ObjectId::with_nonce(2, namer + 1, 0);
        let bytes = vec![9u64; 2].encode();
        s.insert_replica(ObjectMeta::of_parts(replica, <Vec<u64>>::TYPE_NAME, &[&bytes]), bytes)
            .unwrap();
        assert!(s.evict(replica));
        assert!(!s.contains(replica), "a replica is forgotten");
        s.flush_all().unwrap();
    }
    let s = open(tmp.path(), 2);
    let p = PersistentPtr::<Vec<u64>>::from_id(id);
    assert_eq!(*s.load_wait(p).unwrap(), vec![7u64; 32]);
}
