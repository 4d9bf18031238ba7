//! A checkpoint written by one rank count restores on another: 3 in-process
//! ranks (root + 2 workers) write a dense and a symmetric tensor; universes
//! of 1, 2 and 5 ranks on a copy of the store directory restore them with the
//! same values (compared with the dense values the writer read back), the
//! manifests name only this universe's compute ranks, the one-line notice
//! says what moved, and the tensors compute (a contraction against the
//! writer's result). A block file missing from the old owner's directory is
//! a typed error naming it.

use std::path::Path;
use std::sync::Arc;

use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::dist::{checkpoint, restore_redistributed, sym_random, Checkpoint};
use uni20::persist::ObjectId;
use uni20::prelude::*;

fn leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

fn layout() -> Arc<SymmetricLayout> {
    let g = Symmetry::u1();
    let legs = vec![
        leg(Direction::In, &[(-1, 3), (0, 4), (1, 3)], 2),
        leg(Direction::In, &[(-1, 1), (1, 1)], 1),
        leg(Direction::Out, &[(-2, 2), (-1, 3), (0, 4), (1, 3), (2, 2)], 2),
    ];
    Arc::new(SymmetricLayout::new(g.clone(), legs, g.charge(&[0]).unwrap()).unwrap())
}

fn matrix(n: usize) -> LocalTensor {
    LocalTensor::from_f64(&[n, n], (0..n * n).map(|i| (i as f64 * 0.61).cos()).collect()).unwrap()
}

/// Writes the checkpoint on 3 ranks: `(id, dense values of "m", of "s",
/// the norm of m . m)`.
fn write(dir: &Path) -> (ObjectId, LocalTensor, LocalTensor, f64) {
    uni20::universe()
        .ranks(3)
        .store_dir(dir)
        .run(|ctl| {
            let m = DistTensor::from_local(ctl, &matrix(9), 2).unwrap();
            let s = sym_random(ctl, layout(), DType::F64, 7).unwrap();
            let mut cp = Checkpoint {
                label: "ranks".into(),
                ..Default::default()
            };
            cp.add(ctl, "m", &m).unwrap();
            cp.add(ctl, "s", &s).unwrap();
            let mm = contract(ctl, "ij,jk->ik", &m, &m).unwrap();
            let id = checkpoint(ctl, &cp).unwrap().id();
            (
                id,
                m.to_local(ctl).unwrap(),
                s.to_dense(ctl).unwrap(),
                norm(ctl, &mm).unwrap(),
            )
        })
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn a_three_rank_checkpoint_restores_on_one_two_and_five_ranks() {
    let written = tempfile::tempdir().unwrap();
    let (id, m_want, s_want, mm_norm) = write(written.path());
    for ranks in [1usize, 2, 5, 3] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(written.path(), dir.path());
        let notice = uni20::universe()
            .ranks(ranks)
            .store_dir(dir.path())
            .run(|ctl| {
                let r = restore_redistributed(ctl, id).unwrap();
                let compute = ctl.compute_ranks();
                for (name, man) in &r.checkpoint.tensors {
                    for b in &man.blocks {
                        assert!(
                            compute.contains(&b.owner),
                            "{ranks} ranks: {name} block on rank {}",
                            b.owner
                        );
                    }
                }
                let m = r.checkpoint.tensor(ctl, "m").unwrap();
                let s = r.checkpoint.tensor(ctl, "s").unwrap();
                assert_eq!(m.to_local(ctl).unwrap(), m_want, "{ranks} ranks");
                assert_eq!(s.to_dense(ctl).unwrap(), s_want, "{ranks} ranks");
                let mm = contract(ctl, "ij,jk->ik", &m, &m).unwrap();
                let got = norm(ctl, &mm).unwrap();
                assert!(
                    (got - mm_norm).abs() <= 1e-12 * mm_norm,
                    "{ranks} ranks: {got} vs {mm_norm}"
                );
                r.redistribution.map(|d| (d.blocks, d.to_string()))
            })
            .unwrap();
        match ranks {
            // The two workers' blocks go to the lone root, or rank 2's to rank 1.
            1 | 2 => {
                let (blocks, text) = notice.expect("a notice");
                assert!(blocks > 0, "{text}");
                let want = if ranks == 1 {
                    "restored on 1 rank: "
                } else {
                    "restored on 2 ranks: "
                };
                assert!(text.starts_with(want) && text.contains("re-placed from"), "{text}");
            }
            // More ranks: nothing moves, but the notice says where the blocks stay.
            5 => {
                let (blocks, text) = notice.expect("a notice");
                assert_eq!(blocks, 0, "{text}");
                assert!(
                    text.contains("nothing re-placed") && text.contains("ranks 1,2"),
                    "{text}"
                );
            }
            // The same rank count: no notice.
            _ => assert!(notice.is_none(), "{notice:?}"),
        }
    }
}

#[test]
fn a_one_rank_checkpoint_restores_on_three_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let (id, want) = uni20::universe()
        .ranks(1)
        .store_dir(dir.path())
        .run(|ctl| {
            let s = sym_random(ctl, layout(), DType::F64, 3).unwrap();
            let mut cp = Checkpoint::default();
            cp.add(ctl, "s", &s).unwrap();
            (checkpoint(ctl, &cp).unwrap().id(), s.to_dense(ctl).unwrap())
        })
        .unwrap();
    let text = uni20::universe()
        .ranks(3)
        .store_dir(dir.path())
        .run(|ctl| {
            let r = restore_redistributed(ctl, id).unwrap();
            let s = r.checkpoint.tensor(ctl, "s").unwrap();
            assert_eq!(s.to_dense(ctl).unwrap(), want);
            assert!(r.checkpoint.tensors[0].1.blocks.iter().all(|b| b.owner != 0));
            r.redistribution.unwrap().to_string()
        })
        .unwrap();
    assert!(text.contains("from rank 0 onto ranks 1,2"), "{text}");
}

#[test]
fn a_block_missing_from_the_old_owner_is_an_error_naming_it() {
    let written = tempfile::tempdir().unwrap();
    let (id, ..) = write(written.path());
    // Remove one object file of rank 2's directory.
    let victim = std::fs::read_dir(written.path().join("rank-2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "obj"))
        .unwrap();
    std::fs::remove_file(&victim).unwrap();
    // A failed adoption is a failed command: the job stops (fail-stop), and
    // its error names the command, the rank, the block and the file.
    let err = match uni20::universe()
        .ranks(2)
        .store_dir(written.path())
        .run(|ctl| restore_redistributed(ctl, id).map(|_| ()))
    {
        Err(job) => job.to_string(),
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(())) => panic!("restored with a block file missing"),
    };
    assert!(err.contains(&victim.display().to_string()), "{err}");
    assert!(err.contains("uni20.adopt.v1") && err.contains("rank 1"), "{err}");
}
