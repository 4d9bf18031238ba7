//! The decomposition planner, pure: validation of a call against the
//! input's static description ([`validate`]: the split, the options, the
//! size limit, the tilings of the factors), the choice of the factorizing
//! worker and the blocks it must fetch ([`plan_assembly`]), the factors'
//! shapes and tilings once the kept rank is known ([`factor_metas`]), and
//! where their blocks go afterwards ([`plan_distribution`]). No transport,
//! no controller: testable with simulated ranks.

use std::collections::BTreeMap;

use uni20_dispatch::decomp::{DecompError, DecompKind};
use uni20_dispatch::DType;
use uni20_persist::ObjectId;

use super::error::SplitError;
use super::split::MatrixSplit;
use crate::error::DistError;
use crate::layout::{block_extents, Blocking, BlockingError};
use crate::tensor::{BlockRef, Manifest, TensorMeta};
use crate::transfer::{Transfer, TransferSet};

/// Default limit on the bytes of the matrix assembled on the factorizing
/// worker: 8 GiB. The factorization needs about three times as much
/// (matrix, factors, workspace) on that rank.
pub const DEFAULT_MAX_MATRIX_BYTES: u64 = 8 << 30;

/// A decomposition call checked against its input's static description.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Validated {
    /// The family.
    pub(crate) op: DecompKind,
    /// The input's shape, dtype and tiling.
    pub(crate) input: TensorMeta,
    /// The matrix view.
    pub(crate) split: MatrixSplit,
    /// Rows of the matrix view.
    pub(crate) rows: usize,
    /// Columns of the matrix view.
    pub(crate) cols: usize,
    /// Block extent of the new index `k`.
    pub(crate) k_block: usize,
}

/// Checks a call of `op` on a tensor described by `input`: the split (see
/// [`MatrixSplit::parse`]), squareness for `eigh`, the matrix size against
/// `max_matrix_bytes` (default [`DEFAULT_MAX_MATRIX_BYTES`]), `k_block`
/// (default: the input's largest block extent) and that the factors of the
/// largest possible rank can be tiled.
pub(crate) fn validate(
    op: DecompKind,
    input: &TensorMeta,
    split: &str,
    k_block: Option<usize>,
    max_matrix_bytes: Option<u64>,
) -> Result<Validated, DistError> {
    let split_err = |error: SplitError| DistError::Split {
        op,
        split: split.to_string(),
        error,
    };
    let s = MatrixSplit::parse(split, input.shape.len()).map_err(split_err)?;
    let (rows, cols) = s.matrix_size(&input.shape);
    if op == DecompKind::Eigh && rows != cols {
        return Err(split_err(SplitError::NotSquare {
            rows: usize::try_from(rows).unwrap_or(usize::MAX),
            cols: usize::try_from(cols).unwrap_or(usize::MAX),
        }));
    }
    check_matrix_bytes(op, rows, cols, input.dtype, max_matrix_bytes)?;
    // Below the limit, both sizes fit in usize.
    let (rows, cols) = (rows as usize, cols as usize);
    let k_block = resolve_k_block(input, k_block)?;
    let v = Validated {
        op,
        input: input.clone(),
        split: s,
        rows,
        cols,
        k_block,
    };
    factor_metas(&v, rows.min(cols), true)?;
    Ok(v)
}

/// Checks that a `rows x cols` matrix of `dtype` fits `max_matrix_bytes`
/// (default [`DEFAULT_MAX_MATRIX_BYTES`]).
pub(crate) fn check_matrix_bytes(
    op: DecompKind,
    rows: u128,
    cols: u128,
    dtype: DType,
    max_matrix_bytes: Option<u64>,
) -> Result<(), DistError> {
    let limit = max_matrix_bytes.unwrap_or(DEFAULT_MAX_MATRIX_BYTES);
    let bytes = rows.saturating_mul(cols).saturating_mul(dtype.size_bytes() as u128);
    if bytes > limit as u128 {
        return Err(DistError::MatrixTooLarge {
            op,
            rows,
            cols,
            dtype,
            bytes,
            limit,
        });
    }
    Ok(())
}

