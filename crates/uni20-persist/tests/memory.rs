//! In-memory store: the required API.

mod common;

use std::task::Poll;

use uni20_persist::*;

#[test]
fn object_id_display_parse_and_serde() {
    let id = ObjectId::new(3, 17);
    assert_eq!(id.nonce, ObjectId::NIL_NONCE);
    assert_eq!(id.to_string(), "r3:17");
    assert_eq!("r3:17".parse::<ObjectId>().unwrap(), id);
    let full = ObjectId::with_nonce(3, 0x9f2c_04d1_e5a6_b7c8, 17);
    assert_eq!(full.to_string(), "r3:17@9f2c04d1e5a6b7c8");
    assert_eq!("r3:17@9f2c04d1e5a6b7c8".parse::<ObjectId>().unwrap(), full);
    assert_eq!("r3:17@9F2C04D1E5A6B7C8".parse::<ObjectId>().unwrap(), full);
    let small = ObjectId::with_nonce(0, 1, 0);
    assert_eq!(small.to_string(), "r0:0@0000000000000001");
    for bad in [
        "3:17",
        "r3-17",
        "r3:17@",
        "r3:17@9f2c",
        "r3:17@9f2c04d1e5a6b7c8aa",
        "r3:17@9f2c04d1e5a6b7cg",
        "r3:+17",
        "r:17",
        "r3:17@+f2c04d1e5a6b7c8",
    ] {
        assert!(bad.parse::<ObjectId>().is_err(), "{bad}");
    }
    let p = PersistentPtr::<Vec<f64>>::from_id(id);
    assert_eq!(p.id(), id);
    let a = postcard::to_allocvec(&p).unwrap();
    let b = postcard::to_allocvec(&id).unwrap();
    assert_eq!(a, b, "PersistentPtr serializes exactly as ObjectId");
    let back: PersistentPtr<Vec<f64>> = postcard::from_bytes(&a).unwrap();
    assert_eq!(back, p);
}

#[test]
fn commit_then_load() {
    let s = Store::in_memory(2);
    assert_eq!(s.rank(), 2);
    let p = s.commit(vec![1.0f64, 2.0, 3.5]).unwrap();
    assert_eq!(p.id().origin, 2);
    let q = s.commit(String::from("hello")).unwrap();
    assert_ne!(p.id(), q.id());
    assert_eq!(&*s.try_load_local(p).unwrap(), &[1.0, 2.0, 3.5]);
    assert_eq!(&*s.load_wait(q).unwrap(), "hello");
    let m = s.meta(p.id()).unwrap();
    assert_eq!(m.type_name, "uni20.vec_f64.v1");
    assert_eq!(m.size, 24);
    assert_eq!(m.checksum, crc32fast::hash(&vec![1.0f64, 2.0, 3.5].encode()));
    assert!(s.contains(p.id()));
    let st = s.stats();
    assert_eq!(st.objects, 2);
    assert_eq!(st.commits, 2);
    assert_eq!(st.hits, 2);
    assert_eq!(st.bytes_resident, 24 + 5);
}

#[test]
fn misses_and_not_found() {
    let s = Store::in_memory(0);
    let p = PersistentPtr::<Vec<u8>>::from_id(ObjectId::new(5, 1));
    assert!(s.try_load_local(p).is_none());
    assert!(matches!(s.load_wait(p), Err(PersistError::NotFound(id)) if id == p.id()));
    assert!(matches!(s.encoded(p.id()), Err(PersistError::NotFound(_))));
    assert!(s.meta(p.id()).is_none());
    assert!(!s.contains(p.id()));
    assert!(!s.evict(p.id()));
    assert!(s.stats().misses >= 2);
}

#[test]
fn type_mismatch() {
    let s = Store::in_memory(0);
    let p = s.commit(vec![1u8, 2, 3]).unwrap();
    let wrong = PersistentPtr::<String>::from_id(p.id());
    assert!(matches!(s.load_wait(wrong), Err(PersistError::TypeMismatch { .. })));
    assert!(s.try_load_local(wrong).is_none());
}

#[test]
fn replicate_between_stores() {
    let a = Store::in_memory(0);
    let b = Store::in_memory(1);
    let p = a.commit(vec![7i64, -8, 9]).unwrap();
    let (meta, bytes) = a.encoded(p.id()).unwrap();
    assert_eq!(meta, a.meta(p.id()).unwrap());
    b.insert_replica(meta.clone(), bytes.to_vec()).unwrap();
    // Same id, same bytes: no-op.
    b.insert_replica(meta.clone(), bytes.to_vec()).unwrap();
    assert_eq!(b.stats().objects, 1);
    // Byte-only replica decodes on first local load.
    assert_eq!(&*b.try_load_local(p).unwrap(), &[7, -8, 9]);
    assert_eq!(b.stats().materializations, 1);
    // Bytes served by b are identical to a's.
    let (m2, b2) = b.encoded(p.id()).unwrap();
    assert_eq!(m2, meta);
    assert_eq!(&*b2, &*bytes);
    // A replica of an own object is a no-op too.
    a.insert_replica(meta, bytes.to_vec()).unwrap();
}

