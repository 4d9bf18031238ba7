//! GEMM lowering of a [`ContractProblem`]: labels grouped into batch / M (A-free) / N
//! (B-free) / K (contracted), labels summed in one operand pre-reduced, the contracted order
//! chosen to keep operands in place, each operand read in place or copied once, and the
//! output written directly or through one permuted copy. A backend supplies only the GEMM:
//! [`GemmLowering::for_each_gemm`] hands it one [`GemmCall`] per batch element.

use crate::backend::KernelError;
use crate::dtype::C64;
use crate::permute::gather_par;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::{checked_len, LocalTensor};
use crate::view::StridedView;

use super::operand::{concat, for_each_batch, plan_matrix, reduce, storage_order, typed, MatLayout, MatPlan, Operand};

/// One GEMM of a lowered contraction: `dst (+)= alpha * op(A) * op(B)` where `A` is `m x k`,
/// `B` is `k x n`, `dst` is `m x n`, `op` conjugates when the flag is set, and `accumulate`
/// selects `+=` (else `=`).
///
/// Guarantees for the duration of the [`GemmLowering::for_each_gemm`] callback: for every
/// `i < m`, `j < k`, `a.wrapping_offset(i * a_rs + j * a_cs)` points to a live, initialized
/// element (likewise `b` over `k x n` and `dst` over `m x n`); distinct `(i, j)` of `dst` are
/// distinct elements, `dst` is writable and aliases neither `a` nor `b`, and nothing else
/// accesses `dst` during the call. Strides may be negative or zero (for `a`, `b`); when `m`,
/// `n` or `k` is 0 no call is made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmCall<T> {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: *const T,
    pub(crate) a_rs: isize,
    pub(crate) a_cs: isize,
    pub(crate) conj_a: bool,
    pub(crate) b: *const T,
    pub(crate) b_rs: isize,
    pub(crate) b_cs: isize,
    pub(crate) conj_b: bool,
    pub(crate) dst: *mut T,
    pub(crate) d_rs: isize,
    pub(crate) d_cs: isize,
    pub(crate) alpha: T,
    pub(crate) accumulate: bool,
}

/// The matrices of a lowered contraction and how each batch element finds them.
struct Mats<'p, T: Clone> {
    a: MatPlan<'p, T>,
    b: MatPlan<'p, T>,
    m: usize,
    n: usize,
    k: usize,
    batch_dims: Vec<usize>,
    /// Batch strides in A, B and the work buffer.
    batch_strides: [Vec<isize>; 3],
    d_rs: isize,
    d_cs: isize,
}

/// A contraction lowered to batched GEMMs over a work buffer (see the module documentation).
///
/// Plan, per operand: labels summed in only one operand are pre-reduced (one pass, a copy);
/// then the operand is read **in place** as a strided matrix (any row/column strides,
/// including negative and zero, with its conjugation flag passed to the GEMM) when its free
/// labels and its contracted labels each collapse to a single stride (size-1 modes ignored)
/// and the backend's `in_place` predicate accepts the layout. Otherwise it is copied once, by
/// a blocked cache-aware permutation, into `[batch][rows][cols]` order. The contracted labels
/// are ordered to let as many operand elements as possible stay in place. The output is the
/// work buffer itself when its A-free and B-free labels are each contiguous in the row-major
/// output; otherwise the buffer is `[batch][m][n]` and [`finish`](Self::finish) permutes it
/// once. With `beta != 0` the buffer starts as `beta * C` and the GEMMs accumulate.
pub(crate) struct GemmLowering<'p, T: Clone> {
    buf: Vec<T>,
    work_labels: Vec<char>,
    work_shape: Vec<usize>,
    /// True when `work_labels` is the output order.
    direct: bool,
    accumulate: bool,
    alpha: T,
    mats: Option<Mats<'p, T>>,
}

impl<'p, T: Element> GemmLowering<'p, T> {
    /// Lowers `p`. `in_place` decides whether a collapsible operand layout may be handed to
    /// the GEMM as is (faer: always); `threads` bounds the permuted copies.
    ///
    /// # Errors
    /// [`KernelError`] if `T` is not the problem's dtype or an intermediate size overflows.
    pub(crate) fn new(
        p: &ContractProblem<'p>,
        in_place: &dyn Fn(&MatLayout) -> bool,
        threads: usize,
    ) -> Result<GemmLowering<'p, T>, KernelError> {
        let cls = p.classes();
        let out_labels = p.out_labels();
        let mut a = Operand::of_view(p.a_labels(), typed::<T>(p.a())?);
        let mut b = Operand::of_view(p.b_labels(), typed::<T>(p.b())?);
        let gemm_needed = p.alpha() != C64::new(0.0, 0.0) && !p.label_dims().iter().any(|&(_, d)| d == 0);
        if gemm_needed && !cls.summed_a.is_empty() {
            a = reduce(&a, &concat(&[&cls.batch, &cls.free_a, &cls.contracted]))?;
        }
        if gemm_needed && !cls.summed_b.is_empty() {
            b = reduce(&b, &concat(&[&cls.batch, &cls.free_b, &cls.contracted]))?;
        }

        // Output layout: direct into the row-major result when the free groups are contiguous.
        let out_op = Operand::<T>::layout_only(out_labels.to_vec(), p.out_shape().to_vec());
        let direct = out_op.collapse(&cls.free_a).is_some() && out_op.collapse(&cls.free_b).is_some();
        let work_labels = if direct {
            out_labels.to_vec()
        } else {
            concat(&[&cls.batch, &cls.free_a, &cls.free_b])
        };
        let work_shape: Vec<usize> = work_labels.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
        let total = checked_len(&work_shape, T::DTYPE.size_bytes())?;

