//! `lanczos_lowest` against exact spectra: Hermitian matrices (real and
//! complex) built as `Q diag(lambda) Q^H` with a chosen spectrum `lambda`
//! and a unitary `Q` (the eigenvectors of a random Hermitian matrix), applied
//! matrix-free as a distributed contraction. Checked: the residual stop, the
//! energy-change stop (the value is variational and within the Kato-Temple
//! bound `r^2 / (lambda_1 - value)` of the lowest eigenvalue, with `r` the
//! true residual of the returned vector; fewer applications than the
//! residual stop), `min_krylov`, and the dense solve of small problems (no
//! application, the exact pair, the start's tiling, a degenerate lowest
//! eigenspace resolved by projecting the start vector).

use uni20::dispatch::decomp::{eigh, EighBackendList, EighOptions};
use uni20::dist::contract;
use uni20::tn::{lanczos_lowest, LanczosOptions, LinearOperator, TnError};
use uni20::worker::Controller;
use uni20::{DType, DistTensor, LocalTensor, C64};

/// A deterministic generator of uniform numbers in `[-1, 1)` (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// A Hermitian `n x n` matrix (row-major) with eigenvalues `lambda` and
/// its eigenvectors (column `k` of the returned `q` belongs to `lambda[k]`).
fn with_spectrum(lambda: &[f64], complex: bool, seed: u64) -> (Vec<C64>, Vec<C64>) {
    let n = lambda.len();
    let mut rng = Rng(seed);
    let mut a = vec![C64::new(0.0, 0.0); n * n];
    for i in 0..n {
        for j in i..n {
            let im = if complex && i != j { rng.next() } else { 0.0 };
            let z = C64::new(rng.next(), im);
            a[i * n + j] = z;
            a[j * n + i] = z.conj();
        }
    }
    let local = if complex {
        LocalTensor::from_c64(&[n, n], a).unwrap()
    } else {
        LocalTensor::from_f64(&[n, n], a.iter().map(|z| z.re).collect()).unwrap()
    };
    let q = eigh(&local, &EighOptions::default(), &EighBackendList::default_cpu(1))
        .unwrap()
        .vectors
        .to_c64_vec();
    let mut m = vec![C64::new(0.0, 0.0); n * n];
    for i in 0..n {
        for j in 0..n {
            m[i * n + j] = (0..n).map(|k| q[i * n + k] * lambda[k] * q[j * n + k].conj()).sum();
        }
    }
    (m, q)
}

/// `x -> M x` by a distributed contraction; offers its matrix when `dense`.
struct MatrixOp {
    m: DistTensor,
    entries: Vec<C64>,
    n: usize,
    dense: bool,
}

impl MatrixOp {
    fn new(ctl: &Controller<'_>, entries: Vec<C64>, n: usize, complex: bool, dense: bool) -> MatrixOp {
        let local = if complex {
            LocalTensor::from_c64(&[n, n], entries.clone()).unwrap()
        } else {
            LocalTensor::from_f64(&[n, n], entries.iter().map(|z| z.re).collect()).unwrap()
        };
        MatrixOp {
            m: DistTensor::from_local(ctl, &local, 16).unwrap(),
            entries,
            n,
            dense,
        }
    }

    /// `||M x - value x||` for the gathered `x`.
    fn residual(&self, x: &[C64], value: f64) -> f64 {
        let n = self.n;
        (0..n)
            .map(|i| {
                let mx: C64 = (0..n).map(|j| self.entries[i * n + j] * x[j]).sum();
                (mx - x[i] * value).norm_sqr()
            })
            .sum::<f64>()
            .sqrt()
    }
}

impl LinearOperator for MatrixOp {
    fn apply(&self, ctl: &Controller<'_>, x: &DistTensor) -> Result<DistTensor, TnError> {
        Ok(contract(ctl, "ij,j->i", &self.m, x)?)
    }

