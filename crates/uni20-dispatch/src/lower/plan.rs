//! The GEMM plan of a contraction: which labels are looped over (the batch labels and, where
//! that lets an operand or the output be used in place, leading free labels), the order of
//! the row (M), column (N) and contracted (K) groups, which operands are read in place, and
//! whether the GEMMs write the output directly. [`choose`] enumerates the candidates and
//! keeps the cheapest by a cost in element moves (operand copies, the output permutation,
//! per-call overhead, GEMM work), under a backend's [`LayoutRules`].

use super::operand::{storage_order, MatLayout, Operand};
use crate::dtype::DType;
use crate::scalar::Element;

/// Which GEMM operand a layout belongs to: `A` is `m x k`, `B` is `k x n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    A,
    B,
}

/// What a GEMM library can take without a copy.
pub(crate) trait LayoutRules: Sync {
    /// Whether the GEMM can write an `m x n` destination with this layout.
    fn dst_ok(&self, dst: &MatLayout) -> bool;
    /// Whether operand `side` with layout `op` (its `conj` flag included) can be read in place
    /// by a GEMM that writes `dst` (a layout [`dst_ok`](Self::dst_ok) accepted).
    fn operand_ok(&self, side: Side, op: &MatLayout, dst: &MatLayout) -> bool;
}

/// Rules of a GEMM taking any strides (faer): everything in place.
pub(crate) struct AnyStrides;

impl LayoutRules for AnyStrides {
    fn dst_ok(&self, _: &MatLayout) -> bool {
        true
    }
    fn operand_ok(&self, _: Side, _: &MatLayout, _: &MatLayout) -> bool {
        true
    }
}

/// A chosen lowering (see the module documentation). Every label of the (reduced) operands
/// is in exactly one of `loops`, `m`, `n`, `k`; `loops` are output labels.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// Loop labels, outermost first: the batch labels, then promoted free labels.
    pub(crate) loops: Vec<char>,
    /// Row labels of each GEMM (A-free), outer to inner.
    pub(crate) m: Vec<char>,
    /// Column labels of each GEMM (B-free), outer to inner.
    pub(crate) n: Vec<char>,
    /// Contracted labels, outer to inner.
    pub(crate) k: Vec<char>,
    /// Whether A (B) is copied into row-major `[loops][m][k]` (`[loops][k][n]`).
    pub(crate) copy_a: bool,
    pub(crate) copy_b: bool,
    /// True when the GEMMs write the row-major output itself; else a `[loops][m][n]` work
    /// buffer that is permuted once into the output.
    pub(crate) direct: bool,
    /// Estimated cost in moves of an 8-byte element.
    pub(crate) cost: f64,
    /// Elements of the (reduced) operands and of the output.
    lens: [usize; 3],
}

impl Plan {
    /// Elements copied: operands not read in place plus the output permutation.
    #[cfg_attr(not(any(test, feature = "blas")), allow(dead_code))]
    pub(crate) fn copied_elements(&self) -> usize {
        let [a, b, out] = self.lens;
        usize::from(self.copy_a) * a + usize::from(self.copy_b) * b + usize::from(!self.direct) * out
    }
}

/// Fixed cost of one GEMM call, in element moves. Set from the DMRG-shaped
/// `abc,bdef->adcef` (chi = 100, d = 2, w = 5) on the 2-core test machine: looping over 200
/// in-place 100 x 5 x 10 faer GEMMs took 0.45-0.5 ms against 0.9 ms for copying A (1e5
/// elements), one GEMM and permuting the output (2e5 elements), so a call costs well under the
/// 1500 moves a first estimate gave; 300 makes the planner loop there.
const CALL_COST: f64 = 300.0;
/// Cost of one real multiply-add of a large GEMM, in element moves.
const MAC_COST: f64 = 0.03;
/// Rows or columns below which a GEMM's micro-kernels run partly empty (cost factor
/// `1 + EDGE / m + EDGE / n`).
const EDGE: f64 = 16.0;

/// Distinct candidates among `orders`, first occurrence kept.
fn distinct(orders: [Vec<char>; 2]) -> Vec<Vec<char>> {
    let [x, y] = orders;
    if x == y {
        vec![x]
    } else {
        vec![x, y]
    }
}

