//! The truncated split of a two-site tensor shared by the DMRG sweep and
//! TEBD: `theta[a, s, t, c] ~= U[a, s, k] S[k, k] Vh[k, t, c]` by a
//! distributed SVD (chi_max, absolute cutoff, the degenerate-multiplet
//! rule), with `S` renormalised so that the state keeps norm 1.

use uni20_dist::decomp::{SvdOptions, SvdTruncation};
use uni20_dist::{scale, svd, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;

/// The factors of [`split_two_site`].
pub(crate) struct TwoSiteSplit {
    /// `U[a, s, k]`, orthonormal columns.
    pub(crate) u: DistTensor,
    /// `diag(s) / |s|` (`k x k`).
    pub(crate) s: DistTensor,
    /// `Vh[k, t, c]`, orthonormal rows.
    pub(crate) vh: DistTensor,
    /// Relative discarded weight of the SVD.
    pub(crate) discarded_weight: f64,
    /// Kept singular values `k`.
    pub(crate) kept: usize,
}

/// Splits `theta` by `split` (`"as|tc"` style), keeping at most `chi_max`
/// values above `cutoff`; new bonds cut into blocks of `block`.
pub(crate) fn split_two_site(
    ctl: &Controller<'_>,
    theta: &DistTensor,
    split: &str,
    chi_max: usize,
    cutoff: f64,
    block: usize,
) -> Result<TwoSiteSplit, TnError> {
    let f = svd(
        ctl,
        theta,
        split,
        &SvdOptions {
            truncation: SvdTruncation {
                max_rank: Some(chi_max),
                cutoff: Some(cutoff),
                ..SvdTruncation::default()
            },
            s_diag: true,
            k_block: Some(block),
            max_matrix_bytes: None,
        },
    )?;
    let kept_norm = f.s.iter().map(|s| s * s).sum::<f64>().sqrt();
    let s = f.s_diag.ok_or(TnError::Internal(
        "the SVD returned no diagonal tensor although one was asked for",
    ))?;
    Ok(TwoSiteSplit {
        u: f.u,
        s: scale(ctl, 1.0 / kept_norm, &s)?,
        vh: f.vh,
        discarded_weight: f.discarded_weight,
        kept: f.kept,
    })
}
