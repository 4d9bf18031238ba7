//! Many small block products into one output block ([`PairContraction`]): the local kernel of
//! a block-sparse (symmetric) contraction, where one output block is the sum of the GEMMs of
//! its block pairs `C = alpha * sum_p einsum(spec, op(A_p), op(B_p)) + beta * C_in`.
//!
//! The spec is analysed once ([`PairContraction::new`]): every label is either contracted (in
//! both operands, not in the output) or free (in one operand and the output), each at most
//! once per operand. Then [`PairContraction::run`] keeps three buffers for the whole item (A
//! packed as `M x K`, B packed as `K x N`, the accumulator `M x N`), grown to the largest pair
//! and reused for every pair: an operand whose labels already are in matrix order (or its
//! transpose) is read in place; any other is packed by one blocked copy into the reused
//! buffer. Each pair is one faer GEMM accumulating into the accumulator, whose rows are A's
//! free labels and columns B's free labels in output order; it becomes the output block by at
//! most one permuted copy at the end. No allocation per pair (except casting a block whose
//! dtype is narrower than the output's).
//!
//! Pairs where one operand is tiny (at most `DIRECT_MAX_SMALL` = 16 elements: an MPO block
//! against an environment block, whose GEMMs have an inner extent of 1-3) skip the GEMM: the
//! big operand is streamed once per non-zero element of the small one straight into the
//! output in output order (`accumulate_direct`), so neither operand is packed and the output
//! is not permuted. Such a pair is memory-bound either way; the direct form moves each
//! element of the big operand once per small-side element instead of three copies.

use faer::linalg::matmul::matmul_with_conj;
use faer::{Accum, Conj, MatMut, MatRef, Par};

use crate::dtype::{with_dtype, DType, C64};
use crate::error::{check_scalars, ContractError};
use crate::permute::gather_slabs_into;
use crate::scalar::Element;
use crate::spec::ResolvedSpec;
use crate::tensor::{LocalTensor, TensorError};
use crate::view::StridedView;

mod direct;

/// Largest operand (its free elements times the contracted ones) that a pair streams
/// against instead of a GEMM (see the module docs).
pub(crate) const DIRECT_MAX_SMALL: usize = 16;

/// How [`PairContraction::run`] computes an item's pairs (`run` always picks; the tests
/// force each path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
enum Path {
    /// Direct when every pair has a tiny operand, else GEMM.
    Auto,
    /// GEMMs into an accumulator in `[A free, B free]` order.
    Gemm,
    /// Streaming against the tiny operand (every pair must have one).
    Direct,
}

/// A two-operand spec analysed for block-pair accumulation (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairContraction {
    /// Per output label (row-major output order): its position in the accumulator's
    /// `[A free labels..., B free labels...]`.
    out_from_acc: Vec<usize>,
    /// Positions in A of `[A free labels in output order..., contracted labels in A order...]`.
    a_order: Vec<usize>,
    /// Positions in B of `[contracted labels in A order..., B free labels in output order...]`.
    b_order: Vec<usize>,
    /// Number of A's free labels (rows of the GEMMs are their product).
    a_free: usize,
    /// Number of contracted labels.
    contracted: usize,
    conj: [bool; 2],
}

fn pair_error(reason: String) -> ContractError {
    ContractError::PairSpec { reason }
}

/// Rows, columns and strides of `data` read as a matrix in the order `order` of its shape,
/// split after `split` dims, when that is the identity or a swap of the two groups.
fn in_place(shape: &[usize], order: &[usize], split: usize) -> Option<(usize, usize, isize, isize)> {
    let rows: usize = order[..split].iter().map(|&p| shape[p]).product();
    let cols: usize = order[split..].iter().map(|&p| shape[p]).product();
    let identity = order.iter().enumerate().all(|(i, &p)| i == p);
    if identity {
        return Some((rows, cols, cols as isize, 1));
    }
    // Transposed: the stored order is [cols group..., rows group...], each group in order.
    let r = order.len() - split;
    let swapped = order[split..].iter().enumerate().all(|(i, &p)| p == i)
        && order[..split].iter().enumerate().all(|(i, &p)| p == r + i);
    swapped.then_some((rows, cols, 1, rows as isize))
}

