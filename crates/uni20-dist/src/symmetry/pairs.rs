//! Block pairs of a symmetric contraction, from metadata only: which
//! allowed blocks of `A` meet which allowed blocks of `B` on the contracted
//! legs, which output block each pair adds into, and what each output
//! block costs in flops.
//!
//! Only charge-allowed blocks take part: a pair exists only when both its
//! blocks exist and their tiles agree on every contracted leg, so zero
//! blocks are never planned. The output's flux is the fusion of the two
//! fluxes, and every output block reached by a pair is an allowed block of
//! the output layout.

use rustc_hash::FxHashMap as HashMap;

use super::group::SymmetryError;
use super::layout::SymmetricLayout;
use super::leg::Leg;

/// Why two symmetric tensors cannot be contracted as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SymContractError {
    /// A label list does not have one label per leg.
    #[error("operand {operand} has {legs} legs but {labels} labels")]
    LabelCount {
        /// `'A'`, `'B'` or `'C'` (output).
        operand: char,
        /// Legs of the operand.
        legs: usize,
        /// Labels given.
        labels: usize,
    },
    /// A label appears twice in one operand (traces are not supported on
    /// symmetric operands), or an output label is in neither operand, or a
    /// free label is missing from the output.
    #[error("label `{label}`: {reason}")]
    BadLabel {
        /// The label.
        label: char,
        /// What is wrong.
        reason: &'static str,
    },
    /// A contracted pair of legs has different sector lists.
    #[error("contracted leg `{label}`: sectors {a} of A do not match sectors {b} of B")]
    SectorMismatch {
        /// The leg's label.
        label: char,
        /// A's sectors, as `charge:dim` pairs.
        a: String,
        /// B's sectors.
        b: String,
    },
    /// A contracted pair of legs has the same direction (a contraction
    /// joins an `Out` leg with an `In` leg).
    #[error(
        "contracted leg `{label}` has direction {direction:?} in both operands; one must be the dual of the other"
    )]
    SameDirection {
        /// The leg's label.
        label: char,
        /// The common direction.
        direction: super::leg::Direction,
    },
    /// A contracted pair of legs is tiled differently (reblock one
    /// operand first).
    #[error("contracted leg `{label}`: tiles {a:?} of A differ from tiles {b:?} of B")]
    TileMismatch {
        /// The leg's label.
        label: char,
        /// A's tiles per sector.
        a: Vec<Vec<usize>>,
        /// B's tiles per sector.
        b: Vec<Vec<usize>>,
    },
    /// The group, the output flux or the output layout is invalid (for
    /// example [`SymmetryError::NoAllowedBlock`]: no output block satisfies
    /// the fused flux, so the product is identically zero).
    #[error(transparent)]
    Symmetry(#[from] SymmetryError),
    /// A symmetric contraction needs two operands (one-operand einsum forms
    /// of symmetric tensors are other families: permute, trace).
    #[error("a symmetric contraction takes two operands, got {got}")]
    OperandCount {
        /// Operands given.
        got: usize,
    },
    /// The existing output `C_in` of `C = alpha A B + beta C_in` does not
    /// have the output's layout (legs with their sectors and directions, and
    /// flux).
    #[error("C_in has {got}, but the product has {expected}")]
    OutputLayout {
        /// The product's layout, in words.
        expected: String,
        /// C_in's layout, in words.
        got: String,
    },
}

/// One output block of a symmetric contraction and the block pairs that
/// add into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairItem {
    /// Index of the output block in the output layout.
    pub out_block: usize,
    /// `(block of A, block of B)` pairs, in increasing order.
    pub pairs: Vec<(usize, usize)>,
    /// Multiply-adds of the item: the sum over its pairs of
    /// `m * n * k` (rows, columns and contracted extent of the pair's GEMM).
    pub flops: u64,
}

