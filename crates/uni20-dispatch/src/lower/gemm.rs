//! GEMM lowering of a [`ContractProblem`]: labels summed in one operand pre-reduced, then the
//! plan of `plan.rs` carried out (operands read in place or copied once, the output written
//! directly or through one permuted copy). A backend supplies only the GEMM:
//! [`GemmLowering::for_each_gemm_par`] hands it one [`GemmCall`] per loop index.

use crate::backend::KernelError;
use crate::dtype::C64;
use crate::permute::gather_par;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::{checked_len, LocalTensor};

use super::operand::{concat, for_each_batch, for_each_batch_range, reduce, typed, work_view, Operand};
use super::plan::{choose, Groups, LayoutRules, Plan};

/// One GEMM of a lowered contraction: `dst (+)= alpha * op(A) * op(B)` where `A` is `m x k`,
/// `B` is `k x n`, `dst` is `m x n`, `op` conjugates when the flag is set, and `accumulate`
/// selects `+=` (else `=`).
///
/// Guarantees for the duration of the [`GemmLowering::for_each_gemm`] callback: for every
/// `i < m`, `j < k`, `a.wrapping_offset(i * a_rs + j * a_cs)` points to a live, initialized
/// element (likewise `b` over `k x n` and `dst` over `m x n`); distinct `(i, j)` of `dst` are
/// distinct elements, `dst` is writable and aliases neither `a` nor `b`, and nothing else
/// accesses `dst` during the call. When `accumulate` is false, `dst` may be uninitialised
/// memory: the callee must write every element and must not read `dst` (faer's
/// `Accum::Replace` and BLAS's `beta = 0` do neither). Strides may be negative or zero (for `a`, `b`); when `m`,
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

// SAFETY: a `GemmCall` is plain data (pointers, strides, scalars). Sending one to another
// thread is sound under the guarantees above: the callee may read `a` and `b` (shared,
// immutable for the call) and write `dst`, which no other call of the same
// `for_each_gemm_par` writes (distinct loop indices are distinct output elements).
unsafe impl<T: Send> Send for GemmCall<T> {}

/// The matrices of a lowered contraction and how each loop index finds them.
struct Mats<'p, T: Clone> {
    a: Operand<'p, T>,
    a_rs: isize,
    a_cs: isize,
    b: Operand<'p, T>,
    b_rs: isize,
    b_cs: isize,
    m: usize,
    n: usize,
    k: usize,
    loop_dims: Vec<usize>,
    /// Loop strides in A, B and the work buffer.
    loop_strides: [Vec<isize>; 3],
    d_rs: isize,
    d_cs: isize,
}

impl<T: Clone> Mats<'_, T> {
    fn calls(&self) -> usize {
        self.loop_dims.iter().product()
    }
}

/// GEMMs of fewer multiply-adds than this run one per thread (the loop split across threads)
/// rather than each split across threads.
pub(crate) const SMALL_GEMM_MACS: usize = 1 << 18;

/// A contraction lowered to batched GEMMs over a work buffer (see the module documentation).
///
/// Labels summed in only one operand are pre-reduced (one pass, a copy). Then
/// [`plan::choose`](super::plan::choose) picks, under the backend's [`LayoutRules`], the loop
/// labels, the M/N/K orders, which operands are read **in place** (strided, conjugation passed
/// to the GEMM) and whether the GEMMs write the output directly, by the fewest elements
/// moved. An operand not read in place is copied once, by the blocked parallel permutation,
/// into row-major `[loops][rows][cols]`; a non-direct output is a `[loops][m][n]` buffer that
/// [`finish`](Self::finish) permutes once. With `beta != 0` the buffer starts as `beta * C`
/// and the GEMMs accumulate.
pub(crate) struct GemmLowering<'p, T: Clone> {
    /// The work buffer; while `pending > 0` it has length 0 and `pending` elements of
    /// capacity that the GEMMs write before [`for_each_gemm_par`](Self::for_each_gemm_par)
    /// sets the length.
    buf: Vec<T>,
    pending: usize,
    work_labels: Vec<char>,
    work_shape: Vec<usize>,
    /// True when `work_labels` is the output order.
    direct: bool,
    accumulate: bool,
    alpha: T,
    mats: Option<Mats<'p, T>>,
}

