//! Shared by `reduce_many` (in-process, 1-3 ranks) and `mpi_reduce_many`:
//! fused reductions ([`uni20::dist::reduce_many`]) against the same
//! reductions run one by one (bit for bit) and against the local reference
//! on the gathered tensors, for dense operands (different tilings and
//! owners, real and complex) and symmetric ones.
#![allow(dead_code)]

use uni20::dist::symmetry::{Direction, Leg, SymmetricLayout, Symmetry};
use uni20::dist::{reduce, reduce_many, sym_random, Reduction};
use uni20::prelude::*;
use uni20::C64;

/// Xorshift values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

pub fn local(shape: &[usize], complex: bool, seed: u64) -> LocalTensor {
    let n: usize = shape.iter().product();
    let v = values(seed, if complex { 2 * n } else { n });
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    LocalTensor::from_bytes(if complex { DType::C64 } else { DType::F64 }, shape, &bytes).unwrap()
}

/// `vdot(a, b)`, `|a|` and `max |a|` of root-local tensors, naively.
fn vdot(a: &LocalTensor, b: &LocalTensor) -> C64 {
    a.to_c64_vec()
        .iter()
        .zip(b.to_c64_vec())
        .map(|(x, y)| x.conj() * y)
        .sum()
}

fn norm_of(a: &LocalTensor) -> f64 {
    a.to_c64_vec().iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt()
}

fn max_abs_of(a: &LocalTensor) -> f64 {
    a.to_c64_vec().iter().map(|x| x.norm()).fold(0.0, f64::max)
}

/// Runs `rs` fused and one by one; asserts equal bits, and the values
/// against `want` to `1e-12` relative. Returns the number of reductions.
fn compare(ctl: &Controller<'_>, rs: &[Reduction<'_>], want: &[C64], what: &str) -> usize {
    let fused = reduce_many(ctl, rs).unwrap();
    assert_eq!(fused.len(), rs.len(), "{what}");
    for (k, (&r, (&f, &w))) in rs.iter().zip(fused.iter().zip(want)).enumerate() {
        let alone = reduce(ctl, r).unwrap().value;
        assert!(
            f.re.to_bits() == alone.re.to_bits() && f.im.to_bits() == alone.im.to_bits(),
            "{what}: reduction {k}: fused {f} differs from alone {alone}"
        );
        let scale = w.norm().max(1.0);
        assert!(
            (f - w).norm() <= 1e-12 * scale,
            "{what}: reduction {k}: {f} against {w}"
        );
    }
    rs.len()
}

/// Dense: `a` (4 x 6, blocks of 2, on the workers), `b` (same shape, blocks
/// of 3, all on the last compute rank), complex `c` (blocks of 4): inner
/// products across tilings and dtypes, norms and maxima, all fused.
pub fn check_dense(ctl: &Controller<'_>, seed: u64) -> usize {
    let (la, lb, lc) = (
        local(&[4, 6], false, seed),
        local(&[4, 6], false, seed + 1),
        local(&[4, 6], true, seed + 2),
    );
    let last = *ctl.compute_ranks().last().unwrap();
    let a = DistTensor::from_local_on(ctl, &la, 2, &Placement::Workers).unwrap();
    let b = DistTensor::from_local_on(ctl, &lb, 3, &Placement::Ranks(vec![last])).unwrap();
    let c = DistTensor::from_local_on(ctl, &lc, 4, &Placement::Workers).unwrap();
    let rs = [
        Reduction::Inner(&a, &b),
        Reduction::Norm(&a),
        Reduction::Inner(&b, &c),
        Reduction::Norm(&c),
        Reduction::MaxAbs(&b),
        Reduction::Inner(&c, &a),
        Reduction::Inner(&a, &a),
    ];
    let r = |x: f64| C64::new(x, 0.0);
    let want = [
        vdot(&la, &lb),
        r(norm_of(&la)),
        vdot(&lb, &lc),
        r(norm_of(&lc)),
        r(max_abs_of(&lb)),
        vdot(&lc, &la),
        vdot(&la, &la),
    ];
    let mut n = compare(ctl, &rs, &want, "dense");
    // A Lanczos step's pair, and one reduction alone.
    n += compare(ctl, &rs[..2], &want[..2], "dense inner and norm");
    n += compare(ctl, &rs[3..4], &want[3..4], "dense norm alone");
    assert!(reduce_many(ctl, &[]).unwrap().is_empty());
    n
}

fn u1_leg(dir: Direction, sectors: &[(i64, usize)], tile: usize) -> Leg {
    Leg::u1(dir, sectors, tile).unwrap()
}

/// Symmetric: two random U(1) tensors of one layout (flux 0), a third of
/// another flux; inner products, norms and maxima fused, against the
/// reductions of the dense embeddings.
pub fn check_symmetric(ctl: &Controller<'_>, seed: u64) -> usize {
    let g = Symmetry::u1();
    let legs = vec![
        u1_leg(Direction::Out, &[(-1, 2), (0, 3), (1, 2)], 2),
        u1_leg(Direction::In, &[(0, 2), (1, 3)], 2),
        u1_leg(Direction::Out, &[(0, 1), (1, 2)], 1),
    ];
    let l0 = SymmetricLayout::new(g.clone(), legs.clone(), g.charge(&[0]).unwrap()).unwrap();
    let l1 = SymmetricLayout::new(g.clone(), legs, g.charge(&[1]).unwrap()).unwrap();
    let a = sym_random(ctl, l0.clone(), DType::F64, seed).unwrap();
    let b = sym_random(ctl, l0, DType::C64, seed + 1).unwrap();
    let c = sym_random(ctl, l1, DType::F64, seed + 2).unwrap();
    let (da, db, dc) = (
        a.to_dense(ctl).unwrap(),
        b.to_dense(ctl).unwrap(),
        c.to_dense(ctl).unwrap(),
    );
    let rs = [
        Reduction::Inner(&a, &b),
        Reduction::Norm(&a),
        Reduction::Norm(&b),
        Reduction::MaxAbs(&c),
        Reduction::Inner(&b, &a),
        Reduction::Norm(&c),
    ];
    let r = |x: f64| C64::new(x, 0.0);
    let want = [
        vdot(&da, &db),
        r(norm_of(&da)),
        r(norm_of(&db)),
        r(max_abs_of(&dc)),
        vdot(&db, &da),
        r(norm_of(&dc)),
    ];
    compare(ctl, &rs, &want, "symmetric")
}

/// Dense and symmetric checks over a few seeds; the number of reductions
/// compared.
pub fn check_all(ctl: &Controller<'_>) -> usize {
    (0..3u64)
        .map(|s| check_dense(ctl, 17 + 101 * s) + check_symmetric(ctl, 5 + 31 * s))
        .sum()
}