impl PairContraction {
    /// Analyses `spec` (two operands) with conjugation flags `conj` for A and B.
    ///
    /// # Errors
    /// [`ContractError::PairSpec`] unless the spec has two operands, no label twice in one
    /// operand, every label of both operands absent from the output (contracted) and every
    /// other label in exactly one operand and in the output (free); no batch labels, traces,
    /// diagonals or summed free labels.
    pub fn new(spec: &ResolvedSpec, conj: [bool; 2]) -> Result<PairContraction, ContractError> {
        let inputs = spec.inputs();
        if inputs.len() != 2 {
            return Err(pair_error(format!("{} operands (two are needed)", inputs.len())));
        }
        let (a, b, out) = (&inputs[0], &inputs[1], spec.output());
        for (name, labels) in [('A', a), ('B', b)] {
            for (i, l) in labels.iter().enumerate() {
                if labels[..i].contains(l) {
                    return Err(pair_error(format!("label `{l}` is repeated in {name}")));
                }
                let other = if name == 'A' { b } else { a };
                match (other.contains(l), out.contains(l)) {
                    (true, true) => return Err(pair_error(format!("label `{l}` is a batch label"))),
                    (false, false) => return Err(pair_error(format!("free label `{l}` of {name} is summed"))),
                    _ => {}
                }
            }
        }
        let a_free_out: Vec<char> = out.iter().copied().filter(|l| a.contains(l)).collect();
        let b_free_out: Vec<char> = out.iter().copied().filter(|l| b.contains(l)).collect();
        let contracted: Vec<char> = a.iter().copied().filter(|l| b.contains(l)).collect();
        let pos = |labels: &[char], l: &char| labels.iter().position(|x| x == l).unwrap_or(0);
        let acc_labels: Vec<char> = a_free_out.iter().chain(&b_free_out).copied().collect();
        Ok(PairContraction {
            out_from_acc: out.iter().map(|l| pos(&acc_labels, l)).collect(),
            a_order: a_free_out.iter().chain(&contracted).map(|l| pos(a, l)).collect(),
            b_order: contracted.iter().chain(&b_free_out).map(|l| pos(b, l)).collect(),
            a_free: a_free_out.len(),
            contracted: contracted.len(),
            conj,
        })
    }

