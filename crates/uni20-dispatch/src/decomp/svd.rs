//! The SVD family: the [`SvdBackend`] trait, its list, the [`svd`] front end and the
//! truncation rule (maximum rank, relative discarded weight, absolute cutoff, degenerate
//! multiplets), which is applied by the front end to every backend's full thin SVD so that
//! all backends truncate identically.

use super::{
    check_factor, check_matrix, check_tol, default_rtol, scale, DecompBackend, DecompBackendList, DecompError,
    DecompKind, MatrixProblem,
};
use crate::backend::{KernelAttempt, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::DType;
use crate::tensor::LocalTensor;
use crate::typed::{elems_of, tensor, Neumaier};

/// The full thin SVD `A = U diag(s) Vh` a backend returns for an `m x n` matrix, with
/// `r = min(m, n)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SvdFactors {
    /// `m x r`, orthonormal columns, the matrix's dtype.
    pub u: LocalTensor,
    /// `r` singular values, non-negative, non-increasing.
    pub s: Vec<f64>,
    /// `r x n`, orthonormal rows, the matrix's dtype.
    pub vh: LocalTensor,
}

/// An SVD backend: [`DecompBackend`] plus the computation.
pub trait SvdBackend: DecompBackend {
    /// The full thin SVD of `problem.matrix` (kind [`DecompKind::Svd`]), untruncated.
    ///
    /// # Errors
    /// Any [`KernelError`] (e.g. no convergence); dispatch then fails without trying
    /// further backends.
    fn svd(&self, problem: &MatrixProblem<'_>) -> Result<SvdFactors, KernelError>;
}

/// Ordered list of SVD backends.
pub type SvdBackendList = DecompBackendList<dyn SvdBackend>;

/// Truncation options of [`svd`]. The default keeps every singular value.
///
/// The kept rank `k` is chosen from the non-increasing singular values `s_0 >= s_1 >= ...`
/// (`r` of them) in this order:
///
/// 1. Dropping: a value is dropped when any criterion drops it (as TeNPy's `svd_min` and
///    `trunc_cut`): `cutoff` drops every value `<= cutoff`; `max_discarded_weight` drops
///    the smallest values as long as `sum_{i>=k} s_i^2 / sum_i s_i^2 <=
///    max_discarded_weight` (both sums taken relative to `s_0`, so that they neither
///    overflow nor underflow whatever the matrix's scale). So `k = min(k_cutoff, k_weight)`, and `k = r` with neither
///    set. (With both set, the discarded weight may exceed the target because the cutoff
///    dropped more.)
/// 2. At least one: if `k == 0` and `s_0 > 0`, then `k = 1`. Only a zero (or empty) matrix
///    can keep nothing (then `u` is `m x 0` and `vh` is `0 x n`).
/// 3. Multiplets: values `s_i`, `s_{i+1}` belong to one degenerate multiplet when
///    `s_i - s_{i+1} <= degeneracy_rtol * s_0` (chained: a multiplet is a maximal run of
///    such neighbours). A cut inside a multiplet moves past the multiplet's end, keeping it
///    whole (so a weight target still holds).
/// 4. `max_rank`: if `k > max_rank`, `k = max_rank`, and a cut inside a multiplet then
///    moves to the multiplet's start, dropping it whole. If that would keep nothing (the leading
///    multiplet alone is larger than `max_rank`), the multiplet is split instead: the
///    first `max_rank` values (in the backend's order) are kept and
///    [`SvdResult::degenerate_split`] is set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SvdOptions {
    /// Keep at most this many values (must be `>= 1`).
    pub max_rank: Option<usize>,
    /// Relative discarded weight target `sum discarded s^2 / sum s^2` (finite, `>= 0`).
    pub max_discarded_weight: Option<f64>,
    /// Absolute cutoff: keep only values `> cutoff` (finite, `>= 0`).
    pub cutoff: Option<f64>,
    /// Relative tolerance of degenerate multiplets (finite, `>= 0`), relative to the
    /// largest singular value. `None`: `1e-12` for `f64`/`c64`, `1e-5` for `f32`/`c32`.
    pub degeneracy_rtol: Option<f64>,
}

/// The (possibly truncated) SVD `A ~= u diag(s) vh` from [`svd`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SvdResult {
    /// `m x kept`, orthonormal columns, the input's dtype.
    pub u: LocalTensor,
    /// The `kept` largest singular values, non-increasing, as `f64` whatever the dtype.
    pub s: Vec<f64>,
    /// `kept x n`, orthonormal rows, the input's dtype.
    pub vh: LocalTensor,
    /// Number of kept values (`s.len()`).
    pub kept: usize,
    /// The discarded singular values, non-increasing (`min(m, n) - kept` of them).
    pub discarded: Vec<f64>,
    /// `sum(discarded^2) / sum(all s^2)`, both sums compensated and taken relative to the
    /// largest value (so finite and accurate at any scale); `0.0` for a zero or empty
    /// matrix.
    pub discarded_weight: f64,
    /// True if `max_rank` forced a cut inside the leading degenerate multiplet (see
    /// [`SvdOptions`]).
    pub degenerate_split: bool,
}

