//! Symmetric (block-sparse) distributed tensors, the foundation: creation
//! of the charge-allowed blocks only, the dense embedding both ways, norms,
//! inner products, `.npy` output and checkpoints, on 1-3 in-process ranks.
//! Every expected value is computed independently from the dense
//! embedding (the dense random tensor masked by the charge rule, checked
//! element by element against the charges of the legs).

use std::sync::Arc;

use uni20::dist::error::LayoutError;
use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::dist::{sym_identity, sym_random, sym_zeros};
use uni20::prelude::*;
use uni20::TensorData;

/// A U(1) leg with sectors `(charge, dim)` in tiles of at most `tile`.
fn leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

/// The charge of every dense position of `sectors`.
fn charges(sectors: &[(i64, usize)]) -> Vec<i64> {
    sectors.iter().flat_map(|&(q, d)| std::iter::repeat_n(q, d)).collect()
}

/// A three-leg layout (left bond, physical, right bond) with flux `flux`.
fn mps_like(flux: i64) -> (SymmetricLayout, [Vec<i64>; 3]) {
    let l = [(-1, 2), (0, 3), (1, 2)];
    let p = [(-1, 1), (1, 1)];
    let r = [(-2, 1), (-1, 2), (0, 4), (1, 2), (2, 1)];
    let g = Symmetry::u1();
    let legs = vec![
        leg(Direction::In, &l, 2),
        leg(Direction::In, &p, 1),
        leg(Direction::Out, &r, 3),
    ];
    let layout = SymmetricLayout::new(g.clone(), legs, g.charge(&[flux]).unwrap()).unwrap();
    (layout, [charges(&l), charges(&p), charges(&r)])
}

fn f64s(t: &LocalTensor) -> Vec<f64> {
    match t.data() {
        TensorData::F64(v) => v.clone(),
        other => panic!("expected f64, got {other:?}"),
    }
}

#[test]
fn random_symmetric_tensor_is_the_masked_dense_random_tensor() {
    for ranks in 1..=3 {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                for flux in [0, 1] {
                    let (layout, q) = mps_like(flux);
                    let shape = layout.dense_shape();
                    let allowed = layout.blocks().len();
                    let t = sym_random(ctl, layout.clone(), DType::F64, 11).unwrap();
                    assert!(t.is_symmetric());
                    let m = t.manifest(ctl).unwrap();
                    assert_eq!(m.blocks.len(), allowed, "only the allowed blocks are stored");
                    assert!(allowed < m.blocking.num_blocks());
                    let got = f64s(&t.to_dense(ctl).unwrap());
                    let dense = f64s(&random(ctl, &shape, DType::F64, 4, 11).unwrap().to_local(ctl).unwrap());
                    let mut nonzero = 0;
                    for i in 0..shape[0] {
                        for j in 0..shape[1] {
                            for k in 0..shape[2] {
                                let g = (i * shape[1] + j) * shape[2] + k;
                                // In legs count -q, Out legs +q: the rule is r - l - p = flux.
                                let ok = q[2][k] - q[0][i] - q[1][j] == flux;
                                let want = if ok { dense[g] } else { 0.0 };
                                assert_eq!(got[g], want, "ranks {ranks} flux {flux} at ({i},{j},{k})");
                                nonzero += usize::from(ok);
                            }
                        }
                    }
                    assert_eq!(nonzero, layout.stored_elements());
                    // The norm over the stored blocks is the norm of the embedding.
                    let want_norm = got.iter().map(|x| x * x).sum::<f64>().sqrt();
                    let n = norm(ctl, &t).unwrap();
                    assert!((n - want_norm).abs() <= 1e-12 * want_norm, "{n} vs {want_norm}");
                    let want_max = got.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                    assert_eq!(max_abs(ctl, &t).unwrap(), want_max);
                }
            })
            .unwrap();
    }
}

