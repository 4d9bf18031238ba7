//! The fully packed GEMM lowering for backends that need contiguous operands (device GEMMs):
//! [`Packed`] copies a [`ContractProblem`] into row-major `[batch][m][k]`, `[batch][k][n]` and
//! `[batch][m][n]` buffers and reorders a `[batch][m][n]` result into the output tensor.

use crate::backend::KernelError;
use crate::permute::gather;
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::{checked_len, LocalTensor};

use super::operand::{concat, reduce, typed, work_view, Operand};

/// A problem packed into contiguous row-major buffers for a device GEMM: `a` is
/// `[batch][m][k]`, `b` is `[batch][k][n]`, `c` is `[batch][m][n]` holding `beta * C` (or
/// `None` when there is no accumulator); conjugation and summed labels are applied.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct Packed<T> {
    pub(crate) a: Vec<T>,
    pub(crate) b: Vec<T>,
    pub(crate) c: Option<Vec<T>>,
    pub(crate) batch: usize,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// Labels of the `[batch][m][n]` work layout.
    work_labels: Vec<char>,
    work_shape: Vec<usize>,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl<T: Element> Packed<T> {
    /// Packs `p`.
    ///
    /// # Errors
    /// [`KernelError`] if `T` is not the problem's dtype or a buffer size overflows.
    pub(crate) fn new(p: &ContractProblem<'_>) -> Result<Packed<T>, KernelError> {
        let cls = p.classes();
        let mut a = Operand::of_view(p.a_labels(), typed::<T>(p.a())?);
        let mut b = Operand::of_view(p.b_labels(), typed::<T>(p.b())?);
        if !cls.summed_a.is_empty() {
            a = reduce(&a, &concat(&[&cls.batch, &cls.free_a, &cls.contracted]))?;
        }
        if !cls.summed_b.is_empty() {
            b = reduce(&b, &concat(&[&cls.batch, &cls.free_b, &cls.contracted]))?;
        }
        let a = a.permuted(&concat(&[&cls.batch, &cls.free_a, &cls.contracted]), 1)?;
        let b = b.permuted(&concat(&[&cls.batch, &cls.contracted, &cls.free_b]), 1)?;
        let prod = |ls: &[char]| ls.iter().map(|&l| p.dim(l).unwrap_or(1)).product::<usize>();
        let work_labels = concat(&[&cls.batch, &cls.free_a, &cls.free_b]);
        let work_shape: Vec<usize> = work_labels.iter().map(|&l| p.dim(l).unwrap_or(1)).collect();
        checked_len(&work_shape, T::DTYPE.size_bytes())?;
        let c = match p.c() {
            Some(c) => {
                let order: Vec<usize> = work_labels
                    .iter()
                    .filter_map(|&l| p.out_labels().iter().position(|&x| x == l))
                    .collect();
                let beta = T::from_c64(p.beta());
                Some(gather(typed::<T>(c)?, &order).into_iter().map(|x| beta * x).collect())
            }
            None => None,
        };
        Ok(Packed {
            a: a.data.into_owned(),
            b: b.data.into_owned(),
            c,
            batch: prod(&cls.batch),
            m: prod(&cls.free_a),
            n: prod(&cls.free_b),
            k: prod(&cls.contracted),
            work_labels,
            work_shape,
        })
    }

    /// Reorders a `[batch][m][n]` result into the output tensor of `p`.
    ///
    /// # Errors
    /// [`KernelError`] if `work` is shorter than `batch * m * n`.
    pub(crate) fn unpack(&self, p: &ContractProblem<'_>, work: &[T]) -> Result<LocalTensor, KernelError> {
        let (v, order) = work_view(p, work, &self.work_shape, &self.work_labels)?;
        Ok(LocalTensor::from_data(p.out_shape(), T::wrap(gather(&v, &order)))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::AnyView;
    use crate::{BackendList, TensorData, C64};

    #[test]
    fn packed_round_trip_matches_reference() {
        let a = LocalTensor::from_data(&[2, 3, 2, 2], TensorData::F64((0..24).map(|x| x as f64).collect())).unwrap();
        let b = LocalTensor::from_data(&[4, 2, 3], TensorData::F64((0..24).map(|x| 1.0 - x as f64).collect())).unwrap();
        let c = LocalTensor::from_data(&[4, 2, 2], TensorData::F64((0..16).map(|x| x as f64).collect())).unwrap();
        let problem = ContractProblem::new(
            "bkis,jbk->jbi",
            C64::new(1.0, 0.0),
            &[AnyView::of_tensor(&a), AnyView::of_tensor(&b)],
            C64::new(-0.75, 0.0),
            Some(AnyView::of_tensor(&c)),
        )
        .unwrap();
        let pk = Packed::<f64>::new(&problem).unwrap();
        assert_eq!((pk.batch, pk.m, pk.n, pk.k), (2, 2, 4, 3));
        // Host GEMM over the packed buffers, as the device backend does.
        let mut work = pk.c.clone().unwrap();
        for bi in 0..pk.batch {
            for i in 0..pk.m {
                for j in 0..pk.n {
                    let mut acc = 0.0;
                    for k in 0..pk.k {
                        acc += pk.a[(bi * pk.m + i) * pk.k + k] * pk.b[(bi * pk.k + k) * pk.n + j];
                    }
                    work[(bi * pk.m + i) * pk.n + j] += acc;
                }
            }
        }
        let got = pk.unpack(&problem, &work).unwrap();
        let want = crate::contract(
            "bkis,jbk->jbi",
            C64::new(1.0, 0.0),
            &a,
            &b,
            C64::new(-0.75, 0.0),
            Some(&c),
            &BackendList::reference_only(),
        )
        .unwrap();
        assert!(got.max_abs_diff(&want).unwrap() < 1e-12);
    }
}