/// The block extent of the new index: `k_block`, or by default the
/// input's largest block extent (zero is an error).
pub(crate) fn resolve_k_block(input: &TensorMeta, k_block: Option<usize>) -> Result<usize, DistError> {
    match k_block {
        Some(0) => Err(BlockingError::ZeroBlockSize.into()),
        Some(b) => Ok(b),
        None => Ok(input
            .blocking
            .extents()
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(1)
            .max(1)),
    }
}

/// Checks SVD truncation options as the local kernel will (so that a bad
/// option is an error before anything runs).
pub(crate) fn check_truncation(t: &uni20_dispatch::decomp::SvdOptions) -> Result<(), DistError> {
    let op = DecompKind::Svd;
    if t.max_rank == Some(0) {
        return Err(DecompError::InvalidOption {
            op,
            option: "max_rank",
            reason: "must be at least 1".to_string(),
        }
        .into());
    }
    let fields = [
        ("max_discarded_weight", t.max_discarded_weight),
        ("cutoff", t.cutoff),
        ("degeneracy_rtol", t.degeneracy_rtol),
    ];
    check_tolerances(op, &fields)
}

/// Checks that each given tolerance is finite and non-negative.
pub(crate) fn check_tolerances(op: DecompKind, fields: &[(&'static str, Option<f64>)]) -> Result<(), DistError> {
    for &(option, v) in fields {
        if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(DecompError::InvalidOption {
                op,
                option,
                reason: format!("must be finite and >= 0, got {v}"),
            }
            .into());
        }
    }
    Ok(())
}

/// The real dtype of the same precision (singular values on a diagonal).
pub(crate) fn real_dtype(d: DType) -> DType {
    match d {
        DType::F32 | DType::C32 => DType::F32,
        DType::F64 | DType::C64 => DType::F64,
    }
}

/// A tiling from per-mode block extents; a tensor without elements gets
/// the one-block tiling every empty tensor has.
fn tiling(extents: Vec<Vec<usize>>) -> Result<(Vec<usize>, Blocking), BlockingError> {
    let shape: Vec<usize> = extents.iter().map(|e| e.iter().sum()).collect();
    let blocking = if shape.contains(&0) {
        Blocking::regular(&shape, 1)?
    } else {
        Blocking::from_extents(&shape, extents)?
    };
    Ok((shape, blocking))
}

/// The factors of a decomposition of kept rank `k`, in reply order:
/// svd `[U (rows.., k), Vh (k, cols..), S (k, k) when s_diag]`, qr
/// `[Q, R]` and lq `[L, Q]` with the same shapes as U and Vh, eigh
/// `[V (rows.., k)]`. The row and column modes keep the input's block
/// extents; `k` is cut into blocks of `k_block`.
pub(crate) fn factor_metas(v: &Validated, k: usize, s_diag: bool) -> Result<Vec<TensorMeta>, BlockingError> {
    let ext = v.input.blocking.extents();
    let k_ext = block_extents(k, v.k_block);
    let mut left: Vec<Vec<usize>> = v.split.rows.iter().map(|&m| ext[m].clone()).collect();
    left.push(k_ext.clone());
    let mut right = vec![k_ext.clone()];
    right.extend(v.split.cols.iter().map(|&m| ext[m].clone()));
    let mut parts = vec![(left, v.input.dtype)];
    if v.op != DecompKind::Eigh {
        parts.push((right, v.input.dtype));
    }
    if v.op == DecompKind::Svd && s_diag {
        parts.push((vec![k_ext.clone(), k_ext], real_dtype(v.input.dtype)));
    }
    parts
        .into_iter()
        .map(|(extents, dtype)| {
            let (shape, blocking) = tiling(extents)?;
            Ok(TensorMeta::dense(shape, dtype, blocking))
        })
        .collect()
}

/// Where the matrix is assembled and what must move there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Assembly {
    /// The factorizing worker.
    pub(crate) rank: usize,
    /// Input bytes the factorizing worker already holds.
    pub(crate) local_bytes: u64,
    /// Input blocks moving to it.
    pub(crate) transfers: Vec<Transfer>,
    /// Ranks that receive the command (the factorizing worker and every sender).
    pub(crate) participants: Vec<usize>,
}

