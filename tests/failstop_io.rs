//! An injected store I/O failure (`UNI20_INJECT_FAULT=io@...`, here through
//! the builder) stops the job, and reopening the ranks' disk stores shows
//! every published id that was made durable before the failure with its
//! object, and no partial object. (A disk store writes commits behind: what
//! no flush or checkpoint reached has no file, and is not expected back.)

use uni20::persist::{PersistentPtr, Store, StoreOptions};
use uni20::prelude::*;
use uni20::worker::fault::FaultPlan;

#[test]
fn no_published_id_without_its_object_after_an_io_failure() {
    let dir = tempfile::tempdir().unwrap();
    let mut published = Vec::new();
    let mut failure = None;
    let outcome = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .faults(FaultPlan::parse("io@rank=2,op=4").unwrap())
        .run(|ctl| {
            let n = 6;
            let t = LocalTensor::from_f64(&[n, n], (0..n * n).map(|i| i as f64).collect()).unwrap();
            let a = DistTensor::from_local(ctl, &t, 2).unwrap(); // op 1
            let b = DistTensor::from_local(ctl, &t, 2).unwrap(); // op 2
            for x in [&a, &b] {
                published.extend(x.manifest(ctl).unwrap().blocks);
            }
            uni20::dist::flush_all(ctl).unwrap(); // op 3: a and b durable
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap(); // op 4: rank 2 cannot commit
            failure = Some(c.to_local(ctl).unwrap_err());
        });
    assert!(outcome.is_err());
    let text = failure.unwrap().to_string();
    assert!(
        text.contains("rank 2") && text.contains("op_id 4") && text.contains("No space left"),
        "{text}"
    );
    // Reopen every rank's store: each published id loads, with its checksum.
    assert_eq!(published.len(), 18);
    for rank in 0..3u32 {
        let store = Store::open(dir.path(), rank, StoreOptions::new()).unwrap();
        for r in published.iter().filter(|r| r.owner == rank as usize) {
            let v = store
                .load_wait(PersistentPtr::<uni20::dist::Block>::from_id(r.id))
                .unwrap();
            assert_eq!(v.0.shape(), &[2, 2]);
        }
        // Whatever the store lists is complete: nothing partial is served.
        for id in store.ids() {
            assert!(
                store.encoded(id).is_ok(),
                "rank {rank}: object {id} is listed but unreadable"
            );
        }
    }
}
