//! Einsum specifications with explicit output: `"abc,bcd->ad"`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Error parsing or validating an [`EinsumSpec`], or checking operand shapes against it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// No `->`: implicit-output einsum is not supported.
    #[error("einsum spec has no \"->\" (implicit output is not supported)")]
    MissingArrow,
    /// More than one `->`.
    #[error("einsum spec has more than one \"->\"")]
    MultipleArrows,
    /// The input side does not have exactly two comma-separated operands.
    #[error("einsum spec must have exactly two input operands, found {0}")]
    OperandCount(usize),
    /// A character that is not an ASCII letter (or whitespace, `,`, `->`); this includes
    /// `.` from ellipsis, which is unsupported.
    #[error("invalid character {ch:?} at byte {position} in einsum spec (labels are ASCII letters)")]
    InvalidChar {
        /// The offending character.
        ch: char,
        /// Byte offset in the input string.
        position: usize,
    },
    /// A label repeated within one input operand (diagonals are unsupported).
    #[error("label '{label}' repeated in operand {operand} (diagonals are not supported)")]
    RepeatedLabel {
        /// The repeated label.
        label: char,
        /// `'A'` or `'B'`.
        operand: char,
    },
    /// A label repeated in the output.
    #[error("label '{0}' repeated in the output")]
    RepeatedOutputLabel(char),
    /// An output label that appears in neither input.
    #[error("output label '{0}' does not appear in any input")]
    UnknownOutputLabel(char),
    /// An operand's rank differs from its label count.
    #[error("operand {operand} has rank {got}, spec expects {expected}")]
    RankMismatch {
        /// `'A'`, `'B'` or `'C'` (the accumulator).
        operand: char,
        /// Number of labels in the spec.
        expected: usize,
        /// Actual rank.
        got: usize,
    },
    /// A label shared by A and B has different extents.
    #[error("label '{label}' has extent {a} in A but {b} in B")]
    DimMismatch {
        /// The label.
        label: char,
        /// Extent in A.
        a: usize,
        /// Extent in B.
        b: usize,
    },
}

/// Parsed two-operand einsum spec with explicit output, e.g. `"abc,bcd->ad"`.
/// Labels are ASCII letters `a-z`, `A-Z` (case-sensitive). Invariants (checked by
/// [`EinsumSpec::parse`] and [`EinsumSpec::validate`]): no label repeats within `a`, `b` or
/// `out`, and every `out` label occurs in `a` or `b`. `Display` prints the canonical form
/// `"ab,bc->ac"` (no whitespace), which parses back to an equal spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EinsumSpec {
    /// Labels of operand A, one per dimension.
    pub a: Vec<char>,
    /// Labels of operand B, one per dimension.
    pub b: Vec<char>,
    /// Labels of the output, one per dimension.
    pub out: Vec<char>,
}

/// Partition of the labels of an [`EinsumSpec`] by where they occur.
/// Each list is ordered by first occurrence in `out` (for `batch`, `free_a`, `free_b`) or in
/// the operand named (for the rest: `contracted` and `summed_a` in A order, `summed_b` in B
/// order).
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

