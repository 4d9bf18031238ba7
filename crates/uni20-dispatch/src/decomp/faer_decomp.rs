//! The faer backend of the decomposition families: thin SVD, Householder QR and the
//! self-adjoint eigendecomposition of faer 0.24, called through faer's low-level
//! `linalg` entry points so that the thread budget is explicit (faer's high-level
//! `Mat::thin_svd`/`qr`/`self_adjoint_eigen` use faer's global parallelism setting).

use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::evd::{self_adjoint_evd, self_adjoint_evd_scratch, ComputeEigenvectors};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
};
use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch, recommended_block_size};
use faer::linalg::svd::{svd as faer_svd, svd_scratch, ComputeSvdVectors};
use faer::traits::ComplexField;
use faer::{Conj, Mat, MatRef, Par};

use super::eigh::{EighBackend, EighFactors};
use super::qr::{QrBackend, QrFactors};
use super::svd::{SvdBackend, SvdFactors};
use super::{DecompBackend, MatrixProblem};
use crate::backend::KernelError;
use crate::dtype::with_dtype;
use crate::dtype::C64;
use crate::scalar::Element;
use crate::tensor::LocalTensor;
use crate::typed::{elems_of, tensor, Lane};

/// Decomposition backend built on faer 0.24, named `"faer"`. Accepts every family
/// ([`SvdBackend`], [`QrBackend`], [`EighBackend`]), every dtype and every problem,
/// including empty matrices (which it answers without calling faer).
///
/// Thread budget: `threads <= 1` runs sequentially (`Par::Seq`); otherwise faer runs with
/// `Par::rayon(threads)` on the global rayon pool. Routines: `faer::linalg::svd::svd` with
/// thin vectors; `qr::no_pivoting::factor::qr_in_place` (blocked Householder) then the thin
/// Q by applying the Householder sequence to the first `k` columns of the identity;
/// `evd::self_adjoint_evd`.
#[derive(Clone, Copy, Debug)]
pub struct FaerDecompBackend {
    threads: usize,
}

impl FaerDecompBackend {
    /// A faer backend with thread budget `threads` (`0` and `1` both mean sequential).
    pub fn new(threads: usize) -> FaerDecompBackend {
        FaerDecompBackend { threads }
    }

    /// The thread budget given to [`FaerDecompBackend::new`].
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn par(&self) -> Par {
        if self.threads <= 1 {
            Par::Seq
        } else {
            Par::rayon(self.threads)
        }
    }
}

impl DecompBackend for FaerDecompBackend {
    fn name(&self) -> &str {
        "faer"
    }
}

impl SvdBackend for FaerDecompBackend {
    fn svd(&self, p: &MatrixProblem<'_>) -> Result<SvdFactors, KernelError> {
        with_dtype!(p.dtype(), T => svd_typed::<T>(p, self.par()))
    }
}

impl QrBackend for FaerDecompBackend {
    fn qr(&self, p: &MatrixProblem<'_>) -> Result<QrFactors, KernelError> {
        with_dtype!(p.dtype(), T => qr_typed::<T>(p, self.par()))
    }
}

impl EighBackend for FaerDecompBackend {
    fn eigh(&self, p: &MatrixProblem<'_>) -> Result<EighFactors, KernelError> {
        with_dtype!(p.dtype(), T => eigh_typed::<T>(p, self.par()))
    }
}

/// A workspace of `req` bytes, or a [`KernelError`] if it cannot be allocated.
fn workspace(req: StackReq, what: &str) -> Result<MemBuffer, KernelError> {
    MemBuffer::try_new(req).map_err(|_| KernelError::Failed(format!("cannot allocate the {what} workspace")))
}

/// The problem's matrix as a faer view (row-major, so row stride `cols`).
fn matrix_ref<'a, T: Lane + ComplexField>(p: &MatrixProblem<'a>) -> Result<MatRef<'a, T>, KernelError> {
    let data = elems_of::<T>(p.matrix);
    if data.len() != p.rows * p.cols {
        return Err(KernelError::Failed(format!(
            "matrix holds {} elements, expected {}x{}",
            data.len(),
            p.rows,
            p.cols
        )));
    }
    Ok(MatRef::from_row_major_slice(data, p.rows, p.cols))
}

/// Row-major copy of the `rows x cols` faer matrix `m`.
fn row_major<T: Lane + ComplexField>(m: &Mat<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(m.nrows() * m.ncols());
    for i in 0..m.nrows() {
        out.extend((0..m.ncols()).map(|j| m[(i, j)]));
    }
    out
}