/// Thin singular value decomposition of `matrix` (`m x n`), truncated by `opts`:
/// `matrix ~= u diag(s) vh`, with `u` `m x k`, `vh` `k x n`, `s` non-increasing and
/// `k <= min(m, n)` chosen as described on [`SvdOptions`].
///
/// Empty input (`m == 0` or `n == 0`) gives empty factors: `u` `m x 0`, `s` empty, `vh`
/// `0 x n`, `kept == 0`, `discarded_weight == 0`. The singular vectors of repeated or zero
/// singular values are whatever the backend returns (any orthonormal basis of the
/// subspace).
///
/// Any finite scale is handled: a matrix whose largest entry is outside the dtype's safe
/// range (about `[6.7e-139, 1.5e138]` for `f64`/`c64`, `[9.1e-13, 1.1e12]` for
/// `f32`/`c32`) is scaled exactly by a power of two before the backend runs, and the
/// singular values are unscaled (see `decomp/scale.rs`).
///
/// # Errors
/// [`DecompError::NotMatrix`] (rank != 2), [`DecompError::NonFinite`] (NaN or infinity,
/// naming the first such entry), [`DecompError::InvalidOption`] (`max_rank == 0`, negative
/// or non-finite tolerances), [`DecompError::Dispatch`] (every backend declined, or the
/// committed one failed or returned factors of the wrong dtype/shape or singular values
/// that are negative, non-finite or not sorted), [`DecompError::Overflow`] (a singular
/// value above `f64::MAX`, for entries near it), [`DecompError::Tensor`].
pub fn svd(matrix: &LocalTensor, opts: &SvdOptions, backends: &SvdBackendList) -> Result<SvdResult, DecompError> {
    svd_with_attempts(matrix, opts, backends).map(|(r, _)| r)
}

/// Like [`svd`], also returning the dispatch log (the last entry is the backend that ran).
///
/// # Errors
/// As [`svd`].
pub fn svd_with_attempts(
    matrix: &LocalTensor,
    opts: &SvdOptions,
    backends: &SvdBackendList,
) -> Result<(SvdResult, Vec<KernelAttempt>), DecompError> {
    let op = DecompKind::Svd;
    let (rows, cols) = check_matrix(op, matrix)?;
    let rtol = check_options(opts, matrix.dtype())?;
    let scaled = scale::to_safe_range(matrix)?;
    let problem = MatrixProblem {
        kind: op,
        matrix: scaled.matrix(),
        rows,
        cols,
    };
    let r = rows.min(cols);
    let dtype = matrix.dtype();
    let (mut f, attempts) = backends.dispatch(&problem, |b, p| b.svd(p), |f| check_factors(f, dtype, rows, cols))?;
    scaled.scaling().unscale_values(op, "singular value", &mut f.s)?;
    let cut = choose_rank(&f.s, opts, rtol);
    let k = cut.kept;
    let u = if k == r {
        f.u
    } else {
        with_dtype!(dtype, T => {
            let src = elems_of::<T>(&f.u);
            let data: Vec<T> = src.chunks_exact(r.max(1)).take(rows).flat_map(|row| row[..k].iter().copied()).collect();
            tensor(&[rows, k], data)?
        })
    };
    let vh = if k == r {
        f.vh
    } else {
        with_dtype!(dtype, T => tensor(&[k, cols], elems_of::<T>(&f.vh)[..k * cols].to_vec())?)
    };
    let mut s = f.s;
    let discarded = s.split_off(k);
    Ok((
        SvdResult {
            u,
            s,
            vh,
            kept: k,
            discarded,
            discarded_weight: cut.discarded_weight,
            degenerate_split: cut.split,
        },
        attempts,
    ))
}

/// The outcome of the truncation rule of [`SvdOptions`] on given singular values
/// ([`truncation_rank`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct TruncationRank {
    /// Number of values kept (a prefix of the input).
    pub kept: usize,
    /// `sum(discarded^2) / sum(all s^2)` (`0.0` when all values are zero or there are none).
    pub discarded_weight: f64,
    /// True if `max_rank` forced a cut inside the leading degenerate multiplet.
    pub degenerate_split: bool,
}

