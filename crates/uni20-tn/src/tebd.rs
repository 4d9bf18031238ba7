//! Time evolution by TEBD for nearest-neighbour models ([`Tebd`]): real
//! time `exp(-i H t)` or imaginary time `exp(-H tau)` in steps of `dt`.
//!
//! One step is the symmetric (second-order) product
//! `U(dt) = prod_(i = 0 .. L-2) g_i(dt/2) prod_(i = L-2 .. 0) g_i(dt/2)`
//! with two-site gates `g_i = exp(-i h_i dt / 2)`: a left-to-right sweep of
//! half steps followed by a right-to-left one. Each gate is applied at the
//! orthogonality centre and the two-site tensor is split by a truncated SVD
//! on a worker (chi_max, cutoff), so the truncation is optimal and the
//! centre moves with the sweep; the error is `O(dt^2)` per unit time.
//! The bond Hamiltonians `h_i` come from the model's operator sum: each
//! two-site term on bond `(i, i+1)`, and each one-site term split evenly
//! between the bonds of its site. A real-time step makes the state complex.
//!
//! The state must be right-canonical with its centre on site 0 (as
//! [`Mps::random`], [`Mps::product`] and a DMRG after a full sweep leave it);
//! a step leaves it so again.

use uni20_dispatch::decomp::{eigh, EighBackendList};
use uni20_dispatch::{LocalTensor, C64};
use uni20_dist::{contract, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;
use crate::models::Model;
use crate::mps::Mps;
use crate::opsum::{MpoOptions, OpSum};
use crate::split::split_two_site;

/// Options of [`Tebd`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TebdOptions {
    /// Time step (finite, `> 0`).
    pub dt: f64,
    /// Imaginary time (`exp(-H dt)`, the state renormalised) instead of
    /// real time.
    pub imaginary: bool,
    /// Largest bond dimension kept (at least 1).
    pub chi_max: usize,
    /// Singular values at or below this are dropped (finite, `>= 0`).
    pub cutoff: f64,
    /// Block extent of new bonds and of the gates.
    pub block: usize,
}

impl Default for TebdOptions {
    fn default() -> Self {
        TebdOptions {
            dt: 0.05,
            imaginary: false,
            chi_max: 64,
            cutoff: 1e-12,
            block: 64,
        }
    }
}

/// What one step discarded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TebdStep {
    /// Largest discarded weight of the step's SVDs.
    pub max_discarded_weight: f64,
    /// Sum of the discarded weights of the step's SVDs (the truncation error).
    pub discarded_weight: f64,
    /// Largest bond dimension after the step.
    pub max_bond: usize,
}

/// A TEBD integrator: the half-step gates of every bond, distributed.
#[derive(Clone, Debug)]
pub struct Tebd {
    gates: Vec<DistTensor>,
    opts: TebdOptions,
}

/// The bond Hamiltonians `h_i` (row-major `(d_i d_(i+1))^2` matrices).
fn bond_hamiltonians(model: &Model) -> Result<Vec<(usize, usize, Vec<C64>)>, TnError> {
    let l = model.sites.len();
    if l < 2 {
        return Err(TnError::InvalidOption {
            name: "TEBD chain length",
            value: l.to_string(),
            expected: "at least 2 sites",
        });
    }
    let mut per_bond: Vec<OpSum> = vec![OpSum::new(); l - 1];
    for (k, t) in model.hamiltonian.terms().iter().enumerate() {
        let lo = t.ops.iter().map(|o| o.1).min().unwrap_or(0);
        let hi = t.ops.iter().map(|o| o.1).max().unwrap_or(0);
        if hi >= l {
            return Err(TnError::BadTerm {
                term: k,
                reason: format!("site {hi} beyond the chain of {l} sites"),
            });
        }
        if hi > lo + 1 {
            return Err(TnError::BadTerm {
                term: k,
                reason: format!("couples sites {lo} and {hi}: TEBD needs nearest-neighbour terms (use TDVP)"),
            });
        }
        let ops =
            |shift: usize| -> Vec<(String, usize)> { t.ops.iter().map(|(n, i)| (n.clone(), i - shift)).collect() };
        let push = |sum: &mut OpSum, c: C64, ops: Vec<(String, usize)>| {
            let v: Vec<(&str, usize)> = ops.iter().map(|(n, i)| (n.as_str(), *i)).collect();
            sum.add(c, &v);
        };
        if hi == lo + 1 {
            push(&mut per_bond[lo], t.coeff, ops(lo));
        } else {
            // One-site term: half to each bond of the site (all of it at the ends).
            let bonds: Vec<usize> = [lo.checked_sub(1), (lo + 1 < l).then_some(lo)]
                .into_iter()
                .flatten()
                .collect();
            let w = C64::new(1.0 / bonds.len() as f64, 0.0);
            for b in bonds {
                // On bond b the site is local index lo - b (0 or 1).
                push(&mut per_bond[b], t.coeff * w, ops(b));
            }
        }
    }
    per_bond
        .iter()
        .enumerate()
        .map(|(b, sum)| {
            let sites = [model.sites[b].clone(), model.sites[b + 1].clone()];
            let (d1, d2) = (sites[0].dim(), sites[1].dim());
            let h = if sum.terms().is_empty() {
                vec![C64::new(0.0, 0.0); (d1 * d2) * (d1 * d2)]
            } else {
                sum.to_mpo(&sites, &MpoOptions::default())?.dense_matrix()?
            };
            Ok((d1, d2, h))
        })
        .collect()
}

