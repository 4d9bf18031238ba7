//! `Store::offload` and `Store::prefetch`: an offloaded object leaves memory
//! (the store's resident-bytes account drops by its size), keeps being served
//! from its file, comes back resident with a prefetch, and its file goes with
//! its release; an in-memory store's temporary offload directory goes with
//! the store.

use std::time::{Duration, Instant};

use uni20_persist::{PersistentPtr, Store, StoreOptions};

fn values(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| (i as f64 * 0.37 + seed).sin()).collect()
}

/// Waits (at most 10 s) until `id` is resident.
fn wait_resident(s: &Store, p: PersistentPtr<Vec<f64>>) {
    let t = Instant::now();
    while !s.is_resident(p.id()) {
        assert!(t.elapsed() < Duration::from_secs(10), "prefetch never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn in_memory_store_offloads_to_a_temporary_directory_and_prefetches_back() {
    let s = Store::in_memory(3);
    assert!(s.offload_dir().is_none());
    let a = values(10_000, 0.5);
    let b = values(2_000, 1.5);
    let pa = s.commit(a.clone()).unwrap();
    let pb = s.commit(b.clone()).unwrap();
    let size_a = s.meta(pa.id()).unwrap().size;
    let before = s.stats().bytes_resident;

    let o = s.offload(pa.id()).unwrap();
    assert_eq!(o.bytes_dropped, size_a);
    assert_eq!(o.bytes_written, size_a);
    assert!(!s.is_resident(pa.id()));
    assert!(s.is_resident(pb.id()));
    let st = s.stats();
    assert_eq!(st.bytes_resident, before - size_a);
    assert_eq!((st.offloads, st.bytes_offloaded, st.offload_writes), (1, size_a, 1));
    let dir = s.offload_dir().unwrap().to_owned();
    assert!(dir.starts_with(std::env::temp_dir()), "{}", dir.display());
    let file = dir.join(format!("{}", pa.id()));
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(
        files.iter().any(|f| f.is_file()),
        "no object file in {}: {files:?} ({})",
        dir.display(),
        file.display()
    );

    // A second offload finds nothing resident.
    assert_eq!(s.offload(pa.id()).unwrap(), Default::default());

    // Prefetch brings it back without a load call, counted; it keeps the bytes,
    // and the load that needs the object decodes them (on the loading thread).
    let decoded_before = s.stats().materializations;
    assert_eq!(s.prefetch(pa), Some(size_a));
    wait_resident(&s, pa);
    let st = s.stats();
    assert_eq!((st.prefetches, st.bytes_prefetched), (1, size_a));
    assert_eq!(
        st.materializations, decoded_before,
        "the prefetch decoded on the load thread"
    );
    assert_eq!(*s.load_wait(pa).unwrap(), a);
    let st = s.stats();
    assert_eq!(st.materializations, decoded_before + 1);
    assert_eq!(st.bytes_resident, before);
    assert_eq!(s.prefetch(pa), None, "resident: nothing to prefetch");

    // Offloaded again (the file exists: nothing written), then loaded on demand.
    let o = s.offload(pa.id()).unwrap();
    assert_eq!((o.bytes_dropped, o.bytes_written), (size_a, 0));
    assert_eq!(*s.load_wait(pa).unwrap(), a);

    // Release deletes the offloaded file; the directory goes with the store.
    s.offload(pa.id()).unwrap();
    s.release(pa.id()).unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('r'))
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().starts_with("rank"))
        .collect();
    assert!(s.load_wait(pa).is_err());
    assert_eq!(*s.load_wait(pb).unwrap(), b);
    let files_after: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(
        files_after.len() < files.len(),
        "file not deleted: {files_after:?} (left {left:?})"
    );
    let root = dir.parent().unwrap().to_owned();
    drop(s);
    assert!(
        !root.exists(),
        "temporary offload directory {} left behind",
        root.display()
    );
}

#[test]
fn a_given_offload_dir_is_used_and_a_disk_store_uses_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Store::in_memory(1);
    assert!(s.set_offload_dir(tmp.path()).unwrap());
    assert!(!s.set_offload_dir(tmp.path()).unwrap(), "set twice");
    assert_eq!(s.offload_dir().unwrap(), tmp.path().join("rank-1"));
    let p = s.commit(values(500, 2.0)).unwrap();
    s.offload(p.id()).unwrap();
    assert!(!s.is_resident(p.id()));
    assert_eq!(*s.load_wait(p).unwrap(), values(500, 2.0));

    let dtmp = tempfile::tempdir().unwrap();
    let d = Store::open(dtmp.path(), 0, StoreOptions::new()).unwrap();
    assert!(!d.set_offload_dir(tmp.path()).unwrap());
    let q = d.commit(values(700, 3.0)).unwrap();
    let o = d.offload(q.id()).unwrap();
    assert_eq!(o.bytes_dropped, d.meta(q.id()).unwrap().size);
    assert!(!d.is_resident(q.id()));
    assert_eq!(*d.load_wait(q).unwrap(), values(700, 3.0));
}

#[test]
fn pinned_and_unknown_objects() {
    let s = Store::in_memory(0);
    let p = s.commit(values(100, 0.0)).unwrap();
    s.pin(p.id()).unwrap();
    assert_eq!(s.offload(p.id()).unwrap(), Default::default(), "explicit pin keeps it");
    assert!(s.is_resident(p.id()));
    s.unpin(p.id());
    // A live PValue keeps its value; the store's copy goes.
    let v = s.load_wait(p).unwrap();
    assert!(s.offload(p.id()).unwrap().bytes_dropped > 0);
    assert_eq!(*v, values(100, 0.0));
    let other = Store::in_memory(0).commit(1u64.to_le_bytes().to_vec()).unwrap();
    assert!(matches!(
        s.offload(other.id()),
        Err(uni20_persist::PersistError::NotFound(_))
    ));
}

#[test]
fn an_in_memory_store_with_a_budget_spills_to_a_temporary_directory_and_reads_back() {
    let n = 10_000;
    let probe = Store::in_memory(0);
    let one = probe.meta(probe.commit(values(n, 0.0)).unwrap().id()).unwrap().size;
    // Room for three of the ten objects.
    let budget = 3 * one + one / 2;
    let s = Store::in_memory_with_budget(2, budget);
    let ptrs: Vec<_> = (0..10).map(|k| s.commit(values(n, k as f64)).unwrap()).collect();
    let st = s.stats();
    assert!(
        st.bytes_resident <= budget,
        "{} resident > budget {budget}",
        st.bytes_resident
    );
    assert!(st.spills >= 7 && st.evictions >= 7, "{st:?}");
    assert_eq!(s.take_background_error().map(|e| e.to_string()), None);
    let dir = s.offload_dir().expect("spills made a directory").to_owned();
    assert!(dir.starts_with(std::env::temp_dir()), "{}", dir.display());
    // Every object reads back equal, and the budget still holds once the loads end.
    for (k, p) in ptrs.iter().enumerate() {
        assert_eq!(*s.load_wait(*p).unwrap(), values(n, k as f64), "object {k}");
    }
    assert!(s.stats().bytes_resident <= budget, "{:?}", s.stats());
    let root = dir.parent().unwrap().to_owned();
    drop(s);
    assert!(
        !root.exists(),
        "temporary spill directory {} left behind",
        root.display()
    );
}
