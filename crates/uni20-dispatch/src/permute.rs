//! Blocked, cache-aware copies of strided views into contiguous row-major buffers.

use std::mem::MaybeUninit;

use crate::scalar::Element;
use crate::view::StridedView;

/// Tile edge of the blocked transpose (elements).
const TILE: usize = 32;

/// Copies `src` into a new row-major buffer whose dimension `k` is `src` dimension
/// `order[k]` (`order` is a permutation of `0..rank`), applying `src`'s conjugation flag.
///
/// When the destination's innermost dimension is not the source's smallest-stride dimension,
/// the two are copied in `TILE x TILE` blocks so that both the reads and the writes stay in
/// cache; other dimensions are walked outermost.
///
/// The caller guarantees the element count fits in memory (it was overflow-checked).
pub(crate) fn gather<T: Element>(src: &StridedView<'_, T>, order: &[usize]) -> Vec<T> {
    gather_par(src, order, 1)
}

/// Copies of at least this many elements are split across threads by [`gather_par`].
pub(crate) const GATHER_PAR_MIN: usize = 1 << 16;

/// [`gather`] with a thread budget: when `threads > 1` and the copy has at least
/// [`GATHER_PAR_MIN`] elements, the destination's outermost dimension is cut into up to
/// `threads` contiguous slabs, copied in parallel (`rayon::join`), each by the same blocked
/// algorithm.
pub(crate) fn gather_par<T: Element>(src: &StridedView<'_, T>, order: &[usize], threads: usize) -> Vec<T> {
    let n: usize = order.iter().map(|&p| src.shape()[p]).product();
    if n == 0 {
        return Vec::new();
    }
    // Every element is written exactly once below (the loops of `gather_into` cover every
    // destination index), so the buffer starts uninitialised rather than zeroed.
    let mut out: Vec<T> = crate::alloc::uninit_capacity(n);
    let parts = if n >= GATHER_PAR_MIN && !order.is_empty() {
        threads.min(src.shape()[order[0]]).max(1)
    } else {
        1
    };
    gather_slabs(src, order, &mut out.spare_capacity_mut()[..n], parts);
    // SAFETY: `gather_slabs` initialised all `n` elements (see above; a panic inside it
    // leaves the length 0), and the capacity is at least `n`.
    unsafe { out.set_len(n) };
    out
}

/// [`gather_par`] into a reused buffer: `out` is cleared and refilled (it grows only when it
/// is smaller than the copy), so a caller packing many blocks allocates once.
pub(crate) fn gather_slabs_into<T: Element>(
    src: &StridedView<'_, T>,
    order: &[usize],
    out: &mut Vec<T>,
    threads: usize,
) {
    let n: usize = order.iter().map(|&p| src.shape()[p]).product();
    out.clear();
    if n == 0 {
        return;
    }
    out.reserve(n);
    let parts = if n >= GATHER_PAR_MIN && !order.is_empty() {
        threads.min(src.shape()[order[0]]).max(1)
    } else {
        1
    };
    gather_slabs(src, order, &mut out.spare_capacity_mut()[..n], parts);
    // SAFETY: `gather_slabs` initialised all `n` elements (see `gather_par`), and the
    // capacity is at least `n`.
    unsafe { out.set_len(n) };
}

/// Fills `out` (row-major over `order`) from `src`, in `parts` parallel slabs of the
/// destination's outermost dimension.
fn gather_slabs<T: Element>(src: &StridedView<'_, T>, order: &[usize], out: &mut [MaybeUninit<T>], parts: usize) {
    if parts <= 1 {
        gather_into(src, order, out);
        return;
    }
    let d0 = order[0];
    let (extent, stride) = (src.shape()[d0], src.strides()[d0]);
    let first = parts / 2;
    // extent * first / parts without overflow (first < parts <= extent).
    let cut = (extent as u128 * first as u128 / parts as u128) as usize;
    let slab = out.len() / extent;
    // Sub-views of `src` over [0, cut) and [cut, extent) of dimension d0.
    let sub = |start: usize, len: usize| {
        let mut shape = src.shape().to_vec();
        shape[d0] = len;
        let offset = src.offset() as isize + start as isize * stride;
        StridedView::new(src.data(), &shape, src.strides(), offset as usize, src.is_conj())
    };
    match (sub(0, cut), sub(cut, extent - cut)) {
        (Ok(lo), Ok(hi)) if cut > 0 => {
            let (out_lo, out_hi) = out.split_at_mut(cut * slab);
            rayon::join(
                || gather_slabs(&lo, order, out_lo, first),
                || gather_slabs(&hi, order, out_hi, parts - first),
            );
        }
        // Unreachable for a valid view; copy sequentially rather than fail.
        _ => gather_into(src, order, out),
    }
}