/// Operands after pre-reduction (layout only when `with_data` is false), and whether any GEMM
/// is needed.
fn reduced<'p, T: Element>(
    p: &ContractProblem<'p>,
    with_data: bool,
) -> Result<(Operand<'p, T>, Operand<'p, T>, bool), KernelError> {
    let cls = p.classes();
    let mut a = Operand::of_view(p.a_labels(), typed::<T>(p.a())?);
    let mut b = Operand::of_view(p.b_labels(), typed::<T>(p.b())?);
    let gemm_needed = p.alpha() != C64::new(0.0, 0.0) && !p.label_dims().iter().any(|&(_, d)| d == 0);
    for (op, summed, free) in [
        (&mut a, &cls.summed_a, &cls.free_a),
        (&mut b, &cls.summed_b, &cls.free_b),
    ] {
        if gemm_needed && !summed.is_empty() {
            let keep = concat(&[&cls.batch, free, &cls.contracted]);
            *op = if with_data {
                reduce(op, &keep)?
            } else {
                let labels: Vec<char> = op.labels.iter().copied().filter(|l| keep.contains(l)).collect();
                let shape = labels.iter().map(|&l| op.dim(l)).collect();
                Operand::layout_only(labels, shape)
            };
        }
    }
    Ok((a, b, gemm_needed))
}

/// The plan of `p` under `rules`, without copying anything (`None` when no GEMM is needed:
/// `alpha == 0` or an extent is 0).
///
/// # Errors
/// [`KernelError`] if `T` is not the problem's dtype.
#[cfg_attr(not(feature = "blas"), allow(dead_code))]
pub(crate) fn plan_of<T: Element>(
    p: &ContractProblem<'_>,
    rules: &dyn LayoutRules,
) -> Result<Option<Plan>, KernelError> {
    let (a, b, gemm_needed) = reduced::<T>(p, false)?;
    Ok(gemm_needed.then(|| choose_for(p, &a, &b, rules)))
}

fn choose_for<T: Element>(
    p: &ContractProblem<'_>,
    a: &Operand<'_, T>,
    b: &Operand<'_, T>,
    rules: &dyn LayoutRules,
) -> Plan {
    let cls = p.classes();
    let out = Operand::<T>::layout_only(p.out_labels().to_vec(), p.out_shape().to_vec());
    let groups = Groups {
        batch: &cls.batch,
        free_a: &cls.free_a,
        free_b: &cls.free_b,
        contracted: &cls.contracted,
    };
    choose(a, b, &out, &groups, rules)
}

impl<'p, T: Element> GemmLowering<'p, T> {
    /// Lowers `p` under the backend's layout `rules`; `threads` bounds the permuted copies.
    ///
    /// # Errors
    /// [`KernelError`] if `T` is not the problem's dtype or an intermediate size overflows.
    pub(crate) fn new(
        p: &ContractProblem<'p>,
        rules: &dyn LayoutRules,
        threads: usize,
    ) -> Result<GemmLowering<'p, T>, KernelError> {
        let out_labels = p.out_labels();
        let (a, b, gemm_needed) = reduced::<T>(p, true)?;
        let plan = if gemm_needed && !p.out_shape().contains(&0) {
            Some(choose_for(p, &a, &b, rules))
        } else {
            None
        };
        if let Some(pl) = &plan {
            tracing::debug!(
                target: "uni20_dispatch",
                operation = %p.source_spec(),
                loops = %String::from_iter(&pl.loops),
                m = %String::from_iter(&pl.m),
                n = %String::from_iter(&pl.n),
                k = %String::from_iter(&pl.k),
                copy_a = pl.copy_a,
                copy_b = pl.copy_b,
                direct_output = pl.direct,
                "GEMM plan"
            );
        }
        let direct = plan.as_ref().is_none_or(|pl| pl.direct);
        let work_labels = match &plan {
            Some(pl) if !pl.direct => concat(&[&pl.loops, &pl.m, &pl.n]),
            _ => out_labels.to_vec(),
        };
        let work_shape: Vec<usize> = work_labels.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
        let total = checked_len(&work_shape, T::DTYPE.size_bytes())?;

