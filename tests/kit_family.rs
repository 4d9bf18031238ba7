//! The kit's proof family (`examples/kit_family`: `abs` in one folder of
//! three files) run in-process: every dtype and tiling against the local
//! modulus of the gathered input, symmetric tensors against the modulus of
//! their dense embedding (the family is written once for both layouts), a
//! storage rank's blocks moved to compute ranks, and a tensor of another
//! universe refused. The same program runs
//! under MPI in `cargo xtask test` (`--example kit_family`).

#[path = "../examples/kit_family/main.rs"]
mod kit_family;

use uni20::prelude::*;

#[test]
fn abs_matches_the_local_modulus_on_every_dtype_and_tiling() {
    for ranks in [1, 2, 4] {
        let n = uni20::universe().ranks(ranks).run(kit_family::run).unwrap().unwrap();
        // Per dtype: three dense tensors and one symmetric 7 x 2 x 10 embedding.
        assert_eq!(n, 4 * (35 + 24 + 6 + 140));
    }
}

#[test]
fn a_storage_ranks_blocks_are_computed_on_compute_ranks() {
    uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(|ctl| -> anyhow::Result<()> {
            let storage = ctl.storage_ranks()[0];
            let x = LocalTensor::from_f64(&[6], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0])?;
            let t = DistTensor::from_local_on(ctl, &x, 2, &Placement::Storage)?;
            let a = kit_family::abs::abs(ctl, &t)?;
            let got: Vec<f64> = a.to_local(ctl)?.to_c64_vec().iter().map(|z| z.re).collect();
            assert_eq!(got, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
            let s = a.plan_summary().unwrap();
            assert_eq!((s.transfers, s.bytes_moved), (3, 48), "{s}");
            assert!(a.manifest(ctl)?.blocks.iter().all(|b| b.owner != storage));
            Ok(())
        })
        .unwrap()
        .unwrap();
}

#[test]
fn a_tensor_of_another_universe_is_refused() {
    let foreign = uni20::universe()
        .ranks(2)
        .run(|ctl| random(ctl, &[3, 3], DType::F64, 2, 5).unwrap())
        .unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let e = kit_family::abs::abs(ctl, &foreign).unwrap_err();
            assert!(matches!(e, DistError::WrongUniverse { .. }), "{e}");
            // Nothing was submitted: the job goes on.
            let t = random(ctl, &[2], DType::F64, 1, 1).unwrap();
            assert_eq!(kit_family::abs::abs(ctl, &t).unwrap().shape(), &[2]);
        })
        .unwrap();
}
