//! A committed value is checksummed when first needed, not at commit: the
//! metadata, a transfer's bytes, a spill and a flush all carry the CRC-32 of
//! the value's encoding, computed independently here with `crc32fast`.

use uni20_persist::*;

/// A header then the elements: commits through `encode_split`.
#[derive(Clone, Debug, PartialEq)]
struct Split(Vec<u8>);

impl Persist for Split {
    const TYPE_NAME: &'static str = "test.Split";
    fn encode(&self) -> Vec<u8> {
        let mut b = (self.0.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&self.0);
        b
    }
    fn encode_split(&self) -> Option<(Vec<u8>, &[u8])> {
        Some(((self.0.len() as u32).to_le_bytes().to_vec(), &self.0))
    }
    fn decode(b: &[u8]) -> Result<Self, PersistError> {
        let n = u32::from_le_bytes(
            b.get(..4)
                .ok_or(PersistError::Decode("short".into()))?
                .try_into()
                .unwrap(),
        ) as usize;
        let body = b.get(4..4 + n).ok_or(PersistError::Decode("short".into()))?;
        Ok(Split(body.to_vec()))
    }
}

/// Neither borrowed nor split: encoded (and checksummed) at commit.
#[derive(Clone, Debug, PartialEq)]
struct Owned(u64);

impl Persist for Owned {
    const TYPE_NAME: &'static str = "test.Owned";
    fn encode(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
    fn decode(b: &[u8]) -> Result<Self, PersistError> {
        Ok(Owned(u64::from_le_bytes(
            b.try_into().map_err(|_| PersistError::Decode("len".into()))?,
        )))
    }
}

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

#[test]
fn metadata_and_transfers_carry_the_encodings_checksum() {
    let s = Store::in_memory(0);
    let split = Split((0..=255u8).cycle().take(1000).collect());
    let bytes = vec![7u8; 333];
    let p1 = s.commit(split.clone()).unwrap();
    let p2 = s.commit(bytes.clone()).unwrap();
    let p3 = s.commit(Owned(42)).unwrap();
    for (id, enc) in [
        (p1.id(), split.encode()),
        (p2.id(), bytes.encode()),
        (p3.id(), Owned(42).encode()),
    ] {
        let m = s.meta(id).unwrap();
        assert_eq!((m.size, m.checksum), (enc.len() as u64, crc(&enc)), "{id}");
        // What another rank receives verifies there.
        let (meta, b) = s.encoded_for_transfer(id).unwrap();
        assert_eq!(meta, m);
        assert_eq!(*b, enc);
        let other = Store::in_memory(1);
        other.insert_replica(meta.clone(), b.to_vec()).unwrap();
        // A replica whose checksum is off is refused.
        let third = Store::in_memory(2);
        let mut bad = meta;
        bad.checksum ^= 1;
        assert!(third.insert_replica(bad, b.to_vec()).is_err());
    }
}

#[test]
fn a_value_spilled_and_flushed_before_its_metadata_was_asked_reads_back_verified() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), 0, StoreOptions::new().memory_budget(3000)).unwrap();
    let values: Vec<Split> = (0..8u8).map(|k| Split(vec![k; 1000])).collect();
    let ptrs: Vec<_> = values.iter().map(|v| s.commit(v.clone()).unwrap()).collect();
    // The budget has spilled the older ones; flush the rest.
    assert!(s.stats().spills > 0, "{:?}", s.stats());
    s.flush_all().unwrap();
    for (p, v) in ptrs.iter().zip(&values) {
        s.evict(p.id());
        assert!(!s.is_resident(p.id()));
        assert_eq!(s.meta(p.id()).unwrap().checksum, crc(&v.encode()));
        assert_eq!(*s.load_wait(*p).unwrap(), *v);
        assert!(
            matches!(s.verify(p.id()).unwrap(), Integrity::Intact),
            "{:?}",
            s.verify(p.id())
        );
    }
    // Reopened, the files' headers carry the same checksums.
    drop(s);
    let r = Store::open(dir.path(), 0, StoreOptions::new()).unwrap();
    for (p, v) in ptrs.iter().zip(&values) {
        assert_eq!(r.meta(p.id()).unwrap().checksum, crc(&v.encode()));
        assert_eq!(*r.load_wait(*p).unwrap(), *v);
    }
}

#[test]
fn a_root_does_not_keep_a_released_object_whose_last_value_is_gone() {
    let s = Store::in_memory(0);
    let v = Split(vec![3; 500]);
    let p = s.commit(v.clone()).unwrap();
    let list = s.commit(vec![p.id()]).unwrap();
    let held = s.load_wait(p).unwrap();
    s.release(p.id()).unwrap();
    drop(held);
    // Now nothing of it is left (no store call has swept it yet). A root
    // that reaches it must not revive an entry with no data: its checksum
    // could not be computed any more.
    s.set_root("list", list.id()).unwrap();
    assert!(s.meta(p.id()).is_none());
    assert!(s.load_wait(p).is_err());
    // Released while held, then rooted while the value still lives: kept.
    let q = s.commit(v.clone()).unwrap();
    let held = s.load_wait(q).unwrap();
    s.release(q.id()).unwrap();
    let list2 = s.commit(vec![q.id()]).unwrap();
    s.set_root("list2", list2.id()).unwrap();
    drop(held);
    assert_eq!(s.meta(q.id()).map(|m| m.checksum), Some(crc(&v.encode())));
    assert_eq!(*s.load_wait(q).unwrap(), v);
}