    /// `alpha * sum_p einsum(op(A_p), op(B_p)) + beta * C_in` as a new tensor of `out_dtype`
    /// and shape `out_shape` (`pairs` may be empty: then `beta * C_in`, or zeros). Every pair
    /// must give `out_shape`; `c_in` (read only when `beta != 0`) must have it. `threads` is
    /// the thread budget of each GEMM (large pairs are split across threads as the faer
    /// backend does; small ones run sequentially).
    ///
    /// # Errors
    /// [`ContractError::Shape`] for a pair or C of another output shape or operands whose
    /// contracted extents differ, [`ContractError::Spec`] for an operand of the wrong rank,
    /// [`ContractError::ComplexScalarForRealOutput`], [`ContractError::Tensor`] for a dtype
    /// that cannot be cast to `out_dtype` without loss (see [`DType::promote`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        alpha: C64,
        pairs: &[(&LocalTensor, &LocalTensor)],
        beta: C64,
        c_in: Option<&LocalTensor>,
        out_dtype: DType,
        out_shape: &[usize],
        threads: usize,
    ) -> Result<LocalTensor, ContractError> {
        let c_in = c_in.filter(|_| beta != C64::new(0.0, 0.0));
        check_scalars(out_dtype, alpha, c_in.map(|_| beta))?;
        if let Some(c) = c_in {
            if c.shape() != out_shape {
                return Err(ContractError::Shape {
                    expected: out_shape.to_vec(),
                    got: c.shape().to_vec(),
                });
            }
        }
        with_dtype!(out_dtype, T => self.run_typed::<T>(alpha, pairs, beta, c_in, out_shape, threads, Path::Auto))
    }

    /// Whether operand A (`Some(true)`) or B (`Some(false)`) of a pair of these shapes
    /// is small enough to stream against ([`DIRECT_MAX_SMALL`]); `None` otherwise.
    fn small_side(&self, sa: &[usize], sb: &[usize]) -> Option<bool> {
        let k: usize = (0..self.contracted)
            .map(|i| sa[self.a_order[self.a_free + i]])
            .product();
        let a_free: usize = self.a_order[..self.a_free].iter().map(|&p| sa[p]).product();
        let b_free: usize = self.b_order[self.contracted..].iter().map(|&p| sb[p]).product();
        let (a_small, b_small) = (k.saturating_mul(a_free), k.saturating_mul(b_free));
        if b_small <= DIRECT_MAX_SMALL && b_small <= a_small {
            Some(false)
        } else if a_small <= DIRECT_MAX_SMALL {
            Some(true)
        } else {
            None
        }
    }

    /// Checks one pair against the spec and the output shape without allocating (the
    /// error, when there is one, builds its shapes).
    fn check_pair(&self, a: &LocalTensor, b: &LocalTensor, out_shape: &[usize]) -> Result<(), ContractError> {
        for (operand, (t, order)) in [(a, &self.a_order), (b, &self.b_order)].into_iter().enumerate() {
            if t.shape().len() != order.len() {
                return Err(crate::SpecError::RankMismatch {
                    operand,
                    expected: order.len(),
                    got: t.shape().len(),
                }
                .into());
            }
        }
        let (sa, sb) = (a.shape(), b.shape());
        let contracted_ok = (0..self.contracted).all(|i| sa[self.a_order[self.a_free + i]] == sb[self.b_order[i]]);
        // Extent of accumulator dim p: A's free dims first, then B's.
        let acc_extent = |p: usize| {
            if p < self.a_free {
                sa[self.a_order[p]]
            } else {
                sb[self.b_order[self.contracted + p - self.a_free]]
            }
        };
        let out_ok = out_shape.len() == self.out_from_acc.len()
            && self
                .out_from_acc
                .iter()
                .zip(out_shape)
                .all(|(&p, &n)| acc_extent(p) == n);
        if contracted_ok && out_ok {
            return Ok(());
        }
        let got = if contracted_ok {
            self.out_from_acc.iter().map(|&p| acc_extent(p)).collect()
        } else {
            sb.to_vec()
        };
        Err(ContractError::Shape {
            expected: out_shape.to_vec(),
            got,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn run_typed<T: Element + faer::traits::ComplexField>(
        &self,
        alpha: C64,
        pairs: &[(&LocalTensor, &LocalTensor)],
        beta: C64,
        c_in: Option<&LocalTensor>,
        out_shape: &[usize],
        threads: usize,
        path: Path,
    ) -> Result<LocalTensor, ContractError> {
        let len: usize = out_shape.iter().product();
        let direct = match path {
            Path::Gemm => false,
            Path::Direct => true,
            Path::Auto => {
                !pairs.is_empty()
                    && pairs.iter().all(|(a, b)| {
                        self.check_pair(a, b, out_shape).is_ok() && self.small_side(a.shape(), b.shape()).is_some()
                    })
            }
        };
        if direct {
            let mut out: Vec<T> = crate::alloc::zeroed(len);
            let alpha_t = T::from_c64(alpha);
            for &(a, b) in pairs {
                self.check_pair(a, b, out_shape)?;
                let (a, b) = (cast_to::<T>(a)?, cast_to::<T>(b)?);
                let small_is_a = self.small_side(a.shape(), b.shape()).unwrap_or(false);
                self.accumulate_direct(
                    &mut out,
                    out_shape,
                    (elems::<T>(&a), a.shape()),
                    (elems::<T>(&b), b.shape()),
                    small_is_a,
                    alpha_t,
                );
            }
            return finish(out, out_shape, beta, c_in);
        }
        let mut acc: Vec<T> = crate::alloc::zeroed(len);
        let (mut pa, mut pb): (Vec<T>, Vec<T>) = (Vec::new(), Vec::new());
        let alpha_t = T::from_c64(alpha);
        let conj = |c: bool| if c { Conj::Yes } else { Conj::No };
        for &(a, b) in pairs {
            self.check_pair(a, b, out_shape)?;
            let (a, b) = (cast_to::<T>(a)?, cast_to::<T>(b)?);
            let (ad, bd) = (elems::<T>(&a), elems::<T>(&b));
            let (m, k, a_rs, a_cs, a_ptr) = matrix(ad, a.shape(), &self.a_order, self.a_free, &mut pa);
            let (k2, n, b_rs, b_cs, b_ptr) = matrix(bd, b.shape(), &self.b_order, self.contracted, &mut pb);
            debug_assert_eq!(k, k2);
            if m * n == 0 {
                continue;
            }
            // SAFETY: `matrix` returned a pointer into a live buffer (the operand's elements,
            // or the pack buffer, which is not touched until the next pair) with `m x k`
            // (resp. `k x n`) elements reachable at the given strides; `acc` has `m * n`
            // elements (check_pair: the pair's output shape is `out_shape`), is row-major
            // with row stride `n`, and aliases neither operand.
            unsafe {
                let lhs = MatRef::<T>::from_raw_parts(a_ptr, m, k, a_rs, a_cs);
                let rhs = MatRef::<T>::from_raw_parts(b_ptr, k, n, b_rs, b_cs);
                let dst = MatMut::<T>::from_raw_parts_mut(acc.as_mut_ptr(), m, n, n as isize, 1);
                matmul_with_conj(
                    dst,
                    Accum::Add,
                    lhs,
                    conj(self.conj[0]),
                    rhs,
                    conj(self.conj[1]),
                    alpha_t,
                    par(threads, m, n, k),
                );
            }
        }
        // The accumulator's dims are [A free..., B free...] in output order per operand.
        let identity = self.out_from_acc.iter().enumerate().all(|(i, &p)| i == p);
        let out = if identity || len == 0 {
            acc
        } else {
            let mut acc_shape = vec![0; out_shape.len()];
            for (o, &p) in self.out_from_acc.iter().enumerate() {
                acc_shape[p] = out_shape[o];
            }
            let view = StridedView::row_major(&acc, &acc_shape)?;
            let mut out = Vec::with_capacity(len);
            gather_slabs_into(&view, &self.out_from_acc, &mut out, threads);
            out
        };
        finish(out, out_shape, beta, c_in)
    }
}

/// `out + beta * C_in` as the output tensor.
fn finish<T: Element>(
    mut out: Vec<T>,
    out_shape: &[usize],
    beta: C64,
    c_in: Option<&LocalTensor>,
) -> Result<LocalTensor, ContractError> {
    if let Some(c) = c_in {
        let c = cast_to::<T>(c)?;
        let beta = T::from_c64(beta);
        for (o, &x) in out.iter_mut().zip(elems::<T>(&c)) {
            *o += beta * x;
        }
    }
    Ok(crate::typed::tensor(out_shape, out)?)
}

/// faer's parallelism for one GEMM: sequential below 2^18 multiply-adds (where the fork
/// costs more than it saves) or with one thread.
fn par(threads: usize, m: usize, n: usize, k: usize) -> Par {
    if threads <= 1 || m.saturating_mul(n).saturating_mul(k) < crate::faer_backend::SPLIT_MIN_MACS {
        Par::Seq
    } else {
        Par::rayon(threads)
    }
}

fn cast_to<T: Element>(t: &LocalTensor) -> Result<std::borrow::Cow<'_, LocalTensor>, TensorError> {
    if t.dtype() == T::DTYPE {
        Ok(std::borrow::Cow::Borrowed(t))
    } else {
        t.cast(T::DTYPE).map(std::borrow::Cow::Owned)
    }
}

fn elems<T: Element>(t: &LocalTensor) -> &[T] {
    crate::typed::elems_of::<T>(t)
}

/// `data` (row-major of `shape`) as a matrix whose rows are dims `order[..split]` and columns
/// `order[split..]`: in place when possible, else packed into `pack` (reused: it only grows).
/// Returns rows, columns, row and column strides and the first element.
fn matrix<T: Element>(
    data: &[T],
    shape: &[usize],
    order: &[usize],
    split: usize,
    pack: &mut Vec<T>,
) -> (usize, usize, isize, isize, *const T) {
    if let Some((r, c, rs, cs)) = in_place(shape, order, split) {
        return (r, c, rs, cs, data.as_ptr());
    }
    let rows: usize = order[..split].iter().map(|&p| shape[p]).product();
    let cols: usize = order[split..].iter().map(|&p| shape[p]).product();
    // A row-major view of a tensor's own elements is always valid.
    if let Ok(view) = StridedView::row_major(data, shape) {
        gather_slabs_into(&view, order, pack, 1);
    }
    (rows, cols, cols as isize, 1, pack.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{einsum, BackendList, ContractOptions};

    fn t(shape: &[usize], seed: u64) -> LocalTensor {
        let n: usize = shape.iter().product();
        let mut s = seed | 1;
        let v = (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f64 / 1000.0 - 1.0
            })
            .collect();
        LocalTensor::from_f64(shape, v).unwrap()
    }

    fn c(shape: &[usize], seed: u64) -> LocalTensor {
        let re = t(shape, seed).cast(DType::C64).unwrap();
        let im = t(shape, seed + 7);
        let v: Vec<C64> = re
            .to_c64_vec()
            .iter()
            .zip(im.to_c64_vec())
            .map(|(r, i)| C64::new(r.re, i.re))
            .collect();
        LocalTensor::from_c64(shape, v).unwrap()
    }

    /// The pair kernel equals the sum of per-pair einsums through the reference backend, for
    /// label orders needing no copy, a transpose, a packed copy and a permuted output.
    #[test]
    fn pairs_equal_the_sum_of_reference_einsums() {
        let cpu = BackendList::reference_only();
        for (spec, conj) in [
            ("ij,jk->ik", [false, false]),
            ("ji,jk->ik", [true, false]),
            ("ij,kj->ik", [false, true]),
            ("iaj,jbk->kbia", [true, true]),
            ("ajb,bjc->ac", [false, false]),
            ("ij,ij->", [true, false]),
            ("i,j->ji", [false, false]),
        ] {
            let spec = ResolvedSpec::parse(spec).unwrap();
            let k = PairContraction::new(&spec, conj).unwrap();
            let dim = |l: char, p: usize| 2 + (l as usize + p) % 3;
            for complex in [false, true] {
                let mut blocks = Vec::new();
                for p in 0..3u64 {
                    let sa: Vec<usize> = spec.inputs()[0].iter().map(|&l| dim(l, 0)).collect();
                    let sb: Vec<usize> = spec.inputs()[1].iter().map(|&l| dim(l, 0)).collect();
                    let (a, b) = if complex {
                        (c(&sa, 3 + p), c(&sb, 11 + p))
                    } else {
                        (t(&sa, 3 + p), t(&sb, 11 + p))
                    };
                    blocks.push((a, b));
                }
                let out_shape: Vec<usize> = spec.output().iter().map(|&l| dim(l, 0)).collect();
                let dt = if complex { DType::C64 } else { DType::F64 };
                let cin = if complex { c(&out_shape, 99) } else { t(&out_shape, 99) };
                let (alpha, beta) = if complex {
                    (C64::new(0.5, -1.0), C64::new(-2.0, 0.25))
                } else {
                    (C64::new(0.5, 0.0), C64::new(-2.0, 0.0))
                };
                let refs: Vec<(&LocalTensor, &LocalTensor)> = blocks.iter().map(|(a, b)| (a, b)).collect();
                let got = k.run(alpha, &refs, beta, Some(&cin), dt, &out_shape, 1).unwrap();
                // Both paths, forced, whatever `run` picked.
                let by_path = |path| {
                    with_dtype!(dt, T => k.run_typed::<T>(alpha, &refs, beta, Some(&cin), &out_shape, 1, path)).unwrap()
                };
                let (gemm, direct) = (by_path(Path::Gemm), by_path(Path::Direct));
                let mut want = cin.clone();
                let mut first = true;
                for (a, b) in &blocks {
                    let opts = ContractOptions {
                        alpha,
                        beta: if first { beta } else { C64::new(1.0, 0.0) },
                        c: Some(&want),
                        conj,
                        strict_blocking: true,
                    };
                    want = einsum(&spec, &[a, b], &opts, &cpu).unwrap().0;
                    first = false;
                }
                let w = want.to_c64_vec();
                for (name, got) in [("run", &got), ("gemm", &gemm), ("direct", &direct)] {
                    assert_eq!(got.shape(), want.shape(), "{name}");
                    for (x, y) in got.to_c64_vec().iter().zip(&w) {
                        assert!((x - y).norm() <= 1e-12 * (1.0 + y.norm()), "{name} {spec}: {x} vs {y}");
                    }
                }
            }
        }
    }

    /// An MPO-like tiny operand (with zeros and extent-1 legs) against an environment-like
    /// one, as the symmetric DMRG contracts them: `run` streams it (the direct path) and
    /// agrees with the GEMM path; large operands take the GEMM path.
    #[test]
    fn tiny_operands_are_streamed_and_agree_with_gemm() {
        let spec = ResolvedSpec::parse("awc,wvst->asvct").unwrap();
        let k = PairContraction::new(&spec, [false, false]).unwrap();
        let l = t(&[7, 3, 5], 1);
        let mut w = t(&[3, 2, 1, 1], 2).to_c64_vec();
        w[1] = C64::new(0.0, 0.0);
        w[4] = C64::new(0.0, 0.0);
        let w = LocalTensor::from_f64(&[3, 2, 1, 1], w.iter().map(|z| z.re).collect()).unwrap();
        assert_eq!(k.small_side(l.shape(), w.shape()), Some(false));
        let out_shape = [7, 1, 2, 5, 1];
        let refs = [(&l, &w), (&l, &w)];
        let one = C64::new(1.0, 0.0);
        let got = k
            .run(one, &refs, C64::new(0.0, 0.0), None, DType::F64, &out_shape, 1)
            .unwrap();
        let gemm = k
            .run_typed::<f64>(one, &refs, C64::new(0.0, 0.0), None, &out_shape, 1, Path::Gemm)
            .unwrap();
        let (lv, wv, gv) = (l.to_c64_vec(), w.to_c64_vec(), got.to_c64_vec());
        for a in 0..7 {
            for v in 0..2 {
                for c in 0..5 {
                    let want: f64 = (0..3)
                        .map(|x| 2.0 * lv[(a * 3 + x) * 5 + c].re * wv[x * 2 + v].re)
                        .sum();
                    let i = ((a * 2 + v) * 5) + c;
                    assert!((gv[i].re - want).abs() < 1e-12, "{a} {v} {c}");
                }
            }
        }
        assert_eq!(got.shape(), gemm.shape());
        for (x, y) in gv.iter().zip(gemm.to_c64_vec()) {
            assert!((x - y).norm() < 1e-12);
        }
        let big = PairContraction::new(&ResolvedSpec::parse("ij,jk->ik").unwrap(), [false; 2]).unwrap();
        assert_eq!(big.small_side(&[20, 20], &[20, 20]), None);
        assert_eq!(big.small_side(&[20, 4], &[4, 4]), Some(false));
        assert_eq!(big.small_side(&[2, 3], &[3, 40]), Some(true));
    }

    #[test]
    fn no_pairs_give_beta_c_or_zeros_and_bad_specs_are_refused() {
        let spec = ResolvedSpec::parse("ij,jk->ik").unwrap();
        let k = PairContraction::new(&spec, [false; 2]).unwrap();
        let z = k
            .run(
                C64::new(1.0, 0.0),
                &[],
                C64::new(0.0, 0.0),
                None,
                DType::F32,
                &[2, 3],
                1,
            )
            .unwrap();
        assert_eq!(z, LocalTensor::zeros(DType::F32, &[2, 3]).unwrap());
        let cin = t(&[2, 3], 5);
        let s = k
            .run(
                C64::new(1.0, 0.0),
                &[],
                C64::new(2.0, 0.0),
                Some(&cin),
                DType::F64,
                &[2, 3],
                1,
            )
            .unwrap();
        let want: Vec<C64> = cin.to_c64_vec().iter().map(|x| *x * 2.0).collect();
        assert_eq!(s.to_c64_vec(), want);
        // A pair of the wrong shape is a typed error, not a panic.
        let (a, b) = (t(&[2, 4], 1), t(&[3, 3], 2));
        assert!(matches!(
            k.run(
                C64::new(1.0, 0.0),
                &[(&a, &b)],
                C64::new(0.0, 0.0),
                None,
                DType::F64,
                &[2, 3],
                1
            ),
            Err(ContractError::Shape { .. })
        ));
        for bad in ["ii,ij->j", "ij,jk->ijk", "ij,jk->i", "ij->ij"] {
            let spec = ResolvedSpec::parse(bad).unwrap();
            assert!(
                matches!(
                    PairContraction::new(&spec, [false; 2]),
                    Err(ContractError::PairSpec { .. })
                ),
                "{bad}"
            );
        }
    }
}
