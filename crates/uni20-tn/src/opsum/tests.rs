//! The MPO builder against Hamiltonians built independently from Kronecker
//! products with explicit Jordan-Wigner strings.

use super::*;
use crate::sites::{matmul, Conserve};

/// The operator of `ops` as a full matrix, built independently of the MPO builder:
/// every fermionic operator at site j is F_0 ... F_(j-1) o_j (its own Jordan-Wigner
/// string), and the term is the plain matrix product in the order written.
fn exact(sum: &OpSum, sites: &[Site]) -> Vec<C64> {
    let dims: Vec<usize> = sites.iter().map(Site::dim).collect();
    let n: usize = dims.iter().product();
    let kron_site = |j: usize, o: &[C64], fermionic: bool| -> Vec<C64> {
        // (X_0 x X_1 x ... ) with X_k = F (k < j, fermionic), o (k = j), Id otherwise.
        let mut full = vec![C64::new(1.0, 0.0)];
        let mut size = 1;
        for (k, s) in sites.iter().enumerate() {
            let d = s.dim();
            let x: Vec<C64> = if k == j {
                o.to_vec()
            } else if k < j && fermionic {
                s.jw_string().unwrap().matrix.clone()
            } else {
                s.op("Id").unwrap().matrix.clone()
            };
            let ns = size * d;
            let mut next = vec![C64::new(0.0, 0.0); ns * ns];
            for r in 0..size {
                for c in 0..size {
                    for a in 0..d {
                        for b in 0..d {
                            next[(r * d + a) * ns + c * d + b] = full[r * size + c] * x[a * d + b];
                        }
                    }
                }
            }
            full = next;
            size = ns;
        }
        full
    };
    let mut h = vec![C64::new(0.0, 0.0); n * n];
    for t in sum.terms() {
        let mut p: Vec<C64> = (0..n * n)
            .map(|k| C64::new(if k % (n + 1) == 0 { 1.0 } else { 0.0 }, 0.0))
            .collect();
        for (name, j) in &t.ops {
            let op = sites[*j].op(name).unwrap();
            p = matmul(n, &p, &kron_site(*j, &op.matrix, op.fermionic));
        }
        for (x, y) in h.iter_mut().zip(p) {
            *x += t.coeff * y;
        }
    }
    h
}

fn assert_same(mpo: &LocalMpo, sum: &OpSum, sites: &[Site], tol: f64) {
    let a = mpo.dense_matrix().unwrap();
    let b = exact(sum, sites);
    let err = a.iter().zip(&b).map(|(x, y)| (x - y).norm()).fold(0.0, f64::max);
    assert!(err <= tol, "max |MPO - exact| = {err:e}");
}

fn heisenberg(l: usize, conserve: Conserve) -> (Vec<Site>, OpSum) {
    let sites = vec![Site::spin(1, conserve).unwrap(); l];
    let mut h = OpSum::new();
    for i in 0..l - 1 {
        h.add(0.5, &[("Sp", i), ("Sm", i + 1)]);
        h.add(0.5, &[("Sm", i), ("Sp", i + 1)]);
        h.add(1.0, &[("Sz", i), ("Sz", i + 1)]);
    }
    (sites, h)
}

#[test]
fn heisenberg_is_exact_with_bond_five_and_charged_bonds() {
    for conserve in [Conserve::None, Conserve::Sz] {
        let (sites, h) = heisenberg(6, conserve);
        let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_eq!(mpo.bond_dims(), vec![1, 5, 5, 5, 5, 5, 1]);
        assert!(mpo.is_real());
        assert_same(&mpo, &h, &sites, 1e-13);
        if conserve == Conserve::Sz {
            let q = &mpo.bond_charges().unwrap()[3];
            let mut c: Vec<i64> = q.iter().map(|x| x.components()[0]).collect();
            c.sort();
            assert_eq!(c, vec![-2, 0, 0, 0, 2], "channels of S-, Sz, S+ and the two identities");
        }
    }
}

#[test]
fn transverse_field_ising_has_bond_three() {
    let l = 7;
    let sites = vec![Site::spin(1, Conserve::None).unwrap(); l];
    let mut h = OpSum::new();
    for i in 0..l {
        if i + 1 < l {
            h.add(-4.0, &[("Sx", i), ("Sx", i + 1)]);
        }
        h.add(-2.0 * 0.7, &[("Sz", i)]);
    }
    let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
    assert_eq!(mpo.max_bond(), 3);
    assert_same(&mpo, &h, &sites, 1e-13);
}

/// Hubbard chain: hopping of both spins with Jordan-Wigner strings, U n_up n_dn.
#[test]
fn hubbard_is_exact_with_bond_six() {
    let l = 4;
    for conserve in [Conserve::None, Conserve::NSz] {
        let sites = vec![Site::electron(conserve).unwrap(); l];
        let mut h = OpSum::new();
        for i in 0..l {
            if i + 1 < l {
                for (cd, c) in [("Cdagup", "Cup"), ("Cdagdn", "Cdn")] {
                    h.add(-1.0, &[(cd, i), (c, i + 1)]);
                    h.add(-1.0, &[(cd, i + 1), (c, i)]);
                }
            }
            h.add(4.0, &[("NupNdn", i)]);
        }
        let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_eq!(mpo.max_bond(), 6, "{conserve:?}");
        assert_same(&mpo, &h, &sites, 1e-13);
    }
}

