//! Environments and the two-site effective Hamiltonian, every step a
//! distributed contraction.
//!
//! Conventions (all tensors f64 or complex, labels as in the einsum specs):
//! an environment is `E[a, w, c]` (bra bond `a`, MPO bond `w`, ket bond
//! `c`); an MPS site is `M[c, t, d]`; an MPO site is `W[w, v, s, t]` (left,
//! right, bra spin, ket spin). The left environment of site `i` holds sites
//! `0..i`, the right environment of site `i` holds sites `i+1..L`.
//!
//! [`TwoSiteHamiltonian`] applies `H_eff theta = L W_i W_(i+1) R theta` to a
//! two-site tensor `theta[c, t, u, d]` without forming the matrix. Two
//! strategies ([`Matvec`]): `Fused` contracts `L W_i` and `W_(i+1) R` once
//! per step, then each product is two contractions (`80 chi^3 d^2 D / 4`
//! multiply-adds for `d = 2`); `Sequential` applies `L`, `W_i`, `W_(i+1)`,
//! `R` one after the other (four contractions, half the multiply-adds at
//! large `chi`, plus two small memory-bound ones).

use uni20_dispatch::C64;
use uni20_dist::{contract, contract_with, ContractOptions, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;
use crate::lanczos::LinearOperator;

/// `conj(a)` as the first operand.
fn conj_first<'a>() -> ContractOptions<'a> {
    ContractOptions {
        conj: [true, false],
        ..ContractOptions::default()
    }
}

/// The left environment of site `i + 1` from that of site `i`, the MPO
/// tensor `w` of site `i` and the left-normalised site tensor `a`:
/// `E'[b, v, d] = sum conj(a[a0, s, b]) E[a0, w, c] W[w, v, s, t] a[c, t, d]`,
/// as three contractions (`E a`, then `W`, then `conj(a)`), about
/// `2 chi^3 d D` multiply-adds. Returns at once.
///
/// # Errors
/// The validation errors of [`contract`] (shapes that do not fit).
pub fn grow_left(
    ctl: &Controller<'_>,
    env: &DistTensor,
    w: &DistTensor,
    a: &DistTensor,
) -> Result<DistTensor, TnError> {
    let t1 = contract(ctl, "awc,ctd->awtd", env, a)?;
    let t2 = contract(ctl, "awtd,wvst->asvd", &t1, w)?;
    Ok(contract_with(ctl, "asb,asvd->bvd", a, &t2, &conj_first())?)
}

/// The right environment of site `i - 1` from that of site `i`, the MPO
/// tensor `w` of site `i` and the right-normalised site tensor `b`:
/// `E'[a, v, c] = sum conj(b[a, r, b0]) W[v, x, r, u] E[b0, x, d] b[c, u, d]`,
/// as three contractions. Returns at once.
///
/// # Errors
/// As [`grow_left`].
pub fn grow_right(
    ctl: &Controller<'_>,
    env: &DistTensor,
    w: &DistTensor,
    b: &DistTensor,
) -> Result<DistTensor, TnError> {
    let t1 = contract(ctl, "bxd,cud->bxcu", env, b)?;
    let t2 = contract(ctl, "bxcu,vxru->bcvr", &t1, w)?;
    Ok(contract_with(ctl, "arb,bcvr->avc", b, &t2, &conj_first())?)
}

/// [`grow_left`] from the fused `lw[a, s, v, c, t] = L W_i` of the step's
/// [`TwoSiteHamiltonian`] (`Matvec::Fused`) instead of `L` and `W_i`:
/// `E'[b, v, d] = sum conj(a[a0, s, b]) lw[a0, s, v, c, t] a[c, t, d]`, two
/// contractions (`lw a`, then `conj(a)`) where [`grow_left`] needs three,
/// both read in place by the block-pair kernel; about `chi^3 d D (d + 1)`
/// multiply-adds against `2 chi^3 d D`. Returns at once.
///
/// # Errors
/// The validation errors of [`contract`] (shapes that do not fit).
pub fn grow_left_fused(ctl: &Controller<'_>, lw: &DistTensor, a: &DistTensor) -> Result<DistTensor, TnError> {
    let x = contract(ctl, "asvct,ctd->asvd", lw, a)?;
    Ok(contract_with(ctl, "asb,asvd->bvd", a, &x, &conj_first())?)
}

/// [`grow_right`] from the fused `wr[v, u, d, r, b] = W_(i+1) R` of the
/// step's [`TwoSiteHamiltonian`]: `E'[a, v, c] = sum conj(b[a, r, b0])
/// wr[v, u, d, r, b0] b[c, u, d]`, two contractions (`conj(b) wr`, then
/// `b`), each operand read in place. Returns at once.
///
/// # Errors
/// As [`grow_left_fused`].
pub fn grow_right_fused(ctl: &Controller<'_>, wr: &DistTensor, b: &DistTensor) -> Result<DistTensor, TnError> {
    let x = contract_with(ctl, "arb,vudrb->avud", b, wr, &conj_first())?;
    Ok(contract(ctl, "avud,cud->avc", &x, b)?)
}

/// How [`TwoSiteHamiltonian`] applies itself (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Matvec {
    /// `Fused` for symmetric (block-sparse) operands whose outer bonds are
    /// at most [`FUSED_MAX_BOND`], `Sequential` for larger ones and for
    /// dense operands. With small sector blocks the fused form wins by its
    /// fewer distributed operations (two per product instead of four); at
    /// large bonds by the sequential form's half of the multiply-adds (its
    /// middle contractions, with an MPO block of a few elements, are
    /// streamed by the block-pair kernel without packing). L = 100
    /// Heisenberg with Sz, one thread, converged sweeps: chi = 100 fused
    /// 0.81-0.89 s against 0.93-0.95 s; chi = 200 about equal (2.1-2.7 s
    /// each); chi = 400 sequential 7.2 s against 8.3 s. Dense, `Sequential`
    /// is about 10 % faster at chi = 100. Figures: `docs/performance.md`.
    #[default]
    Auto,
    /// `L W_i` and `W_(i+1) R` contracted once per step; two contractions
    /// per product.
    Fused,
    /// Four contractions per product (`L`, `W_i`, `W_(i+1)`, `R`); the
    /// fewest multiply-adds for `chi` above about `d D`.
    Sequential,
}