impl EinsumSpec {
    /// Parses `"<A labels>,<B labels>-><out labels>"`. ASCII whitespace is allowed anywhere
    /// around labels and is ignored. Operands may be empty (rank 0), e.g. `"ij,ij->"`.
    ///
    /// # Errors
    /// [`SpecError::MissingArrow`], [`SpecError::MultipleArrows`],
    /// [`SpecError::OperandCount`], [`SpecError::InvalidChar`],
    /// [`SpecError::RepeatedLabel`], [`SpecError::RepeatedOutputLabel`],
    /// [`SpecError::UnknownOutputLabel`].
    pub fn parse(s: &str) -> Result<EinsumSpec, SpecError> {
        let arrow = s.find("->").ok_or(SpecError::MissingArrow)?;
        if s[arrow + 2..].contains("->") {
            return Err(SpecError::MultipleArrows);
        }
        let lhs = &s[..arrow];
        let n_ops = lhs.split(',').count();
        if n_ops != 2 {
            return Err(SpecError::OperandCount(n_ops));
        }
        let mut a = Vec::new();
        let mut b = Vec::new();
        let mut out = Vec::new();
        let mut operand = 0;
        for (i, ch) in s.char_indices() {
            if i >= arrow && i < arrow + 2 {
                continue;
            }
            if ch.is_ascii_whitespace() {
                continue;
            }
            if ch == ',' && i < arrow {
                operand += 1;
                continue;
            }
            if !ch.is_ascii_alphabetic() {
                return Err(SpecError::InvalidChar { ch, position: i });
            }
            if i > arrow {
                out.push(ch);
            } else if operand == 0 {
                a.push(ch);
            } else {
                b.push(ch);
            }
        }
        let spec = EinsumSpec { a, b, out };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the invariants (useful for specs built or deserialized field by field).
    ///
    /// # Errors
    /// [`SpecError::InvalidChar`] (position is the index within the offending list),
    /// [`SpecError::RepeatedLabel`], [`SpecError::RepeatedOutputLabel`],
    /// [`SpecError::UnknownOutputLabel`].
    pub fn validate(&self) -> Result<(), SpecError> {
        for list in [&self.a, &self.b, &self.out] {
            if let Some((position, &ch)) = list.iter().enumerate().find(|(_, c)| !c.is_ascii_alphabetic()) {
                return Err(SpecError::InvalidChar { ch, position });
            }
        }
        for (labels, operand) in [(&self.a, 'A'), (&self.b, 'B')] {
            if let Some(label) = first_repeat(labels) {
                return Err(SpecError::RepeatedLabel { label, operand });
            }
        }
        if let Some(label) = first_repeat(&self.out) {
            return Err(SpecError::RepeatedOutputLabel(label));
        }
        if let Some(&l) = self.out.iter().find(|l| !self.a.contains(l) && !self.b.contains(l)) {
            return Err(SpecError::UnknownOutputLabel(l));
        }
        Ok(())
    }

    /// Extent of every label, checking operand ranks and shared extents.
    ///
    /// # Errors
    /// [`SpecError::RankMismatch`] (operand `'A'`/`'B'`), [`SpecError::DimMismatch`].
    pub(crate) fn label_dims(&self, a_shape: &[usize], b_shape: &[usize]) -> Result<Vec<(char, usize)>, SpecError> {
        if a_shape.len() != self.a.len() {
            return Err(SpecError::RankMismatch {
                operand: 'A',
                expected: self.a.len(),
                got: a_shape.len(),
            });
        }
        if b_shape.len() != self.b.len() {
            return Err(SpecError::RankMismatch {
                operand: 'B',
                expected: self.b.len(),
                got: b_shape.len(),
            });
        }
        let mut dims: Vec<(char, usize)> = self.a.iter().copied().zip(a_shape.iter().copied()).collect();
        for (&l, &d) in self.b.iter().zip(b_shape) {
            match dims.iter().find(|(x, _)| *x == l) {
                Some(&(_, da)) if da != d => return Err(SpecError::DimMismatch { label: l, a: da, b: d }),
                Some(_) => {}
                None => dims.push((l, d)),
            }
        }
        Ok(dims)
    }

    /// The output shape for operands of shapes `a_shape` and `b_shape` (empty for a scalar
    /// output).
    ///
    /// # Errors
    /// [`SpecError::RankMismatch`] with operand `'A'` or `'B'` if a rank differs from the
    /// label count; [`SpecError::DimMismatch`] if a shared label has different extents; any
    /// [`EinsumSpec::validate`] error for a hand-built invalid spec.
    pub fn output_shape(&self, a_shape: &[usize], b_shape: &[usize]) -> Result<Vec<usize>, SpecError> {
        self.validate()?;
        let dims = self.label_dims(a_shape, b_shape)?;
        Ok(self
            .out
            .iter()
            .map(|l| dims.iter().find(|(x, _)| x == l).map_or(0, |&(_, d)| d))
            .collect())
    }

    /// Classifies every label; see [`IndexClasses`] for the ordering.
    pub fn classes(&self) -> IndexClasses {
        let in_a = |l: &char| self.a.contains(l);
        let in_b = |l: &char| self.b.contains(l);
        let in_out = |l: &char| self.out.contains(l);
        IndexClasses {
            batch: self.out.iter().copied().filter(|l| in_a(l) && in_b(l)).collect(),
            free_a: self.out.iter().copied().filter(|l| in_a(l) && !in_b(l)).collect(),
            free_b: self.out.iter().copied().filter(|l| !in_a(l) && in_b(l)).collect(),
            contracted: self.a.iter().copied().filter(|l| in_b(l) && !in_out(l)).collect(),
            summed_a: self.a.iter().copied().filter(|l| !in_b(l) && !in_out(l)).collect(),
            summed_b: self.b.iter().copied().filter(|l| !in_a(l) && !in_out(l)).collect(),
        }
    }
}

fn first_repeat(labels: &[char]) -> Option<char> {
    labels
        .iter()
        .enumerate()
        .find(|(i, l)| labels[..*i].contains(l))
        .map(|(_, &l)| l)
}

impl fmt::Display for EinsumSpec {
    /// Canonical form `"ab,bc->ac"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |v: &[char]| v.iter().collect::<String>();
        write!(f, "{},{}->{}", s(&self.a), s(&self.b), s(&self.out))
    }
}

