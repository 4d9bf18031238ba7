//! Decompositions of a distributed tensor viewed as a matrix: [`svd`]
//! (with truncation), [`qr`], [`lq`] and [`eigh`]. A label split such as
//! `"ab|cd"` names the modes forming the rows and the columns. The pure
//! split parser lives in `split`, the planner in `plan`, the commands and
//! their handlers in `command` (with the worker's assembly and cutting in
//! `matrix`), and the root's synchronous flow in `run`.
//!
//! # Placement
//! The matrix is assembled on one compute worker, the one owning most
//! bytes of the input (never the root unless it is alone): the other
//! owners send it their blocks directly. It checks every block for NaN and
//! infinities, factorizes through the local dispatcher (the family's
//! backend list with the rank's thread budget), cuts the factors into
//! blocks and commits them; a second command moves the factor blocks from
//! it to their owners, round-robin over the compute workers. No payload
//! passes through the root. A rank-distributed factorization (as ScaLAPACK
//! or ELPA do) is not built: the matrix must fit on one rank
//! ([`DEFAULT_MAX_MATRIX_BYTES`], or the `max_matrix_bytes` option).
//!
//! # Synchronization
//! A truncated SVD's output shape depends on the data, so every call here
//! is a synchronization point: it waits for the input's producing
//! operation, runs, and returns ready tensors.
//!
//! # Symmetric tensors
//! A symmetric input (planner in `symmetric`, commands in `sym_command`,
//! root flow in `sym_run`) is factorized sector by sector: the row legs
//! fuse into a leg of direction `Out`, the column legs into one of
//! direction `In`, and the matrix is block diagonal by charge, one sector
//! matrix per row charge `q_R` (the column charge being `q_R - flux`).
//! The sector matrices are assigned to the compute workers by cost
//! (`m n min(m, n)`), assembled there from blocks fetched worker to worker
//! and factorized in parallel with the same local kernels; only the
//! values come back to the root, which decides the kept counts (the SVD
//! truncation across all sectors, [`truncate_sectors`](crate::symmetry::truncate_sectors)),
//! and the workers cut the factors' blocks, which stay on their sector's
//! worker. The factors are symmetric: the left one (`U`, `Q`, `L`, the
//! eigenvectors) has the row legs and a new bond leg of direction `In`
//! whose sectors carry the row charges, with flux zero; the right one
//! (`Vh`, `R`, `Q` of LQ) has the dual bond (`Out`) and the column legs,
//! and carries the input's flux; `S` has the legs (dual of U's bond, dual
//! of Vh's bond). A sector that keeps nothing has no bond sector. `eigh`
//! needs flux zero and every column leg the dual of its row leg.
//!
//! # Blocking of the factors
//! The row and column modes of the factors keep the input's block extents
//! of those modes, so contracting a factor with tensors blocked like the
//! input needs no reblocking. The new index `k` is cut into blocks of
//! `k_block` (default: the input's largest block extent).

mod command;
pub(crate) mod error;
mod matrix;
mod plan;
mod run;
mod split;
mod sym_command;
mod sym_run;
mod symmetric;

pub(crate) use command::{DistributeFactorsV1, EighV1, QrV1, SvdV1};
use command::{EighDescV1, QrDescV1, SvdDescV1, TruncationV1};
pub use plan::DEFAULT_MAX_MATRIX_BYTES;
use sym_command::SymKindV1;
pub(crate) use sym_command::{SymCutV1, SymFactorizeV1};

use uni20_dispatch::decomp::DecompKind;
use uni20_worker::Controller;

use crate::error::DistError;
use crate::summary::PlanSummary;
use crate::symmetry::Charge;
use crate::tensor::DistTensor;

/// SVD truncation rule (maximum rank, relative discarded weight, absolute
/// cutoff, degenerate multiplets): the local kernel's options, applied on
/// the factorizing worker exactly as [`uni20_dispatch::decomp::svd`] applies them.
/// The rule, including the deterministic handling of degenerate values at
/// the cut, is documented on [`uni20_dispatch::decomp::SvdOptions`].
pub type SvdTruncation = uni20_dispatch::decomp::SvdOptions;

