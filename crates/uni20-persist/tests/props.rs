//! Property tests: round trips and no panics on bad bytes.

use proptest::prelude::*;
use uni20_persist::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn replica_round_trip(v in proptest::collection::vec(any::<f64>(), 0..300)) {
        let a = Store::in_memory(0);
        let b = Store::in_memory(1);
        let p = a.commit(v.clone()).unwrap();
        let (m, bytes) = a.encoded(p.id()).unwrap();
        b.insert_replica(m, bytes.to_vec()).unwrap();
        let got = b.load_wait(p).unwrap();
        prop_assert_eq!(got.len(), v.len());
        for (x, y) in got.iter().zip(&v) {
            prop_assert_eq!(x.to_bits(), y.to_bits());
        }
    }

    #[test]
    fn object_id_text_round_trips(origin in any::<u32>(), nonce in any::<u64>(), seq in any::<u64>()) {
        let id = ObjectId::with_nonce(origin, nonce, seq);
        let text = id.to_string();
        prop_assert_eq!(text.parse::<ObjectId>().unwrap(), id);
        prop_assert_eq!(text.contains('@'), nonce != ObjectId::NIL_NONCE);
        let wire = postcard::to_allocvec(&id).unwrap();
        prop_assert_eq!(postcard::from_bytes::<ObjectId>(&wire).unwrap(), id);
    }

    #[test]
    fn object_id_parse_never_panics(text in "\\PC{0,40}") {
        if let Ok(id) = text.parse::<ObjectId>() {
            // Whatever parses prints back to something that parses to the same ID.
            prop_assert_eq!(id.to_string().parse::<ObjectId>().unwrap(), id);
        }
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = <Vec<f64>>::decode(&bytes);
        let _ = <Vec<u32>>::decode(&bytes);
        let _ = String::decode(&bytes);
        let _ = <Vec<ObjectId>>::decode(&bytes);
    }

    #[test]
    fn bad_replica_never_served(bytes in proptest::collection::vec(any::<u8>(), 1..64), flip in 0usize..64) {
        let s = Store::in_memory(0);
        let meta = ObjectMeta::of_bytes(ObjectId::new(1, 1), "uni20.bytes.v1", &bytes);
        let mut bad = bytes.clone();
        let i = flip % bad.len();
        bad[i] ^= 0x80;
        prop_assert!(s.insert_replica(meta.clone(), bad).is_err());
        prop_assert!(!s.contains(meta.id));
    }

    #[test]
    fn damaged_file_never_served(len in 1usize..2000, pos in any::<usize>(), truncate in any::<bool>()) {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let (p, path) = {
            let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
            let p = s.commit(data.clone()).unwrap();
            s.flush_all().unwrap();
            (p, s.object_path(p.id()).unwrap())
        };
        let mut file = std::fs::read(&path).unwrap();
        let at = pos % file.len();
        if truncate { file.truncate(at); } else { file[at] ^= 0x01; }
        std::fs::write(&path, &file).unwrap();
        let s = Store::open(tmp.path(), 0, StoreOptions::new()).unwrap();
        match s.load_wait(p) {
            Ok(v) => prop_assert_eq!(&*v, &data), // flipped bit was in slack? must still be right
            Err(e) => prop_assert!(e.is_fatal() || matches!(e, PersistError::NotFound(_)), "{}", e),
        }
    }
}