/// Long-range fermion hopping, terms written out of site order, and operators
/// repeated on one site: the signs and strings of the builder against explicit strings.
#[test]
fn fermion_signs_and_strings_match_explicit_jordan_wigner() {
    let l = 5;
    let sites = vec![Site::fermion(Conserve::N).unwrap(); l];
    let mut h = OpSum::new();
    h.add(0.3, &[("Cdag", 0), ("C", 3)]);
    h.add(0.3, &[("Cdag", 3), ("C", 0)]);
    h.add(-0.7, &[("C", 4), ("Cdag", 1)]);
    h.add(-0.7, &[("C", 1), ("Cdag", 4)]);
    h.add(0.25, &[("Cdag", 2), ("Cdag", 0), ("C", 0), ("C", 2)]);
    h.add(1.1, &[("N", 2), ("Cdag", 1), ("C", 1)]);
    h.add(0.5, &[("Cdag", 1), ("C", 3), ("N", 4)]);
    h.add(0.5, &[("N", 4), ("Cdag", 3), ("C", 1)]);
    let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
    assert_same(&mpo, &h, &sites, 1e-13);
}

/// Stated accuracy of the compressed `sum_(i<j) Sz_i Sz_j / (j-i)^2` at L = 8
/// (exact bond dimension 6): the largest element error of the dense
/// Hamiltonian (whose largest element is about 1.6) is at most 5e-3 with
/// `MpoOptions::cutoff` 1e-2 (bond 4; measured 3.0e-3) and 1e-4 with 1e-3
/// (bond 5; measured 4.3e-5).
const TOL_1E2: f64 = 5e-3;
const TOL_1E3: f64 = 1e-4;

/// exp(-r/xi) Sz_i Sz_j has bond dimension 3 whatever the length; 1/r^2 is compressed
/// to the stated tolerance (the `TOL_*` constants above).
#[test]
fn long_range_couplings_compress() {
    for l in [6usize, 12, 24] {
        let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); l];
        let mut h = OpSum::new();
        for i in 0..l {
            for j in i + 1..l {
                h.add(0.6f64.powi((j - i) as i32), &[("Sz", i), ("Sz", j)]);
            }
        }
        let mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
        assert_eq!(mpo.max_bond(), 3, "L = {l}");
        if l == 6 {
            assert_same(&mpo, &h, &sites, 1e-12);
        }
    }
    let l = 8;
    let sites = vec![Site::spin(1, Conserve::None).unwrap(); l];
    let mut h = OpSum::new();
    for i in 0..l {
        for j in i + 1..l {
            h.add(1.0 / ((j - i) * (j - i)) as f64, &[("Sz", i), ("Sz", j)]);
        }
    }
    let exact_mpo = h.to_mpo(&sites, &MpoOptions::default()).unwrap();
    assert_same(&exact_mpo, &h, &sites, 1e-12);
    for (cutoff, tol) in [(1e-2, TOL_1E2), (1e-3, TOL_1E3)] {
        let loose = h.to_mpo(&sites, &MpoOptions { cutoff }).unwrap();
        let a = loose.dense_matrix().unwrap();
        let err = a
            .iter()
            .zip(&exact(&h, &sites))
            .map(|(x, y)| (x - y).norm())
            .fold(0.0, f64::max);
        eprintln!(
            "1/r^2, L = {l}, cutoff {cutoff:e}: bond {} (exact {}), max |MPO - H| = {err:e}",
            loose.max_bond(),
            exact_mpo.max_bond()
        );
        assert!(
            loose.max_bond() < exact_mpo.max_bond(),
            "cutoff {cutoff}: {} vs {}",
            loose.max_bond(),
            exact_mpo.max_bond()
        );
        assert!(
            err <= tol,
            "cutoff {cutoff}: max |MPO - H| = {err:e} above the stated {tol:e}"
        );
    }
}

#[test]
fn bad_terms_are_typed_errors() {
    let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); 3];
    let err = |h: &OpSum| h.to_mpo(&sites, &MpoOptions::default()).unwrap_err();
    assert!(matches!(
        err(OpSum::new().add(1.0, &[("Sz", 3)])),
        TnError::BadTerm { term: 0, .. }
    ));
    assert!(matches!(
        err(OpSum::new().add(1.0, &[("Q", 0)])),
        TnError::UnknownOperator { .. }
    ));
    assert!(
        matches!(err(OpSum::new().add(1.0, &[("Sp", 0)])), TnError::BadTerm { .. }),
        "charged term"
    );
    assert!(matches!(
        err(OpSum::new().add(1.0, &[("Sx", 0)])),
        TnError::ChargeMismatch { .. }
    ));
    assert!(matches!(
        err(OpSum::new().add(f64::NAN, &[("Sz", 0)])),
        TnError::BadTerm { .. }
    ));
    assert!(matches!(err(OpSum::new().add(1.0, &[])), TnError::BadTerm { .. }));
    let f = vec![Site::fermion(Conserve::None).unwrap(); 2];
    assert!(matches!(
        OpSum::new().add(1.0, &[("C", 0)]).to_mpo(&f, &MpoOptions::default()),
        Err(TnError::BadTerm { .. })
    ));
    let mixed = vec![
        Site::spin(1, Conserve::None).unwrap(),
        Site::fermion(Conserve::None).unwrap(),
        Site::fermion(Conserve::None).unwrap(),
    ];
    // No string crosses the spin (site 0, which has no F): fine.
    assert!(OpSum::new()
        .add(1.0, &[("Cdag", 1), ("C", 2)])
        .to_mpo(&mixed, &MpoOptions::default())
        .is_ok());
    assert!(matches!(
        OpSum::new()
            .add(1.0, &[("Sz", 0)])
            .to_mpo(&sites, &MpoOptions { cutoff: -1.0 }),
        Err(TnError::InvalidOption { .. })
    ));
}