    fn matrix(&self, _: &Controller<'_>, _: &DistTensor, rows: &[usize]) -> Result<Option<Vec<C64>>, TnError> {
        if !self.dense {
            return Ok(None);
        }
        let n = self.n;
        Ok(Some(
            rows.iter()
                .flat_map(|&i| rows.iter().map(move |&j| (i, j)))
                .map(|(i, j)| self.entries[i * n + j])
                .collect(),
        ))
    }
}

/// A start vector (not an eigenvector), real or complex, tiled by `block`.
fn start(ctl: &Controller<'_>, n: usize, complex: bool, block: usize, seed: u64) -> DistTensor {
    let mut rng = Rng(seed);
    let local = if complex {
        LocalTensor::from_c64(&[n], (0..n).map(|_| C64::new(rng.next(), rng.next())).collect()).unwrap()
    } else {
        LocalTensor::from_f64(&[n], (0..n).map(|_| rng.next()).collect()).unwrap()
    };
    DistTensor::from_local(ctl, &local, block).unwrap()
}

/// `|<q_k|x>|` for the unit vector `x`.
fn overlap(q: &[C64], n: usize, k: usize, x: &[C64]) -> f64 {
    (0..n).map(|i| q[i * n + k].conj() * x[i]).sum::<C64>().norm()
}

/// A spectrum: lowest -1, gap `gap`, the rest spread over `[0, 1]`.
fn spectrum(n: usize, gap: f64) -> Vec<f64> {
    let mut l = vec![-1.0, -1.0 + gap];
    l.extend((0..n - 2).map(|k| k as f64 / (n - 3) as f64));
    l
}

fn iterative_opts(tol: f64, e_tol: f64) -> LanczosOptions {
    LanczosOptions {
        max_krylov: 40,
        max_restarts: 3,
        tol,
        e_tol,
        dense_max: 0,
        ..LanczosOptions::default()
    }
}

#[test]
fn residual_stop_finds_the_lowest_pair_real_and_complex() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            for complex in [false, true] {
                let n = 80;
                let lambda = spectrum(n, 0.3);
                let (m, q) = with_spectrum(&lambda, complex, 7);
                let op = MatrixOp::new(ctl, m, n, complex, false);
                let x0 = start(ctl, n, complex, 16, 11);
                let r = lanczos_lowest(ctl, &op, &x0, &iterative_opts(1e-10, 0.0)).unwrap();
                assert!(r.converged && !r.dense, "complex {complex}");
                assert!((r.value - lambda[0]).abs() < 1e-12, "complex {complex}: {}", r.value);
                let x = r.vector.to_local(ctl).unwrap().to_c64_vec();
                assert!((1.0 - overlap(&q, n, 0, &x)).abs() < 1e-10, "complex {complex}");
                assert!(op.residual(&x, r.value) < 1e-9, "complex {complex}");
                assert_eq!(r.vector.dtype(), if complex { DType::C64 } else { DType::F64 });
            }
        })
        .unwrap();
}

#[test]
fn energy_change_stop_is_within_the_kato_temple_bound_and_cheaper() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            for complex in [false, true] {
                for (gap, seed) in [(0.3, 3u64), (0.05, 5), (0.5, 9)] {
                    let n = 90;
                    let lambda = spectrum(n, gap);
                    let (m, _) = with_spectrum(&lambda, complex, seed);
                    let op = MatrixOp::new(ctl, m, n, complex, false);
                    let x0 = start(ctl, n, complex, 32, seed + 1);
                    // Residual alone (to 1e-10) against the energy change (1e-9),
                    // the residual tolerance out of reach.
                    let full = lanczos_lowest(ctl, &op, &x0, &iterative_opts(1e-10, 0.0)).unwrap();
                    let r = lanczos_lowest(ctl, &op, &x0, &iterative_opts(1e-15, 1e-9)).unwrap();
                    let what = format!("complex {complex}, gap {gap}");
                    assert!(r.converged, "{what}");
                    assert!(
                        r.applications < full.applications,
                        "{what}: {} vs {} applications",
                        r.applications,
                        full.applications
                    );
                    let x = r.vector.to_local(ctl).unwrap().to_c64_vec();
                    let true_res = op.residual(&x, r.value);
                    // Variational, and Kato-Temple with the true residual.
                    assert!(r.value >= lambda[0] - 1e-12, "{what}: {}", r.value);
                    assert!(r.value < lambda[1], "{what}");
                    let bound = true_res * true_res / (lambda[1] - r.value);
                    assert!(
                        r.value - lambda[0] <= bound + 1e-13,
                        "{what}: error {} > bound {bound}",
                        r.value - lambda[0]
                    );
                    // The reported residual is the true one (to rounding).
                    assert!(
                        (r.residual - true_res).abs() < 1e-9 + 0.05 * true_res,
                        "{what}: {} vs {true_res}",
                        r.residual
                    );
                    // And the energy is converged well below the stopping change.
                    assert!(r.value - lambda[0] < 1e-7, "{what}: error {}", r.value - lambda[0]);
                }
            }
        })
        .unwrap();
}