/// Applies the truncation rule documented on [`SvdOptions`] to the singular values `s`
/// (non-increasing, finite, `>= 0`) of a matrix of `dtype`, exactly as [`svd`] applies it
/// to a backend's values: the number of values kept and the discarded weight. Callers that
/// gather a spectrum from several pieces (the sectors of a block-diagonal matrix) use this
/// to make the decision [`svd`] would make on the whole matrix.
///
/// # Errors
/// [`DecompError::InvalidOption`] for invalid options (as [`svd`]) or for values that are
/// negative, non-finite or not sorted (option `singular values`).
pub fn truncation_rank(s: &[f64], opts: &SvdOptions, dtype: DType) -> Result<TruncationRank, DecompError> {
    let rtol = check_options(opts, dtype)?;
    let bad = |reason: String| DecompError::InvalidOption {
        op: DecompKind::Svd,
        option: "singular values",
        reason,
    };
    if let Some(i) = s.iter().position(|&x| !(x.is_finite() && x >= 0.0)) {
        return Err(bad(format!("value {i} is {} (not finite and >= 0)", s[i])));
    }
    if let Some(i) = s.windows(2).position(|w| w[0] < w[1]) {
        return Err(bad(format!(
            "not sorted: s[{i}] = {} < s[{}] = {}",
            s[i],
            i + 1,
            s[i + 1]
        )));
    }
    let cut = choose_rank(s, opts, rtol);
    Ok(TruncationRank {
        kept: cut.kept,
        discarded_weight: cut.discarded_weight,
        degenerate_split: cut.split,
    })
}

/// Validates `opts`; returns the degeneracy tolerance in force.
fn check_options(opts: &SvdOptions, dtype: DType) -> Result<f64, DecompError> {
    let op = DecompKind::Svd;
    if opts.max_rank == Some(0) {
        return Err(DecompError::InvalidOption {
            op,
            option: "max_rank",
            reason: "must be at least 1".to_string(),
        });
    }
    if let Some(w) = opts.max_discarded_weight {
        check_tol(op, "max_discarded_weight", w)?;
    }
    if let Some(c) = opts.cutoff {
        check_tol(op, "cutoff", c)?;
    }
    let rtol = opts.degeneracy_rtol.unwrap_or(default_rtol(dtype));
    check_tol(op, "degeneracy_rtol", rtol)?;
    Ok(rtol)
}

/// Checks a backend's factors: dtypes, shapes and the singular values' range and order.
fn check_factors(f: &SvdFactors, dtype: DType, rows: usize, cols: usize) -> Result<(), String> {
    let r = rows.min(cols);
    check_factor("U", &f.u, dtype, [rows, r])?;
    check_factor("Vh", &f.vh, dtype, [r, cols])?;
    if f.s.len() != r {
        return Err(format!("backend returned {} singular values, expected {r}", f.s.len()));
    }
    if let Some(i) = f.s.iter().position(|&x| !(x.is_finite() && x >= 0.0)) {
        return Err(format!("singular value {i} is {} (not finite and >= 0)", f.s[i]));
    }
    if let Some(i) = f.s.windows(2).position(|w| w[0] < w[1]) {
        return Err(format!(
            "singular values not sorted: s[{i}] = {} < s[{}] = {}",
            f.s[i],
            i + 1,
            f.s[i + 1]
        ));
    }
    Ok(())
}

/// The outcome of the truncation rule.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cut {
    kept: usize,
    discarded_weight: f64,
    split: bool,
}

