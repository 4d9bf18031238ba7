//! The root's truncation decision for a sector-wise SVD: the workers send
//! each sector's singular values (a small decision record), and
//! [`truncate_sectors`] decides how many to keep in each sector so that
//! the result is exactly what the dense truncated SVD of the block-diagonal
//! matrix would keep.
//!
//! The sectors' values are merged into one non-increasing spectrum (ties
//! broken by sector, then by position, so the decision is deterministic),
//! the dense rule of [`uni20_dispatch::SvdOptions`] (maximum rank, cutoff,
//! discarded weight, degenerate multiplets across sectors) picks the kept
//! prefix, and each sector keeps its values inside that prefix. This is the
//! root's job in the design: a global, non-reproducible-by-one-worker
//! decision made from small records, never from payloads.

use uni20_dispatch::decomp::{truncation_rank, DecompError, DecompKind, SvdOptions};
use uni20_dispatch::DType;

/// How many singular values each sector keeps ([`truncate_sectors`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SectorCut {
    /// Values kept per sector (a prefix of that sector's values).
    pub kept: Vec<usize>,
    /// Discarded weight `sum(discarded^2) / sum(all s^2)` over all sectors.
    pub discarded_weight: f64,
    /// True when `max_rank` had to cut inside the leading degenerate
    /// multiplet (see [`SvdOptions`]).
    pub degenerate_split: bool,
}

