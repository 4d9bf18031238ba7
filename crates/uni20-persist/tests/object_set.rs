//! Object sets (checkpoints) and gc: reachable and pinned objects are kept.

mod common;

use uni20_persist::*;

#[test]
fn gc_keeps_object_set_targets_and_pinned_objects_across_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, a, b, pinned_only, garbage) = {
        let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
        let a = s.commit(vec![1.0f64; 100]).unwrap();
        let b = s.commit(String::from("site 2")).unwrap();
        let pinned_only = s.commit(vec![3u8; 10]).unwrap();
        let garbage = s.commit(vec![4u8; 10]).unwrap();
        let m = s
            .commit(
                ObjectSet::new()
                    .with(a)
                    .with(b)
                    .with_meta("step", 7)
                    .with_meta("energy", -1.25),
            )
            .unwrap();
        s.set_root("checkpoint/latest", m).unwrap();
        s.flush_all().unwrap();
        (m, a, b, pinned_only, garbage)
    };
    // After a restart nothing is resident: references come from the files.
    let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    assert_eq!(s.root("checkpoint/latest"), Some(m.id()));
    let pin = s.load_wait(pinned_only).unwrap();
    let r = s.gc(&[]).unwrap();
    assert_eq!(r.removed, 1, "{r:?}");
    assert!(!s.contains(garbage.id()));
    assert!(!s.object_path(garbage.id()).unwrap().exists());
    for id in [m.id(), a.id(), b.id(), pinned_only.id()] {
        assert!(s.contains(id), "{id} kept");
    }
    let man = s.load_wait(m).unwrap();
    assert_eq!(man.metadata["step"], "7");
    assert_eq!(&*s.load_wait(man.entry::<String>(1).unwrap()).unwrap(), "site 2");
    assert!(matches!(
        s.load_wait(man.entry::<String>(0).unwrap()),
        Err(PersistError::TypeMismatch { .. })
    ));
    assert!(man.entry::<String>(2).is_none());
    // Unpinned and unreachable now: the next gc removes it.
    drop(pin);
    assert_eq!(s.gc(&[]).unwrap().removed, 1);
    assert!(!s.contains(pinned_only.id()));
    // Dropping the root frees the object set and its targets.
    drop(man);
    s.remove_root("checkpoint/latest").unwrap();
    assert_eq!(s.gc(&[]).unwrap().removed, 3);
    assert!(s.ids().is_empty());
}

#[test]
fn object_set_replica_references_are_found_without_decoding_first() {
    let src = Store::in_memory(1);
    let a = src.commit(vec![1u32, 2, 3]).unwrap();
    let m = src.commit(ObjectSet::new().with(a)).unwrap();
    let dst = Store::in_memory(2);
    common::replicate(&src, &dst, &[a.id(), m.id()]);
    // The object set is byte-only in `dst`: gc decodes it with the built-in registration.
    let r = dst.gc(&[m.id()]).unwrap();
    assert_eq!(r.removed, 0);
    assert!(dst.contains(a.id()));
    assert_eq!(dst.gc(&[]).unwrap().removed, 2);
}
