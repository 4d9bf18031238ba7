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

/// A flow's bytes in both directions.
fn both(f: uni20::worker::transport::Flow) -> u64 {
    f.bytes_sent + f.bytes_received
}

/// Workers put blocks onto the storage rank and fetch them back as steps of
/// plans (`place`, and a contraction reading the placed tensor), and the
/// root's transport, which counts every message it sends and receives,
/// carries none of their payload: no block-transfer, root-data or
/// collective bytes at all, and control traffic (envelopes, replies) a
/// small fraction of the payload moved. Returns the payload bytes that went
/// to and from the storage rank.
pub fn put_and_fetch_through_storage(ctl: &Controller<'_>) -> u64 {
    let storage = ctl.storage_ranks()[0];
    let (la, lb) = (ramp(&[48, 40], 1.0), ramp(&[40, 48], 0.25));
    // Inputs on the workers (the scatter goes through the root, by design: before the count).
    let a = DistTensor::from_local(ctl, &la, 16).unwrap();
    let b = DistTensor::from_local(ctl, &lb, 16).unwrap();
    a.manifest(ctl).unwrap();
    b.manifest(ctl).unwrap();
    let before = ctl.transport().traffic();
    // The counter sees the scatter that did go through the root (so the zeros below mean something).
    let scattered = (la.len() + lb.len()) as u64 * 8;
    assert!(
        before.root_data.bytes_sent >= scattered,
        "the root's transport counted {} root-data bytes for a {scattered}-byte scatter",
        before.root_data.bytes_sent
    );

    // Computed on the workers, put onto the storage rank worker to storage rank.
    let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
    let stored = uni20::dist::place(ctl, &c, &Placement::Storage).unwrap();
    let put = stored.plan_summary().unwrap().clone();
    assert!(stored.manifest(ctl).unwrap().blocks.iter().all(|r| r.owner == storage));
    let put_bytes = put.per_rank.get(&storage).map_or(0, |s| s.bytes_received);
    assert!(
        put_bytes > 0 && put_bytes == put.bytes_moved,
        "the put moves every block to the storage rank"
    );
    drop(c);
    ctl.collect().unwrap();

    // A contraction on the workers fetches the stored blocks from the storage rank.
    let d = contract(ctl, "ik,kj->ij", &stored, &a).unwrap();
    d.manifest(ctl).unwrap();
    let fetch = d.plan_summary().unwrap().clone();
    let fetched = fetch.per_rank.get(&storage).map_or(0, |s| s.bytes_sent);
    assert!(fetched > 0, "the contraction fetches from the storage rank");
    assert!(
        fetch.per_rank.get(&storage).is_none_or(|s| s.items == 0),
        "storage rank computed"
    );
    // And the whole tensor back onto the workers.
    let back = uni20::dist::place(ctl, &stored, &Placement::Workers).unwrap();
    assert!(back.manifest(ctl).unwrap().blocks.iter().all(|r| r.owner != storage));
    let got_back = back
        .plan_summary()
        .unwrap()
        .per_rank
        .get(&storage)
        .map_or(0, |s| s.bytes_sent);
    assert_eq!(got_back, put_bytes, "every block comes back");
    ctl.collect().unwrap();

    let after = ctl.transport().traffic();
    let moved = put_bytes + fetched + got_back;
    let delta = |f: fn(&uni20::worker::transport::Traffic) -> uni20::worker::transport::Flow| {
        both(f(&after)) - both(f(&before))
    };
    assert_eq!(delta(|t| t.block_data), 0, "block payload through the root");
    assert_eq!(
        delta(|t| t.root_data),
        0,
        "root data phases during the puts and fetches"
    );
    assert_eq!(delta(|t| t.collective), 0, "collectives during the puts and fetches");
    let control = delta(|t| t.control);
    assert!(control > 0, "the commands and replies were counted");
    assert!(
        control * 4 < moved,
        "the root's control traffic ({control} bytes) is not small against the {moved} payload bytes moved"
    );

    // The values, through the root on purpose (after the count).
    let spec = EinsumSpec::parse("ij,jk->ik").unwrap();
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let backends = BackendList::reference_only();
    let lc = local_contract(&spec, one, &la, &lb, zero, None, &backends).unwrap();
    let spec2 = EinsumSpec::parse("ik,kj->ij").unwrap();
    let ld = local_contract(&spec2, one, &lc, &la, zero, None, &backends).unwrap();
    assert!(back.to_local(ctl).unwrap().max_abs_diff(&lc).unwrap() < 1e-12);
    assert!(d.to_local(ctl).unwrap().max_abs_diff(&ld).unwrap() < 1e-10);
    println!(
        "storage: {put_bytes} bytes put, {fetched} fetched by a contraction, {got_back} brought back; root: \
         {control} control bytes, 0 payload bytes"
    );
    moved
}