/// The real parts of a faer diagonal (singular values or eigenvalues) as `f64`.
fn real_diag<T: Lane + ComplexField>(d: &Diag<T>) -> Vec<f64> {
    d.column_vector().iter().map(|x| Element::to_c64(*x).re).collect()
}

fn svd_typed<T: Lane + ComplexField>(p: &MatrixProblem<'_>, par: Par) -> Result<SvdFactors, KernelError> {
    let (m, n) = (p.rows, p.cols);
    let r = m.min(n);
    if r == 0 {
        return Ok(SvdFactors {
            u: LocalTensor::zeros(T::DTYPE, &[m, 0])?,
            s: Vec::new(),
            vh: LocalTensor::zeros(T::DTYPE, &[0, n])?,
        });
    }
    let a = matrix_ref::<T>(p)?;
    let mut u = Mat::<T>::zeros(m, r);
    let mut v = Mat::<T>::zeros(n, r);
    let mut s = Diag::<T>::zeros(r);
    let thin = ComputeSvdVectors::Thin;
    let mut buf = workspace(svd_scratch::<T>(m, n, thin, thin, par, Default::default()), "svd")?;
    faer_svd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        Some(v.as_mut()),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| KernelError::Failed(format!("faer svd: {e:?}")))?;
    // vh[i, j] = conj(v[j, i]).
    let mut vh = Vec::with_capacity(r * n);
    for i in 0..r {
        vh.extend((0..n).map(|j| Element::conj(v[(j, i)])));
    }
    Ok(SvdFactors {
        u: tensor(&[m, r], row_major(&u))?,
        s: real_diag(&s),
        vh: tensor(&[r, n], vh)?,
    })
}

fn qr_typed<T: Lane + ComplexField>(p: &MatrixProblem<'_>, par: Par) -> Result<QrFactors, KernelError> {
    let (m, n) = (p.rows, p.cols);
    let k = m.min(n);
    if k == 0 {
        return Ok(QrFactors {
            q: LocalTensor::zeros(T::DTYPE, &[m, 0])?,
            r: LocalTensor::zeros(T::DTYPE, &[0, n])?,
        });
    }
    let a = matrix_ref::<T>(p)?;
    let mut f = a.to_owned();
    let bs = recommended_block_size::<T>(m, n);
    let mut coeff = Mat::<T>::zeros(bs, k);
    let mut buf = workspace(qr_in_place_scratch::<T>(m, n, bs, par, Default::default()), "qr")?;
    qr_in_place(
        f.as_mut(),
        coeff.as_mut(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    );
    let zero = <T as Element>::zero();
    let one = <T as Element>::from_c64(C64::new(1.0, 0.0));
    // R: the upper trapezoid of the first k rows.
    let mut r = Vec::with_capacity(k * n);
    for i in 0..k {
        r.extend((0..n).map(|j| if j >= i { f[(i, j)] } else { zero }));
    }
    // The Householder basis: unit lower trapezoid of the first k columns.
    let basis = Mat::<T>::from_fn(m, k, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => f[(i, j)],
        std::cmp::Ordering::Equal => one,
        std::cmp::Ordering::Less => zero,
    });
    let mut q = Mat::<T>::from_fn(m, k, |i, j| if i == j { one } else { zero });
    let mut buf = workspace(
        apply_block_householder_sequence_on_the_left_in_place_scratch::<T>(m, bs, k),
        "householder",
    )?;
    apply_block_householder_sequence_on_the_left_in_place_with_conj(
        basis.as_ref(),
        coeff.as_ref(),
        Conj::No,
        q.as_mut(),
        par,
        MemStack::new(&mut buf),
    );
    Ok(QrFactors {
        q: tensor(&[m, k], row_major(&q))?,
        r: tensor(&[k, n], r)?,
    })
}

fn eigh_typed<T: Lane + ComplexField>(p: &MatrixProblem<'_>, par: Par) -> Result<EighFactors, KernelError> {
    let n = p.rows;
    if n != p.cols {
        return Err(KernelError::Failed(format!(
            "eigh of a non-square {}x{} matrix",
            p.rows, p.cols
        )));
    }
    if n == 0 {
        return Ok(EighFactors {
            values: Vec::new(),
            vectors: LocalTensor::zeros(T::DTYPE, &[0, 0])?,
        });
    }
    let a = matrix_ref::<T>(p)?;
    let mut u = Mat::<T>::zeros(n, n);
    let mut s = Diag::<T>::zeros(n);
    let mut buf = workspace(
        self_adjoint_evd_scratch::<T>(n, ComputeEigenvectors::Yes, par, Default::default()),
        "eigh",
    )?;
    self_adjoint_evd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| KernelError::Failed(format!("faer self_adjoint_evd: {e:?}")))?;
    Ok(EighFactors {
        values: real_diag(&s),
        vectors: tensor(&[n, n], row_major(&u))?,
    })
}

