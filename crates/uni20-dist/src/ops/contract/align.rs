//! Operands blocked differently on a shared index: the choice of which
//! operand a contraction reblocks ([`align`]), pure.
//!
//! Rule: two candidate tilings per label are tried, "keep A" (every label
//! takes A's block extents, labels only in B take B's) and "keep B" (the
//! reverse); for one operand only "keep A" (the first occurrence of a
//! repeated label wins). A candidate's cost is the bytes of the blocks that
//! its reblocks must rebuild from pieces (blocks of an operand, and of C_in,
//! that are not exactly blocks of the target tiling: an upper bound on the
//! bytes the reblock moves; the owners are not known before the operands
//! are ready). The cheaper candidate wins; on a tie, "keep A" (B is
//! reblocked). C_in, when used, is reblocked to the output tiling the
//! winner gives. Operands without elements are one empty block and are
//! never reblocked.

use std::collections::BTreeMap;

use uni20_dispatch::ResolvedSpec;

use crate::error::DistError;
use crate::layout::Blocking;
use crate::ops::kit::{check_block_bytes, rebuilt_bytes};
use crate::tensor::TensorMeta;

/// What to reblock: per input (in operand order, then C_in), the target
/// tiling when it changes, and a note naming the operand and labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Alignment {
    pub(crate) targets: Vec<Option<(Blocking, String)>>,
    pub(crate) cost: u64,
}

fn operand_name(i: usize, n_inputs: usize) -> &'static str {
    match (i, i == n_inputs) {
        (_, true) => "C_in",
        (0, _) => "A",
        _ => "B",
    }
}

/// The candidate keeping the operands in `order` first.
fn candidate(
    spec: &ResolvedSpec,
    inputs: &[&TensorMeta],
    c: Option<&TensorMeta>,
    order: &[usize],
) -> Result<Alignment, DistError> {
    let mut ext: BTreeMap<char, Vec<usize>> = BTreeMap::new();
    for &i in order {
        let m = inputs[i];
        if m.is_empty() {
            continue;
        }
        for (l, e) in spec.inputs()[i].iter().zip(m.blocking.extents()) {
            ext.entry(*l).or_insert_with(|| e.clone());
        }
    }
    let mut all: Vec<(&[char], &TensorMeta)> = spec
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(l, m)| (l.as_slice(), *m))
        .collect();
    all.extend(c.map(|c| (spec.output(), c)));
    let mut targets = Vec::with_capacity(all.len());
    let mut cost = 0u64;
    for (i, (labels, m)) in all.into_iter().enumerate() {
        if m.is_empty() {
            targets.push(None);
            continue;
        }
        let extents: Vec<Vec<usize>> = labels
            .iter()
            .zip(m.blocking.extents())
            .map(|(l, own)| ext.get(l).cloned().unwrap_or_else(|| own.clone()))
            .collect();
        let target = Blocking::from_extents(&m.shape, extents)?;
        if target == m.blocking {
            targets.push(None);
            continue;
        }
        check_block_bytes(&target, m.dtype, "a reblocked operand")?;
        cost = cost.saturating_add(rebuilt_bytes(&m.blocking, &target, m.dtype));
        let mut changed: Vec<String> = Vec::new();
        for (k, l) in labels.iter().enumerate() {
            let s = format!("{l} to {:?}", target.mode(k));
            if target.mode(k) != m.blocking.mode(k) && !changed.contains(&s) {
                changed.push(s);
            }
        }
        let note = format!("reblocked {} on {}", operand_name(i, inputs.len()), changed.join(", "));
        targets.push(Some((target, note)));
    }
    Ok(Alignment { targets, cost })
}

/// Chooses the reblocks that give every label one tiling across the
/// operands (and C_in when `c` is given); see the module docs for the rule.
///
/// # Errors
/// [`DistError::PlanTooLarge`] if a reblocked operand's blocks would be too
/// large; [`DistError::Blocking`] for an invalid target (not expected).
pub(crate) fn align(
    spec: &ResolvedSpec,
    inputs: &[&TensorMeta],
    c: Option<&TensorMeta>,
) -> Result<Alignment, DistError> {
    let keep_a = candidate(spec, inputs, c, &(0..inputs.len()).collect::<Vec<_>>())?;
    if inputs.len() < 2 {
        return Ok(keep_a);
    }
    let keep_b = candidate(spec, inputs, c, &[1, 0])?;
    Ok(if keep_b.cost < keep_a.cost { keep_b } else { keep_a })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uni20_dispatch::DType;

    fn meta(shape: &[usize], ext: Vec<Vec<usize>>) -> TensorMeta {
        TensorMeta {
            symmetric: None,
            shape: shape.to_vec(),
            dtype: DType::F64,
            blocking: Blocking::from_extents(shape, ext).unwrap(),
        }
    }

    #[test]
    fn the_operand_with_fewer_bytes_to_rebuild_is_reblocked() {
        let spec = ResolvedSpec::parse("ij,jk->ik").unwrap();
        // A is 4x6 (j as [3,3]), B is 6x2 (j as [2,2,2]): B is smaller.
        let a = meta(&[4, 6], vec![vec![4], vec![3, 3]]);
        let b = meta(&[6, 2], vec![vec![2, 2, 2], vec![2]]);
        let al = align(&spec, &[&a, &b], None).unwrap();
        assert!(al.targets[0].is_none());
        let (t, note) = al.targets[1].clone().unwrap();
        assert_eq!(t.mode(0), &[3, 3]);
        assert_eq!(note, "reblocked B on j to [3, 3]");
        assert_eq!(al.cost, 6 * 2 * 8);
        // Swapped sizes: A is reblocked.
        let a = meta(&[2, 6], vec![vec![2], vec![3, 3]]);
        let b = meta(&[6, 4], vec![vec![2, 2, 2], vec![4]]);
        let al = align(&spec, &[&a, &b], None).unwrap();
        assert!(al.targets[1].is_none());
        assert_eq!(al.targets[0].clone().unwrap().1, "reblocked A on j to [2, 2, 2]");
    }

    #[test]
    fn ties_reblock_b_and_c_follows_the_output() {
        let spec = ResolvedSpec::parse("ij,jk->ik").unwrap();
        let a = meta(&[2, 6], vec![vec![1, 1], vec![3, 3]]);
        let b = meta(&[6, 2], vec![vec![2, 2, 2], vec![2]]);
        let c = meta(&[2, 2], vec![vec![2], vec![2]]);
        let al = align(&spec, &[&a, &b], Some(&c)).unwrap();
        assert!(al.targets[0].is_none());
        assert!(al.targets[1].is_some());
        assert_eq!(al.targets[2].clone().unwrap().1, "reblocked C_in on i to [1, 1]");
    }
}
