//! The reference backend: naive loops over arbitrary strides, accumulating in `C64`.

use crate::backend::{ContractBackend, ContractProblem, KernelError};
use crate::contract::ContractError;
use crate::dtype::C64;
use crate::scalar::Element;
use crate::spec::EinsumSpec;
use crate::tensor::{checked_len, with_dtype, LocalTensor};
use crate::view::{AnyView, StridedView};

/// Naive loop backend; accepts every problem. Accumulates in `C64` and rounds once to the
/// output dtype, so it is the test oracle. Cost is `O(out_len * inner_len * rank)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceBackend;

impl ContractBackend for ReferenceBackend {
    fn name(&self) -> &str {
        "reference"
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        p.validate().map_err(KernelError::Failed)?;
        with_dtype!(p.dtype, T => {
            let a = view::<T>(&p.a)?;
            let b = view::<T>(&p.b)?;
            let c = p.c.as_ref().map(view::<T>).transpose()?;
            let out = reference_contract(p.spec, p.alpha, a, b, p.beta, c)
                .map_err(|e| KernelError::Failed(e.to_string()))?;
            Ok(LocalTensor::from_data(&p.out_shape, T::wrap(out))?)
        })
    }
}

fn view<'v, 'a, T: Element>(v: &'v AnyView<'a>) -> Result<&'v StridedView<'a, T>, KernelError> {
    v.typed::<T>()
        .ok_or_else(|| KernelError::Failed(format!("operand dtype {} is not {}", v.dtype(), T::DTYPE)))
}

/// Row-major offset iterator state over `dims`, tracking one linear offset per stride set.
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

/// `alpha * einsum(spec, a, b) + beta * c` on strided views, returned row-major with shape
/// `spec.out` extents. Views may have any strides (negative, zero, size-1) and conjugation.
/// `c` is read only if `beta != 0`; `a` and `b` are read only if `alpha != 0`. Labels only
/// in one operand and absent from the output are summed over. Arithmetic is in `C64`; the result is rounded to `T` once (taking the real
/// part for real `T`).
///
/// # Errors
/// [`ContractError::Spec`] if the spec is invalid or ranks/extents mismatch,
/// [`ContractError::Shape`] if `c` (read only when `beta != 0`) does not have the output
/// shape, [`ContractError::Tensor`] if the output size overflows.
pub fn reference_contract<T: Element>(
    spec: &EinsumSpec,
    alpha: C64,
    a: &StridedView<'_, T>,
    b: &StridedView<'_, T>,
    beta: C64,
    c: Option<&StridedView<'_, T>>,
) -> Result<Vec<T>, ContractError> {
    let out_shape = spec.output_shape(a.shape(), b.shape())?;
    checked_len(&out_shape, T::DTYPE.size_bytes())?;
    let c = c.filter(|_| beta != C64::new(0.0, 0.0));
    if let Some(c) = c {
        if c.shape() != out_shape.as_slice() {
            return Err(ContractError::Shape {
                expected: out_shape,
                got: c.shape().to_vec(),
            });
        }
    }
    let dims = spec.label_dims(a.shape(), b.shape())?;
    let dim = |l: char| dims.iter().find(|(x, _)| *x == l).map_or(0, |&(_, d)| d);
    let stride_in =
        |labels: &[char], strides: &[isize], l: char| labels.iter().position(|&x| x == l).map_or(0, |p| strides[p]);
    let inner: Vec<char> = dims.iter().map(|&(l, _)| l).filter(|l| !spec.out.contains(l)).collect();
    let out_dims: Vec<usize> = spec.out.iter().map(|&l| dim(l)).collect();
    let in_dims: Vec<usize> = inner.iter().map(|&l| dim(l)).collect();
    let sa_o: Vec<isize> = spec.out.iter().map(|&l| stride_in(&spec.a, a.strides(), l)).collect();
    let sb_o: Vec<isize> = spec.out.iter().map(|&l| stride_in(&spec.b, b.strides(), l)).collect();
    let sa_i: Vec<isize> = inner.iter().map(|&l| stride_in(&spec.a, a.strides(), l)).collect();
    let sb_i: Vec<isize> = inner.iter().map(|&l| stride_in(&spec.b, b.strides(), l)).collect();
    let n_out: usize = out_dims.iter().product();
    let inner_empty = in_dims.contains(&0) || alpha == C64::new(0.0, 0.0);
    let mut out = Vec::with_capacity(n_out);
    if n_out == 0 {
        return Ok(out);
    }
    let mut oi = vec![0usize; out_dims.len()];
    let mut ii = vec![0usize; in_dims.len()];
    loop {
        let oa = offsets(&oi, &sa_o);
        let ob = offsets(&oi, &sb_o);
        let mut acc = C64::new(0.0, 0.0);
        if !inner_empty {
            loop {
                acc += a.get_c64(oa + offsets(&ii, &sa_i)) * b.get_c64(ob + offsets(&ii, &sb_i));
                if !step(&mut ii, &in_dims) {
                    break;
                }
            }
        }
        let mut v = if inner_empty { C64::new(0.0, 0.0) } else { alpha * acc };
        if let Some(c) = c {
            v += beta * c.get_c64(offsets(&oi, c.strides()));
        }
        out.push(T::from_c64(v));
        if !step(&mut oi, &out_dims) {
            break;
        }
    }
    Ok(out)
}