/// Options of [`svd`]. The default keeps every singular value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SvdOptions {
    /// Truncation (default: none).
    pub truncation: SvdTruncation,
    /// Also return the singular values as a `k x k` diagonal tensor
    /// ([`SvdOutput::s_diag`]), of the input's real dtype (`f64` for `f64`
    /// and `c64`, `f32` for `f32` and `c32`).
    pub s_diag: bool,
    /// Block extent of the new index `k` (default: the input's largest
    /// block extent; zero is an error).
    pub k_block: Option<usize>,
    /// Most bytes of the matrix assembled on one rank (default
    /// [`DEFAULT_MAX_MATRIX_BYTES`]).
    pub max_matrix_bytes: Option<u64>,
}

/// Options of [`qr`] and [`lq`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QrOptions {
    /// Block extent of the new index `k` (as [`SvdOptions::k_block`]).
    pub k_block: Option<usize>,
    /// Most bytes of the matrix assembled on one rank (default
    /// [`DEFAULT_MAX_MATRIX_BYTES`]).
    pub max_matrix_bytes: Option<u64>,
}

/// Options of [`eigh`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EighOptions {
    /// The input is accepted as Hermitian when `max |A - A^H| <=
    /// hermitian_rtol * max |A|` (default `1e-12` for `f64`/`c64`, `1e-5`
    /// for `f32`/`c32`); it is then decomposed as `(A + A^H) / 2`.
    pub hermitian_rtol: Option<f64>,
    /// Block extent of the eigenvector index `k` (as [`SvdOptions::k_block`]).
    pub k_block: Option<usize>,
    /// Most bytes of the matrix assembled on one rank (default
    /// [`DEFAULT_MAX_MATRIX_BYTES`]).
    pub max_matrix_bytes: Option<u64>,
}

/// The values of one bond sector of a symmetric decomposition.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BondSector {
    /// The sector's charge on the bond leg: the fused charge `q_R` of the
    /// row legs (the charge of the bond leg's sector; the leg is `In` on
    /// the left factor, `Out` on the right one).
    pub charge: Charge,
    /// Its kept singular values (non-increasing) or eigenvalues
    /// (non-decreasing).
    pub values: Vec<f64>,
}

/// The (possibly truncated) SVD `A ~= U diag(s) Vh` of a matrix view
/// `rows x cols` of a tensor.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SvdOutput {
    /// Shape `(row modes.., k)`, the input's dtype; orthonormal columns.
    pub u: DistTensor,
    /// The `k` kept singular values, non-increasing.
    pub s: Vec<f64>,
    /// `diag(s)`, shape `(k, k)`, when [`SvdOptions::s_diag`] was set.
    pub s_diag: Option<DistTensor>,
    /// Shape `(k, column modes..)`, the input's dtype; orthonormal rows.
    pub vh: DistTensor,
    /// Number of kept values `k` (`s.len()`).
    pub kept: usize,
    /// The discarded singular values, non-increasing.
    pub discarded: Vec<f64>,
    /// `sum(discarded^2) / sum(all s^2)` (`0` for a zero matrix).
    pub discarded_weight: f64,
    /// True if `max_rank` had to split the leading degenerate multiplet.
    pub degenerate_split: bool,
    /// Symmetric input: the kept values of each bond sector, in the bond
    /// leg's sector order (sectors that keep nothing are absent); empty
    /// for a dense input.
    pub sectors: Vec<BondSector>,
    /// The rank that assembled and factorized the matrix (symmetric input:
    /// the rank of the costliest sector matrix).
    pub factorizer: usize,
    /// The plan in numbers (also on every output tensor).
    pub summary: PlanSummary,
}

/// The thin QR `A = Q R`, `k = min(rows, cols)` (for a symmetric input, the
/// sum over charge sectors of each sector matrix's smaller side).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct QrOutput {
    /// Shape `(row modes.., k)`, orthonormal columns.
    pub q: DistTensor,
    /// Shape `(k, column modes..)`, upper trapezoidal as a `k x cols`
    /// matrix, with a real non-negative diagonal.
    pub r: DistTensor,
    /// The rank that assembled and factorized the matrix.
    pub factorizer: usize,
    /// The plan in numbers.
    pub summary: PlanSummary,
}

/// The thin LQ `A = L Q`, `k = min(rows, cols)` (for a symmetric input, the
/// sum over charge sectors of each sector matrix's smaller side).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LqOutput {
    /// Shape `(row modes.., k)`, lower trapezoidal as a `rows x k` matrix,
    /// with a real non-negative diagonal.
    pub l: DistTensor,
    /// Shape `(k, column modes..)`, orthonormal rows.
    pub q: DistTensor,
    /// The rank that assembled and factorized the matrix.
    pub factorizer: usize,
    /// The plan in numbers.
    pub summary: PlanSummary,
}

