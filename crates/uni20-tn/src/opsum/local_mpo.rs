//! [`LocalMpo`]: the compiled MPO on the root.

use uni20_dispatch::{DType, LocalTensor, C64};
use uni20_dist::symmetry::Charge;
use uni20_dist::DistTensor;
use uni20_worker::Controller;

use crate::error::TnError;
use crate::mpo::Mpo;

/// An MPO on the root, before it is distributed: per site `W[a, b, s, t]`
/// (left bond, right bond, outgoing, incoming), f64 when every entry is
/// real, complex otherwise; boundary vectors `[1.0]`; the charge of every
/// bond state when the sites carry charges.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMpo {
    pub(super) sites: Vec<LocalTensor>,
    pub(super) bond_charges: Option<Vec<Vec<Charge>>>,
    pub(super) discarded: f64,
}

impl LocalMpo {
    /// The site tensors `W_i[a, b, s, t]`.
    pub fn sites(&self) -> &[LocalTensor] {
        &self.sites
    }

    /// Number of sites.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// Always false (an MPO has at least one site).
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Bond dimensions `D_0 .. D_L` (`D_0 = D_L = 1`).
    pub fn bond_dims(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.sites.iter().map(|w| w.shape()[0]).collect();
        v.push(self.sites.last().map_or(1, |w| w.shape()[1]));
        v
    }

    /// The largest bond dimension.
    pub fn max_bond(&self) -> usize {
        self.bond_dims().into_iter().max().unwrap_or(1)
    }

    /// The charges of the bond states (per bond, per state), when the sites
    /// carry charges: each channel carries the charge of the operators to
    /// its right.
    pub fn bond_charges(&self) -> Option<&[Vec<Charge>]> {
        self.bond_charges.as_deref()
    }

    /// Sum over bonds of the squared singular values that the compression
    /// dropped (0 for an exact MPO): the squared Frobenius norm of what was
    /// left out, bond by bond, in units of the coefficients squared.
    pub fn discarded(&self) -> f64 {
        self.discarded
    }

    /// True when every site tensor is real (f64).
    pub fn is_real(&self) -> bool {
        self.sites.iter().all(|w| w.dtype() == DType::F64)
    }

    /// The operator as a dense `d^L x d^L` matrix (row-major, the first site
    /// the most significant), for checks against exact diagonalisation.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] when `d^L` exceeds 4096.
    pub fn dense_matrix(&self) -> Result<Vec<C64>, TnError> {
        let dims: Vec<usize> = self.sites.iter().map(|w| w.shape()[2]).collect();
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= 4096);
        let Some(n) = n else {
            return Err(TnError::InvalidOption {
                name: "dense MPO size",
                value: format!("{dims:?}"),
                expected: "a product of site dimensions of at most 4096",
            });
        };
        // T[a, (s), (t)] grown site by site: rows = bond state x ket/bra strings.
        let mut cur: Vec<C64> = vec![C64::new(1.0, 0.0)]; // [a=1][s=1][t=1]
        let (mut rows, mut a) = (1usize, 1usize);
        for w in &self.sites {
            let (dl, dr, d) = (w.shape()[0], w.shape()[1], w.shape()[2]);
            debug_assert_eq!(dl, a);
            let wd = w.to_c64_vec();
            let nrows = rows * d;
            let mut next = vec![C64::new(0.0, 0.0); dr * nrows * nrows];
            for x in 0..a {
                for s0 in 0..rows {
                    for t0 in 0..rows {
                        let v = cur[(x * rows + s0) * rows + t0];
                        if v == C64::new(0.0, 0.0) {
                            continue;
                        }
                        for y in 0..dr {
                            for s in 0..d {
                                for t in 0..d {
                                    let wv = wd[((x * dr + y) * d + s) * d + t];
                                    if wv != C64::new(0.0, 0.0) {
                                        next[(y * nrows + s0 * d + s) * nrows + t0 * d + t] += v * wv;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            cur = next;
            rows = nrows;
            a = dr;
        }
        debug_assert_eq!(rows, n);
        Ok(cur)
    }

    /// Distributes the MPO: each distinct site tensor is scattered once
    /// (blocks of `block` elements per mode) and shared by the sites that
    /// have it.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a complex MPO (the DMRG of this crate
    /// is real); the errors of [`DistTensor::from_local`] and [`Mpo::new`].
    pub fn to_mpo(&self, ctl: &Controller<'_>, block: usize) -> Result<Mpo, TnError> {
        if !self.is_real() {
            return Err(TnError::InvalidOption {
                name: "MPO dtype",
                value: "complex".into(),
                expected: "a real MPO (the DMRG runs in f64)",
            });
        }
        let mut distinct: Vec<(usize, DistTensor)> = Vec::new();
        let mut sites = Vec::with_capacity(self.sites.len());
        for (i, w) in self.sites.iter().enumerate() {
            if let Some((_, t)) = distinct.iter().find(|(j, _)| self.sites[*j] == *w) {
                sites.push(t.clone());
                continue;
            }
            let t = DistTensor::from_local(ctl, w, block)?;
            distinct.push((i, t.clone()));
            sites.push(t);
        }
        Mpo::new(sites, vec![1.0], vec![1.0])
    }
}