/// Decides the kept counts of a sector-wise truncated SVD.
///
/// `values[s]` are the singular values of sector `s`, non-increasing,
/// finite and `>= 0`; `dtype` selects the default degeneracy tolerance.
///
/// # Errors
/// [`DecompError::InvalidOption`] for invalid options or values (negative,
/// non-finite, or a sector's values not sorted).
pub fn truncate_sectors(values: &[Vec<f64>], opts: &SvdOptions, dtype: DType) -> Result<SectorCut, DecompError> {
    let mut merged: Vec<(f64, usize, usize)> = Vec::with_capacity(values.iter().map(Vec::len).sum());
    for (s, v) in values.iter().enumerate() {
        if let Some(i) = v.windows(2).position(|w| w[0] < w[1]) {
            return Err(DecompError::InvalidOption {
                op: DecompKind::Svd,
                option: "singular values",
                reason: format!("sector {s}: not sorted at position {i} ({} < {})", v[i], v[i + 1]),
            });
        }
        merged.extend(v.iter().enumerate().map(|(i, &x)| (x, s, i)));
    }
    // Non-increasing by value; NaN is refused by truncation_rank below.
    merged.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let spectrum: Vec<f64> = merged.iter().map(|m| m.0).collect();
    let cut = truncation_rank(&spectrum, opts, dtype)?;
    let mut kept = vec![0usize; values.len()];
    for &(_, s, _) in &merged[..cut.kept] {
        kept[s] += 1;
    }
    Ok(SectorCut {
        kept,
        discarded_weight: cut.discarded_weight,
        degenerate_split: cut.degenerate_split,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uni20_dispatch::decomp::{svd, SvdBackendList};
    use uni20_dispatch::LocalTensor;

    fn matrix(rows: usize, cols: usize, data: Vec<f64>) -> LocalTensor {
        LocalTensor::from_f64(&[rows, cols], data).unwrap()
    }

    /// Dense block-diagonal embedding of the sector matrices.
    fn block_diagonal(blocks: &[(usize, usize, Vec<f64>)]) -> LocalTensor {
        let rows: usize = blocks.iter().map(|b| b.0).sum();
        let cols: usize = blocks.iter().map(|b| b.1).sum();
        let mut d = vec![0.0; rows * cols];
        let (mut r0, mut c0) = (0, 0);
        for (m, n, v) in blocks {
            for i in 0..*m {
                for j in 0..*n {
                    d[(r0 + i) * cols + c0 + j] = v[i * n + j];
                }
            }
            r0 += m;
            c0 += n;
        }
        matrix(rows, cols, d)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// The sector decision keeps exactly the values that the dense truncated SVD of the
        /// block-diagonal matrix keeps, with sectors that repeat each other (multiplets
        /// across sectors, as SU(2) spreads over Sz sectors).
        #[test]
        fn sector_cut_equals_the_dense_truncation(
            shapes in prop::collection::vec((1usize..=4, 1usize..=4), 1..=4),
            repeat in any::<bool>(),
            seed in any::<u64>(),
            max_rank in prop::option::of(1usize..=8),
            weight in prop::option::of(0.0f64..0.3),
            cutoff in prop::option::of(0.0f64..0.8),
        ) {
            let mut rnd = super::super::test_values(seed);
            let mut blocks: Vec<(usize, usize, Vec<f64>)> = shapes
                .iter()
                .map(|&(m, n)| (m, n, (0..m * n).map(|_| rnd()).collect()))
                .collect();
            if repeat {
                let first = blocks[0].clone();
                blocks.push(first);
            }
            let all = SvdBackendList::default_cpu(1);
            let values: Vec<Vec<f64>> = blocks
                .iter()
                .map(|(m, n, v)| svd(&matrix(*m, *n, v.clone()), &SvdOptions::default(), &all).unwrap().s)
                .collect();
            let opts = SvdOptions { max_rank, max_discarded_weight: weight, cutoff, degeneracy_rtol: None };
            let cut = truncate_sectors(&values, &opts, DType::F64).unwrap();
            let dense = svd(&block_diagonal(&blocks), &opts, &all).unwrap();
            // The embedding has min(rows, cols) - sum_s min(m_s, n_s) extra singular values
            // that are zero (numerically ~1e-16); the dense SVD keeps them when no criterion
            // drops them, the sector-wise one has no such values. Compare the rest.
            let noise = 1e-10 * dense.s.first().copied().unwrap_or(0.0);
            let dense_s: Vec<f64> = dense.s.iter().copied().filter(|&x| x > noise).collect();
            // The comparison tells the embedding's zeros from the sectors' values by size, so
            // it needs every sector value above the noise floor: a random block can be close
            // to singular (seed 11226309109624500060 made one), and such a case is skipped.
            prop_assume!(values.iter().flatten().all(|&x| x > noise), "random sectors have full rank");
            prop_assert_eq!(cut.kept.iter().sum::<usize>(), dense_s.len());
            prop_assert_eq!(cut.degenerate_split, dense.degenerate_split);
            let mut kept: Vec<f64> = values
                .iter()
                .zip(&cut.kept)
                .flat_map(|(v, &k)| v[..k].iter().copied())
                .collect();
            kept.sort_by(|a, b| b.total_cmp(a));
            for (x, y) in kept.iter().zip(&dense_s) {
                prop_assert!((x - y).abs() <= 1e-12 * (1.0 + y), "{} vs {}", x, y);
            }
            prop_assert!((cut.discarded_weight - dense.discarded_weight).abs() <= 1e-12);
        }
    }

    #[test]
    fn a_multiplet_across_sectors_is_kept_or_dropped_whole() {
        // Two sectors share the value 0.5: max_rank 2 cannot keep half of it.
        let values = vec![vec![1.0, 0.5], vec![0.5, 0.1]];
        let opts = SvdOptions {
            max_rank: Some(2),
            ..SvdOptions::default()
        };
        let cut = truncate_sectors(&values, &opts, DType::F64).unwrap();
        assert_eq!(cut.kept, vec![1, 0]);
        let opts = SvdOptions {
            max_rank: Some(3),
            ..SvdOptions::default()
        };
        assert_eq!(truncate_sectors(&values, &opts, DType::F64).unwrap().kept, vec![2, 1]);
    }

    #[test]
    fn bad_values_are_errors() {
        let opts = SvdOptions::default();
        assert!(truncate_sectors(&[vec![0.1, 0.2]], &opts, DType::F64).is_err());
        assert!(truncate_sectors(&[vec![f64::NAN]], &opts, DType::F64).is_err());
        assert!(truncate_sectors(&[vec![-1.0]], &opts, DType::F64).is_err());
        let zero = SvdOptions {
            max_rank: Some(0),
            ..SvdOptions::default()
        };
        assert!(truncate_sectors(&[vec![1.0]], &zero, DType::F64).is_err());
        assert_eq!(
            truncate_sectors(&[vec![], vec![]], &opts, DType::F64).unwrap().kept,
            vec![0, 0]
        );
    }
}