#[test]
fn replica_checks() {
    let a = Store::in_memory(0);
    let p = a.commit(vec![1u8, 2, 3, 4]).unwrap();
    let (meta, bytes) = a.encoded(p.id()).unwrap();

    let b = Store::in_memory(1);
    // Corrupt bytes: checksum error.
    let mut bad = bytes.to_vec();
    bad[0] ^= 1;
    assert!(matches!(
        b.insert_replica(meta.clone(), bad.clone()),
        Err(PersistError::Checksum { .. })
    ));
    // Truncated: size error (reported as Checksum).
    assert!(matches!(
        b.insert_replica(meta.clone(), bytes[..3].to_vec()),
        Err(PersistError::Checksum { .. })
    ));
    assert!(!b.contains(p.id()));

    // Same id, different (self-consistent) content: conflict, fatal.
    let other = ObjectMeta::of_bytes(p.id(), meta.type_name.as_str(), &bad);
    let e = a.insert_replica(other.clone(), bad.clone()).unwrap_err();
    assert!(matches!(e, PersistError::Conflict(id) if id == p.id()));
    assert!(e.is_fatal());
    b.insert_replica(meta.clone(), bytes.to_vec()).unwrap();
    assert!(matches!(b.insert_replica(other, bad), Err(PersistError::Conflict(_))));
    // Still the original value.
    assert_eq!(&*b.load_wait(p).unwrap(), &[1, 2, 3, 4]);
}

#[test]
fn own_origin_replica_moves_counter() {
    let a = Store::in_memory(0);
    // Same rank, other nonce (another store, another job): not this store's ID.
    let foreign = ObjectMeta::of_bytes(ObjectId::new(0, 50), "uni20.bytes.v1", b"abc");
    a.insert_replica(foreign, b"abc".to_vec()).unwrap();
    assert_eq!(a.commit(vec![0u8]).unwrap().id().seq, 0);
    let meta = ObjectMeta::of_bytes(ObjectId::with_nonce(0, a.nonce(), 10), "uni20.bytes.v1", b"xyz");
    a.insert_replica(meta, b"xyz".to_vec()).unwrap();
    let p = a.commit(vec![1u8]).unwrap();
    assert_eq!(p.id().seq, 11);
}

#[test]
fn successive_in_memory_stores_issue_distinct_ids() {
    let mut seen = std::collections::HashSet::new();
    let mut nonces = std::collections::HashSet::new();
    for _ in 0..50 {
        // One store per "universe", all of rank 0, one after the other.
        let s = Store::in_memory(0);
        assert_ne!(s.nonce(), ObjectId::NIL_NONCE);
        assert!(nonces.insert(s.nonce()), "nonce repeated");
        for k in 0..3u8 {
            let p = s.commit(vec![k]).unwrap();
            assert_eq!(p.id().origin, 0);
            assert_eq!(p.id().nonce, s.nonce());
            assert_eq!(p.id().seq, u64::from(k));
            assert!(seen.insert(p.id()), "id {} repeated", p.id());
            assert_eq!(p.id().to_string().parse::<ObjectId>().unwrap(), p.id());
        }
    }
    assert_eq!(seen.len(), 150);
}

#[test]
fn pvalue_pins_and_evict() {
    let s = Store::in_memory(0);
    let p = s.commit(vec![5u32; 10]).unwrap();
    let v = s.load_wait(p).unwrap();
    assert!(s.is_pinned(p.id()));
    let v2 = v.clone();
    drop(v);
    assert!(s.is_pinned(p.id()));
    drop(v2);
    assert!(!s.is_pinned(p.id()));
    let v = s.load_wait(p).unwrap();
    assert!(s.evict(p.id()));
    assert!(!s.contains(p.id()));
    // The PValue keeps its value.
    assert_eq!(v.len(), 10);
    assert_eq!(v.id(), p.id());
    assert_eq!(s.stats().bytes_resident, 0);
}