/// Ranks up to this one are copied by [`gather_into`] with index scratch on the stack (no
/// allocation per copy: a block-sparse contraction packs many tiny blocks).
const STACK_RANK: usize = 12;

/// The index scratch of one [`gather_into`] call: extents, source and destination strides,
/// the walked dimensions and the multi-index, `rank` entries each.
struct Scratch<'s> {
    dims: &'s mut [usize],
    strides: &'s mut [isize],
    dst_strides: &'s mut [usize],
    outer: &'s mut [usize],
    idx: &'s mut [usize],
}

/// The sequential blocked copy behind [`gather`]: writes every element of `out`
/// (`out.len()` = the element count of `src`).
fn gather_into<T: Element>(src: &StridedView<'_, T>, order: &[usize], out: &mut [MaybeUninit<T>]) {
    let r = order.len();
    if r <= STACK_RANK {
        let (mut dims, mut strides, mut dst) = ([0usize; STACK_RANK], [0isize; STACK_RANK], [0usize; STACK_RANK]);
        let (mut outer, mut idx) = ([0usize; STACK_RANK], [0usize; STACK_RANK]);
        let scratch = Scratch {
            dims: &mut dims[..r],
            strides: &mut strides[..r],
            dst_strides: &mut dst[..r],
            outer: &mut outer[..r],
            idx: &mut idx[..r],
        };
        gather_with(src, order, out, scratch);
    } else {
        let (mut dims, mut strides, mut dst) = (vec![0usize; r], vec![0isize; r], vec![0usize; r]);
        let (mut outer, mut idx) = (vec![0usize; r], vec![0usize; r]);
        let scratch = Scratch {
            dims: &mut dims,
            strides: &mut strides,
            dst_strides: &mut dst,
            outer: &mut outer,
            idx: &mut idx,
        };
        gather_with(src, order, out, scratch);
    }
}

/// [`gather_into`] with its index scratch supplied.
fn gather_with<T: Element>(src: &StridedView<'_, T>, order: &[usize], out: &mut [MaybeUninit<T>], s: Scratch<'_>) {
    for (k, &p) in order.iter().enumerate() {
        s.dims[k] = src.shape()[p];
        s.strides[k] = src.strides()[p];
    }
    let (dims, strides) = (&*s.dims, &*s.strides);
    if out.is_empty() {
        return;
    }
    let r = dims.len();
    if r == 0 {
        out[0].write(src.at(0));
        return;
    }
    let conj = src.is_conj();
    let base = src.offset() as isize;
    row_major_into(dims, s.dst_strides);
    let dst_strides = &*s.dst_strides;
    let idx = s.idx;
    // Source dimension with the smallest |stride| among extents > 1.
    let fast = (0..r)
        .filter(|&k| dims[k] > 1)
        .min_by_key(|&k| strides[k].unsigned_abs())
        .unwrap_or(r - 1);
    let inner = r - 1;
    let data = src.data();
    if fast == inner || dims[inner] == 1 || strides[inner].unsigned_abs() <= 1 {
        // Plain loop: the destination's inner dimension is (nearly) contiguous in the source.
        for (k, o) in s.outer.iter_mut().enumerate() {
            *o = k;
        }
        let outer = &s.outer[..inner];
        let (ni, si) = (dims[inner], strides[inner]);
        for_each_index(
            dims,
            strides,
            dst_strides,
            outer,
            &mut idx[..inner],
            base,
            |soff, doff| {
                let dst = &mut out[doff..doff + ni];
                if si == 1 && !conj {
                    // A contiguous run: one copy (memcpy) instead of element by element.
                    let src = &data[soff as usize..soff as usize + ni];
                    // SAFETY: `T: Copy`; `MaybeUninit<T>` has the layout of `T`; `src` and
                    // `dst` have `ni` elements each and do not overlap (`out` is a separate
                    // buffer from `data`).
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<T>(), ni);
                    }
                    return;
                }
                let mut s = soff;
                for d in dst.iter_mut() {
                    let v = data[s as usize];
                    d.write(if conj { v.conj() } else { v });
                    s += si;
                }
            },
        );
        return;
    }
    // Blocked transpose of (fast, inner); all other dimensions outermost.
    let mut n_outer = 0;
    for k in (0..r).filter(|&k| k != fast && k != inner) {
        s.outer[n_outer] = k;
        n_outer += 1;
    }
    let outer = &s.outer[..n_outer];
    let t = Transpose {
        nf: dims[fast],
        sf: strides[fast],
        df: dst_strides[fast],
        ni: dims[inner],
        si: strides[inner],
    };
    for_each_index(
        dims,
        strides,
        dst_strides,
        outer,
        &mut idx[..n_outer],
        base,
        |soff, doff| {
            if conj {
                t.run::<T, true>(data, soff, out, doff);
            } else {
                t.run::<T, false>(data, soff, out, doff);
            }
        },
    );
}