/// The labels of one two-operand contraction, by class (see [`crate::backends::IndexClasses`]).
pub(crate) struct Groups<'g> {
    pub(crate) batch: &'g [char],
    pub(crate) free_a: &'g [char],
    pub(crate) free_b: &'g [char],
    pub(crate) contracted: &'g [char],
}

/// The cheapest plan for `a`, `b` (summed labels already reduced) writing `out` (a row-major
/// layout over the output labels), under `rules`. Candidates: M in output or A-storage order,
/// N in output or B-storage order, K in A- or B-storage order, and for each a leading part of
/// M and of N promoted to loops (only when the output is then written directly). Ties keep
/// the earlier candidate (output order, no promotion).
pub(crate) fn choose<T: Element>(
    a: &Operand<'_, T>,
    b: &Operand<'_, T>,
    out: &Operand<'_, T>,
    g: &Groups<'_>,
    rules: &dyn LayoutRules,
) -> Plan {
    let dim = |ls: &[char]| {
        ls.iter()
            .map(|&l| out.dim(l).max(a.dim(l)).max(b.dim(l)))
            .product::<usize>()
    };
    let (move_cost, mac_cost) = costs(T::DTYPE);
    let m_orders = distinct([g.free_a.to_vec(), storage_order(a, g.free_a)]);
    let n_orders = distinct([g.free_b.to_vec(), storage_order(b, g.free_b)]);
    let k_orders = distinct([storage_order(a, g.contracted), storage_order(b, g.contracted)]);
    let lens = [a.len(), b.len(), out.len()];
    let mut best: Option<Plan> = None;
    for mo in &m_orders {
        for no in &n_orders {
            for ko in &k_orders {
                for pm in 0..mo.len().max(1) {
                    for pn in 0..no.len().max(1) {
                        let (m, n) = (&mo[pm.min(mo.len())..], &no[pn.min(no.len())..]);
                        let loops: Vec<char> = g.batch.iter().chain(&mo[..pm]).chain(&no[..pn]).copied().collect();
                        let (mt, nt, kt, calls) = (dim(m), dim(n), dim(ko), dim(&loops));
                        let direct_dst = match (out.collapse(m), out.collapse(n)) {
                            (Some(rs), Some(cs)) => Some(MatLayout {
                                rows: mt,
                                cols: nt,
                                row_stride: rs,
                                col_stride: cs,
                                conj: false,
                            })
                            .filter(|d| rules.dst_ok(d)),
                            _ => None,
                        };
                        let direct = direct_dst.is_some();
                        if !direct && (pm > 0 || pn > 0) {
                            continue;
                        }
                        let dst = direct_dst.unwrap_or(MatLayout {
                            rows: mt,
                            cols: nt,
                            row_stride: nt as isize,
                            col_stride: 1,
                            conj: false,
                        });
                        let in_place = |op: &Operand<'_, T>, rows: &[char], cols: &[char], side: Side| match (
                            op.collapse(rows),
                            op.collapse(cols),
                        ) {
                            (Some(rs), Some(cs)) => rules.operand_ok(
                                side,
                                &MatLayout {
                                    rows: dim(rows),
                                    cols: dim(cols),
                                    row_stride: rs,
                                    col_stride: cs,
                                    conj: op.conj,
                                },
                                &dst,
                            ),
                            _ => false,
                        };
                        let copy_a = !in_place(a, m, ko, Side::A);
                        let copy_b = !in_place(b, ko, n, Side::B);
                        let moved = usize::from(copy_a) * a.len()
                            + usize::from(copy_b) * b.len()
                            + usize::from(!direct) * out.len();
                        let macs = calls as f64 * mt as f64 * nt as f64 * kt as f64;
                        let cost = moved as f64 * move_cost
                            + calls as f64 * CALL_COST
                            + macs * mac_cost * (1.0 + EDGE / mt.max(1) as f64 + EDGE / nt.max(1) as f64);
                        if best.as_ref().is_none_or(|b| cost < b.cost) {
                            best = Some(Plan {
                                loops,
                                m: m.to_vec(),
                                n: n.to_vec(),
                                k: ko.clone(),
                                copy_a,
                                copy_b,
                                direct,
                                cost,
                                lens,
                            });
                        }
                    }
                }
            }
        }
    }
    // Non-empty candidate lists: the first candidate (no promotion) is never skipped, since
    // a non-direct output is allowed without promotion.
    best.unwrap_or_else(|| Plan {
        loops: g.batch.to_vec(),
        m: g.free_a.to_vec(),
        n: g.free_b.to_vec(),
        k: g.contracted.to_vec(),
        copy_a: true,
        copy_b: true,
        direct: false,
        cost: f64::INFINITY,
        lens,
    })
}

