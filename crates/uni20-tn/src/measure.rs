//! Measurements of matrix-product states, computed by the workers with
//! distributed contractions and decompositions; only scalars (and
//! singular values) reach the root.
//!
//! | call | result |
//! |---|---|
//! | [`overlap`] | `<a|b>` |
//! | [`expectation`] | `<psi|H|psi> / <psi|psi>` of an MPO |
//! | [`energy_variance`] | `<H>` and `<H^2> - <H>^2` |
//! | [`local_expectations`] | `<O_i>` on every site |
//! | [`correlations`] | `<A_i B_j>` for `j = i+1 ..`, with an optional string (Jordan-Wigner) between |
//! | [`schmidt_spectra`], [`entanglement_entropy`] | the Schmidt values at every bond and `S = -sum p ln p` |
//!
//! Dense states only for now: the operators and boundaries are built dense,
//! so a symmetric MPS or MPO ([`crate::conserve`]) gives a
//! `LayoutError::Mixed` from the first contraction.
//!
//! Conventions: `M_i[a, s, b]` (left bond, physical, right bond); an
//! operator `O[s, t]` maps the ket's `t` to the bra's `s`; an MPO site is
//! `W[a, b, s, t]`. The results are real numbers: for a complex state
//! (after a real-time TEBD step) the expectation values of Hermitian
//! operators are real, and [`overlap`] returns the real part of `<a|b>`.

use uni20_dispatch::LocalTensor;
use uni20_dist::decomp::SvdOptions;
use uni20_dist::{contract, contract_with, svd, ContractOptions, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;
use crate::mpo::Mpo;
use crate::mps::Mps;
use crate::sites::Site;

fn scalar(ctl: &Controller<'_>, t: &DistTensor) -> Result<f64, TnError> {
    let v = t.to_local(ctl)?.to_c64_vec();
    v.first()
        .map(|z| z.re)
        .ok_or(TnError::Internal("a full contraction returned no element"))
}

pub(crate) fn ones(ctl: &Controller<'_>, shape: &[usize]) -> Result<DistTensor, TnError> {
    let n: usize = shape.iter().product();
    Ok(DistTensor::from_local(
        ctl,
        &LocalTensor::from_f64(shape, vec![1.0; n])?,
        1,
    )?)
}

fn conj_first() -> ContractOptions<'static> {
    ContractOptions {
        conj: [true, false],
        ..ContractOptions::default()
    }
}

fn check_len(what: &str, got: usize, want: usize) -> Result<(), TnError> {
    if got != want {
        return Err(TnError::Shape {
            what: what.to_string(),
            expected: vec![want],
            got: vec![got],
        });
    }
    Ok(())
}

/// The operator `name` of `site` as a distributed `d x d` tensor (real
/// part; blocks of `block`).
///
/// # Errors
/// [`TnError::UnknownOperator`]; [`TnError::InvalidOption`] for an operator
/// with an imaginary part (the states here are real); the errors of
/// [`DistTensor::from_local`].
pub fn site_operator(ctl: &Controller<'_>, site: &Site, name: &str, block: usize) -> Result<DistTensor, TnError> {
    let op = site.op(name)?;
    if op.matrix.iter().any(|z| z.im != 0.0) {
        return Err(TnError::InvalidOption {
            name: "operator",
            value: name.into(),
            expected: "a real operator (use Sp/Sm instead of Sy)",
        });
    }
    let d = site.dim();
    let t = LocalTensor::from_f64(&[d, d], op.matrix.iter().map(|z| z.re).collect())?;
    Ok(DistTensor::from_local(ctl, &t, block)?)
}

/// Which way a transfer step grows an environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// `E'[w, z] = sum conj(A[x, s, w]) O[s, t] B[y, t, z] E[x, y]`.
    Left,
    /// `E'[x, y] = sum conj(A[x, s, w]) O[s, t] B[y, t, z] E[w, z]`.
    Right,
}

/// One transfer step of an overlap environment `E` (bra bond, ket bond)
/// through bra site `a` and ket site `b`, with the operator `op` between
/// them (`None`: the identity).
pub(crate) fn transfer(
    ctl: &Controller<'_>,
    side: Side,
    e: &DistTensor,
    a: &DistTensor,
    b: &DistTensor,
    op: Option<&DistTensor>,
) -> Result<DistTensor, TnError> {
    let (mut t, specs) = match side {
        Side::Left => (contract(ctl, "xy,ytz->xtz", e, b)?, ["st,xtz->xsz", "xsw,xsz->wz"]),
        Side::Right => (contract(ctl, "ytz,wz->ytw", b, e)?, ["st,ytw->ysw", "xsw,ysw->xy"]),
    };
    if let Some(o) = op {
        t = contract(ctl, specs[0], o, &t)?;
    }
    Ok(contract_with(ctl, specs[1], a, &t, &conj_first())?)
}