/// The block pairs of `C[c] = sum A[a] B[b]` for symmetric operands, with
/// the output layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairPlan {
    /// The output's layout (legs from the operands' free legs, flux the
    /// fusion of the two fluxes).
    pub output: SymmetricLayout,
    /// One item per output block that at least one pair reaches, in output
    /// block order. Output blocks that no pair reaches are exact zeros of
    /// the result (allowed by the charge rule, but not stored).
    pub items: Vec<PairItem>,
}

impl PairPlan {
    /// Total number of block pairs.
    pub fn pair_count(&self) -> usize {
        self.items.iter().map(|i| i.pairs.len()).sum()
    }

    /// Total multiply-adds.
    pub fn flops(&self) -> u64 {
        self.items.iter().map(|i| i.flops).sum()
    }
}

fn sectors_string(l: &Leg) -> String {
    let parts: Vec<String> = l.sectors().iter().map(|s| format!("{}:{}", s.charge, s.dim)).collect();
    format!("[{}]", parts.join(", "))
}

fn check_labels(operand: char, labels: &[char], legs: usize) -> Result<(), SymContractError> {
    if labels.len() != legs {
        return Err(SymContractError::LabelCount {
            operand,
            legs,
            labels: labels.len(),
        });
    }
    for (i, c) in labels.iter().enumerate() {
        if labels[..i].contains(c) {
            return Err(SymContractError::BadLabel {
                label: *c,
                reason: "appears twice in one operand (no traces of symmetric operands)",
            });
        }
    }
    Ok(())
}