/// The eigendecomposition `A = V diag(values) V^H` of a Hermitian matrix view.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EighOutput {
    /// The `n` eigenvalues, non-decreasing.
    pub values: Vec<f64>,
    /// Shape `(row modes.., n)`: `vectors[.., j]` is a unit eigenvector of
    /// `values[j]`, indexed like the rows (and, the matrix being square,
    /// like the flattened columns).
    pub vectors: DistTensor,
    /// Symmetric input: the eigenvalues of each bond sector, in the bond
    /// leg's sector order; empty for a dense input.
    pub sectors: Vec<BondSector>,
    /// The rank that assembled and factorized the matrix (symmetric input:
    /// the rank of the costliest sector matrix).
    pub factorizer: usize,
    /// The plan in numbers.
    pub summary: PlanSummary,
}

/// Thin singular value decomposition of `t` viewed as a matrix by `split`,
/// truncated by `opts.truncation`: `A ~= U diag(s) Vh`.
///
/// `split` is `"rows|cols"` with one ASCII letter per mode of `t` in mode
/// order (`"ab|cd"`: modes 0, 1 are the rows, 2, 3 the columns), or
/// `"labels->rows|cols"` to take the modes in any order on each side
/// (`"abcd->ca|db"`: rows `(c, a)`, columns `(d, b)`). Rows and columns
/// are flattened row-major in the order written. `U` has the row modes
/// then `k`; `Vh` has `k` then the column modes. An input without elements
/// gives `k = 0` and empty factors.
///
/// Synchronous (see the module docs): waits for `t`, factorizes on one
/// worker, and returns ready tensors owned round-robin by the compute
/// workers.
///
/// # Errors
/// Before anything runs: [`DistError::Split`] (bad split: syntax, rank,
/// repeated, missing or extra labels, an empty side),
/// [`DistError::MatrixTooLarge`] (over `max_matrix_bytes`),
/// [`DistError::Decomp`] (an invalid truncation option: `max_rank == 0`,
/// negative or non-finite tolerances), [`DistError::Blocking`] (`k_block
/// == 0`, too many blocks). From the data, with the job still usable:
/// [`DistError::NonFinite`] naming the first block holding NaN or an
/// infinity. [`DistError::Job`] (fail-stop) if a command fails on a rank
/// (the diagnostic lists the local backend attempts); the input's own
/// failure as [`DistTensor::wait`].
pub fn svd(ctl: &Controller<'_>, t: &DistTensor, split: &str, opts: &SvdOptions) -> Result<SvdOutput, DistError> {
    if let Some(layout) = t.layout() {
        return sym_svd(ctl, t, layout, split, opts);
    }
    let v = plan::validate(DecompKind::Svd, t.meta(), split, opts.k_block, opts.max_matrix_bytes)?;
    plan::check_truncation(&opts.truncation)?;
    let tr = &opts.truncation;
    let truncation = TruncationV1 {
        max_rank: tr.max_rank.map(|r| r as u64),
        max_discarded_weight: tr.max_discarded_weight,
        cutoff: tr.cutoff,
        degeneracy_rtol: tr.degeneracy_rtol,
    };
    let s_diag = opts.s_diag;
    let f = run::factorize::<SvdV1>(ctl, t, &v, s_diag, |matrix| SvdDescV1 {
        matrix,
        truncation,
        s_diag,
    })?;
    let mut it = f.tensors.into_iter();
    let (u, vh) = (next(&mut it)?, next(&mut it)?);
    let s_diag = it.next();
    Ok(SvdOutput {
        u,
        kept: f.factored.k,
        s: f.factored.values,
        s_diag,
        vh,
        discarded: f.factored.discarded,
        discarded_weight: f.factored.discarded_weight,
        degenerate_split: f.factored.degenerate_split,
        sectors: Vec::new(),
        factorizer: f.factorizer,
        summary: f.summary,
    })
}

/// Thin QR decomposition `A = Q R` of `t` viewed as a matrix by `split`
/// (the forms of [`svd`]); `k = min(rows, cols)`, or for a symmetric input
/// the sum over charge sectors of `min(m_q, n_q)` (a sector matrix with no
/// rows or no columns adds nothing, so `k` can be below the dense one; the
/// bond leg, `In` on `q` and `Out` on `r`, lists the sectors; see the
/// crate's "Symmetric layout" notes). The diagonal of `R` is
/// real and non-negative, so the factors are unique for a matrix of full
/// rank. Synchronous, placed as [`svd`].
///
/// # Errors
/// As [`svd`] (no truncation options).
pub fn qr(ctl: &Controller<'_>, t: &DistTensor, split: &str, opts: &QrOptions) -> Result<QrOutput, DistError> {
    if let Some(layout) = t.layout() {
        let (q, r, factorizer, summary) = sym_qr_family(ctl, t, layout, split, opts, false)?;
        return Ok(QrOutput {
            q,
            r,
            factorizer,
            summary,
        });
    }
    let (q, r, factorizer, summary) = qr_family(ctl, t, split, opts, false)?;
    Ok(QrOutput {
        q,
        r,
        factorizer,
        summary,
    })
}

