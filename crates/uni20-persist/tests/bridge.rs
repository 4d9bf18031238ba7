//! persist_copy / persist_take: the bridge from uni20-async epochs.

mod common;

use std::fs;

use uni20_async::{Async, AsyncError, LocalExecutor};
use uni20_persist::*;

fn is_no_value(e: &PersistError) -> bool {
    matches!(e, PersistError::Async(a) if a.is_no_value())
}

fn is_poisoned(e: &PersistError) -> bool {
    matches!(e, PersistError::Async(a) if a.is_poisoned())
}

#[test]
fn persist_copy_is_non_destructive_and_releases_the_reader() {
    let s = Store::in_memory(0);
    let x = Async::new(vec![1.0f64, 2.0, 3.0]);
    let r = x.read();
    let w = x.write();
    assert!(!w.is_ready(), "the reader holds the next writer back");
    let p = common::block_on(s.persist_copy(r)).unwrap();
    assert!(w.is_ready(), "persist_copy released its reader");
    drop(w);
    assert_eq!(&*s.load_wait(p).unwrap(), &[1.0, 2.0, 3.0]);
    assert_eq!(x.get_wait().unwrap(), vec![1.0, 2.0, 3.0], "source keeps its value");
    assert_eq!(s.stats().commits, 1);
    // Blocking form.
    let q = s.persist_copy_wait(x.read()).unwrap();
    assert_ne!(p.id(), q.id());
    assert_eq!(&*s.load_wait(q).unwrap(), &[1.0, 2.0, 3.0]);
}

#[test]
fn persist_copy_waits_for_the_epoch_value() {
    let s = Store::in_memory(0);
    let x = Async::new(String::from("before"));
    let w = x.write();
    let r = x.read(); // epoch of `w`: sees what it writes
    let ex = LocalExecutor::new();
    let s2 = s.clone();
    let copied = ex.spawn(async move { s2.persist_copy(r).await });
    ex.spawn(async move {
        let mut g = w.await.unwrap();
        g.set(String::from("after"));
    });
    ex.run().unwrap();
    let p = copied.try_take().unwrap().unwrap().unwrap();
    assert_eq!(&*s.load_wait(p).unwrap(), "after");
}

#[test]
fn persist_copy_of_a_poisoned_or_empty_epoch_commits_nothing() {
    let s = Store::in_memory(0);
    let x: Async<Vec<u8>> = Async::new(vec![1]);
    x.write().fail("upstream failed");
    let e = common::block_on(s.persist_copy(x.read())).unwrap_err();
    assert!(is_poisoned(&e), "{e}");
    assert!(!e.is_fatal());
    let empty: Async<Vec<u8>> = Async::empty();
    let w = empty.write();
    let r = empty.read();
    drop(w); // released without writing
    let e = s.persist_copy_wait(r).unwrap_err();
    assert!(is_no_value(&e), "{e}");
    assert_eq!(s.stats().commits, 0);
    assert!(s.ids().is_empty());
}

#[test]
fn persist_take_moves_the_value_out_and_leaves_the_slot_empty() {
    let s = Store::in_memory(0);
    let x = Async::new(vec![5u64; 1000]).with_name("x");
    let w = x.write();
    let after = x.read();
    let p = common::block_on(s.persist_take(w)).unwrap();
    match common::block_on(after.get()) {
        Err(AsyncError::NoValue { .. }) => {}
        other => panic!("slot should be empty after persist_take, got {other:?}"),
    }
    drop(after);
    let v = s.load_wait(p).unwrap();
    assert_eq!(v.len(), 1000);
    assert!(v.iter().all(|&y| y == 5));
    // Blocking form on a disk store: the file is written behind, by the flush.
    let tmp = tempfile::tempdir().unwrap();
    let d = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    let y = Async::new(String::from("taken"));
    let q = d.persist_take_wait(y.write()).unwrap();
    assert!(!d.object_path(q.id()).unwrap().exists());
    d.flush(q).unwrap();
    assert!(d.object_path(q.id()).unwrap().exists());
    assert_eq!(&*d.load_wait(q).unwrap(), "taken");
    assert!(y.take_wait().is_err(), "slot left empty");
}

#[test]
fn persist_take_and_copy_on_a_disk_store_inside_a_local_executor() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    let x = Async::new((0..10_000u32).collect::<Vec<_>>());
    let w = x.write();
    let ex = LocalExecutor::new();
    let d2 = d.clone();
    let h = ex.spawn(async move { d2.persist_take(w).await });
    let h2 = ex.spawn({
        let d = d.clone();
        let r = x.read();
        async move { d.persist_copy(r).await }
    });
    ex.run().unwrap();
    let p = h.try_take().unwrap().unwrap().unwrap();
    assert_eq!(d.load_wait(p).unwrap()[9_999], 9_999);
    // The copy ran after the take: it sees the emptied slot.
    let e = h2.try_take().unwrap().unwrap().unwrap_err();
    assert!(is_no_value(&e), "{e}");
}

#[test]
fn persist_take_failure_publishes_no_id_and_poisons_the_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    // The store's directory disappears: every write fails.
    fs::remove_dir_all(d.dir().unwrap()).unwrap();
    for blocking in [false, true] {
        let x = Async::new(vec![1.0f64; 100]).with_name("psi");
        let w = x.write();
        let after = x.read();
        let e = if blocking {
            d.persist_take_wait(w).unwrap_err()
        } else {
            common::block_on(d.persist_take(w)).unwrap_err()
        };
        assert!(matches!(e, PersistError::Io { .. }), "{e}");
        assert!(e.is_fatal());
        assert_eq!(d.stats().commits, 0);
        assert!(d.ids().is_empty(), "no object, no ID published");
        match common::block_on(after.get()) {
            Err(AsyncError::Poisoned { source, message, .. }) => {
                let cf = source
                    .downcast_ref::<CommitFailed>()
                    .expect("poisoned with CommitFailed");
                assert!(cf.fatal);
                assert_eq!(cf.message, e.to_string());
                assert!(message.contains("commit failed"), "{message}");
            }
            other => panic!("expected poisoned epoch, got {other:?}"),
        }
    }
}

#[test]
fn persist_copy_failure_leaves_the_source_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    fs::remove_dir_all(d.dir().unwrap()).unwrap();
    let x = Async::new(String::from("keep me"));
    let e = common::block_on(d.persist_copy(x.read())).unwrap_err();
    assert!(matches!(e, PersistError::Io { .. }), "{e}");
    let e = d.persist_copy_wait(x.read()).unwrap_err();
    assert!(matches!(e, PersistError::Io { .. }), "{e}");
    assert!(d.ids().is_empty());
    assert_eq!(x.get_wait().unwrap(), "keep me");
}

#[test]
fn persist_take_of_empty_or_poisoned_epoch_commits_nothing() {
    let s = Store::in_memory(0);
    let empty: Async<String> = Async::empty();
    let e = common::block_on(s.persist_take(empty.write())).unwrap_err();
    assert!(is_no_value(&e), "{e}");
    let poisoned = Async::new(String::from("x"));
    poisoned.write().fail("bad");
    let e = s.persist_take_wait(poisoned.write()).unwrap_err();
    assert!(is_poisoned(&e), "{e}");
    assert_eq!(s.stats().commits, 0);
}