#[test]
fn min_krylov_holds_off_the_energy_change_stop() {
    uni20::universe()
        .ranks(1)
        .run(|ctl| {
            let n = 50;
            let (m, _) = with_spectrum(&spectrum(n, 0.2), false, 21);
            let op = MatrixOp::new(ctl, m, n, false, false);
            let x0 = start(ctl, n, false, 16, 22);
            for min_krylov in [2, 3, 7] {
                // Any change counts as settled: the pass ends at min_krylov.
                let opts = LanczosOptions {
                    min_krylov,
                    ..iterative_opts(1e-15, 10.0)
                };
                let r = lanczos_lowest(ctl, &op, &x0, &opts).unwrap();
                assert_eq!(r.applications, min_krylov);
                assert!(r.converged);
            }
            let off = LanczosOptions {
                max_restarts: 0,
                max_krylov: 12,
                ..iterative_opts(1e-15, 0.0)
            };
            let r = lanczos_lowest(ctl, &op, &x0, &off).unwrap();
            assert_eq!(r.applications, 12, "e_tol = 0 turns the stop off");
            assert!(!r.converged);
            for bad in [
                LanczosOptions {
                    min_krylov: 1,
                    ..LanczosOptions::default()
                },
                LanczosOptions {
                    min_krylov: 21,
                    ..LanczosOptions::default()
                },
                LanczosOptions {
                    e_tol: -1.0,
                    ..LanczosOptions::default()
                },
                LanczosOptions {
                    e_tol: f64::NAN,
                    ..LanczosOptions::default()
                },
            ] {
                assert!(matches!(
                    lanczos_lowest(ctl, &op, &x0, &bad),
                    Err(TnError::InvalidOption { .. })
                ));
            }
        })
        .unwrap();
}

/// `M x` plus a perturbation of `1e-16` times a fresh pseudo-random vector
/// at every application: the rounding of a large problem's products, which
/// moves the Ritz value by about `1e-15` from step to step once it has
/// converged.
struct NoisyOp {
    inner: MatrixOp,
    calls: std::cell::Cell<u64>,
}

impl LinearOperator for NoisyOp {
    fn apply(&self, ctl: &Controller<'_>, x: &DistTensor) -> Result<DistTensor, TnError> {
        let mx = self.inner.apply(ctl, x)?;
        self.calls.set(self.calls.get() + 1);
        let noise = start(ctl, self.inner.n, false, 32, 1000 + self.calls.get());
        Ok(uni20::dist::axpby(ctl, 1.0, &mx, 1e-16, &noise, "i->i")?)
    }
}

