//! MPI integration test (run by `cargo xtask test` under `mpirun -n 1..3`):
//! random symmetric contractions (random groups, legs, sectors, fluxes,
//! tilings, label orders, conjugation, alpha/beta with C_in, all four
//! dtypes) against the dense contraction of the dense embeddings, and a
//! DMRG-shaped contraction whose plan counts exactly the charge-allowed
//! block pairs, with no payload through the root when there are workers.
//! A failure panics on the root, which aborts the communicator: non-zero exit.

#[path = "symmetric_contract_common/mod.rs"]
mod common;

use uni20::dist::sym_random;
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::prelude::*;

fn u1_leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

fn main() {
    let (ran, total) = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            let dtypes = [DType::F64, DType::C64, DType::F32, DType::C32];
            let mut ran = 0;
            let total = 24;
            for i in 0..total as u64 {
                let c = common::Case {
                    seed: 0x9e37_79b9_7f4a_7c15 ^ (i * 7919),
                    free_a: (i % 3) as usize,
                    contracted: 1 + (i % 2) as usize,
                    free_b: ((i / 3) % 3) as usize,
                    dtype: dtypes[(i % 4) as usize],
                    ranks: 1,
                    conj: [i % 5 == 1, i % 7 == 3],
                    with_c: i % 2 == 0,
                };
                ran += usize::from(common::run_in(ctl, &c));
            }
            // DMRG-shaped: environment L(a, w, b) with a two-site tensor A(b, s, t, c).
            let g = Symmetry::u1();
            let bond = [(-2, 3), (0, 6), (2, 3)];
            let mpo = [(-2, 1), (0, 3), (2, 1)];
            let phys = [(-1, 1), (1, 1)];
            let ll = SymmetricLayout::new(
                g.clone(),
                vec![u1_leg(Direction::In, &bond, 3), u1_leg(Direction::Out, &mpo, 2), u1_leg(Direction::Out, &bond, 3)],
                g.identity(),
            )
            .unwrap();
            let la = SymmetricLayout::new(
                g.clone(),
                vec![
                    u1_leg(Direction::In, &bond, 3),
                    u1_leg(Direction::In, &phys, 1),
                    u1_leg(Direction::In, &phys, 1),
                    u1_leg(Direction::Out, &bond, 3),
                ],
                g.identity(),
            )
            .unwrap();
            let l = sym_random(ctl, ll, DType::F64, 5).unwrap();
            let a = sym_random(ctl, la, DType::F64, 6).unwrap();
            let r = contract(ctl, "awb,bstc->awstc", &l, &a).unwrap();
            let got = r.to_dense(ctl).unwrap();
            let want = contract(
                ctl,
                "awb,bstc->awstc",
                &DistTensor::from_local(ctl, &l.to_dense(ctl).unwrap(), 4).unwrap(),
                &DistTensor::from_local(ctl, &a.to_dense(ctl).unwrap(), 4).unwrap(),
            )
            .unwrap()
            .to_local(ctl)
            .unwrap();
            common::assert_close(&got, &want, 1e-12, "DMRG-shaped L x A");
            let s = r.plan_summary().unwrap();
            assert!(s.block_products > 0 && s.flops > 0);
            if ctl.size() > 1 {
                assert_eq!(s.bytes_through_root, 0, "payload routed through the root");
            }
            println!(
                "mpi_symmetric_contract: {ran} of {total} random cases and the DMRG-shaped case ({}) match the dense contraction on {} ranks",
                s,
                ctl.size()
            );
            (ran, total)
        })
        .unwrap();
    assert!(ran * 2 >= total, "only {ran} of {total} random cases contracted");
}