/// The lowest eigenpair of the exactly Hermitian `n x n` row-major `a` (`n >= 1`) by
/// shifted inverse iteration from `start` (see [`eigh_lowest`](super::eigh_lowest)):
/// the eigenvalues alone (`evd::self_adjoint_evd` without vectors: Householder
/// tridiagonalisation and implicit QR), a Cholesky factor of `a - sigma I` with `sigma`
/// `1e-3 gap` (clamped to `[1e-12, 1e-10] max|lambda|`) below the lowest eigenvalue,
/// then solves from `start` until the residual of the Rayleigh quotient is at most
/// `1e-12 max|lambda|`. `Ok(None)` when the lowest level is degenerate (gap at most
/// `1e-11 max|lambda|`), the shifted matrix is not positive definite, `start` vanishes,
/// or eight solves do not reach the residual.
pub(crate) fn lowest_typed<T: Lane + ComplexField>(
    a: &[T],
    n: usize,
    start: &[C64],
    par: Par,
) -> Result<Option<(f64, Vec<C64>, f64)>, KernelError> {
    use faer::linalg::cholesky::llt::{factor, solve};
    let am = MatRef::from_row_major_slice(a, n, n);
    let mut s = Diag::<T>::zeros(n);
    let mut buf = workspace(
        self_adjoint_evd_scratch::<T>(n, ComputeEigenvectors::No, par, Default::default())
            .or(factor::cholesky_in_place_scratch::<T>(n, par, Default::default())),
        "lowest eigenpair",
    )?;
    self_adjoint_evd(am, s.as_mut(), None, par, MemStack::new(&mut buf), Default::default())
        .map_err(|e| KernelError::Failed(format!("faer self_adjoint_evd: {e:?}")))?;
    let values = real_diag(&s);
    let scale = values.iter().fold(0.0f64, |m, l| m.max(l.abs())).max(f64::MIN_POSITIVE);
    // A degenerate lowest level: inverse iteration would distort the start's weights
    // within it by (spread / shift) per solve; the caller diagonalises fully instead.
    let gap = values.get(1).map_or(scale, |l| l - values[0]);
    if gap <= 1e-11 * scale {
        return Ok(None);
    }
    // The shift below the lowest eigenvalue: above its rounding error (about
    // `n eps max|lambda|`), small against the gap (each solve scales the other
    // components by `shift / (gap + shift)`).
    let sigma = values[0] - (1e-3 * gap).clamp(1e-12 * scale, 1e-10 * scale);
    let ac: Vec<C64> = a.iter().map(|x| Element::to_c64(*x)).collect();
    let mut l = Mat::<T>::from_fn(n, n, |i, j| {
        let x = ac[i * n + j];
        <T as Element>::from_c64(if i == j { x - sigma } else { x })
    });
    if factor::cholesky_in_place(
        l.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .is_err()
    {
        return Ok(None);
    }
    let unit = |x: &mut Vec<C64>| {
        let nx = x.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        if nx.is_finite() && nx > 0.0 {
            x.iter_mut().for_each(|z| *z /= nx);
            true
        } else {
            false
        }
    };
    let mut x = start.to_vec();
    if !unit(&mut x) {
        return Ok(None);
    }
    for _ in 0..8 {
        let mut rhs = Mat::<T>::from_fn(n, 1, |i, _| <T as Element>::from_c64(x[i]));
        solve::solve_in_place_with_conj(l.as_ref(), Conj::No, rhs.as_mut(), par, MemStack::new(&mut buf));
        x = (0..n).map(|i| Element::to_c64(rhs[(i, 0)])).collect();
        if !unit(&mut x) {
            return Ok(None);
        }
        let ax: Vec<C64> = (0..n)
            .map(|i| ac[i * n..(i + 1) * n].iter().zip(&x).map(|(m, v)| m * v).sum())
            .collect();
        let theta: f64 = x.iter().zip(&ax).map(|(v, w)| (v.conj() * w).re).sum();
        let residual = ax
            .iter()
            .zip(&x)
            .map(|(w, v)| (w - v * theta).norm_sqr())
            .sum::<f64>()
            .sqrt();
        if residual <= 1e-12 * scale {
            return Ok(Some((theta, x, residual)));
        }
    }
    Ok(None)
}
