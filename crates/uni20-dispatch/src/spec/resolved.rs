//! [`ResolvedSpec`]: the concrete einsum spec kernels consume and descriptors carry: one or
//! two inputs and an explicit output, labels only (no ellipsis), label extents taken
//! literally (no broadcasting). Owns its strict shape check ([`ResolvedSpec::label_extents`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::parse::{check_output, first_repeat, Term};
use super::{EinsumSpec, SpecError};

/// A concrete einsum spec: one or two inputs, explicit output, ASCII-letter labels only.
///
/// Produced by [`EinsumSpec::resolve`] (which expands ellipses and numpy broadcasting into
/// ordinary labels for given shapes), by [`ResolvedSpec::new`] from label lists, or by
/// [`ResolvedSpec::parse`] from a string without ellipsis. Invariants (checked by every
/// constructor, including deserialization): 1 or 2 inputs; labels are ASCII letters; the output
/// has no repeated label and only labels that occur in some input. A label may repeat within
/// an input: that operand is read along the diagonal of those dimensions (numpy semantics:
/// `"ii->i"` is the diagonal, `"ii->"` the trace).
///
/// Shapes are checked strictly ([`ResolvedSpec::label_extents`]): every occurrence of a label
/// must have the same extent, with no broadcasting, since a resolved spec is what the root
/// sends to workers and a mismatch there is a planning error, not user input to broadcast.
///
/// `Display` prints the canonical string (`"ij,jk->ik"`), itself a numpy einsum string with
/// the same meaning; serde uses it and validates it when deserializing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ResolvedSpec {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
}

impl ResolvedSpec {
    /// A spec with the given input label lists and output labels.
    ///
    /// # Errors
    /// [`SpecError::NoOperands`], [`SpecError::TooManyOperands`] (more than two inputs),
    /// [`SpecError::InvalidLabel`] (a label that is not an ASCII letter),
    /// [`SpecError::RepeatedOutputLabel`], [`SpecError::UnknownOutputLabel`].
    pub fn new(inputs: &[&[char]], output: &[char]) -> Result<ResolvedSpec, SpecError> {
        if inputs.is_empty() {
            return Err(SpecError::NoOperands);
        }
        if inputs.len() > 2 {
            return Err(SpecError::TooManyOperands { count: inputs.len() });
        }
        if let Some(&label) = inputs
            .iter()
            .flat_map(|l| l.iter())
            .chain(output)
            .find(|c| !c.is_ascii_alphabetic())
        {
            return Err(SpecError::InvalidLabel { label });
        }
        let terms: Vec<Term> = inputs
            .iter()
            .map(|l| Term {
                labels: l.to_vec(),
                ellipsis: None,
            })
            .collect();
        check_output(&terms, output)?;
        Ok(ResolvedSpec {
            inputs: inputs.iter().map(|l| l.to_vec()).collect(),
            output: output.to_vec(),
        })
    }

    /// Parses a numpy einsum string without ellipsis. An implicit output (no `->`) is
    /// completed by numpy's rule (labels occurring exactly once, sorted by code point).
    ///
    /// # Errors
    /// Any [`EinsumSpec::parse`] error; [`SpecError::Unresolved`] if the string contains `...`.
    pub fn parse(s: &str) -> Result<ResolvedSpec, SpecError> {
        let spec = EinsumSpec::parse(s)?;
        if spec.has_ellipsis() {
            return Err(SpecError::Unresolved);
        }
        let inputs: Vec<&[char]> = spec.inputs.iter().map(|t| t.labels.as_slice()).collect();
        let output = match &spec.output {
            Some(t) => t.labels.clone(),
            None => super::resolve::implicit_labels(&spec.inputs),
        };
        ResolvedSpec::new(&inputs, &output)
    }

    /// The label list of each input operand (1 or 2 lists).
    pub fn inputs(&self) -> &[Vec<char>] {
        &self.inputs
    }

    /// Number of input operands (1 or 2).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The output labels (empty for a scalar result).
    pub fn output(&self) -> &[char] {
        &self.output
    }

    /// True if some input repeats a label (a diagonal or trace).
    pub fn has_repeated_labels(&self) -> bool {
        self.inputs.iter().any(|l| first_repeat(l).is_some())
    }

    /// Extent of every label for operands of the given shapes, in order of first occurrence
    /// (first input, then labels new in the second). Strict: no broadcasting.
    ///
    /// # Errors
    /// [`SpecError::OperandCount`], [`SpecError::RankMismatch`],
    /// [`SpecError::DiagonalMismatch`] (a repeated label with different extents in one
    /// operand), [`SpecError::ExtentMismatch`] (different extents in different operands).
    pub fn label_extents(&self, shapes: &[&[usize]]) -> Result<Vec<(char, usize)>, SpecError> {
        if shapes.len() != self.inputs.len() {
            return Err(SpecError::OperandCount {
                expected: self.inputs.len(),
                got: shapes.len(),
            });
        }
        let mut dims: Vec<(char, usize)> = Vec::new();
        for (operand, (labels, shape)) in self.inputs.iter().zip(shapes).enumerate() {
            if shape.len() != labels.len() {
                return Err(SpecError::RankMismatch {
                    operand,
                    expected: labels.len(),
                    got: shape.len(),
                });
            }
            let mut own: Vec<(char, usize)> = Vec::new();
            for (&label, &d) in labels.iter().zip(shape.iter()) {
                match own.iter().find(|(x, _)| *x == label) {
                    Some(&(_, first)) if first != d => {
                        return Err(SpecError::DiagonalMismatch {
                            operand,
                            label,
                            first,
                            second: d,
                        })
                    }
                    Some(_) => {}
                    None => own.push((label, d)),
                }
            }
            for (label, d) in own {
                match dims.iter().find(|(x, _)| *x == label) {
                    Some(&(_, first)) if first != d => {
                        return Err(SpecError::ExtentMismatch {
                            label,
                            first,
                            second: d,
                        })
                    }
                    Some(_) => {}
                    None => dims.push((label, d)),
                }
            }
        }
        Ok(dims)
    }

    /// The output shape (empty for a scalar) for operands of the given shapes.
    ///
    /// # Errors
    /// As [`ResolvedSpec::label_extents`].
    pub fn output_shape(&self, shapes: &[&[usize]]) -> Result<Vec<usize>, SpecError> {
        let dims = self.label_extents(shapes)?;
        Ok(self
            .output
            .iter()
            .map(|l| dims.iter().find(|(x, _)| x == l).map_or(0, |&(_, d)| d))
            .collect())
    }
}

impl fmt::Display for ResolvedSpec {
    /// Canonical form `"ab,bc->ac"` (always with `->`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, labels) in self.inputs.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            f.write_str(&labels.iter().collect::<String>())?;
        }
        write!(f, "->{}", self.output.iter().collect::<String>())
    }
}