/// Micro-tile edge of the blocked transpose: 8 x 8 elements are read as 8 runs along the
/// source's fast dimension and written as 8 runs along the destination's inner dimension
/// (whole 64-byte cache lines for f64), as HPTT does.
const MICRO: usize = 8;

/// One 2-D transpose inside [`gather_into`]: source dimension `fast` (extent `nf`, source
/// stride `sf`, destination stride `df`) and the destination's inner dimension (extent `ni`,
/// source stride `si`, destination stride 1).
struct Transpose {
    nf: usize,
    sf: isize,
    df: usize,
    ni: usize,
    si: isize,
}

impl Transpose {
    /// Copies the `nf x ni` block whose first element is `data[soff]` to `out[doff..]`, in
    /// `TILE x TILE` tiles of `MICRO x MICRO` micro-tiles. Panics (index out of bounds) if the
    /// block does not lie inside `data` and `out`, which the callers' layouts rule out.
    fn run<T: Element, const CONJ: bool>(&self, data: &[T], soff: isize, out: &mut [MaybeUninit<T>], doff: usize) {
        let load = |off: isize| {
            let v = data[off as usize];
            if CONJ {
                v.conj()
            } else {
                v
            }
        };
        let (nf, sf, df, ni, si) = (self.nf, self.sf, self.df, self.ni, self.si);
        for f0 in (0..nf).step_by(TILE) {
            let f1 = (f0 + TILE).min(nf);
            for i0 in (0..ni).step_by(TILE) {
                let i1 = (i0 + TILE).min(ni);
                let mut i = i0;
                while i < i1 {
                    let mut f = f0;
                    while f < f1 {
                        if i + MICRO <= i1 && f + MICRO <= f1 {
                            // Read 8 runs along `fast`, write 8 runs along `inner`.
                            let mut tile = [[T::zero(); MICRO]; MICRO];
                            for (r, row) in tile.iter_mut().enumerate() {
                                let s = soff + f as isize * sf + (i + r) as isize * si;
                                for (c, x) in row.iter_mut().enumerate() {
                                    *x = load(s + c as isize * sf);
                                }
                            }
                            // Column c of the tile is row c of the destination block.
                            #[allow(clippy::needless_range_loop)]
                            for c in 0..MICRO {
                                let d = doff + (f + c) * df + i;
                                let dst = &mut out[d..d + MICRO];
                                for (r, x) in dst.iter_mut().enumerate() {
                                    x.write(tile[r][c]);
                                }
                            }
                            f += MICRO;
                        } else {
                            // Edge: element by element.
                            for ii in i..(i + MICRO).min(i1) {
                                for ff in f..(f + MICRO).min(f1) {
                                    out[doff + ff * df + ii].write(load(soff + ff as isize * sf + ii as isize * si));
                                }
                            }
                            f += MICRO;
                        }
                    }
                    i += MICRO;
                }
            }
        }
    }
}

/// Row-major strides of `dims`.
fn row_major_into(dims: &[usize], s: &mut [usize]) {
    s.fill(1);
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
}