/// Thin LQ decomposition `A = L Q` of `t` viewed as a matrix by `split`
/// (the forms of [`svd`]); `k = min(rows, cols)` (symmetric input: the sum
/// over sectors, as [`qr`]), computed as the QR of
/// the adjoint. The diagonal of `L` is real and non-negative. Synchronous,
/// placed as [`svd`].
///
/// # Errors
/// As [`qr`].
pub fn lq(ctl: &Controller<'_>, t: &DistTensor, split: &str, opts: &QrOptions) -> Result<LqOutput, DistError> {
    if let Some(layout) = t.layout() {
        let (l, q, factorizer, summary) = sym_qr_family(ctl, t, layout, split, opts, true)?;
        return Ok(LqOutput {
            l,
            q,
            factorizer,
            summary,
        });
    }
    let (l, q, factorizer, summary) = qr_family(ctl, t, split, opts, true)?;
    Ok(LqOutput {
        l,
        q,
        factorizer,
        summary,
    })
}

/// QR (or, with `lq`, LQ) of `t`: the two factors in output order (`Q, R` or
/// `L, Q`), the factorizer and the plan summary.
fn qr_family(
    ctl: &Controller<'_>,
    t: &DistTensor,
    split: &str,
    opts: &QrOptions,
    lq: bool,
) -> Result<(DistTensor, DistTensor, usize, PlanSummary), DistError> {
    let op = if lq { DecompKind::Lq } else { DecompKind::Qr };
    let v = plan::validate(op, t.meta(), split, opts.k_block, opts.max_matrix_bytes)?;
    let f = run::factorize::<QrV1>(ctl, t, &v, false, |matrix| QrDescV1 { matrix, lq })?;
    let mut it = f.tensors.into_iter();
    Ok((next(&mut it)?, next(&mut it)?, f.factorizer, f.summary))
}

/// Eigendecomposition `A = V diag(values) V^H` of `t` viewed as a
/// Hermitian matrix by `split` (the forms of [`svd`]; the matrix must be
/// square: as many rows as columns). Eigenvalues come back non-decreasing
/// on the root; the eigenvectors are the distributed tensor
/// `(row modes.., n)`. Synchronous, placed as [`svd`].
///
/// # Errors
/// As [`svd`], plus [`DistError::Split`] with
/// [`SplitError::NotSquare`](crate::error::SplitError::NotSquare); [`DistError::Decomp`] for an invalid
/// `hermitian_rtol`; and, from the data, [`DistError::NotHermitian`]
/// naming the largest deviation `|A[i, j] - conj(A[j, i])|` and where it
/// is (the job goes on). A symmetric input: [`DistError::SymDecomp`] when
/// the flux is not zero or a column leg is not the dual of its row leg;
/// the Hermiticity test is the dense one (the largest deviation of all
/// sectors against `hermitian_rtol` times the largest entry of all
/// sectors), the deviation named in the dense matrix view.
pub fn eigh(ctl: &Controller<'_>, t: &DistTensor, split: &str, opts: &EighOptions) -> Result<EighOutput, DistError> {
    if let Some(layout) = t.layout() {
        return sym_eigh(ctl, t, layout, split, opts);
    }
    let v = plan::validate(DecompKind::Eigh, t.meta(), split, opts.k_block, opts.max_matrix_bytes)?;
    plan::check_tolerances(DecompKind::Eigh, &[("hermitian_rtol", opts.hermitian_rtol)])?;
    let hermitian_rtol = opts.hermitian_rtol;
    let f = run::factorize::<EighV1>(ctl, t, &v, false, |matrix| EighDescV1 { matrix, hermitian_rtol })?;
    let mut it = f.tensors.into_iter();
    Ok(EighOutput {
        values: f.factored.values,
        vectors: next(&mut it)?,
        sectors: Vec::new(),
        factorizer: f.factorizer,
        summary: f.summary,
    })
}

