//! Fused reductions (`uni20::dist::reduce_many`) on 1-3 in-process ranks
//! (and with a storage rank): the checks of `tests/reduce_many_common`, plus
//! the fused command's typed errors and its single round trip.

mod reduce_many_common;

use reduce_many_common as common;
use uni20::dist::{reduce_many, Reduction};
use uni20::prelude::*;

#[test]
fn fused_reductions_equal_the_separate_calls_on_1_to_3_ranks() {
    for ranks in 1..=3 {
        let n = uni20::universe().ranks(ranks).run(common::check_all).unwrap();
        assert_eq!(n, 3 * (7 + 2 + 1 + 6), "{ranks} ranks");
    }
}

#[test]
fn fused_reductions_with_a_storage_rank() {
    let n = uni20::universe()
        .ranks(4)
        .storage_ranks(1)
        .run(common::check_all)
        .unwrap();
    assert!(n > 0);
}

#[test]
fn fused_reductions_are_one_operation_and_check_every_operand_first() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let a = DistTensor::from_local(ctl, &common::local(&[4, 6], false, 1), 2).unwrap();
            let b = DistTensor::from_local(ctl, &common::local(&[6, 4], false, 2), 2).unwrap();
            a.wait(ctl).unwrap();
            b.wait(ctl).unwrap();
            let before = ctl.profile().operations;
            let v = reduce_many(ctl, &[Reduction::Norm(&a), Reduction::Norm(&b), Reduction::MaxAbs(&a)]).unwrap();
            assert_eq!(v.len(), 3);
            assert_eq!(ctl.profile().operations - before, 1, "one command for three reductions");
            // A bad second reduction: nothing is submitted.
            let before = ctl.profile().operations;
            let e = reduce_many(ctl, &[Reduction::Norm(&a), Reduction::Inner(&a, &b)]).unwrap_err();
            assert!(matches!(e, DistError::ShapeMismatch { .. }), "{e}");
            assert_eq!(ctl.profile().operations, before);
        })
        .unwrap();
}
