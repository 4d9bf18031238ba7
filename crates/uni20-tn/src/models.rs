//! Standard lattice models as operator sums on open chains ([`Model`]):
//! each is a site type per site and an [`OpSum`], a few lines over the
//! toolkit, and a template for a user's own model.
//!
//! | model | Hamiltonian |
//! |---|---|
//! | [`xxz`] | `sum_i Jxy (Sx_i Sx_(i+1) + Sy_i Sy_(i+1)) + Jz Sz_i Sz_(i+1) - hz sum_i Sz_i`, any spin |
//! | [`heisenberg`] | `J sum_i S_i . S_(i+1)` (XXZ with `Jxy = Jz = J`, `hz = 0`) |
//! | [`j1j2`] | `J1 sum_i S_i . S_(i+1) + J2 sum_i S_i . S_(i+2)` |
//! | [`spin1`] | `J sum_i S_i . S_(i+1) + D sum_i (Sz_i)^2`, spin 1 |
//! | [`tfi`] | `-J sum_i sx_i sx_(i+1) - g sum_i sz_i` with Pauli matrices `s = 2 S` |
//! | [`hubbard`] | `-t sum_(i,sigma) (c+_(i,sigma) c_(i+1,sigma) + h.c.) + U sum_i n_(i,up) n_(i,dn) - mu sum_i n_i` |

use crate::error::TnError;
use crate::mpo::check_sites;
use crate::opsum::OpSum;
use crate::sites::{Conserve, Site};

/// A model: the site type of every site and the Hamiltonian.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// One site type per site.
    pub sites: Vec<Site>,
    /// The Hamiltonian.
    pub hamiltonian: OpSum,
}

fn check_finite(name: &'static str, values: &[f64]) -> Result<(), TnError> {
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        return Err(TnError::InvalidOption {
            name,
            value: v.to_string(),
            expected: "finite couplings",
        });
    }
    Ok(())
}

/// Adds `j (S_i . S_k)` with the Sz part scaled to `jz`: `jxy/2 (S+ S- + S- S+) + jz Sz Sz`.
fn exchange(h: &mut OpSum, i: usize, k: usize, jxy: f64, jz: f64) {
    if jxy != 0.0 {
        h.add(0.5 * jxy, &[("Sp", i), ("Sm", k)]);
        h.add(0.5 * jxy, &[("Sm", i), ("Sp", k)]);
    }
    if jz != 0.0 {
        h.add(jz, &[("Sz", i), ("Sz", k)]);
    }
}

/// The XXZ chain of `len` spins `S = two_s / 2` in a field `hz` along z.
///
/// # Errors
/// [`TnError::InvalidOption`] for a bad length, spin or non-finite
/// coupling; the errors of [`Site::spin`].
pub fn xxz(len: usize, two_s: u32, jxy: f64, jz: f64, hz: f64, conserve: Conserve) -> Result<Model, TnError> {
    check_sites(len)?;
    check_finite("XXZ coupling", &[jxy, jz, hz])?;
    let site = Site::spin(two_s, conserve)?;
    let mut h = OpSum::new();
    for i in 0..len {
        if i + 1 < len {
            exchange(&mut h, i, i + 1, jxy, jz);
        }
        if hz != 0.0 {
            h.add(-hz, &[("Sz", i)]);
        }
    }
    Ok(Model {
        sites: vec![site; len],
        hamiltonian: h,
    })
}

/// The Heisenberg chain `J sum_i S_i . S_(i+1)` of spins `two_s / 2`.
///
/// # Errors
/// As [`xxz`].
pub fn heisenberg(len: usize, two_s: u32, j: f64, conserve: Conserve) -> Result<Model, TnError> {
    xxz(len, two_s, j, j, 0.0, conserve)
}

/// The J1-J2 chain of spins 1/2 (nearest and next-nearest Heisenberg
/// couplings).
///
/// # Errors
/// As [`xxz`].
pub fn j1j2(len: usize, j1: f64, j2: f64, conserve: Conserve) -> Result<Model, TnError> {
    check_sites(len)?;
    check_finite("J1-J2 coupling", &[j1, j2])?;
    let site = Site::spin(1, conserve)?;
    let mut h = OpSum::new();
    for i in 0..len {
        if i + 1 < len {
            exchange(&mut h, i, i + 1, j1, j1);
        }
        if i + 2 < len {
            exchange(&mut h, i, i + 2, j2, j2);
        }
    }
    Ok(Model {
        sites: vec![site; len],
        hamiltonian: h,
    })
}

/// The spin-1 chain with single-ion anisotropy `D` (the Haldane chain at
/// `D = 0`).
///
/// # Errors
/// As [`xxz`].
pub fn spin1(len: usize, j: f64, d: f64, conserve: Conserve) -> Result<Model, TnError> {
    let mut m = xxz(len, 2, j, j, 0.0, conserve)?;
    check_finite("single-ion anisotropy", &[d])?;
    if d != 0.0 {
        for i in 0..len {
            m.hamiltonian.add(d, &[("Sz", i), ("Sz", i)]);
        }
    }
    Ok(m)
}

/// The transverse-field Ising chain `-J sum sx sx - g sum sz` (Pauli
/// matrices); `Conserve::Parity` conserves `prod_i sz_i`.
///
/// # Errors
/// As [`xxz`]; [`TnError::InvalidOption`] for `Conserve::Sz`.
pub fn tfi(len: usize, j: f64, g: f64, conserve: Conserve) -> Result<Model, TnError> {
    check_sites(len)?;
    check_finite("TFI coupling", &[j, g])?;
    if conserve == Conserve::Sz {
        return Err(TnError::InvalidOption {
            name: "conserve",
            value: "Sz".into(),
            expected: "None or Parity for the transverse-field Ising chain",
        });
    }
    let site = Site::spin(1, conserve)?;
    let mut h = OpSum::new();
    for i in 0..len {
        if i + 1 < len && j != 0.0 {
            h.add(-4.0 * j, &[("Sx", i), ("Sx", i + 1)]);
        }
        if g != 0.0 {
            h.add(-2.0 * g, &[("Sz", i)]);
        }
    }
    Ok(Model {
        sites: vec![site; len],
        hamiltonian: h,
    })
}

