//! Storage-rank protocol, explicit pins, named roots. (Objects of other ranks arrive only as replicas a plan inserts; a store never fetches on a miss.)

use uni20_persist::*;

#[test]
fn serve_get_put_has_pin_unpin() {
    let server = Store::in_memory(9);
    let client = Store::in_memory(0);
    let p = client.commit(vec![1.0f64, 2.0]).unwrap();
    let (meta, bytes) = client.encoded(p.id()).unwrap();

    // Requests and responses survive the wire.
    let req = StorageRequest::Put {
        meta: meta.clone(),
        bytes: bytes.to_vec(),
    };
    let wire = postcard::to_allocvec(&req).unwrap();
    let req: StorageRequest = postcard::from_bytes(&wire).unwrap();
    assert_eq!(server.serve(req), StorageResponse::Done);
    assert_eq!(server.serve(StorageRequest::Has(p.id())), StorageResponse::Has(true));
    assert_eq!(
        server.serve(StorageRequest::Get(p.id())),
        StorageResponse::Object {
            meta: meta.clone(),
            bytes: bytes.to_vec()
        }
    );
    let missing = ObjectId::new(4, 4);
    assert_eq!(
        server.serve(StorageRequest::Get(missing)),
        StorageResponse::NotFound(missing)
    );
    assert_eq!(server.serve(StorageRequest::Has(missing)), StorageResponse::Has(false));
    assert_eq!(server.serve(StorageRequest::Pin(p.id())), StorageResponse::Done);
    assert!(server.is_pinned(p.id()));
    assert_eq!(server.serve(StorageRequest::Unpin(p.id())), StorageResponse::Done);
    assert!(!server.is_pinned(p.id()));
    assert_eq!(
        server.serve(StorageRequest::Unpin(p.id())),
        StorageResponse::NotFound(p.id())
    );

    // A damaged put is refused with a fatal failure.
    let mut bad = bytes.to_vec();
    bad[3] ^= 1;
    match server.serve(StorageRequest::Put { meta, bytes: bad }) {
        StorageResponse::Failed { fatal, message } => {
            assert!(fatal);
            assert!(message.contains(&p.id().to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert!(StorageResponse::Has(true).into_fetched(missing).is_err());
    assert_eq!(StorageResponse::NotFound(missing).into_fetched(missing).unwrap(), None);
}

#[test]
fn explicit_pins_survive_eviction_and_gc() {
    let tmp = tempfile::tempdir().unwrap();
    let id = {
        let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
        let p = s.commit(vec![5u8; 4096]).unwrap();
        s.flush_all().unwrap();
        p.id()
    };
    let s = Store::open(tmp.path(), 0, StoreOptions::new().memory_budget(8192)).unwrap();
    assert!(!s.is_resident(id));
    s.pin(id).unwrap();
    assert!(s.is_resident(id) && s.is_pinned(id));
    for i in 0..10u8 {
        s.commit(vec![i; 4096]).unwrap();
    }
    assert!(s.is_resident(id));
    assert_eq!(s.gc(&[]).unwrap().kept, 1);
    assert!(s.contains(id));
    assert!(s.unpin(id));
    assert!(!s.unpin(id));
    assert_eq!(s.gc(&[]).unwrap().removed, 1);
    assert!(!s.contains(id));
    assert!(matches!(s.pin(id), Err(PersistError::NotFound(_))));
}

#[test]
fn named_roots_persist_and_guard_gc() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, manifest) = {
        let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
        let a = s.commit(vec![1u8]).unwrap();
        let b = s.commit(vec![2u8]).unwrap();
        let manifest = s.commit(vec![a.id()]).unwrap();
        s.set_root("checkpoint/latest", manifest).unwrap();
        s.flush_all().unwrap();
        (a, b, manifest)
    };
    let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    assert_eq!(s.root("checkpoint/latest"), Some(manifest.id()));
    assert_eq!(s.roots(), vec![("checkpoint/latest".to_owned(), manifest.id())]);
    let r = s.gc(&[]).unwrap();
    assert_eq!(r.removed, 1);
    assert!(s.contains(a.id()) && s.contains(manifest.id()) && !s.contains(b.id()));
    assert_eq!(s.remove_root("checkpoint/latest").unwrap(), Some(manifest.id()));
    assert_eq!(s.root("checkpoint/latest"), None);
    assert_eq!(s.gc(&[]).unwrap().removed, 2);
    drop(s);
    let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
    assert!(s.roots().is_empty());
    assert_eq!(s.stats().objects, 0);
}