        // Initial contents: beta * C (in work order) or zeros.
        let buf: Vec<T> = match p.c() {
            Some(c) if total > 0 => {
                let order: Vec<usize> = work_labels
                    .iter()
                    .filter_map(|&l| out_labels.iter().position(|&x| x == l))
                    .collect();
                let mut v = gather_par(typed::<T>(c)?, &order, threads);
                if p.beta() != C64::new(1.0, 0.0) {
                    let beta = T::from_c64(p.beta());
                    for x in &mut v {
                        *x = beta * *x;
                    }
                }
                v
            }
            _ => crate::alloc::zeroed(total),
        };

        let mats = if gemm_needed && total > 0 {
            // Contracted order: whichever storage order keeps more operand elements in place.
            let cands = [storage_order(&a, &cls.contracted), storage_order(&b, &cls.contracted)];
            let cost = |k: &[char]| {
                let ca = if a.collapse(&cls.free_a).is_some() && a.collapse(k).is_some() {
                    0
                } else {
                    a.len()
                };
                let cb = if b.collapse(&cls.free_b).is_some() && b.collapse(k).is_some() {
                    0
                } else {
                    b.len()
                };
                ca + cb
            };
            let [c0, c1] = cands;
            let k_order = if cost(&c1) < cost(&c0) { c1 } else { c0 };
            let am = plan_matrix(a, &cls.batch, &cls.free_a, &k_order, in_place, threads)?;
            let bm = plan_matrix(b, &cls.batch, &k_order, &cls.free_b, in_place, threads)?;
            let prod = |ls: &[char]| ls.iter().map(|&l| p.dim(l).unwrap_or(1)).product::<usize>();
            let work = Operand::<T>::layout_only(work_labels.clone(), work_shape.clone());
            let strides = |o: &Operand<'_, T>| cls.batch.iter().map(|&l| o.stride(l)).collect::<Vec<_>>();
            Some(Mats {
                m: prod(&cls.free_a),
                n: prod(&cls.free_b),
                k: prod(&k_order),
                batch_dims: cls.batch.iter().map(|&l| p.dim(l).unwrap_or(1)).collect(),
                batch_strides: [strides(&am.op), strides(&bm.op), strides(&work)],
                d_rs: work.collapse(&cls.free_a).unwrap_or(1),
                d_cs: work.collapse(&cls.free_b).unwrap_or(1),
                a: am,
                b: bm,
            })
        } else {
            None
        };
        Ok(GemmLowering {
            buf,
            work_labels,
            work_shape,
            direct,
            accumulate: p.c().is_some(),
            alpha: T::from_c64(p.alpha()),
            mats,
        })
    }

    /// Calls `f` once per batch element with that element's GEMM (see [`GemmCall`] for what
    /// the pointers guarantee). Calls nothing when
    /// no GEMM is needed (`alpha == 0` or an extent is 0: the result is `beta * C` or zeros).
    pub(crate) fn for_each_gemm(&mut self, mut f: impl FnMut(GemmCall<T>)) {
        let Some(g) = &self.mats else {
            return;
        };
        let (a_ptr, b_ptr) = (g.a.op.data.as_ptr(), g.b.op.data.as_ptr());
        let (a_base, b_base) = (g.a.op.offset as isize, g.b.op.offset as isize);
        let d_ptr = self.buf.as_mut_ptr();
        let [sa, sb, sd] = &g.batch_strides;
        for_each_batch(&g.batch_dims, [sa, sb, sd], |[oa, ob, od]| {
            // Every operand is a validated strided layout over its slice (checked by
            // `StridedView::new` or built row-major by `gather`/`reduce`), and the row and
            // column groups collapse to the strides given, so each (batch, row, col) index is
            // in bounds. The destination is a fresh row-major buffer over distinct labels.
            f(GemmCall {
                m: g.m,
                n: g.n,
                k: g.k,
                a: a_ptr.wrapping_offset(a_base + oa),
                a_rs: g.a.row_stride,
                a_cs: g.a.col_stride,
                conj_a: g.a.op.conj,
                b: b_ptr.wrapping_offset(b_base + ob),
                b_rs: g.b.row_stride,
                b_cs: g.b.col_stride,
                conj_b: g.b.op.conj,
                dst: d_ptr.wrapping_offset(od),
                d_rs: g.d_rs,
                d_cs: g.d_cs,
                alpha: self.alpha,
                accumulate: self.accumulate,
            })
        });
    }

    /// The result of `p` (the problem this was lowered from): the work buffer, permuted into
    /// output order if it is not already, with up to `threads` threads.
    ///
    /// # Errors
    /// [`KernelError`] on an internal layout error or output size overflow.
    pub(crate) fn finish(self, p: &ContractProblem<'_>, threads: usize) -> Result<LocalTensor, KernelError> {
        let out = if self.direct || self.buf.is_empty() {
            self.buf
        } else {
            let work = StridedView::row_major(&self.buf, &self.work_shape)
                .map_err(|e| KernelError::Failed(format!("internal layout error: {e}")))?;
            let order: Vec<usize> = p
                .out_labels()
                .iter()
                .filter_map(|&l| self.work_labels.iter().position(|&x| x == l))
                .collect();
            gather_par(&work, &order, threads)
        };
        Ok(LocalTensor::from_data(p.out_shape(), T::wrap(out))?)
    }
}