/// Plans the block pairs of the contraction `a_labels, b_labels ->
/// c_labels` of two symmetric layouts (labels shared by `A` and `B` and
/// absent from the output are contracted; every other label must appear in
/// the output exactly once).
///
/// # Errors
/// [`SymContractError`]: label problems, contracted legs whose sector
/// lists differ ([`SymContractError::SectorMismatch`]), have equal
/// directions ([`SymContractError::SameDirection`]) or different tilings
/// ([`SymContractError::TileMismatch`]); a group mismatch between the
/// operands ([`SymmetryError::GroupMismatch`]).
pub fn plan_pairs(
    a: &SymmetricLayout,
    a_labels: &[char],
    b: &SymmetricLayout,
    b_labels: &[char],
    c_labels: &[char],
) -> Result<PairPlan, SymContractError> {
    check_labels('A', a_labels, a.legs().len())?;
    check_labels('B', b_labels, b.legs().len())?;
    check_labels('C', c_labels, c_labels.len())?;
    if a.symmetry() != b.symmetry() {
        return Err(SymmetryError::GroupMismatch {
            what: "the operands of a contraction".into(),
            first: a.symmetry().clone(),
            second: b.symmetry().clone(),
        }
        .into());
    }
    let g = a.symmetry();
    // Contracted legs: (position in A, position in B).
    let mut contracted = Vec::new();
    for (i, &l) in a_labels.iter().enumerate() {
        if let Some(j) = b_labels.iter().position(|&m| m == l) {
            if c_labels.contains(&l) {
                return Err(SymContractError::BadLabel {
                    label: l,
                    reason:
                        "is in both operands and in the output (batch legs of symmetric operands are not supported)",
                });
            }
            let (la, lb) = (&a.legs()[i], &b.legs()[j]);
            if !la.same_sectors(lb) {
                return Err(SymContractError::SectorMismatch {
                    label: l,
                    a: sectors_string(la),
                    b: sectors_string(lb),
                });
            }
            if la.direction() == lb.direction() {
                return Err(SymContractError::SameDirection {
                    label: l,
                    direction: la.direction(),
                });
            }
            let ta: Vec<Vec<usize>> = (0..la.sectors().len()).map(|s| la.sector_tiles(s).to_vec()).collect();
            let tb: Vec<Vec<usize>> = (0..lb.sectors().len()).map(|s| lb.sector_tiles(s).to_vec()).collect();
            if ta != tb {
                return Err(SymContractError::TileMismatch { label: l, a: ta, b: tb });
            }
            contracted.push((i, j));
        }
    }
    // Output legs: each output label from A's or B's free legs.
    let mut out_src = Vec::with_capacity(c_labels.len()); // (from A?, position)
    for &l in c_labels {
        if let Some(i) = a_labels.iter().position(|&m| m == l) {
            out_src.push((true, i));
        } else if let Some(j) = b_labels.iter().position(|&m| m == l) {
            out_src.push((false, j));
        } else {
            return Err(SymContractError::BadLabel {
                label: l,
                reason: "is in the output but in neither operand",
            });
        }
    }
    for (&l, side) in a_labels
        .iter()
        .map(|l| (l, 'A'))
        .chain(b_labels.iter().map(|l| (l, 'B')))
    {
        let in_other = if side == 'A' {
            b_labels.contains(&l)
        } else {
            a_labels.contains(&l)
        };
        if !in_other && !c_labels.contains(&l) {
            return Err(SymContractError::BadLabel {
                label: l,
                reason: "is a free leg missing from the output (sum it out first)",
            });
        }
    }
    let out_legs: Vec<Leg> = out_src
        .iter()
        .map(|&(from_a, k)| {
            if from_a {
                a.legs()[k].clone()
            } else {
                b.legs()[k].clone()
            }
        })
        .collect();
    let flux = g.fuse(a.flux(), b.flux())?;
    let output = SymmetricLayout::new(g.clone(), out_legs, flux)?;

    // Group B's blocks by their contracted tiles.
    let mut b_by_key: HashMap<Vec<usize>, Vec<usize>> = HashMap::default();
    for (bi, blk) in b.blocks().iter().enumerate() {
        let key: Vec<usize> = contracted.iter().map(|&(_, j)| blk.tiles[j]).collect();
        b_by_key.entry(key).or_default().push(bi);
    }
    let extent =
        |lay: &SymmetricLayout, leg: usize, tile: usize| lay.legs()[leg].tile(tile).map(|t| t.extent).unwrap_or(0);
    let mut by_out: HashMap<usize, PairItem> = HashMap::default();
    for (ai, ablk) in a.blocks().iter().enumerate() {
        let key: Vec<usize> = contracted.iter().map(|&(i, _)| ablk.tiles[i]).collect();
        let Some(bs) = b_by_key.get(&key) else { continue };
        let k: u64 = contracted
            .iter()
            .map(|&(i, _)| extent(a, i, ablk.tiles[i]) as u64)
            .product();
        let m: u64 = (0..a_labels.len())
            .filter(|i| !contracted.iter().any(|&(ci, _)| ci == *i))
            .map(|i| extent(a, i, ablk.tiles[i]) as u64)
            .product();
        for &bi in bs {
            let bblk = &b.blocks()[bi];
            let n: u64 = (0..b_labels.len())
                .filter(|j| !contracted.iter().any(|&(_, cj)| cj == *j))
                .map(|j| extent(b, j, bblk.tiles[j]) as u64)
                .product();
            let out_tiles: Vec<usize> = out_src
                .iter()
                .map(|&(from_a, p)| if from_a { ablk.tiles[p] } else { bblk.tiles[p] })
                .collect();
            // Every pair's output block satisfies the output's charge rule by construction.
            let Some(ob) = output.find(&out_tiles) else {
                continue;
            };
            let item = by_out.entry(ob).or_insert_with(|| PairItem {
                out_block: ob,
                pairs: Vec::new(),
                flops: 0,
            });
            item.pairs.push((ai, bi));
            item.flops += m * n * k;
        }
    }
    let mut items: Vec<PairItem> = by_out.into_values().collect();
    items.sort_by_key(|i| i.out_block);
    for i in &mut items {
        i.pairs.sort_unstable();
    }
    Ok(PairPlan { output, items })
}
