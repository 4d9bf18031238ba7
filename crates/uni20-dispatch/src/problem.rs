//! [`ContractProblem`]: the checked contraction handed to backends, built once by
//! [`ContractProblem::new`] (spec resolution, shape, dtype, accumulator and scalar checks,
//! then the lowering every backend shares: repeated labels become diagonal views, a
//! one-operand contraction gets the scalar 1 as its second operand), and [`IndexClasses`],
//! the partition of its labels.

use crate::dtype::{DType, C64};
use crate::error::{check_scalars, ContractError};
use crate::spec::{ResolveSpec, ResolvedSpec, SpecError};
use crate::tensor::checked_len;
use crate::view::AnyView;

/// Partition of the labels of a two-operand contraction with no label repeated within an
/// operand, by where they occur. Each list is ordered by first occurrence in the output (for
/// `batch`, `free_a`, `free_b`) or in the operand named (for the rest: `contracted` and
/// `summed_a` in A order, `summed_b` in B order).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IndexClasses {
    /// In A, B and the output (batch / Hadamard indices).
    pub batch: Vec<char>,
    /// In A and the output only.
    pub free_a: Vec<char>,
    /// In B and the output only.
    pub free_b: Vec<char>,
    /// In A and B but not the output (contracted).
    pub contracted: Vec<char>,
    /// Only in A (summed out before contraction).
    pub summed_a: Vec<char>,
    /// Only in B (summed out before contraction).
    pub summed_b: Vec<char>,
}

impl IndexClasses {
    /// Classifies the labels of `a, b -> out` (each list without repeats).
    fn of(a: &[char], b: &[char], out: &[char]) -> IndexClasses {
        let in_a = |l: &char| a.contains(l);
        let in_b = |l: &char| b.contains(l);
        let in_out = |l: &char| out.contains(l);
        IndexClasses {
            batch: out.iter().copied().filter(|l| in_a(l) && in_b(l)).collect(),
            free_a: out.iter().copied().filter(|l| in_a(l) && !in_b(l)).collect(),
            free_b: out.iter().copied().filter(|l| !in_a(l) && in_b(l)).collect(),
            contracted: a.iter().copied().filter(|l| in_b(l) && !in_out(l)).collect(),
            summed_a: a.iter().copied().filter(|l| !in_b(l) && !in_out(l)).collect(),
            summed_b: b.iter().copied().filter(|l| !in_a(l) && !in_out(l)).collect(),
        }
    }
}

/// A checked contraction, `out = alpha * einsum(spec, a, b) + beta * c`, in the two-operand
/// form every backend receives. Built only by [`ContractProblem::new`], so a value that exists
/// satisfies, and backends may rely on, all of the following:
///
/// - [`spec`](Self::spec) has exactly two inputs and no label repeated within an input
///   (repeated labels of the caller's spec were merged into diagonal views; a one-operand
///   spec got a rank-0 second operand holding 1). [`source_spec`](Self::source_spec) is the
///   spec as the caller resolved it.
/// - `a`, `b` and `c` (if present) have dtype [`dtype`](Self::dtype); `a`/`b` have one extent
///   per label of `spec().inputs()[0]`/`[1]`, and shared labels agree.
/// - `c`, if present, has shape [`out_shape`](Self::out_shape), and is `None` whenever
///   `beta == 0` (kernels never read it then); `beta` is 0 when `c` is `None`.
/// - For a real dtype, `alpha` and `beta` are real; the output's byte size fits in `isize`.
///
/// Operands are strided views ([`AnyView`]) with arbitrary strides (negative, zero, size-1
/// modes) and a conjugation flag each; backends must honour both (or decline in
/// [`crate::backends::ContractBackend::accepts`]). Views borrow host memory only: a backend that works
/// on a device copies through its own API and never reinterprets a device buffer as host
/// memory.
#[derive(Clone, Debug)]
pub struct ContractProblem<'a> {
    source: ResolvedSpec,
    source_shapes: Vec<Vec<usize>>,
    spec: ResolvedSpec,
    classes: IndexClasses,
    label_dims: Vec<(char, usize)>,
    alpha: C64,
    beta: C64,
    a: AnyView<'a>,
    b: AnyView<'a>,
    c: Option<AnyView<'a>>,
    dtype: DType,
    out_shape: Vec<usize>,
}

/// The distinct labels of `labels` in first-occurrence order, with the dimensions each covers.
fn merge_repeats(labels: &[char]) -> (Vec<char>, Vec<Vec<usize>>) {
    let mut unique: Vec<char> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (d, &l) in labels.iter().enumerate() {
        match unique.iter().position(|&x| x == l) {
            Some(k) => groups[k].push(d),
            None => {
                unique.push(l);
                groups.push(vec![d]);
            }
        }
    }
    (unique, groups)
}