/// The largest outer bond (the bra bond of either environment) for which
/// [`Matvec::Auto`] applies a symmetric effective Hamiltonian in the fused
/// form; above it, sequentially.
pub const FUSED_MAX_BOND: usize = 256;

/// The two-site effective Hamiltonian of sites `(i, i+1)`:
/// `(H theta)[a, s, r, b] = sum L[a, w, c] W_i[w, v, s, t] W_(i+1)[v, x, r, u]
/// R[b, x, d] theta[c, t, u, d]`, applied matrix-free by distributed
/// contractions ([`LinearOperator`]).
#[derive(Clone, Debug)]
pub struct TwoSiteHamiltonian {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    /// `lw[a, s, v, c, t] = L W_i`, `wr[v, u, d, r, b] = W_(i+1) R`.
    Fused { lw: DistTensor, wr: DistTensor },
    Sequential {
        left: DistTensor,
        w1: DistTensor,
        w2: DistTensor,
        right: DistTensor,
    },
}

impl TwoSiteHamiltonian {
    /// The operator of the environments `left` (of site `i`) and `right` (of
    /// site `i + 1`) and the MPO tensors `w1`, `w2` of sites `i`, `i + 1`.
    /// `Matvec::Fused` submits the two fusing contractions now (they return
    /// at once).
    ///
    /// # Errors
    /// The validation errors of [`contract`].
    pub fn new(
        ctl: &Controller<'_>,
        left: &DistTensor,
        w1: &DistTensor,
        w2: &DistTensor,
        right: &DistTensor,
        how: Matvec,
    ) -> Result<TwoSiteHamiltonian, TnError> {
        let how = match how {
            Matvec::Auto if left.is_symmetric() && left.shape()[0].max(right.shape()[0]) <= FUSED_MAX_BOND => {
                Matvec::Fused
            }
            Matvec::Auto => Matvec::Sequential,
            other => other,
        };
        let kind = match how {
            Matvec::Fused => Kind::Fused {
                lw: contract(ctl, "awc,wvst->asvct", left, w1)?,
                wr: contract(ctl, "vxru,bxd->vudrb", w2, right)?,
            },
            Matvec::Sequential | Matvec::Auto => Kind::Sequential {
                left: left.clone(),
                w1: w1.clone(),
                w2: w2.clone(),
                right: right.clone(),
            },
        };
        Ok(TwoSiteHamiltonian { kind })
    }
}

impl TwoSiteHamiltonian {
    /// The fused product on one side, for growing that side's environment
    /// after the step ([`grow_left_fused`] with `L W_i` when `left`,
    /// [`grow_right_fused`] with `W_(i+1) R` otherwise); `None` for the
    /// sequential form, which holds no fused products. Consumes the
    /// operator, so the other side's product is released.
    pub fn into_fused(self, left: bool) -> Option<DistTensor> {
        match self.kind {
            Kind::Fused { lw, wr } => Some(if left { lw } else { wr }),
            Kind::Sequential { .. } => None,
        }
    }
}

impl LinearOperator for TwoSiteHamiltonian {
    fn apply(&self, ctl: &Controller<'_>, theta: &DistTensor) -> Result<DistTensor, TnError> {
        match &self.kind {
            Kind::Fused { lw, wr } => {
                let x = contract(ctl, "asvct,ctud->asvud", lw, theta)?;
                Ok(contract(ctl, "asvud,vudrb->asrb", &x, wr)?)
            }
            Kind::Sequential { left, w1, w2, right } => {
                let t1 = contract(ctl, "awc,ctud->awtud", left, theta)?;
                let t2 = contract(ctl, "awtud,wvst->asvud", &t1, w1)?;
                let t3 = contract(ctl, "asvud,vxru->asrxd", &t2, w2)?;
                Ok(contract(ctl, "asrxd,bxd->asrb", &t3, right)?)
            }
        }
    }