/// Chooses the factorizing worker among `workers` (not empty): the one
/// that owns most bytes of the input (ties: the lowest rank), and lists
/// the input blocks it must fetch from the others.
pub(crate) fn plan_assembly(m: &Manifest, workers: &[usize]) -> Assembly {
    let mut owned: BTreeMap<usize, u64> = workers.iter().map(|&w| (w, 0)).collect();
    for (b, r) in m.blocks.iter().enumerate() {
        if let Some(x) = owned.get_mut(&r.owner) {
            *x += m.block_bytes(b);
        }
    }
    let (rank, local_bytes) = owned
        .iter()
        .max_by_key(|(w, bytes)| (**bytes, std::cmp::Reverse(**w)))
        .map(|(w, b)| (*w, *b))
        .unwrap_or((workers[0], 0));
    let mut set = TransferSet::new();
    for (b, r) in m.blocks.iter().enumerate() {
        set.need(r, m.block_bytes(b), rank);
    }
    let transfers = set.into_vec();
    let mut participants: Vec<usize> = transfers.iter().map(|t| t.from).chain([rank]).collect();
    participants.sort_unstable();
    participants.dedup();
    Assembly {
        rank,
        local_bytes,
        transfers,
        participants,
    }
}

/// Owners of the factor blocks committed on `from`: all factors' blocks
/// in order (factor by factor, blocks row-major) go round-robin to
/// `workers` (not empty); returns each factor's block map and the
/// transfers from `from` to the other owners.
///
/// # Errors
/// [`DistError::Protocol`] if a factor has a different number of blocks
/// than its tiling.
pub(crate) fn plan_distribution(
    metas: &[TensorMeta],
    ids: &[Vec<ObjectId>],
    from: usize,
    workers: &[usize],
) -> Result<(Vec<Vec<BlockRef>>, Vec<Transfer>), DistError> {
    if ids.len() != metas.len() {
        return Err(DistError::Protocol(format!(
            "{} factors reported, {} expected",
            ids.len(),
            metas.len()
        )));
    }
    let mut next = 0usize;
    let mut set = TransferSet::new();
    let mut maps = Vec::with_capacity(metas.len());
    for (meta, ids) in metas.iter().zip(ids) {
        if ids.len() != meta.blocking.num_blocks() {
            return Err(DistError::Protocol(format!(
                "a factor of shape {:?} came back as {} blocks, its tiling has {}",
                meta.shape,
                ids.len(),
                meta.blocking.num_blocks()
            )));
        }
        let mut map = Vec::with_capacity(ids.len());
        for (b, &id) in ids.iter().enumerate() {
            let owner = workers[next % workers.len()];
            next += 1;
            set.need(&BlockRef { owner: from, id }, meta.block_bytes(b), owner);
            map.push(BlockRef { owner, id });
        }
        maps.push(map);
    }
    Ok((maps, set.into_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(shape: &[usize], block: usize) -> TensorMeta {
        TensorMeta {
            symmetric: None,
            shape: shape.to_vec(),
            dtype: DType::F64,
            blocking: Blocking::regular(shape, block).unwrap(),
        }
    }

    fn manifest(meta: &TensorMeta, owners: &[usize]) -> Manifest {
        let blocks = (0..meta.blocking.num_blocks())
            .map(|b| BlockRef {
                owner: owners[b % owners.len()],
                id: ObjectId::new(owners[b % owners.len()] as u32, b as u64),
            })
            .collect();
        Manifest::new(meta, blocks)
    }

    #[test]
    fn validation_limits_and_tilings() {
        let m = meta(&[6, 4, 5], 4);
        let v = validate(DecompKind::Svd, &m, "ab|c", None, None).unwrap();
        assert_eq!((v.rows, v.cols, v.k_block), (24, 5, 4));
        let f = factor_metas(&v, 5, true).unwrap();
        assert_eq!(f[0].shape, vec![6, 4, 5]);
        assert_eq!(f[0].blocking.extents(), &[vec![4, 2], vec![4], vec![4, 1]]);
        assert_eq!(f[1].blocking.extents(), &[vec![4, 1], vec![4, 1]]);
        assert_eq!((f[2].shape.clone(), f[2].dtype), (vec![5, 5], DType::F64));
        // Nothing kept: the factors are empty tensors of one block each.
        let f = factor_metas(&v, 0, false).unwrap();
        assert_eq!(
            (f.len(), f[0].shape.clone(), f[0].blocking.num_blocks()),
            (2, vec![6, 4, 0], 1)
        );
        let err = validate(DecompKind::Qr, &m, "ab|c", None, Some(24 * 5 * 8 - 1)).unwrap_err();
        assert!(matches!(
            err,
            DistError::MatrixTooLarge {
                rows: 24,
                cols: 5,
                bytes: 960,
                limit: 959,
                ..
            }
        ));
        assert!(matches!(
            validate(DecompKind::Eigh, &m, "ab|c", None, None),
            Err(DistError::Split {
                error: SplitError::NotSquare { rows: 24, cols: 5 },
                ..
            })
        ));
        assert!(matches!(
            validate(DecompKind::Svd, &m, "ab|c", Some(0), None),
            Err(DistError::Blocking(BlockingError::ZeroBlockSize))
        ));
        let huge = meta(&[1 << 40, 1 << 40], 1 << 30);
        assert!(matches!(
            validate(DecompKind::Svd, &huge, "a|b", None, None),
            Err(DistError::MatrixTooLarge { .. })
        ));
    }

    #[test]
    fn assembly_goes_to_the_rank_with_most_bytes_never_the_root() {
        // 3x2 blocks of a 5x4 tensor (block 2): extents [2,2,1] x [2,2].
        let m = meta(&[5, 4], 2);
        let man = manifest(&m, &[1, 2, 3, 3, 3, 3]);
        let a = plan_assembly(&man, &[1, 2, 3]);
        // rank 3 owns blocks 2..6: (2x2 + 2x2 + 1x2 + 1x2) = 12 elements = 96 bytes.
        assert_eq!((a.rank, a.local_bytes), (3, 96));
        assert_eq!(a.transfers.len(), 2);
        assert!(a.transfers.iter().all(|t| t.to == 3 && t.from != 0));
        assert_eq!(a.participants, vec![1, 2, 3]);
        // A tie (ranks 2 and 3 own 64 bytes each) goes to the lower rank.
        let a = plan_assembly(&manifest(&m, &[1, 2, 2, 3, 3, 3]), &[1, 2, 3]);
        assert_eq!((a.rank, a.local_bytes), (2, 64));
        // Blocks on a storage rank (4, not a worker): the lowest worker fetches them all.
        let a = plan_assembly(&manifest(&m, &[4]), &[1, 2]);
        assert_eq!((a.rank, a.participants.clone()), (1, vec![1, 4]));
        assert_eq!(a.transfers.iter().map(|t| t.bytes).sum::<u64>(), 5 * 4 * 8);
    }

    #[test]
    fn distribution_is_round_robin_from_the_factorizer() {
        let m = meta(&[4, 4], 2);
        let v = validate(DecompKind::Svd, &m, "a|b", None, None).unwrap();
        let metas = factor_metas(&v, 3, false).unwrap();
        let ids: Vec<Vec<ObjectId>> = metas
            .iter()
            .enumerate()
            .map(|(f, mt)| {
                (0..mt.blocking.num_blocks())
                    .map(|b| ObjectId::new(2, (10 * f + b) as u64))
                    .collect()
            })
            .collect();
        let (maps, transfers) = plan_distribution(&metas, &ids, 2, &[1, 2, 3]).unwrap();
        let owners: Vec<usize> = maps.iter().flatten().map(|r| r.owner).collect();
        assert_eq!(owners, vec![1, 2, 3, 1, 2, 3, 1, 2]);
        assert_eq!(transfers.len(), 5);
        assert!(transfers.iter().all(|t| t.from == 2 && t.to != 2));
        assert!(plan_distribution(&metas, &ids[..1], 2, &[1]).is_err());
    }
}
