//! [`EinsumSpec`]: a numpy einsum subscripts string parsed once, with its grammar checks
//! (arrows, operand count, label characters, ellipses, output labels). It keeps what the user
//! wrote (ellipses, implicit output, repeated labels); the shape-dependent part lives in
//! `resolve.rs`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ResolvedSpec, SpecError};

/// One operand's (or the output's) subscripts: labels, and where `...` stands among them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Term {
    /// The explicit labels, in order, ellipsis excluded.
    pub(super) labels: Vec<char>,
    /// `Some(k)`: the ellipsis stands before `labels[k]` (`k == labels.len()`: at the end).
    pub(super) ellipsis: Option<usize>,
}

impl Term {
    fn plain(labels: &[char]) -> Term {
        Term {
            labels: labels.to_vec(),
            ellipsis: None,
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, l) in self.labels.iter().enumerate() {
            if self.ellipsis == Some(k) {
                f.write_str("...")?;
            }
            write!(f, "{l}")?;
        }
        if self.ellipsis == Some(self.labels.len()) {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// A parsed numpy einsum spec with one or two input operands, e.g. `"ij,jk->ik"`,
/// `"ii->i"`, `"ij,jk"` (implicit output) or `"...ij,...jk->...ik"`.
///
/// Grammar (numpy's): inputs separated by `,`, optionally `->` and the output. Labels are
/// ASCII letters `a-z`, `A-Z` (case-sensitive); each operand and the output may contain one
/// `...` (ellipsis: the operand's remaining dimensions, broadcast across operands). ASCII
/// whitespace around labels is ignored. A label may repeat within an input (a diagonal, or a
/// trace when it is absent from the output); it may not repeat in the output, and every
/// output label must occur in some input. Without `->` the output is numpy's implicit one:
/// the ellipsis dimensions first, then the labels occurring exactly once, sorted by code point
/// (uppercase before lowercase).
///
/// A value of this type has passed all of these checks. Extents, ranks and broadcasting are
/// checked by [`EinsumSpec::resolve`], which turns the spec into a [`ResolvedSpec`] (explicit
/// labels only) for given operand shapes. `Display` prints the canonical form (no whitespace),
/// which parses back to an equal spec; serde uses that string and validates it when
/// deserializing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EinsumSpec {
    pub(super) inputs: Vec<Term>,
    /// `None`: implicit output.
    pub(super) output: Option<Term>,
}

impl EinsumSpec {
    /// Parses a numpy einsum subscripts string (see the type documentation for the grammar).
    ///
    /// # Errors
    /// [`SpecError::MultipleArrows`], [`SpecError::TooManyOperands`] (three or more inputs),
    /// [`SpecError::InvalidChar`] (anything but letters, whitespace, `,` between inputs, `->`,
    /// `...`; a `-` not followed by `>` included), [`SpecError::StrayDot`],
    /// [`SpecError::RepeatedEllipsis`], [`SpecError::RepeatedOutputLabel`],
    /// [`SpecError::UnknownOutputLabel`].
    pub fn parse(s: &str) -> Result<EinsumSpec, SpecError> {
        let arrows: Vec<usize> = s.match_indices("->").map(|(i, _)| i).collect();
        if arrows.len() > 1 {
            return Err(SpecError::MultipleArrows);
        }
        let (lhs, out) = match arrows.first() {
            Some(&i) => (&s[..i], Some((&s[i + 2..], i + 2))),
            None => (s, None),
        };
        let count = lhs.split(',').count();
        if count > 2 {
            return Err(SpecError::TooManyOperands { count });
        }
        let mut inputs = Vec::with_capacity(count);
        let mut base = 0;
        for part in lhs.split(',') {
            inputs.push(parse_term(part, base)?);
            base += part.len() + 1;
        }
        let output = out.map(|(text, base)| parse_term(text, base)).transpose()?;
        if let Some(out) = &output {
            check_output(&inputs, &out.labels)?;
        }
        Ok(EinsumSpec { inputs, output })
    }

    /// Number of input operands (1 or 2).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// True if some input or the output contains `...`.
    pub fn has_ellipsis(&self) -> bool {
        self.inputs.iter().chain(&self.output).any(|t| t.ellipsis.is_some())
    }

    /// True if the spec has `->` (explicit output); false for numpy's implicit output.
    pub fn has_explicit_output(&self) -> bool {
        self.output.is_some()
    }

    /// The output shape for operands of the given shapes: the shape of
    /// [`resolve`](Self::resolve)`(shapes)`'s output.
    ///
    /// # Errors
    /// As [`EinsumSpec::resolve`].
    pub fn output_shape(&self, shapes: &[&[usize]]) -> Result<Vec<usize>, SpecError> {
        self.resolve(shapes)?.output_shape(shapes)
    }
}

/// Parses one term (no `,`, no `->`) starting at byte `base` of the whole string.
fn parse_term(text: &str, base: usize) -> Result<Term, SpecError> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        let position = base + i;
        match ch {
            c if c.is_ascii_whitespace() => {}
            c if c.is_ascii_alphabetic() => labels.push(c),
            '.' => {
                if !text[i..].starts_with("...") {
                    return Err(SpecError::StrayDot { position });
                }
                chars.next();
                chars.next();
                if ellipsis.is_some() {
                    return Err(SpecError::RepeatedEllipsis { position });
                }
                ellipsis = Some(labels.len());
            }
            ch => return Err(SpecError::InvalidChar { ch, position }),
        }
    }
    Ok(Term { labels, ellipsis })
}

/// Output labels must be unique and occur in some input.
pub(super) fn check_output(inputs: &[Term], out: &[char]) -> Result<(), SpecError> {
    if let Some(label) = first_repeat(out) {
        return Err(SpecError::RepeatedOutputLabel { label });
    }
    if let Some(&label) = out.iter().find(|l| !inputs.iter().any(|t| t.labels.contains(l))) {
        return Err(SpecError::UnknownOutputLabel { label });
    }
    Ok(())
}

/// The first label that occurs a second time in `labels`.
pub(super) fn first_repeat(labels: &[char]) -> Option<char> {
    labels
        .iter()
        .enumerate()
        .find(|(i, l)| labels[..*i].contains(l))
        .map(|(_, &l)| l)
}

impl fmt::Display for EinsumSpec {
    /// Canonical form: inputs joined by `,`, ellipses as `...`, `->output` if explicit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, t) in self.inputs.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            t.write(f)?;
        }
        if let Some(out) = &self.output {
            f.write_str("->")?;
            out.write(f)?;
        }
        Ok(())
    }
}

impl From<&ResolvedSpec> for EinsumSpec {
    /// The same contraction as an (explicit, ellipsis-free) parsed spec.
    fn from(r: &ResolvedSpec) -> EinsumSpec {
        EinsumSpec {
            inputs: r.inputs().iter().map(|l| Term::plain(l)).collect(),
            output: Some(Term::plain(r.output())),
        }
    }
}

impl From<ResolvedSpec> for EinsumSpec {
    /// As `From<&ResolvedSpec>`.
    fn from(r: ResolvedSpec) -> EinsumSpec {
        EinsumSpec::from(&r)
    }
}
