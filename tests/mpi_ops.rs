//! MPI integration test of the operation families beyond contraction (run
//! by `cargo xtask test` under `mpirun -n 2` and `-n 3`): element-wise
//! operations and reductions against the numpy fixtures of
//! `tests/fixtures/ops`, reblocking, worker-side `random` against the local
//! generator, and a contraction of differently blocked operands, each with
//! no payload through the root. A failure panics on the root, which aborts
//! the communicator: non-zero exit.
// uni20-mpi-ranks: 2,3

mod common;

use std::path::Path;

use uni20::dispatch::random_block;
use uni20::prelude::*;

fn main() {
    let checked = uni20::universe()
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
            let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
            dirs.sort();
            let mut checked = 0;
            for dir in &dirs {
                let words: Vec<String> = std::fs::read_to_string(dir.join("op.txt"))
                    .unwrap()
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                for (ba, bb) in [(2, 3), (64, 1)] {
                    let read = |f: &str, blk: usize| read_npy(ctl, dir.join(f), blk).unwrap();
                    let a = read("a.npy", ba);
                    let want = read("out.npy", 4).to_local(ctl).unwrap();
                    let what = format!("{name} ranks={} blocks={ba}/{bb}", ctl.size());
                    let out = match words[0].as_str() {
                        "axpby" => {
                            let (al, be) = (common::parse_scalar(&words[2]), common::parse_scalar(&words[3]));
                            axpby(ctl, al, &a, be, &read("b.npy", bb), &words[1]).unwrap()
                        }
                        "permute" => permute(ctl, &a, &words[1]).unwrap(),
                        "reshape" => {
                            let shape: Vec<usize> = words
                                .get(1)
                                .map(|s| s.split(',').map(|d| d.parse().unwrap()).collect())
                                .unwrap_or_default();
                            reshape(ctl, &a, &shape).unwrap()
                        }
                        "reduce" => {
                            let want = want.to_c64_vec();
                            let r = uni20::dist::reduce(ctl, uni20::dist::Reduction::Inner(&a, &read("b.npy", bb)))
                                .unwrap();
                            assert!((r.value - want[0]).norm() <= 1e-12 * want[0].norm(), "{what}: inner");
                            assert_eq!(r.summary.bytes_through_root, 0, "{what}");
                            let n = norm(ctl, &a).unwrap();
                            assert!((n - want[1].re).abs() <= 1e-12 * want[1].re, "{what}: norm");
                            checked += 1;
                            continue;
                        }
                        other => panic!("{what}: unknown op {other}"),
                    };
                    assert_eq!(out.to_local(ctl).unwrap(), want, "{what}");
                    let s = out.plan_summary().unwrap();
                    assert_eq!(s.bytes_through_root, 0, "{what}");
                    assert!(!s.participants.contains(&0), "{what}: the root took part");
                    // Reblocked, the values do not change.
                    let r = reblock(ctl, &out, 3).unwrap();
                    assert_eq!(r.to_local(ctl).unwrap(), want, "{what} reblocked");
                    checked += 1;
                }
            }
            // random: the same tensor whatever the tiling and rank count.
            let shape = [9usize, 10];
            let want = random_block(7, DType::C64, &shape, &[0, 0], &shape).unwrap();
            for block in [4, 7] {
                let t = random(ctl, &shape, DType::C64, block, 7).unwrap();
                assert_eq!(t.to_local(ctl).unwrap(), want, "random block={block}");
                checked += 1;
            }
            // A contraction of differently blocked operands, with the reblock noted.
            let a = random(ctl, &[8, 6], DType::F64, [8, 3], 1).unwrap();
            let b = random(ctl, &[6, 5], DType::F64, 2, 2).unwrap();
            let c = contract(ctl, "ij,jk->ik", &a, &b).unwrap();
            let a_same = reblock(ctl, &a, 2).unwrap();
            let c_same = contract(ctl, "ij,jk->ik", &a_same, &b).unwrap();
            common::assert_close(
                &c.to_local(ctl).unwrap(),
                &c_same.to_local(ctl).unwrap(),
                "reblocked contraction",
            );
            let s = c.plan_summary().unwrap();
            assert!(
                s.notes.iter().any(|n| n.starts_with("reblocked B on j")),
                "{:?}",
                s.notes
            );
            assert_eq!(s.bytes_through_root, 0);
            checked += 1;
            println!("mpi_ops: {checked} checks on {} ranks match numpy", ctl.size());
            checked
        })
        .unwrap();
    assert!(checked >= 2 * 23 + 3, "{checked} checks");
}