#[test]
fn sixteen_threads_materialize_once() {
    let a = Store::in_memory(0);
    let p = a.commit((0..100_000u64).collect::<Vec<_>>()).unwrap();
    let (meta, bytes) = a.encoded(p.id()).unwrap();
    for round in 0..5 {
        let b = Store::in_memory(1);
        b.insert_replica(meta.clone(), bytes.to_vec()).unwrap();
        let loader = b.clone();
        let vals = common::at_once(16, move |i| {
            if i % 2 == 0 {
                loader.load_wait(p).unwrap()
            } else {
                loop {
                    if let Some(v) = loader.try_load_local(p) {
                        break v;
                    }
                }
            }
        });
        assert_eq!(b.stats().materializations, 1, "round {round}");
        for v in &vals {
            assert!(std::ptr::eq(&**v, &*vals[0]));
        }
        assert_eq!(vals[0][99_999], 99_999);
    }
}

#[test]
fn async_load_hit_is_immediate() {
    let s = Store::in_memory(0);
    let p = s.commit(vec![1.5f32]).unwrap();
    match common::poll_once(s.load(p)) {
        Poll::Ready(Ok(v)) => assert_eq!(&*v, &[1.5]),
        _ => panic!("hit must complete at first poll"),
    }
    let missing = PersistentPtr::<Vec<f32>>::from_id(ObjectId::new(9, 9));
    assert!(matches!(
        common::block_on(s.load(missing)),
        Err(PersistError::NotFound(_))
    ));
}

/// Copies object `id` of `from` into `to` as a replica (what a plan's transfer does).
fn ship(from: &Store, to: &Store, id: ObjectId) {
    let (meta, bytes) = from.encoded(id).unwrap();
    to.insert_replica(meta, bytes.to_vec()).unwrap();
}

#[test]
fn a_store_never_fetches_another_ranks_object_by_itself() {
    let a = Store::in_memory(0);
    let b = Store::in_memory(1);
    let p = a.commit(String::from("far away")).unwrap();
    assert!(matches!(b.load_wait(p), Err(PersistError::NotFound(_))));
    assert!(matches!(common::block_on(b.load(p)), Err(PersistError::NotFound(_))));
    ship(&a, &b, p.id());
    assert_eq!(&*b.load_wait(p).unwrap(), "far away");
    assert!(b.contains(p.id()));
    // A replica with damaged bytes is refused and not kept.
    let q = a.commit(vec![7u8, 8, 9]).unwrap();
    let (meta, mut bytes) = a.encoded(q.id()).map(|(m, b)| (m, b.to_vec())).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    let c = Store::in_memory(2);
    assert!(matches!(
        c.insert_replica(meta, bytes),
        Err(PersistError::Checksum { .. })
    ));
    assert!(!c.contains(q.id()));
}

#[test]
fn gc_in_memory_keeps_reachable_and_pinned() {
    let s = Store::in_memory(0);
    let a = s.commit(vec![1u8]).unwrap();
    let b = s.commit(vec![2u8]).unwrap();
    let c = s.commit(vec![3u8]).unwrap();
    let d = s.commit(vec![4u8]).unwrap();
    let manifest = s.commit(vec![a.id(), b.id()]).unwrap();
    let pinned = s.load_wait(c).unwrap();
    let r = s.gc(&[manifest.id()]).unwrap();
    assert_eq!(r.removed, 1);
    assert!(s.contains(a.id()) && s.contains(b.id()) && s.contains(c.id()));
    assert!(!s.contains(d.id()));
    drop(pinned);
    s.gc(&[manifest.id()]).unwrap();
    assert!(!s.contains(c.id()));
    assert!(s.contains(a.id()));
}

#[test]
fn gc_decodes_replica_references() {
    let a = Store::in_memory(0);
    let x = a.commit(vec![1u8]).unwrap();
    let m = a.commit(vec![x.id()]).unwrap();
    let b = Store::in_memory(1);
    common::replicate(&a, &b, &[x.id(), m.id()]);
    // Built-in types are known: the replica manifest is decoded to find its references.
    let r = b.gc(&[m.id()]).unwrap();
    assert_eq!(r.removed, 0);
    assert!(b.contains(x.id()));
    let r = b.gc(&[]).unwrap();
    assert_eq!(r.removed, 2);
}

/// A type this store has never seen: gc refuses to guess its references.
struct Opaque(Vec<u8>);
impl Persist for Opaque {
    const TYPE_NAME: &'static str = "test.opaque.v1";
    fn encode(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        Ok(Opaque(bytes.to_vec()))
    }
}

#[test]
fn gc_refuses_unknown_types() {
    let a = Store::in_memory(0);
    let x = a.commit(Opaque(vec![1, 2])).unwrap();
    let b = Store::in_memory(1);
    let (meta, bytes) = a.encoded(x.id()).unwrap();
    b.insert_replica(meta, bytes.to_vec()).unwrap();
    assert!(matches!(b.gc(&[x.id()]), Err(PersistError::GcUnknownType { .. })));
    b.register::<Opaque>();
    assert_eq!(b.gc(&[x.id()]).unwrap().removed, 0);
    assert_eq!(&b.load_wait(x).unwrap().0, &[1, 2]);
}

