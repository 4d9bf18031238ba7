//! The faer backend: what is faer-specific about running a contraction. The lowering to
//! batched GEMMs (grouping, in-place operands, copies) is shared (`crate::lower`); this file
//! holds the faer GEMM call and its thread split ([`split_gemm`]).

use faer::linalg::matmul::matmul_with_conj;
use faer::{Accum, Conj, MatMut, MatRef, Par};

use crate::backend::{ContractBackend, KernelError};
use crate::dtype::with_dtype;
use crate::lower::{AnyStrides, GemmCall, GemmLowering};
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::LocalTensor;

/// GEMM backend built on faer 0.24. Accepts every dtype and every problem.
///
/// The problem is lowered by the shared GEMM lowering: labels summed in one operand
/// pre-reduced; then a plan chosen by the fewest elements moved (the order of the row, column
/// and contracted groups, leading free labels promoted to a loop where that avoids a copy):
/// each operand read **in place** as a strided matrix (any strides, including negative and
/// zero, with its conjugation flag passed to the GEMM) when its row and its column labels
/// each collapse to one stride, else copied once by a blocked, parallel permutation; the
/// output written directly when its row and column groups are contiguous, else through one
/// permuted copy; `beta * C` preloaded and accumulated into. Then
/// `faer::linalg::matmul::matmul_with_conj` runs once per loop index (batch labels and
/// promoted labels); many GEMMs of under 2^18 multiply-adds are spread over the thread budget,
/// one sequential GEMM per task.
///
/// Thread budget: `threads <= 1` runs every GEMM sequentially (`Par::Seq`). Otherwise the
/// output of a GEMM is bisected recursively into up to `threads` blocks: each piece is cut
/// across its own longer side (edges on multiples of 16) while it still has at least
/// 2^18 multiply-adds (`SPLIT_MIN_MACS`) and 32 rows or columns, and each final block runs as one
/// sequential faer GEMM, the halves in parallel through `rayon::join` on the global rayon
/// pool (at most `threads` tasks). Each block packs its own operands, so the threads never
/// wait for one another inside the GEMM; on the 2-core test machine this measured 0-16 %
/// faster than faer's own `Par::rayon(2)` at n = 1024 and 2048 (criterion `ratio` lines,
/// `docs/performance.md`). A rank running alongside others should pass its share of the
/// cores; any budget is accepted (a huge one is capped by the matrix size).
#[derive(Clone, Copy, Debug)]
pub struct FaerBackend {
    threads: usize,
}

impl FaerBackend {
    /// A faer backend with thread budget `threads` (see the type documentation; `0` and `1`
    /// both mean sequential).
    pub fn new(threads: usize) -> FaerBackend {
        FaerBackend { threads }
    }

    /// The thread budget given to [`FaerBackend::new`].
    pub fn threads(&self) -> usize {
        self.threads
    }
}

/// Smallest GEMM (m * n * k multiply-adds) that [`FaerBackend`] splits across threads; below
/// it the fork/join costs more than it saves (faer's own threading threshold is 48*48*256).
pub(crate) const SPLIT_MIN_MACS: usize = 1 << 18;

/// Panel edges are rounded to multiples of this many rows or columns (whole SIMD registers).
const SPLIT_ALIGN: usize = 16;

/// `dst (+)= alpha * op(lhs) * op(rhs)` with `parts` sequential faer GEMMs on disjoint output
/// panels, run in parallel by `rayon::join` (see [`FaerBackend`]).
#[allow(clippy::too_many_arguments)]
fn split_gemm<T: Element + faer::traits::ComplexField>(
    dst: MatMut<'_, T>,
    accum: Accum,
    lhs: MatRef<'_, T>,
    ca: Conj,
    rhs: MatRef<'_, T>,
    cb: Conj,
    alpha: T,
    parts: usize,
) {
    let (m, n) = (dst.nrows(), dst.ncols());
    let macs = m.saturating_mul(n).saturating_mul(lhs.ncols());
    // No more pieces than 16-wide strips of the longer side (also bounds a huge budget).
    let parts = parts.min(m.max(n) / SPLIT_ALIGN);
    if parts <= 1 || macs < SPLIT_MIN_MACS {
        matmul_with_conj(dst, accum, lhs, ca, rhs, cb, alpha, Par::Seq);
        return;
    }
    if m > n {
        // Cut across the longer side: rows of dst are columns of dst^T = op(B)^T op(A)^T.
        return split_gemm(
            dst.transpose_mut(),
            accum,
            rhs.transpose(),
            cb,
            lhs.transpose(),
            ca,
            alpha,
            parts,
        );
    }
    let first = parts / 2;
    // n * first / parts without overflow (first < parts).
    let cut = (n as u128 * first as u128 / parts as u128) as usize;
    let cut = cut
        .div_ceil(SPLIT_ALIGN)
        .saturating_mul(SPLIT_ALIGN)
        .clamp(SPLIT_ALIGN, n - 1);
    let (d0, d1) = dst.split_at_col_mut(cut);
    let (r0, r1) = rhs.split_at_col(cut);
    rayon::join(
        || split_gemm(d0, accum, lhs, ca, r0, cb, alpha, first),
        || split_gemm(d1, accum, lhs, ca, r1, cb, alpha, parts - first),
    );
}

impl ContractBackend for FaerBackend {
    fn name(&self) -> &str {
        "faer"
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        let threads = self.threads.max(1);
        with_dtype!(p.dtype(), T => run_typed::<T>(p, threads))
    }
}

fn conj_flag(c: bool) -> Conj {
    if c {
        Conj::Yes
    } else {
        Conj::No
    }
}

/// The shared GEMM lowering ([`GemmLowering`]) with every GEMM on faer; faer takes any
/// strides, so every collapsible operand stays in place.
fn run_typed<T: Element + faer::traits::ComplexField>(
    p: &ContractProblem<'_>,
    threads: usize,
) -> Result<LocalTensor, KernelError> {
    let mut lowering = GemmLowering::<T>::new(p, &AnyStrides, threads)?;
    lowering.for_each_gemm_par(threads, &|g: GemmCall<T>, threads: usize| -> Result<(), String> {
        let accum = if g.accumulate { Accum::Add } else { Accum::Replace };
        // SAFETY: `GemmCall` guarantees that every (row, col) index of `a` (m x k), `b`
        // (k x n) and `dst` (m x n) at the given strides reaches a live element for the
        // duration of this call, that distinct dst indices are distinct elements, and that dst
        // aliases neither operand and is accessed by nothing else meanwhile.
        unsafe {
            let lhs = MatRef::<T>::from_raw_parts(g.a, g.m, g.k, g.a_rs, g.a_cs);
            let rhs = MatRef::<T>::from_raw_parts(g.b, g.k, g.n, g.b_rs, g.b_cs);
            let dst = MatMut::<T>::from_raw_parts_mut(g.dst, g.m, g.n, g.d_rs, g.d_cs);
            split_gemm(
                dst,
                accum,
                lhs,
                conj_flag(g.conj_a),
                rhs,
                conj_flag(g.conj_b),
                g.alpha,
                threads,
            );
        }
        Ok(())
    })?;
    lowering.finish(p, threads)
}
