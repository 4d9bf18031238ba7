//! Excited states by projection: a DMRG run that stays orthogonal to given
//! lower states `|phi_k>` optimises `H + w sum_k |phi_k><phi_k|` (the
//! `weight` method of ITensor's `dmrg`), so its lowest state is the lowest
//! one orthogonal to them when `w` exceeds the energy gap to them.
//!
//! For each lower state the run keeps the overlap environments of
//! `<phi_k|psi>` left and right of the current bond (one transfer per
//! step, as for the Hamiltonian's environments). At a bond, the projector
//! is the two-site tensor `P_k = L_k phi_k,i phi_k,i+1 R_k` in the shape of
//! the two-site state, and the operator the eigensolver sees is
//! `H x + w sum_k P_k <P_k|x>`, all deferred on the workers.

use uni20_dispatch::{DType, C64};
use uni20_dist::{axpby, contract, DistTensor};
use uni20_worker::Controller;

use crate::env::TwoSiteHamiltonian;
use crate::error::TnError;
use crate::lanczos::LinearOperator;
use crate::measure::{ones, transfer, Side};
use crate::mps::Mps;

/// A lower state and its overlap environments with the running state.
#[derive(Clone, Debug)]
pub(crate) struct Orthogonal {
    state: Mps,
    /// `left[i]`: sites `0..i` of `<phi|psi>` (`(phi bond, psi bond)`).
    left: Vec<Option<DistTensor>>,
    /// `right[i]`: sites `i+1..L`.
    right: Vec<Option<DistTensor>>,
}

fn at(v: &[Option<DistTensor>], i: usize) -> Result<&DistTensor, TnError> {
    v.get(i)
        .and_then(Option::as_ref)
        .ok_or(TnError::Internal("a missing overlap environment"))
}

impl Orthogonal {
    /// The environments of `phi` against `psi` (right-canonical, centre on
    /// site 0).
    pub(crate) fn new(ctl: &Controller<'_>, phi: Mps, psi: &Mps) -> Result<Orthogonal, TnError> {
        let n = psi.len();
        if phi.len() != n {
            return Err(TnError::Shape {
                what: "a state to stay orthogonal to".into(),
                expected: vec![n],
                got: vec![phi.len()],
            });
        }
        let mut left = vec![None; n];
        let mut right = vec![None; n];
        left[0] = Some(ones(ctl, &[1, 1])?);
        right[n - 1] = Some(ones(ctl, &[1, 1])?);
        for i in (0..n - 1).rev() {
            right[i] = Some(transfer(
                ctl,
                Side::Right,
                at(&right, i + 1)?,
                phi.site(i + 1),
                psi.site(i + 1),
                None,
            )?);
        }
        Ok(Orthogonal {
            state: phi,
            left,
            right,
        })
    }

    /// The projector `P[a, s, t, c]` at bond `(i, i+1)`.
    pub(crate) fn projector(&self, ctl: &Controller<'_>, i: usize) -> Result<DistTensor, TnError> {
        let t = contract(ctl, "xa,xsy->asy", at(&self.left, i)?, self.state.site(i))?;
        let t = contract(ctl, "asy,ytz->astz", &t, self.state.site(i + 1))?;
        Ok(contract(ctl, "astz,zc->astc", &t, at(&self.right, i + 1)?)?)
    }

    /// After the step at bond `i` moved the centre right: `psi_i` is the
    /// new left-orthonormal site.
    pub(crate) fn moved_right(&mut self, ctl: &Controller<'_>, i: usize, psi_i: &DistTensor) -> Result<(), TnError> {
        let e = transfer(ctl, Side::Left, at(&self.left, i)?, self.state.site(i), psi_i, None)?;
        self.left[i + 1] = Some(e);
        Ok(())
    }

    /// After the step at bond `i` moved the centre left: `psi_next` is the
    /// new right-orthonormal site `i + 1`.
    pub(crate) fn moved_left(&mut self, ctl: &Controller<'_>, i: usize, psi_next: &DistTensor) -> Result<(), TnError> {
        let e = transfer(
            ctl,
            Side::Right,
            at(&self.right, i + 1)?,
            self.state.site(i + 1),
            psi_next,
            None,
        )?;
        self.right[i] = Some(e);
        Ok(())
    }
}

/// `H x + w sum_k P_k <P_k|x>`.
pub(crate) struct Projected<'a> {
    pub(crate) h: &'a TwoSiteHamiltonian,
    pub(crate) projectors: Vec<DistTensor>,
    pub(crate) weight: f64,
}

impl LinearOperator for Projected<'_> {
    fn apply(&self, ctl: &Controller<'_>, x: &DistTensor) -> Result<DistTensor, TnError> {
        let mut y = self.h.apply(ctl, x)?;
        for p in &self.projectors {
            let s = contract(ctl, "astc,astc->", p, x)?;
            let t = contract(ctl, ",astc->astc", &s, p)?;
            y = axpby(ctl, 1.0, &y, self.weight, &t, "astc->astc")?;
        }
        Ok(y)
    }

    /// `H`'s matrix plus `w p p^T` per projector, as `apply` computes it
    /// (real projectors only: `None` for a complex one, which then
    /// iterates).
    fn matrix(&self, ctl: &Controller<'_>, like: &DistTensor, rows: &[usize]) -> Result<Option<Vec<C64>>, TnError> {
        if self.projectors.iter().any(|p| p.dtype() != DType::F64) {
            return Ok(None);
        }
        let Some(mut m) = self.h.matrix(ctl, like, rows)? else {
            return Ok(None);
        };
        let n = rows.len();
        for p in &self.projectors {
            let p = p.to_dense(ctl)?.to_c64_vec();
            let q: Vec<C64> = rows.iter().map(|&r| p[r]).collect();
            for i in 0..n {
                for j in 0..n {
                    m[i * n + j] += q[i] * q[j] * self.weight;
                }
            }
        }
        Ok(Some(m))
    }
}