/// (cost of moving one element, cost of one multiply-add) for `dtype`, in 8-byte moves: a
/// complex multiply-add is four real ones.
fn costs(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (0.5, MAC_COST / 2.0),
        DType::F64 => (1.0, MAC_COST),
        DType::C32 => (1.0, 2.0 * MAC_COST),
        DType::C64 => (2.0, 4.0 * MAC_COST),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(labels: &str, shape: &[usize]) -> Operand<'static, f64> {
        Operand::layout_only(labels.chars().collect(), shape.to_vec())
    }

    fn plan(a: &Operand<'_, f64>, b: &Operand<'_, f64>, out: &Operand<'_, f64>, cls: [&str; 4]) -> Plan {
        let v: Vec<Vec<char>> = cls.iter().map(|s| s.chars().collect()).collect();
        let g = Groups {
            batch: &v[0],
            free_a: &v[1],
            free_b: &v[2],
            contracted: &v[3],
        };
        choose(a, b, out, &g, &AnyStrides)
    }

    #[test]
    fn permuted_operand_copies_the_smaller_one() {
        // abcd,dbef->acef: A cannot be read in place in any order; B can with K = (d, b).
        let d = 8;
        let p = plan(
            &op("abcd", &[d, d, d, d]),
            &op("dbef", &[d, d, d, d]),
            &op("acef", &[d, d, d, d]),
            ["", "ac", "ef", "bd"],
        );
        assert_eq!((p.copy_a, p.copy_b, p.direct), (true, false, true));
        assert_eq!(p.k, vec!['d', 'b']);
        // Same, but B is the large one: the plan copies A only when A is smaller.
        let p = plan(
            &op("kx", &[64, 4]),
            &op("xk", &[4, 64]),
            &op("", &[]),
            ["", "", "", "kx"],
        );
        assert_eq!(p.copied_elements(), 256);
    }

    #[test]
    fn output_permutation_instead_of_a_large_input() {
        // ij,jk->ki with a large A (1000 x 50) and a small output: M = i in A order is
        // in place; the output is transposed through a copy only if cheaper. Here the
        // output's free groups collapse in any order, so everything is direct and in place.
        let p = plan(
            &op("ij", &[1000, 50]),
            &op("jk", &[50, 3]),
            &op("ki", &[3, 1000]),
            ["", "i", "k", "j"],
        );
        assert_eq!((p.copy_a, p.copy_b, p.direct), (false, false, true));
        // ai,bj...: A stores (b, a) while the output wants (a, b): writing the output in A's
        // order and permuting it (4 x 4 x 3 = 48 elements) beats copying A (4 x 4 x 1000).
        let p = plan(
            &op("bak", &[4, 4, 1000]),
            &op("kc", &[1000, 3]),
            &op("abc", &[4, 4, 3]),
            ["", "ab", "c", "k"],
        );
        assert_eq!(p.m, vec!['b', 'a']);
        assert_eq!((p.copy_a, p.copy_b), (false, false));
    }

    #[test]
    fn promoted_loop_labels_keep_everything_in_place() {
        // abc,bd->acd with a large A: looping over `a` reads every A slice (c x b) in place
        // instead of copying A.
        let p = plan(
            &op("abc", &[16, 8, 4096]),
            &op("bd", &[8, 64]),
            &op("acd", &[16, 4096, 64]),
            ["", "ac", "d", "b"],
        );
        assert_eq!(p.loops, vec!['a']);
        assert_eq!((p.copy_a, p.copy_b, p.direct), (false, false, true));
    }
}