/// The next factor tensor, or a protocol error if the family produced fewer.
fn next(it: &mut impl Iterator<Item = DistTensor>) -> Result<DistTensor, DistError> {
    it.next()
        .ok_or_else(|| DistError::Protocol("a decomposition produced fewer factors than planned".into()))
}

/// The SVD of a symmetric tensor (see the module docs, "Symmetric tensors").
fn sym_svd(
    ctl: &Controller<'_>,
    t: &DistTensor,
    layout: &crate::symmetry::SymmetricLayout,
    split: &str,
    opts: &SvdOptions,
) -> Result<SvdOutput, DistError> {
    let v = symmetric::validate(
        DecompKind::Svd,
        t.meta(),
        layout,
        split,
        opts.k_block,
        opts.max_matrix_bytes,
    )?;
    plan::check_truncation(&opts.truncation)?;
    let o = sym_run::SymRootOptions {
        truncation: Some(&opts.truncation),
        s_diag: opts.s_diag,
        hermitian: None,
    };
    let f = sym_run::factorize_symmetric(ctl, t, &v, SymKindV1::Svd, o)?;
    let mut s = Vec::new();
    let mut discarded = Vec::new();
    let mut sectors = Vec::new();
    for (charge, values, kept) in f.sectors {
        s.extend_from_slice(&values[..kept]);
        discarded.extend_from_slice(&values[kept..]);
        if kept > 0 {
            sectors.push(BondSector {
                charge,
                values: values[..kept].to_vec(),
            });
        }
    }
    s.sort_by(|a, b| b.total_cmp(a));
    discarded.sort_by(|a, b| b.total_cmp(a));
    let mut it = f.tensors.into_iter();
    let (u, vh) = (next(&mut it)?, next(&mut it)?);
    Ok(SvdOutput {
        u,
        kept: s.len(),
        s,
        s_diag: it.next(),
        vh,
        discarded,
        discarded_weight: f.discarded_weight,
        degenerate_split: f.degenerate_split,
        sectors,
        factorizer: f.factorizer,
        summary: f.summary,
    })
}

/// QR (or LQ) of a symmetric tensor: the two factors, the rank of the
/// costliest sector and the plan summary.
fn sym_qr_family(
    ctl: &Controller<'_>,
    t: &DistTensor,
    layout: &crate::symmetry::SymmetricLayout,
    split: &str,
    opts: &QrOptions,
    lq: bool,
) -> Result<(DistTensor, DistTensor, usize, PlanSummary), DistError> {
    let (op, kind) = if lq {
        (DecompKind::Lq, SymKindV1::Lq)
    } else {
        (DecompKind::Qr, SymKindV1::Qr)
    };
    let v = symmetric::validate(op, t.meta(), layout, split, opts.k_block, opts.max_matrix_bytes)?;
    let f = sym_run::factorize_symmetric(ctl, t, &v, kind, Default::default())?;
    let mut it = f.tensors.into_iter();
    Ok((next(&mut it)?, next(&mut it)?, f.factorizer, f.summary))
}

/// The eigendecomposition of a symmetric operator.
fn sym_eigh(
    ctl: &Controller<'_>,
    t: &DistTensor,
    layout: &crate::symmetry::SymmetricLayout,
    split: &str,
    opts: &EighOptions,
) -> Result<EighOutput, DistError> {
    let v = symmetric::validate(
        DecompKind::Eigh,
        t.meta(),
        layout,
        split,
        opts.k_block,
        opts.max_matrix_bytes,
    )?;
    plan::check_tolerances(DecompKind::Eigh, &[("hermitian_rtol", opts.hermitian_rtol)])?;
    let o = sym_run::SymRootOptions {
        hermitian: Some(uni20_dispatch::decomp::EighOptions {
            hermitian_rtol: opts.hermitian_rtol,
        }),
        ..Default::default()
    };
    let f = sym_run::factorize_symmetric(ctl, t, &v, SymKindV1::Eigh, o)?;
    let mut values: Vec<f64> = f.sectors.iter().flat_map(|(_, v, _)| v.iter().copied()).collect();
    values.sort_by(|a, b| a.total_cmp(b));
    let sectors = f
        .sectors
        .into_iter()
        .map(|(charge, values, _)| BondSector { charge, values })
        .collect();
    let mut it = f.tensors.into_iter();
    Ok(EighOutput {
        values,
        vectors: next(&mut it)?,
        sectors,
        factorizer: f.factorizer,
        summary: f.summary,
    })
}