/// The real part of `<bra|ket>` of two states on the same chain (the
/// overlap itself for real states).
///
/// # Errors
/// [`TnError::Shape`] for chains of different lengths; the errors of the
/// distributed contractions (physical dimensions that differ among them).
pub fn overlap(ctl: &Controller<'_>, bra: &Mps, ket: &Mps) -> Result<f64, TnError> {
    check_len("overlap: sites of the ket", ket.len(), bra.len())?;
    let mut e = ones(ctl, &[1, 1])?;
    for (a, b) in bra.sites().iter().zip(ket.sites()) {
        e = transfer(ctl, Side::Left, &e, a, b, None)?;
    }
    scalar(ctl, &e)
}

/// Left environments `L_0 .. L_L` of `<psi|psi>` (`L_i` is left of site `i`).
fn left_norms(ctl: &Controller<'_>, mps: &Mps) -> Result<Vec<DistTensor>, TnError> {
    let mut out = vec![ones(ctl, &[1, 1])?];
    for m in mps.sites() {
        let next = transfer(ctl, Side::Left, &out[out.len() - 1], m, m, None)?;
        out.push(next);
    }
    Ok(out)
}

/// Right environments `R_0 .. R_L` of `<psi|psi>` (`R_i` is right of site `i - 1`).
fn right_norms(ctl: &Controller<'_>, mps: &Mps) -> Result<Vec<DistTensor>, TnError> {
    let l = mps.len();
    let mut out = vec![ones(ctl, &[1, 1])?; l + 1];
    for i in (0..l).rev() {
        out[i] = transfer(ctl, Side::Right, &out[i + 1], mps.site(i), mps.site(i), None)?;
    }
    Ok(out)
}

fn close(ctl: &Controller<'_>, left: &DistTensor, right: &DistTensor) -> Result<f64, TnError> {
    scalar(ctl, &contract(ctl, "wz,wz->", left, right)?)
}

/// `<O_i> = <psi|O_i|psi> / <psi|psi>` for every site, with `ops[i]` the
/// `d_i x d_i` operator of site `i`.
///
/// # Errors
/// [`TnError::Shape`] when `ops` does not have one operator per site; the
/// errors of the distributed contractions.
pub fn local_expectations(ctl: &Controller<'_>, mps: &Mps, ops: &[DistTensor]) -> Result<Vec<f64>, TnError> {
    check_len("local_expectations: operators", ops.len(), mps.len())?;
    let left = left_norms(ctl, mps)?;
    let right = right_norms(ctl, mps)?;
    let nrm = close(ctl, &left[mps.len()], &right[mps.len()])?;
    let mut out = Vec::with_capacity(mps.len());
    for (i, o) in ops.iter().enumerate() {
        let e = transfer(ctl, Side::Left, &left[i], mps.site(i), mps.site(i), Some(o))?;
        out.push(close(ctl, &e, &right[i + 1])? / nrm);
    }
    Ok(out)
}

/// `<A_i B_j> / <psi|psi>` for `j = i + 1 ..= min(i + range, L - 1)`, with
/// `string[k]` applied on every site `i < k < j` (the Jordan-Wigner `F`
/// for a fermionic pair; `None`: identity), and `a`, `b` the operators of
/// sites `i` and of each `j` (one per site).
///
/// For fermionic `A` and `B` pass the site's `F` as the string and `A F`
/// as `A` (the builder of [`crate::OpSum`] does the same).
///
/// # Errors
/// [`TnError::Shape`] when `b` or `string` does not have one operator per
/// site or `i` is not a site; the errors of the contractions.
pub fn correlations(
    ctl: &Controller<'_>,
    mps: &Mps,
    a: &DistTensor,
    i: usize,
    b: &[DistTensor],
    string: Option<&[DistTensor]>,
    range: usize,
) -> Result<Vec<f64>, TnError> {
    let l = mps.len();
    check_len("correlations: operators B", b.len(), l)?;
    if let Some(s) = string {
        check_len("correlations: string operators", s.len(), l)?;
    }
    if i >= l {
        return Err(TnError::Shape {
            what: "correlations: first site".into(),
            expected: vec![l - 1],
            got: vec![i],
        });
    }
    let left = left_norms(ctl, mps)?;
    let right = right_norms(ctl, mps)?;
    let nrm = close(ctl, &left[l], &right[l])?;
    let mut open = transfer(ctl, Side::Left, &left[i], mps.site(i), mps.site(i), Some(a))?;
    let mut out = Vec::new();
    for j in i + 1..l.min(i + range + 1) {
        let closed = transfer(ctl, Side::Left, &open, mps.site(j), mps.site(j), Some(&b[j]))?;
        out.push(close(ctl, &closed, &right[j + 1])? / nrm);
        open = transfer(ctl, Side::Left, &open, mps.site(j), mps.site(j), string.map(|s| &s[j]))?;
    }
    Ok(out)
}

/// `<psi|H|psi> / <psi|psi>` of the MPO `mpo`.
///
/// # Errors
/// [`TnError::Shape`] for chains of different lengths; the errors of the
/// contractions.
pub fn expectation(ctl: &Controller<'_>, mps: &Mps, mpo: &Mpo) -> Result<f64, TnError> {
    Ok(mpo_moments(ctl, mps, mpo, false)?.0)
}