        // Initial contents: beta * C (in work order); nothing when the GEMMs overwrite every
        // element (no C: each work element belongs to exactly one GEMM call, which replaces
        // it; faer's `Accum::Replace` and BLAS's beta = 0 never read the destination); else
        // zeros.
        let mut pending = 0;
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
            None if plan.is_some() => {
                pending = total;
                crate::alloc::uninit_capacity(total)
            }
            _ => crate::alloc::zeroed(total),
        };

        let mats = match &plan {
            Some(pl) => {
                let a = if pl.copy_a {
                    a.permuted(&concat(&[&pl.loops, &pl.m, &pl.k]), threads)?
                } else {
                    a
                };
                let b = if pl.copy_b {
                    b.permuted(&concat(&[&pl.loops, &pl.k, &pl.n]), threads)?
                } else {
                    b
                };
                let prod = |ls: &[char]| ls.iter().map(|&l| p.dim(l).unwrap_or(1)).product::<usize>();
                let work = Operand::<T>::layout_only(work_labels.clone(), work_shape.clone());
                let strides = |o: &Operand<'_, T>| pl.loops.iter().map(|&l| o.stride(l)).collect::<Vec<_>>();
                // The plan checked that these groups collapse (copies are row-major over them).
                let stride = |o: &Operand<'_, T>, g: &[char]| o.collapse(g).unwrap_or(1);
                Some(Mats {
                    a_rs: stride(&a, &pl.m),
                    a_cs: stride(&a, &pl.k),
                    b_rs: stride(&b, &pl.k),
                    b_cs: stride(&b, &pl.n),
                    m: prod(&pl.m),
                    n: prod(&pl.n),
                    k: prod(&pl.k),
                    loop_dims: pl.loops.iter().map(|&l| p.dim(l).unwrap_or(1)).collect(),
                    loop_strides: [strides(&a), strides(&b), strides(&work)],
                    d_rs: stride(&work, &pl.m),
                    d_cs: stride(&work, &pl.n),
                    a,
                    b,
                })
            }
            None => None,
        };
        Ok(GemmLowering {
            buf,
            pending,
            work_labels,
            work_shape,
            direct,
            accumulate: p.c().is_some(),
            alpha: T::from_c64(p.alpha()),
            mats,
        })
    }

    /// The GEMM of the loop index at offsets `[oa, ob, od]`.
    fn call(g: &Mats<'_, T>, d_ptr: *mut T, alpha: T, accumulate: bool, [oa, ob, od]: [isize; 3]) -> GemmCall<T> {
        // Every operand is a validated strided layout over its slice (checked by
        // `StridedView::new` or built row-major by `gather`/`reduce`), and the row and column
        // groups collapse to the strides given, so each (loop, row, col) index is in bounds.
        // The destination is a fresh row-major buffer over distinct labels.
        GemmCall {
            m: g.m,
            n: g.n,
            k: g.k,
            a: g.a.data.as_ptr().wrapping_offset(g.a.offset as isize + oa),
            a_rs: g.a_rs,
            a_cs: g.a_cs,
            conj_a: g.a.conj,
            b: g.b.data.as_ptr().wrapping_offset(g.b.offset as isize + ob),
            b_rs: g.b_rs,
            b_cs: g.b_cs,
            conj_b: g.b.conj,
            dst: d_ptr.wrapping_offset(od),
            d_rs: g.d_rs,
            d_cs: g.d_cs,
            alpha,
            accumulate,
        }
    }

    /// Runs every GEMM (see [`GemmCall`] for what its pointers guarantee) through
    /// `f(call, threads_for_the_call)` within a budget of `threads`; nothing runs when no GEMM
    /// is needed (`alpha == 0` or an extent is 0: the result is `beta * C` or zeros). When
    /// there are several GEMMs of under [`SMALL_GEMM_MACS`] multiply-adds each, the loop is
    /// cut into up to `threads` contiguous ranges run in parallel (`rayon::join`), each call
    /// getting 1 thread; otherwise the calls run in order, each getting `threads`. `f` must
    /// write every element of its call's destination (it may read it only when
    /// `call.accumulate`).
    ///
    /// # Errors
    /// The first error `f` returned (the result is then unusable: [`finish`](Self::finish)
    /// fails).
    pub(crate) fn for_each_gemm_par(
        &mut self,
        threads: usize,
        f: &(dyn Fn(GemmCall<T>, usize) -> Result<(), String> + Sync),
    ) -> Result<(), KernelError> {
        let Some(g) = &self.mats else {
            return Ok(());
        };
        let calls = g.calls();
        let macs = g.m.saturating_mul(g.n).saturating_mul(g.k);
        let first_error: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        let record = |r: Result<(), String>| {
            if let Err(e) = r {
                first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
        };
        // The pointer is valid for the buffer's capacity (a pending buffer has length 0).
        let d = SendPtr(self.buf.as_mut_ptr());
        let (alpha, accumulate) = (self.alpha, self.accumulate);
        if threads <= 1 || calls < 2 || macs >= SMALL_GEMM_MACS {
            let [sa, sb, sd] = &g.loop_strides;
            for_each_batch(&g.loop_dims, [sa, sb, sd], |o| {
                record(f(Self::call(g, d.get(), alpha, accumulate, o), threads))
            });
        } else {
            let run = |start: usize, end: usize| {
                let [sa, sb, sd] = &g.loop_strides;
                for_each_batch_range(&g.loop_dims, [sa, sb, sd], start, end, |o| {
                    record(f(Self::call(g, d.get(), alpha, accumulate, o), 1))
                });
            };
            split_range(0, calls, threads.min(calls), &run);
        }
        if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(KernelError::Failed(e));
        }
        if self.pending > 0 {
            // SAFETY: every call succeeded, and together the calls wrote each of the
            // `pending` work elements (every work label is a loop, row or column label, so
            // each element is the destination of exactly one call; `f` writes all of its
            // destination); the capacity is `pending`.
            unsafe { self.buf.set_len(self.pending) };
            self.pending = 0;
        }
        Ok(())
    }

    /// The result of `p` (the problem this was lowered from): the work buffer, permuted into
    /// output order if it is not already, with up to `threads` threads.
    ///
    /// # Errors
    /// [`KernelError`] on an internal layout error or output size overflow.
    pub(crate) fn finish(self, p: &ContractProblem<'_>, threads: usize) -> Result<LocalTensor, KernelError> {
        if self.pending > 0 {
            return Err(KernelError::Failed(
                "internal error: the GEMMs of the lowering did not run".into(),
            ));
        }
        let out = if self.direct || self.buf.is_empty() {
            self.buf
        } else {
            let (work, order) = work_view(p, &self.buf, &self.work_shape, &self.work_labels)?;
            gather_par(&work, &order, threads)
        };
        Ok(LocalTensor::from_data(p.out_shape(), T::wrap(out))?)
    }
}

/// A destination pointer shared by the parallel loop ranges (each writes distinct elements).
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: the ranges of `for_each_gemm_par` write disjoint elements through it (distinct loop
// indices are distinct output elements) and the buffer outlives the `rayon::join` scope.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as for `Send`: shared use only ever writes disjoint elements.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// Runs `run(start, end)` over `parts` contiguous pieces of `start..end`, in parallel.
fn split_range(start: usize, end: usize, parts: usize, run: &(dyn Fn(usize, usize) + Sync)) {
    if parts <= 1 || end - start < 2 {
        run(start, end);
        return;
    }
    let first = parts / 2;
    let mid = start + (end - start) * first / parts;
    rayon::join(
        || split_range(start, mid, first, run),
        || split_range(mid, end, parts - first, run),
    );
}