#[test]
fn an_energy_change_tolerance_below_roundoff_stops_at_the_roundoff_floor() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            // A wide gap: the Ritz value reaches the eigenvalue to rounding
            // within a few steps, while a residual of 1e-300 stays out of
            // reach and the Krylov space does not become invariant.
            let n = 90;
            let lambda = spectrum(n, 0.5);
            let (m, _) = with_spectrum(&lambda, false, 31);
            let op = NoisyOp {
                inner: MatrixOp::new(ctl, m, n, false, false),
                calls: std::cell::Cell::new(0),
            };
            let x0 = start(ctl, n, false, 32, 32);
            let opts = LanczosOptions {
                max_restarts: 0,
                ..iterative_opts(1e-300, 1e-300)
            };
            let r = lanczos_lowest(ctl, &op, &x0, &opts).unwrap();
            assert!(r.converged, "stopped by the floor, not by max_krylov");
            assert!(r.applications < opts.max_krylov, "{} applications", r.applications);
            assert!((r.value - lambda[0]).abs() < 1e-12, "{}", r.value);
            // The floor only raises a positive tolerance: with e_tol = 0 the
            // same pass runs to max_krylov.
            let off = lanczos_lowest(ctl, &op, &x0, &LanczosOptions { e_tol: 0.0, ..opts }).unwrap();
            assert_eq!(off.applications, opts.max_krylov);
            assert!(!off.converged);
        })
        .unwrap();
}

#[test]
fn small_problems_are_solved_densely() {
    uni20::universe()
        .ranks(2)
        .run(|ctl| {
            for complex in [false, true] {
                let n = 40;
                let lambda = spectrum(n, 0.1);
                let (m, q) = with_spectrum(&lambda, complex, 31);
                let op = MatrixOp::new(ctl, m, n, complex, true);
                // Tiles of 7 (not what from_local would choose for 40 elements).
                let x0 = start(ctl, n, complex, 7, 32);
                let opts = LanczosOptions {
                    dense_max: n,
                    ..LanczosOptions::default()
                };
                let r = lanczos_lowest(ctl, &op, &x0, &opts).unwrap();
                assert!(r.dense && r.converged, "complex {complex}");
                assert_eq!(r.applications, 0);
                assert!((r.value - lambda[0]).abs() < 1e-13, "complex {complex}: {}", r.value);
                assert_eq!(r.vector.blocking(), x0.blocking(), "the start's tiling");
                let x = r.vector.to_local(ctl).unwrap().to_c64_vec();
                assert!((1.0 - overlap(&q, n, 0, &x)).abs() < 1e-12, "complex {complex}");
                assert!(op.residual(&x, r.value) < 1e-12 && r.residual < 1e-12);
                // One unknown more than dense_max: iterated.
                let small = LanczosOptions {
                    dense_max: n - 1,
                    ..opts
                };
                let r = lanczos_lowest(ctl, &op, &x0, &small).unwrap();
                assert!(!r.dense && r.applications > 0);
                assert!((r.value - lambda[0]).abs() < 1e-10);
            }
        })
        .unwrap();
}

#[test]
fn a_degenerate_lowest_level_keeps_the_start_vectors_member() {
    uni20::universe()
        .ranks(1)
        .run(|ctl| {
            let n = 30;
            let mut lambda = spectrum(n, 0.4);
            lambda[1] = lambda[0];
            let (m, q) = with_spectrum(&lambda, false, 41);
            let op = MatrixOp::new(ctl, m, n, false, true);
            let x0 = start(ctl, n, false, 8, 42);
            let r = lanczos_lowest(
                ctl,
                &op,
                &x0,
                &LanczosOptions {
                    dense_max: n,
                    ..LanczosOptions::default()
                },
            )
            .unwrap();
            assert!(r.dense);
            assert!((r.value - lambda[0]).abs() < 1e-13);
            // The projection of x0 onto span(q_0, q_1), normalised.
            let x0 = x0.to_local(ctl).unwrap().to_c64_vec();
            let c: Vec<C64> = (0..2)
                .map(|k| (0..n).map(|i| q[i * n + k].conj() * x0[i]).sum())
                .collect();
            let norm = (c[0].norm_sqr() + c[1].norm_sqr()).sqrt();
            let want: Vec<C64> = (0..n).map(|i| (q[i * n] * c[0] + q[i * n + 1] * c[1]) / norm).collect();
            let x = r.vector.to_local(ctl).unwrap().to_c64_vec();
            let diff = (0..n).map(|i| (x[i] - want[i]).norm_sqr()).sum::<f64>().sqrt();
            assert!(diff < 1e-10, "distance to the projected start {diff}");
        })
        .unwrap();
}