    /// The matrix of `H_eff` on the positions `rows` of `theta[a, s, r, b]`,
    /// formed on the root from the gathered environments and MPO tensors
    /// (`Sequential`: `L W_i` and `W_(i+1) R` contracted locally; `Fused`:
    /// the two fused tensors), `|rows|^2 D` multiply-adds for the middle
    /// MPO bond `D`. For small steps only (the bonds near the chain ends).
    fn matrix(&self, ctl: &Controller<'_>, like: &DistTensor, rows: &[usize]) -> Result<Option<Vec<C64>>, TnError> {
        let &[dl, d1, d2, dr] = like.shape() else {
            return Ok(None);
        };
        // lw[a, s, c, t, v] and wr[r, b, u, d, v], v the middle MPO bond.
        let (lw, wr, dv) = match &self.kind {
            Kind::Sequential { left, w1, w2, right } => {
                let (&[dw, dv, s1, t1], &[v2, dx, s2, t2]) = (w1.shape(), w2.shape()) else {
                    return Ok(None);
                };
                if left.shape() != [dl, dw, dl]
                    || right.shape() != [dr, dx, dr]
                    || v2 != dv
                    || [s1, t1] != [d1, d1]
                    || [s2, t2] != [d2, d2]
                {
                    return Ok(None);
                }
                let l = left.to_dense(ctl)?.to_c64_vec();
                let w1 = w1.to_dense(ctl)?.to_c64_vec();
                let w2 = w2.to_dense(ctl)?.to_c64_vec();
                let r = right.to_dense(ctl)?.to_c64_vec();
                let mut lw = vec![C64::new(0.0, 0.0); dl * d1 * dl * d1 * dv];
                for a in 0..dl {
                    for w in 0..dw {
                        for c in 0..dl {
                            let lv = l[(a * dw + w) * dl + c];
                            if lv == C64::new(0.0, 0.0) {
                                continue;
                            }
                            for v in 0..dv {
                                for s in 0..d1 {
                                    for t in 0..d1 {
                                        let x = w1[((w * dv + v) * d1 + s) * d1 + t];
                                        lw[(((a * d1 + s) * dl + c) * d1 + t) * dv + v] += lv * x;
                                    }
                                }
                            }
                        }
                    }
                }
                let mut wr = vec![C64::new(0.0, 0.0); d2 * dr * d2 * dr * dv];
                for b in 0..dr {
                    for x in 0..dx {
                        for d in 0..dr {
                            let rv = r[(b * dx + x) * dr + d];
                            if rv == C64::new(0.0, 0.0) {
                                continue;
                            }
                            for v in 0..dv {
                                for rr in 0..d2 {
                                    for u in 0..d2 {
                                        let y = w2[((v * dx + x) * d2 + rr) * d2 + u];
                                        wr[(((rr * dr + b) * d2 + u) * dr + d) * dv + v] += y * rv;
                                    }
                                }
                            }
                        }
                    }
                }
                (lw, wr, dv)
            }
            Kind::Fused { lw: f1, wr: f2 } => {
                // f1[a, s, v, c, t], f2[v, u, d, r, b].
                let dv = f1.shape()[2];
                if f1.shape() != [dl, d1, dv, dl, d1] || f2.shape() != [dv, d2, dr, d2, dr] {
                    return Ok(None);
                }
                let f1 = f1.to_dense(ctl)?.to_c64_vec();
                let f2 = f2.to_dense(ctl)?.to_c64_vec();
                let mut lw = vec![C64::new(0.0, 0.0); f1.len()];
                for a in 0..dl {
                    for s in 0..d1 {
                        for v in 0..dv {
                            for c in 0..dl {
                                for t in 0..d1 {
                                    lw[(((a * d1 + s) * dl + c) * d1 + t) * dv + v] =
                                        f1[(((a * d1 + s) * dv + v) * dl + c) * d1 + t];
                                }
                            }
                        }
                    }
                }
                let mut wr = vec![C64::new(0.0, 0.0); f2.len()];
                for v in 0..dv {
                    for u in 0..d2 {
                        for d in 0..dr {
                            for rr in 0..d2 {
                                for b in 0..dr {
                                    wr[(((rr * dr + b) * d2 + u) * dr + d) * dv + v] =
                                        f2[(((v * d2 + u) * dr + d) * d2 + rr) * dr + b];
                                }
                            }
                        }
                    }
                }
                (lw, wr, dv)
            }
        };
        // Position p of theta[a, s, r, b] -> (a s) and (r b) parts.
        let split = |p: usize| (p / (d2 * dr), p % (d2 * dr));
        let n = rows.len();
        let mut m = vec![C64::new(0.0, 0.0); n * n];
        for (i, &row) in rows.iter().enumerate() {
            let (as_, rb) = split(row);
            for (j, &col) in rows.iter().enumerate() {
                let (ct, ud) = split(col);
                let lo = (as_ * dl * d1 + ct) * dv;
                let ro = (rb * d2 * dr + ud) * dv;
                m[i * n + j] = (0..dv).map(|v| lw[lo + v] * wr[ro + v]).sum();
            }
        }
        Ok(Some(m))
    }
}