#[test]
fn from_dense_round_trips_and_names_a_block_that_breaks_the_charge_rule() {
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let (layout, _) = mps_like(0);
            let layout = Arc::new(layout);
            let t = sym_random(ctl, layout.clone(), DType::F64, 5).unwrap();
            let dense = t.to_dense(ctl).unwrap();
            let back = DistTensor::from_dense(ctl, &dense, layout.clone(), 0.0).unwrap();
            assert_eq!(back.to_dense(ctl).unwrap(), dense);
            let u = sym_random(ctl, layout.clone(), DType::F64, 6).unwrap();
            let want: f64 = f64s(&dense)
                .iter()
                .zip(f64s(&u.to_dense(ctl).unwrap()))
                .map(|(a, b)| a * b)
                .sum();
            let got = inner(ctl, &back, &u).unwrap();
            assert!((got.re - want).abs() <= 1e-12 * want.abs().max(1.0), "{got} vs {want}");
            // A dense tensor with a nonzero outside the allowed blocks.
            let shape = layout.dense_shape();
            let mut v = f64s(&dense);
            // (i, j, k) = (0, 0, 0): charges l = -1, p = -1, r = -2: r - l - p = 0, allowed;
            // (0, 0, 1): r = -1 gives 1, forbidden.
            v[1] = 0.5;
            let bad = LocalTensor::from_f64(&shape, v).unwrap();
            let e = DistTensor::from_dense(ctl, &bad, layout.clone(), 1e-3).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, DistError::DenseEmbedding(_)), "{e:?}");
            assert!(msg.contains("block [0, 0, 1]") && msg.contains("5e-1"), "{msg}");
            // Within the tolerance the element is dropped.
            let ok = DistTensor::from_dense(ctl, &bad, layout, 0.6).unwrap();
            assert_eq!(ok.to_dense(ctl).unwrap(), dense);
        })
        .unwrap();
}

#[test]
fn zeros_identity_npy_and_checkpoint_of_symmetric_tensors() {
    let dir = tempfile::tempdir().unwrap();
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            let (layout, _) = mps_like(1);
            let z = sym_zeros(ctl, layout.clone(), DType::C64).unwrap();
            assert_eq!(norm(ctl, &z).unwrap(), 0.0);
            assert_eq!(z.manifest(ctl).unwrap().blocks.len(), layout.blocks().len());
            // The identity on two legs: the dense identity of their fused index.
            let a = leg(Direction::Out, &[(-1, 2), (0, 1), (2, 3)], 2);
            let b = leg(Direction::In, &[(0, 2), (1, 1)], 1);
            let id = sym_identity(ctl, &[a.clone(), b.clone()], DType::F64).unwrap();
            let want = identity(ctl, &[6, 3, 6, 3], DType::F64, 3, 2)
                .unwrap()
                .to_local(ctl)
                .unwrap();
            assert_eq!(id.to_dense(ctl).unwrap(), want);
            let lay = id.layout().unwrap();
            assert_eq!(lay.legs()[2], a.dual());
            assert!(id.manifest(ctl).unwrap().blocks.len() < id.blocking().num_blocks());
            // .npy holds the dense embedding.
            let t = sym_random(ctl, layout.clone(), DType::F64, 3).unwrap();
            let path = dir.path().join("t.npy");
            write_npy(ctl, &t, &path).unwrap();
            let read = read_npy(ctl, &path, 4).unwrap();
            assert_eq!(read.to_local(ctl).unwrap(), t.to_dense(ctl).unwrap());
            // A checkpoint keeps the layout: restored, the tensor is symmetric again.
            let mut cp = Checkpoint::default();
            cp.add(ctl, "t", &t).unwrap();
            let ptr = checkpoint(ctl, &cp).unwrap();
            let back = restore(ctl, ptr.id()).unwrap();
            let r = back.tensor(ctl, "t").unwrap();
            assert_eq!(r.layout(), t.layout());
            assert_eq!(r.to_dense(ctl).unwrap(), t.to_dense(ctl).unwrap());
            // Families without a symmetric path yet refuse, typed; mixing is refused.
            let d = random(ctl, &layout.dense_shape(), DType::F64, 4, 1).unwrap();
            let e = inner(ctl, &t, &d).unwrap_err();
            assert!(
                matches!(
                    e,
                    DistError::Layout(LayoutError::Mixed {
                        symmetric: 0,
                        dense: 1,
                        ..
                    })
                ),
                "{e:?}"
            );
        })
        .unwrap();
}
