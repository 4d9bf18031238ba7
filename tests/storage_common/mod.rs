//! The storage-rank scenario shared by the in-process test and the MPI test.
#![allow(dead_code)]

use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::dist::Placement;
use uni20::persist::{StorageRequest, StorageResponse};
use uni20::prelude::*;
use uni20::worker::commands::StorageCommand;

fn ramp(shape: &[usize], scale: f64) -> LocalTensor {
    let n = shape.iter().product();
    LocalTensor::from_f64(shape, (0..n).map(|i| scale * (0.3 * i as f64).cos()).collect()).unwrap()
}

/// Inputs live on the storage rank; workers fetch them directly; the root
/// relays nothing. Returns the number of bytes fetched from storage ranks.
pub fn contraction_with_inputs_on_storage(ctl: &Controller<'_>) -> u64 {
    let storage = ctl.storage_ranks();
    assert_eq!(storage.len(), 1, "expected one storage rank");
    assert!(!ctl.compute_ranks().contains(&storage[0]));
    let (la, lb) = (ramp(&[9, 6, 4], 1.0), ramp(&[4, 6, 5], 0.5));
    let a = DistTensor::from_local_on(ctl, &la, 3, &Placement::Storage).unwrap();
    let b = DistTensor::from_local_on(ctl, &lb, 3, &Placement::Storage).unwrap();
    for t in [&a, &b] {
        assert!(t.manifest(ctl).unwrap().blocks.iter().all(|r| r.owner == storage[0]));
    }
    let c = contract(ctl, "ijk,kjl->li", &a, &b).unwrap();
    let got = c.to_local(ctl).unwrap();
    let spec = EinsumSpec::parse("ijk,kjl->li").unwrap();
    let want = local_contract(
        &spec,
        C64::new(1.0, 0.0),
        &la,
        &lb,
        C64::new(0.0, 0.0),
        None,
        &BackendList::reference_only(),
    )
    .unwrap();
    assert!(
        got.max_abs_diff(&want).unwrap() < 1e-12,
        "result differs from the reference"
    );
    let plan = c.plan_summary().unwrap();
    assert_eq!(plan.bytes_through_root, 0, "payload routed through the root");
    assert!(
        plan.per_rank.get(&storage[0]).is_none_or(|s| s.items == 0),
        "storage rank computed"
    );
    let from_storage: u64 = plan.per_rank.get(&storage[0]).map_or(0, |s| s.bytes_sent);
    assert_eq!(
        from_storage, plan.bytes_moved,
        "every moved byte comes from the storage rank"
    );
    assert!(from_storage > 0);
    // The object-server requests: has / pin / unpin / get / put.
    let id = a.manifest(ctl).unwrap().blocks[0].id;
    let ask = |req: StorageRequest| ctl.submit::<StorageCommand>(&req, &storage).unwrap().remove(0).1;
    assert_eq!(ask(StorageRequest::Has(id)), StorageResponse::Has(true));
    assert_eq!(ask(StorageRequest::Pin(id)), StorageResponse::Done);
    assert_eq!(ask(StorageRequest::Unpin(id)), StorageResponse::Done);
    let StorageResponse::Object { meta, bytes } = ask(StorageRequest::Get(id)) else {
        panic!("get failed")
    };
    assert_eq!(meta.id, id);
    assert_eq!(bytes.len() as u64, meta.size);
    let missing = uni20::persist::ObjectId::new(77, 1);
    assert_eq!(ask(StorageRequest::Has(missing)), StorageResponse::Has(false));
    from_storage
}
