//! The direct path of [`PairContraction`]: a pair with a tiny operand streams the big one
//! into the output in output order (see the parent module's docs).

use super::PairContraction;
use crate::scalar::Element;

impl PairContraction {
    /// `out += alpha * sum_k op(A)[.., k] op(B)[k, ..]` for one pair, written in output
    /// order (`out` row-major of `out_shape`), by streaming the big operand once per
    /// non-zero element of the small one (`small_is_a`). Shapes are checked
    /// ([`check_pair`](Self::check_pair)).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accumulate_direct<T: Element>(
        &self,
        out: &mut [T],
        out_shape: &[usize],
        a: (&[T], &[usize]),
        b: (&[T], &[usize]),
        small_is_a: bool,
        alpha: T,
    ) {
        let ostr = row_major_strides(out_shape);
        let (astr, bstr) = (row_major_strides(a.1), row_major_strides(b.1));
        // Per dim of A and of B: its stride in the output (free dims), or the stride of
        // its partner in the other operand (contracted dims).
        let mut a_other = vec![0usize; a.1.len()];
        let mut b_other = vec![0usize; b.1.len()];
        for (o, &p) in self.out_from_acc.iter().enumerate() {
            if p < self.a_free {
                a_other[self.a_order[p]] = ostr[o];
            } else {
                b_other[self.b_order[self.contracted + p - self.a_free]] = ostr[o];
            }
        }
        let mut a_free = vec![false; a.1.len()];
        let mut b_free = vec![false; b.1.len()];
        for &d in &self.a_order[..self.a_free] {
            a_free[d] = true;
        }
        for &d in &self.b_order[self.contracted..] {
            b_free[d] = true;
        }
        for i in 0..self.contracted {
            let (da, db) = (self.a_order[self.a_free + i], self.b_order[i]);
            a_other[da] = bstr[db];
            b_other[db] = astr[da];
        }
        let (small, big) = if small_is_a { (a, b) } else { (b, a) };
        let (s_str, s_other, s_free) = if small_is_a {
            (&astr, &a_other, &a_free)
        } else {
            (&bstr, &b_other, &b_free)
        };
        let (g_str, g_other, g_free) = if small_is_a {
            (&bstr, &b_other, &b_free)
        } else {
            (&astr, &a_other, &a_free)
        };
        let (conj_s, conj_g) = if small_is_a {
            (self.conj[0], self.conj[1])
        } else {
            (self.conj[1], self.conj[0])
        };
        // The big operand's free dims in storage order: (extent, own stride, out stride).
        let g_dims: Vec<(usize, usize, usize)> = (0..big.1.len())
            .filter(|&d| g_free[d] && big.1[d] != 1)
            .map(|d| (big.1[d], g_str[d], g_other[d]))
            .collect();
        if big.1.contains(&0) || small.1.contains(&0) {
            return;
        }
        let (inner, outer) = match g_dims.split_last() {
            Some((&inner, outer)) => (inner, outer),
            None => ((1, 1, 1), &[][..]),
        };
        let rank_s = small.1.len();
        let mut si = vec![0usize; rank_s];
        let mut gi = vec![0usize; outer.len()];
        loop {
            // One element of the small operand: its offset, and the offsets it selects in
            // the output (its free dims) and in the big operand (its contracted dims).
            let (mut s_off, mut o_base, mut g_base) = (0, 0, 0);
            for d in 0..rank_s {
                s_off += si[d] * s_str[d];
                if s_free[d] {
                    o_base += si[d] * s_other[d];
                } else {
                    g_base += si[d] * s_other[d];
                }
            }
            let sv = small.0[s_off];
            let coeff = alpha * if conj_s { sv.conj() } else { sv };
            if coeff != T::zero() {
                gi.iter_mut().for_each(|x| *x = 0);
                loop {
                    let (mut g, mut o) = (g_base, o_base);
                    for (k, &(_, gs, os)) in outer.iter().enumerate() {
                        g += gi[k] * gs;
                        o += gi[k] * os;
                    }
                    let (n, gs, os) = inner;
                    if gs == 1 && os == 1 {
                        let src = &big.0[g..g + n];
                        let dst = &mut out[o..o + n];
                        if conj_g {
                            dst.iter_mut().zip(src).for_each(|(y, &x)| *y += coeff * x.conj());
                        } else {
                            dst.iter_mut().zip(src).for_each(|(y, &x)| *y += coeff * x);
                        }
                    } else {
                        for x in 0..n {
                            let v = big.0[g + x * gs];
                            out[o + x * os] += coeff * if conj_g { v.conj() } else { v };
                        }
                    }
                    if !odometer(&mut gi, outer.iter().map(|d| d.0)) {
                        break;
                    }
                }
            }
            if !odometer(&mut si, small.1.iter().copied()) {
                break;
            }
        }
    }
}

/// Row-major strides of `shape`, in elements.
fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    crate::view::row_major_strides(shape)
        .into_iter()
        .map(|s| s as usize)
        .collect()
}

/// Advances the multi-index `idx` (last position fastest) within `extents`; false after
/// the last index (then `idx` is all zeros again).
fn odometer(idx: &mut [usize], extents: impl DoubleEndedIterator<Item = usize> + ExactSizeIterator) -> bool {
    for (i, n) in idx.iter_mut().zip(extents).rev() {
        *i += 1;
        if *i < n {
            return true;
        }
        *i = 0;
    }
    false
}