/// `exp(-i h t)` (or `exp(-h t)` for imaginary time) of a Hermitian `n x n` matrix.
fn exponential(h: &[C64], n: usize, t: f64, imaginary: bool) -> Result<Vec<C64>, TnError> {
    let m = LocalTensor::from_c64(&[n, n], h.to_vec())?;
    let r = eigh(&m, &Default::default(), &EighBackendList::default_cpu(1))?;
    let v = r.vectors.to_c64_vec();
    let f: Vec<C64> = r
        .values
        .iter()
        .map(|&x| {
            if imaginary {
                C64::new((-x * t).exp(), 0.0)
            } else {
                C64::new(0.0, -x * t).exp()
            }
        })
        .collect();
    let mut u = vec![C64::new(0.0, 0.0); n * n];
    for i in 0..n {
        for j in 0..n {
            let mut acc = C64::new(0.0, 0.0);
            for k in 0..n {
                acc += v[i * n + k] * f[k] * v[j * n + k].conj();
            }
            u[i * n + j] = acc;
        }
    }
    Ok(u)
}

impl Tebd {
    /// The gates of `model` (nearest-neighbour terms only) for steps of
    /// `opts.dt`, scattered once.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for a non-positive or non-finite `dt`, a
    /// zero `chi_max` or `block`, a negative cutoff, or a chain of one site;
    /// [`TnError::BadTerm`] for a term beyond nearest neighbours; the
    /// errors of [`OpSum::to_mpo`] and of the scatter.
    pub fn new(ctl: &Controller<'_>, model: &Model, opts: TebdOptions) -> Result<Tebd, TnError> {
        if !(opts.dt.is_finite() && opts.dt > 0.0) {
            return Err(TnError::InvalidOption {
                name: "dt",
                value: opts.dt.to_string(),
                expected: "finite and > 0",
            });
        }
        if opts.chi_max == 0 || opts.block == 0 {
            return Err(TnError::InvalidOption {
                name: "chi_max / block",
                value: format!("{} / {}", opts.chi_max, opts.block),
                expected: "at least 1",
            });
        }
        if !(opts.cutoff.is_finite() && opts.cutoff >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "cutoff",
                value: opts.cutoff.to_string(),
                expected: "finite and >= 0",
            });
        }
        let mut gates = Vec::new();
        for (d1, d2, h) in bond_hamiltonians(model)? {
            let n = d1 * d2;
            let u = exponential(&h, n, opts.dt / 2.0, opts.imaginary)?;
            let t = if u.iter().all(|z| z.im == 0.0) {
                LocalTensor::from_f64(&[d1, d2, d1, d2], u.iter().map(|z| z.re).collect())?
            } else {
                LocalTensor::from_c64(&[d1, d2, d1, d2], u)?
            };
            gates.push(DistTensor::from_local(ctl, &t, opts.block)?);
        }
        Ok(Tebd { gates, opts })
    }

    /// The options.
    pub fn options(&self) -> &TebdOptions {
        &self.opts
    }

    /// Advances `mps` by one step `dt` (see the module documentation).
    ///
    /// # Errors
    /// [`TnError::Shape`] for a state of another length; the errors of the
    /// distributed contractions and SVDs.
    pub fn step(&self, ctl: &Controller<'_>, mps: &mut Mps) -> Result<TebdStep, TnError> {
        let l = mps.len();
        if l != self.gates.len() + 1 {
            return Err(TnError::Shape {
                what: "TEBD state length".into(),
                expected: vec![self.gates.len() + 1],
                got: vec![l],
            });
        }
        let mut out = TebdStep {
            max_discarded_weight: 0.0,
            discarded_weight: 0.0,
            max_bond: 1,
        };
        let order: Vec<(usize, bool)> = (0..l - 1)
            .map(|i| (i, true))
            .chain((0..l - 1).rev().map(|i| (i, false)))
            .collect();
        for (i, to_right) in order {
            let theta = contract(ctl, "asb,btc->astc", mps.site(i), mps.site(i + 1))?;
            let theta = contract(ctl, "uvst,astc->auvc", &self.gates[i], &theta)?;
            let f = split_two_site(
                ctl,
                &theta,
                "au|vc",
                self.opts.chi_max,
                self.opts.cutoff,
                self.opts.block,
            )?;
            out.max_discarded_weight = out.max_discarded_weight.max(f.discarded_weight);
            out.discarded_weight += f.discarded_weight;
            out.max_bond = out.max_bond.max(f.kept);
            let s = f.s;
            if to_right {
                let right = contract(ctl, "kj,jtc->ktc", &s, &f.vh)?;
                mps.set_site(i, f.u);
                mps.set_site(i + 1, right);
            } else {
                let left = contract(ctl, "ask,kj->asj", &f.u, &s)?;
                mps.set_site(i, left);
                mps.set_site(i + 1, f.vh);
            }
        }
        Ok(out)
    }
}