/// The Fermi-Hubbard chain with hopping `t`, on-site repulsion `u` and
/// chemical potential `mu`.
///
/// # Errors
/// As [`xxz`]; the errors of [`Site::electron`].
pub fn hubbard(len: usize, t: f64, u: f64, mu: f64, conserve: Conserve) -> Result<Model, TnError> {
    check_sites(len)?;
    check_finite("Hubbard coupling", &[t, u, mu])?;
    let site = Site::electron(conserve)?;
    let mut h = OpSum::new();
    for i in 0..len {
        if i + 1 < len && t != 0.0 {
            for (cd, c) in [("Cdagup", "Cup"), ("Cdagdn", "Cdn")] {
                h.add(-t, &[(cd, i), (c, i + 1)]);
                h.add(-t, &[(cd, i + 1), (c, i)]);
            }
        }
        if u != 0.0 {
            h.add(u, &[("NupNdn", i)]);
        }
        if mu != 0.0 {
            h.add(-mu, &[("Ntot", i)]);
        }
    }
    Ok(Model {
        sites: vec![site; len],
        hamiltonian: h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opsum::MpoOptions;

    /// Lowest eigenvalue of a small dense Hermitian matrix, by faer through the dispatcher.
    fn lowest(h: &[uni20_dispatch::C64], n: usize) -> f64 {
        let re: Vec<f64> = h.iter().map(|z| z.re).collect();
        assert!(h.iter().all(|z| z.im.abs() < 1e-12));
        let t = uni20_dispatch::LocalTensor::from_f64(&[n, n], re).unwrap();
        let r = uni20_dispatch::decomp::eigh(
            &t,
            &Default::default(),
            &uni20_dispatch::decomp::EighBackendList::default_cpu(1),
        )
        .unwrap();
        r.values[0]
    }

    /// Ground energy of the open TFI chain from free fermions: minus the sum of the singular
    /// values of the L x L matrix with g on the diagonal and J above it (Pfeuty 1970).
    fn tfi_exact(l: usize, j: f64, g: f64) -> f64 {
        let mut a = vec![0.0; l * l];
        for i in 0..l {
            a[i * l + i] = g;
            if i + 1 < l {
                a[i * l + i + 1] = j;
            }
        }
        let t = uni20_dispatch::LocalTensor::from_f64(&[l, l], a).unwrap();
        let s = uni20_dispatch::decomp::svd(
            &t,
            &Default::default(),
            &uni20_dispatch::decomp::SvdBackendList::default_cpu(1),
        )
        .unwrap()
        .s;
        -s.iter().sum::<f64>()
    }

    #[test]
    fn models_have_their_minimal_bonds_and_exact_spectra() {
        let bond = |m: &Model| {
            m.hamiltonian
                .to_mpo(&m.sites, &MpoOptions::default())
                .unwrap()
                .max_bond()
        };
        assert_eq!(bond(&heisenberg(8, 1, 1.0, Conserve::Sz).unwrap()), 5);
        assert_eq!(bond(&tfi(8, 1.0, 0.5, Conserve::Parity).unwrap()), 3);
        assert_eq!(bond(&hubbard(6, 1.0, 4.0, 0.0, Conserve::NSz).unwrap()), 6);
        assert_eq!(bond(&spin1(6, 1.0, 0.3, Conserve::Sz).unwrap()), 5);
        assert_eq!(bond(&j1j2(8, 1.0, 0.5, Conserve::Sz).unwrap()), 8);
        let dense = |m: &Model| {
            m.hamiltonian
                .to_mpo(&m.sites, &MpoOptions::default())
                .unwrap()
                .dense_matrix()
                .unwrap()
        };
        // TFI: the MPO's lowest eigenvalue is the free-fermion value (critical and ordered).
        for g in [1.0, 0.5] {
            let e = lowest(&dense(&tfi(8, 1.0, g, Conserve::None).unwrap()), 256);
            assert!(
                (e - tfi_exact(8, 1.0, g)).abs() < 1e-10,
                "g = {g}: {e} vs {}",
                tfi_exact(8, 1.0, g)
            );
        }
        // Heisenberg L = 8: the known ground energy -3.374932598688 (the exact table of the guide, "Getting started").
        assert!((lowest(&dense(&heisenberg(8, 1, 1.0, Conserve::None).unwrap()), 256) + 3.374932598688).abs() < 1e-10);
        // Two-site Hubbard at mu = U/2 (half filling): the N = 2 singlet
        // (U - sqrt(U^2 + 16 t^2)) / 2 - 2 mu is the lowest of all particle numbers.
        let h = dense(&hubbard(2, 1.0, 4.0, 2.0, Conserve::None).unwrap());
        assert!((lowest(&h, 16) - ((4.0 - (32.0f64).sqrt()) / 2.0 - 4.0)).abs() < 1e-12);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(xxz(0, 1, 1.0, 1.0, 0.0, Conserve::None).is_err());
        assert!(xxz(4, 1, f64::NAN, 1.0, 0.0, Conserve::None).is_err());
        assert!(tfi(4, 1.0, 1.0, Conserve::Sz).is_err());
        assert!(hubbard(4, 1.0, f64::INFINITY, 0.0, Conserve::N).is_err());
    }
}
