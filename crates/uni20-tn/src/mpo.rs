//! Matrix-product operators ([`Mpo`]): one distributed tensor
//! `W[a, b, s, t]` per site (left bond, right bond, outgoing (bra) spin,
//! incoming (ket) spin) plus the two boundary vectors that close the first
//! left bond and the last right bond. [`Mpo::heisenberg`] builds the
//! spin-1/2 Heisenberg chain `H = sum_i S_i . S_(i+1)` with open ends, bond
//! dimension 5, in the lower-triangular form of `examples/heisenberg.rs`.

use uni20_dispatch::LocalTensor;
use uni20_dist::{DistError, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;

/// Bond dimension of the Heisenberg MPO of [`heisenberg_tensor`].
pub const HEISENBERG_BOND: usize = 5;

/// Local dimension of a spin 1/2.
pub const SPIN_HALF: usize = 2;

/// Most sites of a chain built here ([`Mpo::heisenberg`], `Mps::random`):
/// 2^20. A longer chain is refused with [`TnError::InvalidOption`] before
/// anything is allocated.
pub const MAX_SITES: usize = 1 << 20;

/// Checks `1 <= len <= MAX_SITES`.
pub(crate) fn check_sites(len: usize) -> Result<(), TnError> {
    if len == 0 || len > MAX_SITES {
        return Err(TnError::InvalidOption {
            name: "sites",
            value: len.to_string(),
            expected: "between 1 and 1048576 (MAX_SITES)",
        });
    }
    Ok(())
}

/// The bulk MPO tensor of the spin-1/2 Heisenberg chain, `W[a, b, s, t]` of
/// shape `(5, 5, 2, 2)` (f64): left bond `a`, right bond `b`, outgoing spin
/// `s`, incoming spin `t` (basis `|up>, |down>`). Lower-triangular form:
/// the chain starts in row 4 ([`heisenberg_left`]) and ends in column 0
/// ([`heisenberg_right`]); `W[4,4] = W[0,0] = 1`, `W[4,1] = S-/2`,
/// `W[4,2] = S+/2`, `W[4,3] = Sz`, `W[1,0] = S+`, `W[2,0] = S-`,
/// `W[3,0] = Sz`, so the product over a chain is
/// `sum_i (S+_i S-_(i+1) + S-_i S+_(i+1)) / 2 + Sz_i Sz_(i+1)`.
///
/// # Errors
/// None in practice (the shape and data length agree); the `Result` is the
/// one of [`LocalTensor::from_f64`].
pub fn heisenberg_tensor() -> Result<LocalTensor, TnError> {
    const D: usize = HEISENBERG_BOND;
    let id = [[1.0, 0.0], [0.0, 1.0]];
    let sp = [[0.0, 1.0], [0.0, 0.0]];
    let sm = [[0.0, 0.0], [1.0, 0.0]];
    let sz = [[0.5, 0.0], [0.0, -0.5]];
    let mut w = vec![0.0; D * D * 4];
    let mut set = |a: usize, b: usize, op: [[f64; 2]; 2], scale: f64| {
        for (s, row) in op.iter().enumerate() {
            for (t, v) in row.iter().enumerate() {
                w[((a * D + b) * 2 + s) * 2 + t] += scale * v;
            }
        }
    };
    set(0, 0, id, 1.0);
    set(1, 0, sp, 1.0);
    set(2, 0, sm, 1.0);
    set(3, 0, sz, 1.0);
    set(4, 1, sm, 0.5);
    set(4, 2, sp, 0.5);
    set(4, 3, sz, 1.0);
    set(4, 4, id, 1.0);
    Ok(LocalTensor::from_f64(&[D, D, 2, 2], w)?)
}

/// The left boundary vector of the Heisenberg MPO: the unit vector `e_4`
/// (length 5).
pub fn heisenberg_left() -> Vec<f64> {
    unit(HEISENBERG_BOND, HEISENBERG_BOND - 1)
}

/// The right boundary vector of the Heisenberg MPO: the unit vector `e_0`
/// (length 5).
pub fn heisenberg_right() -> Vec<f64> {
    unit(HEISENBERG_BOND, 0)
}

fn unit(n: usize, i: usize) -> Vec<f64> {
    let mut v = vec![0.0; n];
    v[i] = 1.0;
    v
}

/// A finite matrix-product operator on distributed tensors.
///
/// Site `i` holds `W_i[a, b, s, t]` of shape `(D_i, D_(i+1), d_i, d_i)`;
/// `left` (length `D_0`) and `right` (length `D_L`) close the open bonds, so
/// the operator is `sum left[a0] W_0[a0,a1] W_1[a1,a2] ... right[aL]`.
/// Several sites may share one tensor (clones of one [`DistTensor`] name
/// the same blocks).
#[derive(Clone, Debug)]
pub struct Mpo {
    sites: Vec<DistTensor>,
    left: Vec<f64>,
    right: Vec<f64>,
}

impl Mpo {
    /// An MPO from its site tensors and boundary vectors, checked.
    ///
    /// # Errors
    /// [`TnError::Shape`] if a site tensor is not of rank 4 with square
    /// physical legs, neighbouring bonds differ, or a boundary vector does
    /// not match its bond; [`TnError::InvalidOption`] for an empty chain.
    pub fn new(sites: Vec<DistTensor>, left: Vec<f64>, right: Vec<f64>) -> Result<Mpo, TnError> {
        if sites.is_empty() {
            return Err(TnError::InvalidOption {
                name: "MPO length",
                value: "0".into(),
                expected: "at least one site",
            });
        }
        for (i, w) in sites.iter().enumerate() {
            let s = w.shape();
            if s.len() != 4 || s[2] != s[3] {
                return Err(TnError::Shape {
                    what: format!("MPO site {i} (W[a, b, s, t] with s and t of one extent)"),
                    expected: vec![s.first().copied().unwrap_or(0), s.get(1).copied().unwrap_or(0), 2, 2],
                    got: s.to_vec(),
                });
            }
            if i > 0 && sites[i - 1].shape()[1] != s[0] {
                return Err(TnError::Shape {
                    what: format!("MPO bond between sites {} and {i}", i - 1),
                    expected: vec![sites[i - 1].shape()[1]],
                    got: vec![s[0]],
                });
            }
        }
        let (d0, dl) = (sites[0].shape()[0], sites[sites.len() - 1].shape()[1]);
        if left.len() != d0 || right.len() != dl {
            return Err(TnError::Shape {
                what: "MPO boundary vectors (left, right)".into(),
                expected: vec![d0, dl],
                got: vec![left.len(), right.len()],
            });
        }
        Ok(Mpo { sites, left, right })
    }

    /// The Heisenberg chain of `len` sites ([`heisenberg_tensor`] on every
    /// site, scattered once from the root with blocks of `block` elements
    /// per mode and shared by all sites).
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for `len == 0` or above [`MAX_SITES`]; the
    /// errors of [`DistTensor::from_local`] (a zero `block`, a failed
    /// scatter).
    pub fn heisenberg(ctl: &Controller<'_>, len: usize, block: usize) -> Result<Mpo, TnError> {
        check_sites(len)?;
        let w = DistTensor::from_local(ctl, &heisenberg_tensor()?, block)?;
        Mpo::new(vec![w; len], heisenberg_left(), heisenberg_right())
    }

    /// Number of sites.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// Always false: an MPO has at least one site.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The site tensors `W_i[a, b, s, t]`.
    pub fn sites(&self) -> &[DistTensor] {
        &self.sites
    }

    /// Local (physical) dimension of site `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn phys_dim(&self, i: usize) -> usize {
        self.sites[i].shape()[2]
    }

    /// The left boundary vector (length `D_0`).
    pub fn left(&self) -> &[f64] {
        &self.left
    }

    /// The right boundary vector (length `D_L`).
    pub fn right(&self) -> &[f64] {
        &self.right
    }

    /// The boundary environment left of site 0, `E[a, w, c]` of shape
    /// `(1, D_0, 1)` holding `left[w]` (bra bond, MPO bond, ket bond), as a
    /// distributed tensor with blocks of `block`.
    ///
    /// # Errors
    /// As [`DistTensor::from_local`].
    pub fn left_boundary(&self, ctl: &Controller<'_>, block: usize) -> Result<DistTensor, TnError> {
        boundary(ctl, &self.left, block)
    }

    /// The boundary environment right of the last site, `E[b, w, d]` of
    /// shape `(1, D_L, 1)` holding `right[w]`.
    ///
    /// # Errors
    /// As [`DistTensor::from_local`].
    pub fn right_boundary(&self, ctl: &Controller<'_>, block: usize) -> Result<DistTensor, TnError> {
        boundary(ctl, &self.right, block)
    }
}