/// `(<H>, <H^2> - <H>^2)` of the MPO on the normalised state: the energy
/// and its variance, which vanishes for an eigenstate (the usual
/// convergence check of a DMRG ground state). `<H^2>` is contracted with
/// two MPO layers (cost `chi^3 D^2` per site).
///
/// # Errors
/// As [`expectation`].
pub fn energy_variance(ctl: &Controller<'_>, mps: &Mps, mpo: &Mpo) -> Result<(f64, f64), TnError> {
    let (e, h2) = mpo_moments(ctl, mps, mpo, true)?;
    Ok((e, h2 - e * e))
}

fn mpo_moments(ctl: &Controller<'_>, mps: &Mps, mpo: &Mpo, second: bool) -> Result<(f64, f64), TnError> {
    check_len("MPO sites", mpo.len(), mps.len())?;
    let nrm = overlap(ctl, mps, mps)?;
    let c = conj_first();
    let mut e1 = mpo.left_boundary(ctl, 8)?; // (1, D, 1)
    let lv = mpo.left();
    let (d0, dl) = (lv.len(), mpo.right().len());
    let outer = |v: &[f64], w: &[f64]| -> Vec<f64> { v.iter().flat_map(|x| w.iter().map(move |y| x * y)).collect() };
    let mut e2 = if second {
        Some(DistTensor::from_local(
            ctl,
            &LocalTensor::from_f64(&[1, d0, d0, 1], outer(lv, lv))?,
            8,
        )?)
    } else {
        None
    };
    for (m, w) in mps.sites().iter().zip(mpo.sites()) {
        let t1 = contract(ctl, "awc,ctd->awtd", &e1, m)?;
        let t2 = contract(ctl, "awtd,wvst->asvd", &t1, w)?;
        e1 = contract_with(ctl, "asb,asvd->bvd", m, &t2, &c)?;
        if let Some(e) = e2.as_ref() {
            let t1 = contract(ctl, "awvc,ctd->awvtd", e, m)?;
            let t2 = contract(ctl, "awvtd,vxut->awuxd", &t1, w)?;
            let t3 = contract(ctl, "awuxd,wysu->asyxd", &t2, w)?;
            e2 = Some(contract_with(ctl, "asb,asyxd->byxd", m, &t3, &c)?);
        }
    }
    let rv = mpo.right();
    let r1 = mpo.right_boundary(ctl, 8)?;
    let h = scalar(ctl, &contract(ctl, "bvd,bvd->", &e1, &r1)?)? / nrm;
    let h2 = match e2 {
        Some(e) => {
            let r2 = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[1, dl, dl, 1], outer(rv, rv))?, 8)?;
            scalar(ctl, &contract(ctl, "byxd,byxd->", &e, &r2)?)? / nrm
        }
        None => f64::NAN,
    };
    Ok((h, h2))
}

/// The Schmidt values at every bond `(i, i+1)`, `i = 0 .. L-2`, of the
/// normalised state (each list non-increasing, squares summing to 1).
///
/// The state is copied, right-canonicalised by LQ and swept left to right
/// with SVDs on the workers (the MPS passed in is unchanged); only the
/// singular values reach the root. `block` is the block extent of the new
/// bonds.
///
/// # Errors
/// The errors of the distributed decompositions and contractions.
pub fn schmidt_spectra(ctl: &Controller<'_>, mps: &Mps, block: usize) -> Result<Vec<Vec<f64>>, TnError> {
    let l = mps.len();
    let mut sites: Vec<DistTensor> = mps.sites().to_vec();
    crate::mps::right_normalize(ctl, &mut sites, block)?;
    let opts = SvdOptions {
        s_diag: true,
        k_block: Some(block),
        ..SvdOptions::default()
    };
    let mut out = Vec::with_capacity(l.saturating_sub(1));
    for i in 0..l.saturating_sub(1) {
        let f = svd(ctl, &sites[i], "as|b", &opts)?;
        let nrm = f.s.iter().map(|x| x * x).sum::<f64>().sqrt();
        out.push(f.s.iter().map(|x| x / nrm).collect());
        let s = f
            .s_diag
            .ok_or(TnError::Internal("the SVD returned no diagonal tensor"))?;
        let sv = contract(ctl, "kj,jb->kb", &s, &f.vh)?;
        sites[i + 1] = contract(ctl, "kb,btc->ktc", &sv, &sites[i + 1])?;
    }
    Ok(out)
}

/// The von Neumann entanglement entropy `S = -sum_k p_k ln p_k`,
/// `p_k = s_k^2`, of each Schmidt spectrum (natural logarithm), never
/// below 0 (rounding of `p = 1` is clamped).
pub fn entanglement_entropy(spectra: &[Vec<f64>]) -> Vec<f64> {
    spectra
        .iter()
        // A product state's p = 1 gives -0.0, and rounding can put p a hair above 1.
        .map(|s| {
            s.iter()
                .map(|x| x * x)
                .filter(|&p| p > 0.0)
                .map(|p| -p * p.ln())
                .sum::<f64>()
                .max(0.0)
        })
        .collect()
}
