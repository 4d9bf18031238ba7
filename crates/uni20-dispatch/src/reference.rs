//! The reference backend and [`reference_contract`]: naive loops over arbitrary strides and
//! repeated labels, accumulating in `C64` (the test oracle).

use crate::backend::{ContractBackend, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::C64;
use crate::error::ContractError;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::spec::ResolvedSpec;
use crate::tensor::{checked_len, LocalTensor};
use crate::view::{AnyView, StridedView};

/// Naive loop backend; accepts every problem. Accumulates in `C64` and rounds once to the
/// output dtype, so it is the test oracle. Cost is `O(out_len * inner_len * rank)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceBackend;

impl ContractBackend for ReferenceBackend {
    fn name(&self) -> &str {
        "reference"
    }
    fn tune_candidate(&self) -> bool {
        false
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        with_dtype!(p.dtype(), T => {
            let a = view::<T>(p.a())?;
            let b = view::<T>(p.b())?;
            let c = p.c().map(view::<T>).transpose()?;
            let out = reference_contract(p.spec(), p.alpha(), &[a, b], p.beta(), c)
                .map_err(|e| KernelError::Failed(e.to_string()))?;
            Ok(LocalTensor::from_data(p.out_shape(), T::wrap(out))?)
        })
    }
}

fn view<'v, 'a, T: Element>(v: &'v AnyView<'a>) -> Result<&'v StridedView<'a, T>, KernelError> {
    v.typed::<T>()
        .ok_or_else(|| KernelError::Failed(format!("operand dtype {} is not {}", v.dtype(), T::DTYPE)))
}

/// Linear offset of the multi-index `idx` under `strides`.
fn offsets(idx: &[usize], strides: &[isize]) -> isize {
    idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum()
}

/// Advances the row-major multi-index `idx` within `dims`; false when it wraps to zero.
fn step(idx: &mut [usize], dims: &[usize]) -> bool {
    for k in (0..dims.len()).rev() {
        idx[k] += 1;
        if idx[k] < dims[k] {
            return true;
        }
        idx[k] = 0;
    }
    false
}

/// Stride of `label` in an operand with these labels and strides: the sum over every
/// dimension carrying it (a repeated label walks the diagonal), 0 if absent.
fn label_stride(labels: &[char], strides: &[isize], label: char) -> isize {
    labels
        .iter()
        .zip(strides)
        .filter(|(l, _)| **l == label)
        .map(|(_, &s)| s)
        .sum()
}

/// `alpha * einsum(spec, operands...) + beta * c` on strided views, returned row-major with
/// the output's extents. One or two operands (`operands.len() == spec.num_inputs()`); labels
/// may repeat within an operand (diagonals and traces, read directly through the summed
/// strides, independently of the backends' diagonal views). Views may have any strides
/// (negative, zero, size-1) and conjugation. `c` is read only if `beta != 0`; the operands
/// only if `alpha != 0`. Labels absent from the output are summed over. Arithmetic is in
/// `C64`; the result is rounded to `T` once (taking the real part for real `T`). The spec is
/// taken literally (strict extents, no broadcasting).
///
/// # Errors
/// [`ContractError::Spec`] if the operand count, ranks or extents do not match the spec,
/// [`ContractError::Shape`] if `c` (read only when `beta != 0`) does not have the output
/// shape, [`ContractError::Tensor`] if the output size overflows.
pub fn reference_contract<T: Element>(
    spec: &ResolvedSpec,
    alpha: C64,
    operands: &[&StridedView<'_, T>],
    beta: C64,
    c: Option<&StridedView<'_, T>>,
) -> Result<Vec<T>, ContractError> {
    let shapes: Vec<&[usize]> = operands.iter().map(|v| v.shape()).collect();
    let dims = spec.label_extents(&shapes)?;
    let dim = |l: char| dims.iter().find(|(x, _)| *x == l).map_or(0, |&(_, d)| d);
    let out = spec.output();
    let out_dims: Vec<usize> = out.iter().map(|&l| dim(l)).collect();
    checked_len(&out_dims, T::DTYPE.size_bytes())?;
    let c = c.filter(|_| beta != C64::new(0.0, 0.0));
    if let Some(c) = c {
        if c.shape() != out_dims.as_slice() {
            return Err(ContractError::Shape {
                expected: out_dims,
                got: c.shape().to_vec(),
            });
        }
    }
    let inner: Vec<char> = dims.iter().map(|&(l, _)| l).filter(|l| !out.contains(l)).collect();
    let in_dims: Vec<usize> = inner.iter().map(|&l| dim(l)).collect();
    // Per operand: strides of the output labels and of the inner labels.
    let per_op: Vec<(Vec<isize>, Vec<isize>)> = operands
        .iter()
        .zip(spec.inputs())
        .map(|(v, labels)| {
            let s = |l: &char| label_stride(labels, v.strides(), *l);
            (out.iter().map(s).collect(), inner.iter().map(s).collect())
        })
        .collect();
    let n_out: usize = out_dims.iter().product();
    let inner_empty = in_dims.contains(&0) || alpha == C64::new(0.0, 0.0);
    let mut result = Vec::with_capacity(n_out);
    if n_out == 0 {
        return Ok(result);
    }
    let mut oi = vec![0usize; out_dims.len()];
    let mut ii = vec![0usize; in_dims.len()];
    loop {
        let base: Vec<isize> = per_op.iter().map(|(so, _)| offsets(&oi, so)).collect();
        let mut acc = C64::new(0.0, 0.0);
        if !inner_empty {
            loop {
                let mut term = C64::new(1.0, 0.0);
                for ((v, (_, si)), &b) in operands.iter().zip(&per_op).zip(&base) {
                    term *= v.get_c64(b + offsets(&ii, si));
                }
                acc += term;
                if !step(&mut ii, &in_dims) {
                    break;
                }
            }
        }
        let mut v = if inner_empty { C64::new(0.0, 0.0) } else { alpha * acc };
        if let Some(c) = c {
            v += beta * c.get_c64(offsets(&oi, c.strides()));
        }
        result.push(T::from_c64(v));
        if !step(&mut oi, &out_dims) {
            break;
        }
    }
    Ok(result)
}