fn boundary(ctl: &Controller<'_>, v: &[f64], block: usize) -> Result<DistTensor, TnError> {
    let t = LocalTensor::from_f64(&[1, v.len(), 1], v.to_vec())?;
    DistTensor::from_local(ctl, &t, block).map_err(|e: DistError| e.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The MPO tensor contracted over a two-site chain is S_1 . S_2: its
    /// triplet states have energy 1/4, the singlet -3/4.
    #[test]
    fn two_site_chain_is_the_exchange() {
        let w = heisenberg_tensor().unwrap().to_c64_vec();
        let (l, r) = (heisenberg_left(), heisenberg_right());
        let d = HEISENBERG_BOND;
        let at = |a: usize, b: usize, s: usize, t: usize| w[((a * d + b) * 2 + s) * 2 + t].re;
        // H[(s1 s2), (t1 t2)] = sum l[a] W[a,b,s1,t1] W[b,c,s2,t2] r[c].
        let mut h = [[0.0; 4]; 4];
        for (row, hr) in h.iter_mut().enumerate() {
            for (col, v) in hr.iter_mut().enumerate() {
                let (s1, s2, t1, t2) = (row / 2, row % 2, col / 2, col % 2);
                for (a, la) in l.iter().enumerate() {
                    for b in 0..d {
                        for (c, rc) in r.iter().enumerate() {
                            *v += la * at(a, b, s1, t1) * at(b, c, s2, t2) * rc;
                        }
                    }
                }
            }
        }
        // |up up> and |dn dn>: 1/4; |up dn> <-> |dn up>: 1/2 hopping, -1/4 diagonal.
        let exact = [
            [0.25, 0.0, 0.0, 0.0],
            [0.0, -0.25, 0.5, 0.0],
            [0.0, 0.5, -0.25, 0.0],
            [0.0, 0.0, 0.0, 0.25],
        ];
        assert_eq!(h, exact);
    }
}