impl std::str::FromStr for EinsumSpec {
    type Err = SpecError;

    /// Same as [`EinsumSpec::parse`].
    fn from_str(s: &str) -> Result<EinsumSpec, SpecError> {
        EinsumSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<EinsumSpec, SpecError> {
        EinsumSpec::parse(s)
    }

    #[test]
    fn parses_and_displays() {
        let s = p(" ab c , bcd -> a d ").unwrap();
        assert_eq!(s.a, vec!['a', 'b', 'c']);
        assert_eq!(s.b, vec!['b', 'c', 'd']);
        assert_eq!(s.out, vec!['a', 'd']);
        assert_eq!(s.to_string(), "abc,bcd->ad");
        assert_eq!(p(&s.to_string()).unwrap(), s);
        let scalar = p("ij,ij->").unwrap();
        assert!(scalar.out.is_empty());
        let r0 = p(",i->i").unwrap();
        assert!(r0.a.is_empty());
        assert_eq!(p("aA,Ab->ab").unwrap().a, vec!['a', 'A']);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(p("ij,jk"), Err(SpecError::MissingArrow));
        assert_eq!(p("ij,jk->ik->i"), Err(SpecError::MultipleArrows));
        assert_eq!(p("ij->ij"), Err(SpecError::OperandCount(1)));
        assert_eq!(p("ij,jk,kl->il"), Err(SpecError::OperandCount(3)));
        assert_eq!(p("i1,jk->ik"), Err(SpecError::InvalidChar { ch: '1', position: 1 }));
        assert!(matches!(p("...i,ij->j"), Err(SpecError::InvalidChar { ch: '.', .. })));
        assert!(matches!(p("ij,jk->i,k"), Err(SpecError::InvalidChar { ch: ',', .. })));
        assert!(matches!(p("ij,jé->i"), Err(SpecError::InvalidChar { ch: 'é', .. })));
        assert_eq!(
            p("ii,ij->j"),
            Err(SpecError::RepeatedLabel {
                label: 'i',
                operand: 'A'
            })
        );
        assert_eq!(
            p("ij,jkj->i"),
            Err(SpecError::RepeatedLabel {
                label: 'j',
                operand: 'B'
            })
        );
        assert_eq!(p("ij,jk->iki"), Err(SpecError::RepeatedOutputLabel('i')));
        assert_eq!(p("ij,jk->iz"), Err(SpecError::UnknownOutputLabel('z')));
        assert_eq!(p("ij,jk->ik-"), Err(SpecError::InvalidChar { ch: '-', position: 9 }));
    }

    #[test]
    fn output_shape_and_errors() {
        let s = p("abc,bcd->da").unwrap();
        assert_eq!(s.output_shape(&[2, 3, 4], &[3, 4, 5]), Ok(vec![5, 2]));
        assert_eq!(
            s.output_shape(&[2, 3], &[3, 4, 5]),
            Err(SpecError::RankMismatch {
                operand: 'A',
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            s.output_shape(&[2, 3, 4], &[3, 4]),
            Err(SpecError::RankMismatch {
                operand: 'B',
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            s.output_shape(&[2, 3, 4], &[3, 7, 5]),
            Err(SpecError::DimMismatch { label: 'c', a: 4, b: 7 })
        );
        assert_eq!(p("ij,ij->").unwrap().output_shape(&[2, 0], &[2, 0]), Ok(vec![]));
        let bad = EinsumSpec {
            a: vec!['i', 'i'],
            b: vec![],
            out: vec![],
        };
        assert!(bad.output_shape(&[1, 1], &[]).is_err());
    }

    #[test]
    fn classes() {
        let s = p("bixs,bjxt->jbi").unwrap();
        let c = s.classes();
        assert_eq!(c.batch, vec!['b']);
        assert_eq!(c.free_a, vec!['i']);
        assert_eq!(c.free_b, vec!['j']);
        assert_eq!(c.contracted, vec!['x']);
        assert_eq!(c.summed_a, vec!['s']);
        assert_eq!(c.summed_b, vec!['t']);
    }
}