/// Calls `f(src_offset, dst_offset)` for every multi-index over the dimensions `which`
/// (row-major order among them), the others held at 0. `idx` (one entry per dimension of
/// `which`) is the multi-index scratch.
fn for_each_index(
    dims: &[usize],
    src_strides: &[isize],
    dst_strides: &[usize],
    which: &[usize],
    idx: &mut [usize],
    base: isize,
    mut f: impl FnMut(isize, usize),
) {
    idx.fill(0);
    let (mut soff, mut doff) = (base, 0usize);
    loop {
        f(soff, doff);
        let mut k = which.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let d = which[k];
            idx[k] += 1;
            soff += src_strides[d];
            doff += dst_strides[d];
            if idx[k] < dims[d] {
                break;
            }
            soff -= src_strides[d] * dims[d] as isize;
            doff -= dst_strides[d] * dims[d];
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::C64;

    /// Naive gather for comparison.
    fn naive<T: Element>(src: &StridedView<'_, T>, order: &[usize]) -> Vec<T> {
        let dims: Vec<usize> = order.iter().map(|&p| src.shape()[p]).collect();
        let n: usize = dims.iter().product();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; dims.len()];
        for _ in 0..n {
            let mut full = vec![0usize; dims.len()];
            for (k, &p) in order.iter().enumerate() {
                full[p] = idx[k];
            }
            out.push(src.get(&full).unwrap());
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < dims[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        out
    }

    #[test]
    fn blocked_gather_matches_naive() {
        let data: Vec<C64> = (0..(70 * 40 * 3)).map(|x| C64::new(x as f64, -(x as f64))).collect();
        let shapes_orders: [(&[usize], &[usize]); 5] = [
            (&[70, 40, 3], &[2, 1, 0]),
            (&[70, 40, 3], &[0, 2, 1]),
            (&[70, 120], &[1, 0]),
            (&[3, 40, 70], &[1, 2, 0]),
            (&[8400], &[0]),
        ];
        for (shape, order) in shapes_orders {
            for conj in [false, true] {
                let v = StridedView::row_major(&data, shape).unwrap();
                let v = if conj { v.conj() } else { v };
                assert_eq!(gather(&v, order), naive(&v, order), "{shape:?} {order:?} {conj}");
            }
        }
        // Negative and zero strides.
        let v = StridedView::new(&data, &[35, 5, 4], &[-2, 0, 100], 68, false).unwrap();
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            assert_eq!(gather(&v, &order), naive(&v, &order));
        }
        let s = StridedView::new(&data, &[], &[], 7, true).unwrap();
        assert_eq!(gather(&s, &[]), vec![C64::new(7.0, 7.0)]);
    }

    /// Ranks at and above `STACK_RANK` (heap scratch) and below it (stack scratch), with
    /// transposes and plain copies.
    #[test]
    fn gather_of_every_rank_matches_naive() {
        for r in [STACK_RANK - 1, STACK_RANK, STACK_RANK + 1, STACK_RANK + 3] {
            let shape: Vec<usize> = (0..r)
                .map(|k| 1 + (k % 3 == 0) as usize + (k == 1) as usize * 2)
                .collect();
            let n: usize = shape.iter().product();
            let data: Vec<f64> = (0..n).map(|x| x as f64 * 0.5 - 3.0).collect();
            let v = StridedView::row_major(&data, &shape).unwrap();
            let reversed: Vec<usize> = (0..r).rev().collect();
            let rotated: Vec<usize> = (1..r).chain([0]).collect();
            let identity: Vec<usize> = (0..r).collect();
            for order in [reversed, rotated, identity] {
                assert_eq!(gather(&v, &order), naive(&v, &order), "rank {r} {order:?}");
            }
        }
    }

    #[test]
    fn parallel_gather_matches_naive() {
        // 3 * 5 * 90 * 50 = 67,500 elements >= GATHER_PAR_MIN, so 2-4 threads split it.
        let data: Vec<f64> = (0..(3 * 5 * 90 * 50 * 2)).map(|x| x as f64).collect();
        let dense = StridedView::row_major(&data[..67_500], &[3, 5, 90, 50]).unwrap();
        // Reversed and padded: stride -100 on the 90-mode, offset at its last slab, every other element.
        let odd = StridedView::new(&data, &[3, 5, 90, 50], &[45_000, 9_000, -100, 2], 8_901, true).unwrap();
        for v in [dense, odd] {
            for order in [[0, 1, 2, 3], [2, 3, 0, 1], [3, 2, 1, 0], [1, 0, 3, 2]] {
                let want = naive(&v, &order);
                for threads in [2, 3, 4, 7] {
                    assert_eq!(gather_par(&v, &order, threads), want, "{order:?} threads={threads}");
                }
            }
        }
    }
}