/// Applies the rule documented on [`SvdOptions`] to non-increasing, non-negative `s`.
fn choose_rank(s: &[f64], opts: &SvdOptions, rtol: f64) -> Cut {
    let r = s.len();
    let s0 = s.first().copied().unwrap_or(0.0);
    // The weights are sums of squares relative to the largest value: each s_i is multiplied
    // by the power of two 2^-e that brings s_0 into [0.5, 1) (exact, so the weights are those
    // of the unscaled squares wherever those are representable), and neither the squares
    // nor their sums can overflow or underflow (a square that underflows is below 2^-1000
    // of the total and below its rounding).
    let e = if s0 > 0.0 { -scale::exponent(s0) } else { 0 };
    // tail[k] = sum_{i >= k} (s_i 2^-e)^2, accumulated from the smallest value upwards.
    let mut tail = vec![0.0; r + 1];
    let mut acc = Neumaier::default();
    for i in (0..r).rev() {
        let x = scale::mul_pow2(s[i], e);
        acc.add(x * x);
        tail[i] = acc.total();
    }
    let total = tail[0];
    let weight = |k: usize| if total > 0.0 { tail[k] / total } else { 0.0 };
    let same = |i: usize| s[i - 1] - s[i] <= rtol * s0; // s[i-1], s[i] in one multiplet

    let mut k = r;
    if let Some(c) = opts.cutoff {
        k = k.min(s.iter().take_while(|&&x| x > c).count());
    }
    if let Some(w) = opts.max_discarded_weight {
        k = k.min((0..=r).find(|&j| weight(j) <= w).unwrap_or(r));
    }
    if k == 0 && s0 > 0.0 {
        k = 1;
    }
    while k > 0 && k < r && same(k) {
        k += 1;
    }
    let mut split = false;
    if let Some(m) = opts.max_rank {
        if k > m {
            k = m;
            let mut j = k;
            while j > 0 && j < r && same(j) {
                j -= 1;
            }
            // j == 0: the loop walked through the whole leading multiplet, so it must split.
            if j == 0 {
                split = true;
            } else {
                k = j;
            }
        }
    }
    Cut {
        kept: k,
        discarded_weight: weight(k),
        split,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SvdOptions` with the named fields set to `Some(value)` and the rest default.
    macro_rules! opts {
        ($($field:ident: $value:expr),+) => {
            SvdOptions {
                $($field: Some($value),)+
                ..Default::default()
            }
        };
    }

    fn cut(s: &[f64], opts: SvdOptions) -> Cut {
        choose_rank(s, &opts, 1e-12)
    }

    #[test]
    fn untruncated_keeps_everything() {
        let c = cut(&[3.0, 2.0, 0.0], SvdOptions::default());
        assert_eq!((c.kept, c.discarded_weight, c.split), (3, 0.0, false));
    }

    #[test]
    fn cutoff_weight_and_max_rank() {
        let s = [4.0, 3.0, 2.0, 1.0];
        let total = 30.0;
        let c = cut(&s, opts!(cutoff: 2.0));
        assert_eq!(c.kept, 2);
        assert_eq!(c.discarded_weight, 5.0 / total);
        let c = cut(&s, opts!(max_discarded_weight: 5.0 / total));
        assert_eq!(c.kept, 2);
        let c = cut(&s, opts!(max_discarded_weight: 4.9 / total));
        assert_eq!(c.kept, 3);
        let c = cut(&s, opts!(max_rank: 1, cutoff: 0.5));
        assert_eq!((c.kept, c.discarded_weight), (1, 14.0 / total));
    }

    #[test]
    fn multiplets_are_kept_or_dropped_whole() {
        let s = [5.0, 2.0, 2.0, 2.0, 1.0];
        // The cutoff falls inside the multiplet {2, 2, 2}: keep all of it.
        let c = cut(
            &s,
            SvdOptions {
                max_rank: None,
                cutoff: Some(1.99),
                ..Default::default()
            },
        );
        assert_eq!(c.kept, 4);
        let c = cut(&s, opts!(max_discarded_weight: 9.0 / 38.0));
        assert_eq!(c.kept, 4);
        // max_rank 3 would split it: drop all of it.
        let c = cut(&s, opts!(max_rank: 3));
        assert_eq!((c.kept, c.split), (1, false));
        // A leading multiplet larger than max_rank is split, and reported.
        let c = cut(&[2.0, 2.0, 2.0, 1.0], opts!(max_rank: 2));
        assert_eq!((c.kept, c.split), (2, true));
    }

    #[test]
    fn weights_do_not_depend_on_the_scale() {
        // The weights of [4, 3, 2, 1] are [0, 1, 10, 5, 0] / 30 wherever the squares would
        // overflow (1e154 and up) or underflow (1e-155 and down) as well.
        let base = [4.0, 3.0, 2.0, 1.0];
        for k in (-300..=300).step_by(25) {
            let c = 10f64.powi(k);
            let s: Vec<f64> = base.iter().map(|x| x * c).collect();
            for (w, kept, weight) in [(0.2, 2, 5.0 / 30.0), (0.1, 3, 1.0 / 30.0), (0.0, 4, 0.0)] {
                let got = cut(&s, opts!(max_discarded_weight: w));
                assert_eq!(got.kept, kept, "scale 1e{k}, target {w}");
                assert!(
                    (got.discarded_weight - weight).abs() <= 4e-15 * weight,
                    "scale 1e{k}: {} vs {weight}",
                    got.discarded_weight
                );
            }
        }
        // The example: the second value carries 43 % of the weight, so it stays.
        let c = cut(&[1.5e154, 1.3e154, 1.0], opts!(max_discarded_weight: 0.1));
        assert_eq!(c.kept, 2);
        let want = (1.0 / 1.5e154f64).powi(2) / (1.0 + (1.3f64 / 1.5).powi(2));
        assert!(
            (c.discarded_weight - want).abs() <= 1e-12 * want,
            "{} vs {want}",
            c.discarded_weight
        );
    }

    #[test]
    fn at_least_one_unless_zero() {
        let c = cut(&[1.0, 0.5], opts!(cutoff: 10.0));
        assert_eq!(c.kept, 1);
        let c = cut(&[0.0, 0.0], opts!(cutoff: 0.0));
        assert_eq!((c.kept, c.discarded_weight), (0, 0.0));
        let c = cut(&[], opts!(max_rank: 3));
        assert_eq!((c.kept, c.discarded_weight, c.split), (0, 0.0, false));
    }
}
