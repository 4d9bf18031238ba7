//! Label specs of the element-wise family ([`LabelSpec`]): which label of
//! each operand goes to which mode of the output, with the typed errors of
//! a bad spec ([`LabelError`], in the leaf `error`). Pure.
//!
//! Forms (ASCII letters; spaces are ignored):
//! - `"ijk->kij"`: one operand (permute), or for `axpby` the first
//!   operand's labels with the second already in output order (the same as
//!   `"ijk,kij->kij"`);
//! - `"ijk,jik->kij"` (`axpby` only): each operand's labels and the
//!   output's.
//!
//! Every operand names each output label exactly once (no repeated labels,
//! no summed labels, no ellipsis): a spec is a pair of permutations.

use super::error::LabelError;

/// A parsed label spec: the labels of `a`, of `b` (when given) and of the
/// output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LabelSpec {
    pub(crate) a: Vec<char>,
    pub(crate) b: Vec<char>,
    pub(crate) out: Vec<char>,
}

impl LabelSpec {
    /// Parses `spec` for an operation of `max` operands (1 or 2). With one
    /// label group before `->`, `b`'s labels are the output's.
    pub(crate) fn parse(spec: &str, max: usize) -> Result<LabelSpec, LabelError> {
        let s: String = spec.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let err_spec = || spec.to_string();
        let mut parts = s.split("->");
        let (Some(lhs), Some(rhs), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(LabelError::NoArrow { spec: err_spec() });
        };
        let groups: Vec<&str> = lhs.split(',').collect();
        if groups.len() > max {
            return Err(LabelError::Operands {
                spec: err_spec(),
                got: groups.len(),
                max,
            });
        }
        let labels = |text: &str, operand: &str| -> Result<Vec<char>, LabelError> {
            let mut v: Vec<char> = Vec::with_capacity(text.len());
            for ch in text.chars() {
                if !ch.is_ascii_alphabetic() {
                    return Err(LabelError::BadLabel { spec: err_spec(), ch });
                }
                if v.contains(&ch) {
                    return Err(LabelError::Repeated {
                        spec: err_spec(),
                        label: ch,
                        operand: operand.to_string(),
                    });
                }
                v.push(ch);
            }
            Ok(v)
        };
        let out = labels(rhs, "the output")?;
        let a = labels(groups[0], "a")?;
        let b = match groups.get(1) {
            Some(g) => labels(g, "b")?,
            None => out.clone(),
        };
        for (operand, l) in [("a", &a), ("b", &b)] {
            let mut sorted = l.clone();
            sorted.sort_unstable();
            let mut o = out.clone();
            o.sort_unstable();
            if sorted != o {
                return Err(LabelError::NotAPermutation {
                    spec: err_spec(),
                    operand: operand.to_string(),
                    labels: l.iter().collect(),
                    output: out.iter().collect(),
                });
            }
        }
        Ok(LabelSpec { a, b, out })
    }

    /// Checks that operand `operand` (`"a"`/`"b"`) of rank `rank` has one
    /// label per mode.
    pub(crate) fn check_rank(&self, spec: &str, operand: &str, rank: usize) -> Result<(), LabelError> {
        let n = if operand == "a" { self.a.len() } else { self.b.len() };
        if n != rank {
            return Err(LabelError::Rank {
                spec: spec.to_string(),
                operand: operand.to_string(),
                labels: n,
                rank,
            });
        }
        Ok(())
    }

    /// The permutation taking `labels` to the output, in `numpy.transpose`
    /// form: output axis `k` is axis `perm[k]` of the operand.
    pub(crate) fn perm(&self, labels: &[char]) -> Vec<usize> {
        self.out
            .iter()
            .map(|l| labels.iter().position(|x| x == l).unwrap_or(0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_permutations() {
        let s = LabelSpec::parse("ijk -> kij", 2).unwrap();
        assert_eq!(s.b, s.out);
        assert_eq!(s.perm(&s.a), vec![2, 0, 1]);
        let s = LabelSpec::parse("ijk,jki->kij", 2).unwrap();
        assert_eq!(s.perm(&s.b), vec![1, 2, 0]);
        assert_eq!(LabelSpec::parse("->", 1).unwrap().out, Vec::<char>::new());
    }

    #[test]
    fn bad_specs_are_typed() {
        assert!(matches!(LabelSpec::parse("ij", 1), Err(LabelError::NoArrow { .. })));
        assert!(matches!(
            LabelSpec::parse("ij->ji->ij", 1),
            Err(LabelError::NoArrow { .. })
        ));
        assert!(matches!(
            LabelSpec::parse("ij,ji->ij", 1),
            Err(LabelError::Operands { got: 2, max: 1, .. })
        ));
        assert!(matches!(
            LabelSpec::parse("i1->i1", 1),
            Err(LabelError::BadLabel { ch: '1', .. })
        ));
        assert!(matches!(
            LabelSpec::parse("i...->i", 1),
            Err(LabelError::BadLabel { ch: '.', .. })
        ));
        assert!(matches!(
            LabelSpec::parse("ii->i", 1),
            Err(LabelError::Repeated { label: 'i', .. })
        ));
        assert!(matches!(
            LabelSpec::parse("ij->ik", 1),
            Err(LabelError::NotAPermutation { .. })
        ));
        assert!(matches!(
            LabelSpec::parse("ij,jkl->ji", 2),
            Err(LabelError::NotAPermutation { operand, .. }) if operand == "b"
        ));
        let s = LabelSpec::parse("ij->ji", 1).unwrap();
        assert!(matches!(
            s.check_rank("ij->ji", "a", 3),
            Err(LabelError::Rank { labels: 2, rank: 3, .. })
        ));
    }
}