#[test]
fn flush_in_memory_is_noop() {
    let s = Store::in_memory(0);
    let p = s.commit(vec![1u8]).unwrap();
    s.flush(p).unwrap();
    s.flush_all().unwrap();
    assert!(matches!(s.flush(ObjectId::new(0, 99)), Err(PersistError::NotFound(_))));
}

#[test]
fn store_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Store>();
    check::<PersistentPtr<std::cell::Cell<u8>>>();
    check::<PValue<Vec<f64>>>();
    fn send<F: std::future::Future + Send>(_: F) {}
    let s = Store::in_memory(0);
    send(s.load(PersistentPtr::<Vec<u8>>::from_id(ObjectId::new(0, 0))));
}

struct Bomb;
impl Persist for Bomb {
    const TYPE_NAME: &'static str = "test.bomb.v1";
    fn encode(&self) -> Vec<u8> {
        vec![0]
    }
    fn decode(_: &[u8]) -> Result<Self, PersistError> {
        panic!("decode bomb")
    }
}

#[test]
fn panicking_decode_in_async_load_does_not_hang() {
    let a = Store::in_memory(0);
    let p = a.commit(Bomb).unwrap();
    let b = Store::in_memory(1);
    ship(&a, &b, p.id());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| common::block_on(b.load(p))));
    assert!(r.is_err());
    // The store still works afterwards.
    let q = b.commit(vec![1u8]).unwrap();
    assert_eq!(&*common::block_on(b.load(q)).unwrap(), &[1]);
}

#[test]
fn a_replica_is_decoded_once_and_cached() {
    let a = Store::in_memory(0);
    let p = a.commit((0..1000u64).collect::<Vec<_>>()).unwrap();
    let (meta, bytes) = a.encoded(p.id()).unwrap();
    let b = Store::in_memory(1);
    b.insert_replica(meta, bytes.to_vec()).unwrap();
    assert_eq!(b.stats().bytes_resident, 8000);
    let v1 = b.try_load_local(p).unwrap();
    let v2 = b.try_load_local(p).unwrap();
    let v3 = b.load_wait(p).unwrap();
    let v4 = common::block_on(b.load(p)).unwrap();
    for v in [&v2, &v3, &v4] {
        assert!(std::ptr::eq(&**v, &*v1), "one shared decoded value");
    }
    drop((v1, v2, v3, v4));
    // Still cached once no PValue is left: no second decode.
    assert_eq!(b.try_load_local(p).unwrap()[999], 999);
    let st = b.stats();
    assert_eq!(st.materializations, 1);
    assert_eq!(st.hits, 4);
    // The decoded value replaced the bytes: charged once.
    assert_eq!(st.bytes_resident, 8000);
    // Serving it to a third rank re-encodes the cached value to the same bytes.
    assert_eq!(&*b.encoded(p.id()).unwrap().1, &*bytes);
}

/// A payload of a short header and the value's own bytes (as a tensor block).
struct Framed(Vec<u8>);

impl Persist for Framed {
    const TYPE_NAME: &'static str = "test.framed.v1";
    fn encode(&self) -> Vec<u8> {
        let mut out = (self.0.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&self.0);
        out
    }
    fn encode_split(&self) -> Option<(Vec<u8>, &[u8])> {
        Some(((self.0.len() as u32).to_le_bytes().to_vec(), &self.0))
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        match bytes.split_first_chunk::<4>() {
            Some((n, rest)) if u32::from_le_bytes(*n) as usize == rest.len() => Ok(Framed(rest.to_vec())),
            _ => Err(PersistError::Decode("bad frame".into())),
        }
    }
}

/// A commit through `encode_split` records the size and checksum of the whole
/// encoding, as if it had been built; a flushed copy of it reads back.
#[test]
fn split_encodings_are_checksummed_as_one() {
    let s = Store::in_memory(0);
    let v = Framed((0u8..200).collect());
    let whole = v.encode();
    let p = s.commit(v).unwrap();
    let m = s.meta(p.id()).unwrap();
    assert_eq!(m.size, whole.len() as u64);
    assert_eq!(m.checksum, crc32fast::hash(&whole));
    assert_eq!(s.load_wait(p).unwrap().0, (0u8..200).collect::<Vec<_>>());
    let empty = s.commit(Framed(Vec::new())).unwrap();
    assert_eq!(s.meta(empty.id()).unwrap().checksum, crc32fast::hash(&[0u8; 4]));
}
