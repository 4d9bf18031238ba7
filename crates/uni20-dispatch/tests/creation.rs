//! Worker-side block creation: random blocks depend only on (seed, global index), so any
//! blocking assembles the same tensor bit for bit; their distribution; identity blocks; and
//! the typed errors for blocks that do not fit the global shape.

use uni20_dispatch::*;

/// Assembles the global tensor of `shape` (rank 3) from blocks of edge `edge` (the last
/// block of each mode is smaller), each made by `make(offset, block_shape)`.
fn assemble(shape: [usize; 3], edge: usize, make: impl Fn(&[usize], &[usize]) -> LocalTensor) -> Vec<u8> {
    let dtype = make(&[0, 0, 0], &[0, 0, 0]).dtype();
    let size = dtype.size_bytes();
    let mut out = vec![0u8; shape.iter().product::<usize>() * size];
    let starts = |d: usize| (0..shape[d]).step_by(edge.max(1));
    for i in starts(0) {
        for j in starts(1) {
            for k in starts(2) {
                let off = [i, j, k];
                let blk: Vec<usize> = (0..3).map(|d| edge.min(shape[d] - off[d])).collect();
                let t = make(&off, &blk);
                assert_eq!(t.shape(), blk.as_slice());
                let bytes = t.as_bytes();
                let mut n = 0;
                for a in 0..blk[0] {
                    for b in 0..blk[1] {
                        for c in 0..blk[2] {
                            let g = ((i + a) * shape[1] + (j + b)) * shape[2] + (k + c);
                            out[g * size..(g + 1) * size].copy_from_slice(&bytes[n * size..(n + 1) * size]);
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn random_blocks_assemble_identically_for_any_blocking() {
    let shape = [9, 10, 11];
    for dtype in DType::ALL {
        let make = |off: &[usize], blk: &[usize]| random_block(42, dtype, &shape, off, blk).unwrap();
        let whole = make(&[0, 0, 0], &shape);
        let b4 = assemble(shape, 4, make);
        let b7 = assemble(shape, 7, make);
        assert_eq!(b4, whole.as_bytes(), "{dtype}: blocks of 4");
        assert_eq!(b7, whole.as_bytes(), "{dtype}: blocks of 7");
        // A different seed gives different values.
        let other = random_block(43, dtype, &shape, &[0, 0, 0], &shape).unwrap();
        assert_ne!(other, whole);
    }
}

#[test]
fn random_values_follow_the_documented_distribution() {
    let shape = [200, 300];
    let r = random_block(7, DType::F64, &shape, &[0, 0], &shape)
        .unwrap()
        .to_c64_vec();
    let c = random_block(7, DType::C64, &shape, &[0, 0], &shape)
        .unwrap()
        .to_c64_vec();
    let f = random_block(7, DType::F32, &shape, &[0, 0], &shape)
        .unwrap()
        .to_c64_vec();
    let n = r.len() as f64;
    for (x, z) in r.iter().zip(&c) {
        assert_eq!(x.re, z.re, "real part of c64 equals the f64 draw");
        assert!((-1.0..1.0).contains(&z.re) && (-1.0..1.0).contains(&z.im));
    }
    for (x, y) in r.iter().zip(&f) {
        // f32 takes the top 24 bits of the same draw: within 2^-23 below the f64 value.
        assert!(y.re <= x.re && x.re - y.re < 2f64.powi(-23));
    }
    // Uniform on [-1, 1): mean 0 (sd 1/sqrt(3n)), variance 1/3; re and im uncorrelated.
    let mean = r.iter().map(|x| x.re).sum::<f64>() / n;
    let var = r.iter().map(|x| x.re * x.re).sum::<f64>() / n;
    let cov = c.iter().map(|z| z.re * z.im).sum::<f64>() / n;
    assert!(mean.abs() < 5.0 / (3.0 * n).sqrt(), "mean {mean}");
    assert!((var - 1.0 / 3.0).abs() < 0.01, "variance {var}");
    assert!(cov.abs() < 0.01, "covariance {cov}");
    // Rank 0 and empty blocks.
    let s = random_block(1, DType::C32, &[], &[], &[]).unwrap();
    assert_eq!(s.len(), 1);
    let e = random_block(1, DType::F64, &[4, 5], &[4, 0], &[0, 5]).unwrap();
    assert_eq!(e.shape(), &[0, 5]);
}

#[test]
fn identity_blocks_assemble_the_identity() {
    let shape = [6, 5, 7];
    // Rows: mode 0 (6); columns: modes 1, 2 fused (35): ones where i == j * 7 + k.
    let make = |off: &[usize], blk: &[usize]| identity_block(DType::C64, &shape, 1, off, blk).unwrap();
    let whole = make(&[0, 0, 0], &shape);
    assert_eq!(assemble(shape, 4, make), whole.as_bytes());
    let v = whole.to_c64_vec();
    for (g, x) in v.iter().enumerate() {
        let (i, j, k) = (g / 35, (g / 7) % 5, g % 7);
        let want = if i == j * 7 + k { 1.0 } else { 0.0 };
        assert_eq!(*x, C64::new(want, 0.0), "({i}, {j}, {k})");
    }
    let m = identity_block(DType::F32, &[3, 3], 1, &[1, 0], &[2, 3]).unwrap();
    assert_eq!(
        m.to_c64_vec().iter().map(|z| z.re).collect::<Vec<_>>(),
        vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    );
    let op = identity_block(DType::F64, &[2, 3, 2, 3], 2, &[0, 0, 0, 0], &[2, 3, 2, 3]).unwrap();
    assert_eq!(op.to_c64_vec().iter().filter(|z| z.re == 1.0).count(), 6);
    let scalar = identity_block(DType::F64, &[], 0, &[], &[]).unwrap();
    assert_eq!(scalar.to_c64_vec(), vec![C64::new(1.0, 0.0)]);
    assert_eq!(
        zeros_block(DType::C32, &[2, 2]).unwrap(),
        LocalTensor::zeros(DType::C32, &[2, 2]).unwrap()
    );
}

#[test]
fn blocks_that_do_not_fit_are_typed_errors() {
    assert_eq!(
        random_block(1, DType::F64, &[4, 4], &[3, 0], &[2, 4]).unwrap_err(),
        BlockError::OutOfBounds {
            mode: 0,
            offset: 3,
            extent: 2,
            global: 4
        }
    );
    assert!(matches!(
        random_block(1, DType::F64, &[4, 4], &[usize::MAX, 0], &[2, 4]),
        Err(BlockError::OutOfBounds { mode: 0, .. })
    ));
    assert_eq!(
        identity_block(DType::F64, &[4, 4], 1, &[0], &[4, 4]).unwrap_err(),
        BlockError::RankMismatch {
            global: 2,
            offset: 1,
            block: 2
        }
    );
    assert_eq!(
        identity_block(DType::F64, &[4, 4], 3, &[0, 0], &[4, 4]).unwrap_err(),
        BlockError::BadSplit { row_modes: 3, rank: 2 }
    );
    let huge = [1usize << 40, 1 << 30];
    assert!(matches!(
        random_block(1, DType::F64, &huge, &[0, 0], &[1, 1]),
        Err(BlockError::GlobalTooLarge { .. })
    ));
    // A global tensor of 2^66 elements is fine when the block is small.
    let big = [1usize << 33, 1 << 33];
    let t = random_block(1, DType::F64, &big, &[(1 << 33) - 1, (1 << 33) - 2], &[1, 2]).unwrap();
    assert_eq!(t.len(), 2);
}