impl<'a> ContractProblem<'a> {
    /// Checks and lowers `alpha * einsum(spec, operands...) + beta * c` for one or two operand
    /// views of one dtype. `spec` is anything [`ResolveSpec`] accepts: an [`crate::EinsumSpec`]
    /// or string is resolved against the operand shapes with numpy's rules, a
    /// [`ResolvedSpec`] is taken literally.
    ///
    /// `c`'s shape is checked even when `beta == 0`; it is then dropped (never read). Without
    /// `c`, `beta` is ignored. Labels repeated within an operand read its diagonal (their
    /// strides add up: no copy). A one-operand spec `"ij->ji"` becomes `"ij,->ji"` with a
    /// rank-0 second operand equal to 1, so it runs through the same backends.
    ///
    /// # Errors
    /// [`ContractError::Spec`] (spec resolution, operand count, ranks, extents),
    /// [`ContractError::MixedDTypes`], [`ContractError::Tensor`] (output size overflows),
    /// [`ContractError::Shape`] (C's shape), [`ContractError::ComplexScalarForRealOutput`]
    /// (see [`check_scalars`]).
    pub fn new(
        spec: impl ResolveSpec,
        alpha: C64,
        operands: &[AnyView<'a>],
        beta: C64,
        c: Option<AnyView<'a>>,
    ) -> Result<ContractProblem<'a>, ContractError> {
        let shapes: Vec<&[usize]> = operands.iter().map(AnyView::shape).collect();
        let source = spec.resolve_spec(&shapes)?.into_owned();
        let dims = source.label_extents(&shapes)?;
        let dim = |l: &char| dims.iter().find(|(x, _)| x == l).map_or(0, |&(_, d)| d);
        let out_shape: Vec<usize> = source.output().iter().map(dim).collect();
        let dtypes: Vec<DType> = operands.iter().chain(&c).map(AnyView::dtype).collect();
        // label_extents checked operands.len() == source.num_inputs() >= 1.
        let Some(&dtype) = dtypes.first() else {
            return Err(SpecError::NoOperands.into());
        };
        if dtypes.iter().any(|&d| d != dtype) {
            return Err(ContractError::MixedDTypes { dtypes });
        }
        checked_len(&out_shape, dtype.size_bytes())?;
        if let Some(c) = &c {
            if c.shape() != out_shape.as_slice() {
                return Err(ContractError::Shape {
                    expected: out_shape,
                    got: c.shape().to_vec(),
                });
            }
        }
        check_scalars(dtype, alpha, c.as_ref().map(|_| beta))?;
        let zero = C64::new(0.0, 0.0);
        let c = c.filter(|_| beta != zero);
        let beta = if c.is_some() { beta } else { zero };

        // Operand k: distinct labels and its view (a diagonal where labels repeat); a missing
        // second operand is the rank-0 scalar 1.
        let lower = |k: usize| -> Result<(Vec<char>, AnyView<'a>), ContractError> {
            let (Some(l), Some(v)) = (source.inputs().get(k), operands.get(k)) else {
                return Ok((Vec::new(), AnyView::unit(dtype)));
            };
            let (unique, groups) = merge_repeats(l);
            let view = if unique.len() < l.len() {
                v.diagonal(&groups)?
            } else {
                v.clone()
            };
            Ok((unique, view))
        };
        let (la, a) = lower(0)?;
        let (lb, b) = lower(1)?;
        let spec = ResolvedSpec::new(&[&la, &lb], source.output())?;
        let classes = IndexClasses::of(&la, &lb, source.output());
        let label_dims = la
            .iter()
            .chain(lb.iter().filter(|l| !la.contains(l)))
            .map(|l| (*l, dim(l)))
            .collect();
        Ok(ContractProblem {
            source_shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            source,
            spec,
            classes,
            label_dims,
            alpha,
            beta,
            a,
            b,
            c,
            dtype,
            out_shape,
        })
    }

    /// The two-operand spec the backends run (see the type documentation).
    pub fn spec(&self) -> &ResolvedSpec {
        &self.spec
    }

    /// The spec as the caller gave it, after resolution (one or two inputs, repeated labels
    /// kept). Used in descriptions and tracing.
    pub fn source_spec(&self) -> &ResolvedSpec {
        &self.source
    }

    /// Labels of operand A (distinct), one per dimension of [`a`](Self::a).
    pub fn a_labels(&self) -> &[char] {
        &self.spec.inputs()[0]
    }

    /// Labels of operand B (distinct), one per dimension of [`b`](Self::b).
    pub fn b_labels(&self) -> &[char] {
        &self.spec.inputs()[1]
    }

    /// Labels of the output, one per dimension of [`out_shape`](Self::out_shape).
    pub fn out_labels(&self) -> &[char] {
        self.spec.output()
    }

    /// The label partition of [`spec`](Self::spec).
    pub fn classes(&self) -> &IndexClasses {
        &self.classes
    }

    /// Extent of every label (A labels first, then labels only in B).
    pub fn label_dims(&self) -> &[(char, usize)] {
        &self.label_dims
    }

    /// Extent of `label`, or `None` if the label does not occur.
    pub fn dim(&self, label: char) -> Option<usize> {
        self.label_dims.iter().find(|(l, _)| *l == label).map(|&(_, d)| d)
    }

    /// Scale of the product.
    pub fn alpha(&self) -> C64 {
        self.alpha
    }

    /// Scale of C (0 when there is no C).
    pub fn beta(&self) -> C64 {
        self.beta
    }

    /// Operand A.
    pub fn a(&self) -> &AnyView<'a> {
        &self.a
    }

    /// Operand B (the rank-0 scalar 1 for a one-operand contraction).
    pub fn b(&self) -> &AnyView<'a> {
        &self.b
    }

    /// The accumulator read as `beta * c`; `None` if absent or `beta == 0`.
    pub fn c(&self) -> Option<&AnyView<'a>> {
        self.c.as_ref()
    }

    /// The dtype of every operand and of the output.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The output shape (empty for a scalar).
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// One-line description used in errors and tracing:
    /// `contract <source spec> (<dtype>) <operand shapes>`.
    pub fn describe(&self) -> String {
        format!("contract {} ({}) {:?}", self.source, self.dtype, self.source_shapes)
    }

    /// Number of multiply-adds (product of all label extents), saturating; 0 if any extent
    /// is 0.
    pub fn macs(&self) -> u128 {
        self.label_dims
            .iter()
            .try_fold(1u128, |acc, &(_, d)| acc.checked_mul(d as u128))
            .unwrap_or(u128::MAX)
    }
}
