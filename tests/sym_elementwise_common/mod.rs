//! Shared by `tests/symmetric_elementwise.rs` (in-process) and
//! `tests/mpi_symmetric_elementwise.rs` (under `mpirun`): random symmetric
//! layouts (U(1), Z_3, U(1) x Z_2; 1-4 legs of random directions, sectors,
//! dimensions and tilings; a flux that some block carries), and the
//! property checks of the element-wise family, fuse/split and reblock on
//! symmetric tensors against the dense operation on the dense embeddings,
//! computed locally from the gathered embedding.

#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use uni20::dispatch as local;
use uni20::dist::symmetry::{Direction, GroupFactor, Leg, Sector, SymmetricLayout, Symmetry};
use uni20::dist::{fuse_legs, split_leg, sym_random, Blocking};
use uni20::prelude::*;

pub const DTYPES: [DType; 4] = [DType::F64, DType::C64, DType::F32, DType::C32];
const LABELS: &[u8] = b"abcd";

/// One leg: direction, which candidate charges it has (bit mask), the
/// sector dimensions and the tile size.
#[derive(Clone, Debug)]
pub struct LegSpec {
    pub out: bool,
    pub mask: u8,
    pub dims: Vec<usize>,
    pub tile: usize,
}

/// A layout: group (0: U(1), 1: Z_3, 2: U(1) x Z_2), legs, and per leg the
/// sector whose charge goes into the flux (so that block exists).
#[derive(Clone, Debug)]
pub struct LayoutSpec {
    pub group: usize,
    pub legs: Vec<LegSpec>,
    pub picks: Vec<usize>,
}

/// The group and its candidate charges (sorted).
fn group(g: usize) -> (Symmetry, Vec<Vec<i64>>) {
    match g % 3 {
        0 => (Symmetry::u1(), (-2..=2).map(|q| vec![q]).collect()),
        1 => (Symmetry::zn(3).unwrap(), (0..3).map(|q| vec![q]).collect()),
        _ => (
            Symmetry::product(vec![GroupFactor::U1, GroupFactor::Z(2)]).unwrap(),
            vec![vec![-1, 0], vec![-1, 1], vec![0, 0], vec![0, 1], vec![1, 0]],
        ),
    }
}

impl LayoutSpec {
    /// The legs (tiled by their tile size).
    pub fn legs(&self) -> (Symmetry, Vec<Leg>) {
        let (g, cands) = group(self.group);
        let legs = self
            .legs
            .iter()
            .map(|l| {
                let mut chosen: Vec<usize> = (0..cands.len()).filter(|&i| l.mask & (1 << i) != 0).collect();
                if chosen.is_empty() {
                    chosen.push(l.mask as usize % cands.len());
                }
                let sectors = chosen
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| Sector {
                        charge: g.charge(&cands[i]).unwrap(),
                        dim: l.dims[k % l.dims.len()],
                    })
                    .collect();
                let dir = if l.out { Direction::Out } else { Direction::In };
                Leg::tiled(g.clone(), dir, sectors, l.tile).unwrap()
            })
            .collect();
        (g, legs)
    }

    /// The layout: flux = the charge of the picked sector combination.
    pub fn layout(&self) -> SymmetricLayout {
        let (g, legs) = self.legs();
        let mut flux = g.identity();
        for (l, &p) in legs.iter().zip(&self.picks) {
            flux = g.fuse(&flux, &l.signed_charge(p % l.sectors().len()).unwrap()).unwrap();
        }
        SymmetricLayout::new(g, legs, flux).unwrap()
    }
}

fn leg_spec() -> impl Strategy<Value = LegSpec> {
    (any::<bool>(), 1u8..32, prop::collection::vec(1usize..=3, 5), 1usize..=3)
        .prop_map(|(out, mask, dims, tile)| LegSpec { out, mask, dims, tile })
}

/// Layouts of `lo..=hi` legs.
pub fn layout_spec(lo: usize, hi: usize) -> impl Strategy<Value = LayoutSpec> {
    (0usize..3, prop::collection::vec((leg_spec(), 0usize..5), lo..=hi)).prop_map(|(group, legs)| {
        let (legs, picks) = legs.into_iter().unzip();
        LayoutSpec { group, legs, picks }
    })
}

pub fn labels(idx: impl IntoIterator<Item = usize>) -> String {
    idx.into_iter().map(|i| LABELS[i] as char).collect()
}

pub fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    inv
}

pub fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Relative tolerance of a dtype: 1e-12 for f64/c64, 1e-5 for f32/c32.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C32 => 1e-5,
        _ => 1e-12,
    }
}

/// `Err` unless `got` and `want` have the same shape and agree to
/// `tol(dtype) * max(1, max |want|)` element by element.
pub fn close(got: &LocalTensor, want: &LocalTensor, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.shape(), want.shape(), "{}: shape", what);
    let (g, w) = (got.to_c64_vec(), want.to_c64_vec());
    let scale = w.iter().fold(1.0f64, |m, z| m.max(z.norm()));
    let t = tol(want.dtype()) * scale;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        prop_assert!((a - b).norm() <= t, "{}: element {}: {} vs {}", what, i, a, b);
    }
    Ok(())
}

/// An element-wise case: a layout, another tiling for `b`, the output
/// permutation, `b`'s storage order, dtype, scalars, seed.
#[derive(Clone, Debug)]
pub struct ElementwiseCase {
    pub layout: LayoutSpec,
    pub tile_b: Vec<usize>,
    pub perm: Vec<usize>,
    pub perm_b: Vec<usize>,
    pub dtype: DType,
    pub alpha: f64,
    pub beta: f64,
    pub seed: u64,
}

pub fn elementwise_case() -> impl Strategy<Value = ElementwiseCase> {
    layout_spec(1, 4)
        .prop_flat_map(|layout| {
            let r = layout.legs.len();
            (
                Just(layout),
                prop::collection::vec(1usize..=4, r),
                Just((0..r).collect::<Vec<usize>>()).prop_shuffle(),
                Just((0..r).collect::<Vec<usize>>()).prop_shuffle(),
                0usize..4,
                -4i32..=4,
                -4i32..=4,
                any::<u64>(),
            )
        })
        .prop_map(|(layout, tile_b, perm, perm_b, d, al, be, seed)| ElementwiseCase {
            layout,
            tile_b,
            perm,
            perm_b,
            dtype: DTYPES[d],
            alpha: f64::from(al) * 0.25,
            beta: f64::from(be) * 0.5,
            seed,
        })
}

/// axpby (with permuted and differently tiled operands), permute, scale and
/// conj of symmetric tensors against the local kernels on the dense
/// embeddings; the output layouts against the legs permuted / dualized.
pub fn check_elementwise(ctl: &Controller<'_>, c: &ElementwiseCase) -> Result<(), TestCaseError> {
    let lay = c.layout.layout();
    let r = lay.legs().len();
    let g = lay.symmetry().clone();
    let a = sym_random(ctl, lay.clone(), c.dtype, c.seed).unwrap();
    // b: a's legs in the order perm_b, retiled.
    let b_legs: Vec<Leg> = c
        .perm_b
        .iter()
        .map(|&p| lay.legs()[p].retiled(c.tile_b[p]).unwrap())
        .collect();
    let lay_b = SymmetricLayout::new(g.clone(), b_legs, lay.flux().clone()).unwrap();
    let b = sym_random(ctl, lay_b, c.dtype, c.seed ^ 0x5a5a).unwrap();
    let (la, lb) = (a.to_dense(ctl).unwrap(), b.to_dense(ctl).unwrap());
    let spec = format!(
        "{},{}->{}",
        labels(0..r),
        labels(c.perm_b.iter().copied()),
        labels(c.perm.iter().copied())
    );
    let inv_b = inverse(&c.perm_b);
    let pb: Vec<usize> = c.perm.iter().map(|&p| inv_b[p]).collect();
    let (alpha, beta) = (C64::new(c.alpha, 0.0), C64::new(c.beta, 0.0));
    let got = axpby(ctl, c.alpha, &a, c.beta, &b, &spec).unwrap();
    let want = local::axpby(alpha, &la, &c.perm, false, beta, Some((&lb, &pb, false)), None, 1).unwrap();
    close(&got.to_dense(ctl).unwrap(), &want, &format!("axpby {spec}"))?;
    let gl = got.layout().unwrap();
    for (k, &p) in c.perm.iter().enumerate() {
        prop_assert_eq!(&gl.legs()[k], &lay.legs()[p], "axpby: output leg {}", k);
    }
    prop_assert_eq!(gl.flux(), lay.flux());
    let s = got.plan_summary().unwrap();
    prop_assert_eq!(s.work_items, lay.blocks().len(), "one item per allowed block");
    prop_assert_eq!(s.bytes_through_root, 0);

    let pspec = format!("{}->{}", labels(0..r), labels(c.perm.iter().copied()));
    let p = permute(ctl, &a, &pspec).unwrap();
    close(
        &p.to_dense(ctl).unwrap(),
        &local::permute(&la, &c.perm, 1).unwrap(),
        "permute",
    )?;
    prop_assert_eq!(p.layout().unwrap(), gl, "permute: the legs permuted");
    prop_assert_eq!(p.plan_summary().unwrap().bytes_moved, 0);

    let sc = scale(ctl, c.alpha, &a).unwrap();
    close(
        &sc.to_dense(ctl).unwrap(),
        &local::scale(alpha, &la, 1).unwrap(),
        "scale",
    )?;
    prop_assert_eq!(sc.layout(), a.layout());

    let j = conj(ctl, &a).unwrap();
    close(&j.to_dense(ctl).unwrap(), &local::conj(&la, 1).unwrap(), "conj")?;
    let jl = j.layout().unwrap();
    for (x, y) in jl.legs().iter().zip(lay.legs()) {
        prop_assert_eq!(x, &y.dual(), "conj dualizes every leg");
    }
    prop_assert_eq!(jl.flux(), &g.dual(lay.flux()).unwrap(), "conj negates the flux");
    prop_assert_eq!(j.plan_summary().unwrap().bytes_moved, 0);
    Ok(())
}

/// A fuse/split case: a layout of 1-4 legs, which legs to fuse, the fused
/// direction, a retiling of the fused tensor, dtype, seed.
#[derive(Clone, Debug)]
pub struct FuseCase {
    pub layout: LayoutSpec,
    pub first: usize,
    pub count: usize,
    pub out: bool,
    pub retile: usize,
    pub dtype: DType,
    pub seed: u64,
}

pub fn fuse_case() -> impl Strategy<Value = FuseCase> {
    (
        layout_spec(1, 4),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        any::<bool>(),
        1usize..=3,
        0usize..4,
        any::<u64>(),
    )
        .prop_map(|(layout, f, n, out, retile, d, seed)| {
            let r = layout.legs.len();
            let first = f.index(r);
            let count = 1 + n.index(r - first);
            FuseCase {
                layout,
                first,
                count,
                out,
                retile,
                dtype: DTYPES[d],
                seed,
            }
        })
}

/// The expected dense embedding of the fused tensor: element `(.., i_1 ..
/// i_k, ..)` of `dense` moved to `(.., fusion.fuse_index(i_1 .. i_k), ..)`.
pub fn fused_dense(
    dense: &LocalTensor,
    first: usize,
    count: usize,
    fusion: &uni20::dist::symmetry::Fusion,
) -> Vec<C64> {
    let shape = dense.shape().to_vec();
    let v = dense.to_c64_vec();
    let mut out_shape = shape[..first].to_vec();
    out_shape.push(fusion.fused().dim());
    out_shape.extend_from_slice(&shape[first + count..]);
    let n: usize = shape.iter().product();
    let mut out = vec![C64::new(0.0, 0.0); n];
    let mut idx = vec![0usize; shape.len()];
    for (lin, &x) in v.iter().enumerate() {
        let mut rem = lin;
        for k in (0..shape.len()).rev() {
            idx[k] = rem % shape[k];
            rem /= shape[k];
        }
        let f = fusion.fuse_index(&idx[first..first + count]).unwrap();
        let mut o: Vec<usize> = idx[..first].to_vec();
        o.push(f);
        o.extend_from_slice(&idx[first + count..]);
        let lin_o = o.iter().zip(&out_shape).fold(0usize, |acc, (&i, &d)| acc * d + i);
        out[lin_o] = x;
    }
    out
}

/// fuse_legs against the dense embedding with the fused index permuted by
/// the fusion's map (exactly), then split_leg back: the same layout and
/// embedding; also after retiling the fused tensor and after conjugating
/// it (the leg then splits into the duals of the parts).
pub fn check_fuse_split(ctl: &Controller<'_>, c: &FuseCase) -> Result<(), TestCaseError> {
    let lay = c.layout.layout();
    let g = lay.symmetry().clone();
    let t = sym_random(ctl, lay.clone(), c.dtype, c.seed).unwrap();
    let dense = t.to_dense(ctl).unwrap();
    let dir = if c.out { Direction::Out } else { Direction::In };
    let (f, fusion) = fuse_legs(ctl, &t, c.first, c.count, dir).unwrap();
    let fl = f.layout().unwrap();
    prop_assert_eq!(fl.legs().len(), lay.legs().len() + 1 - c.count);
    prop_assert_eq!(&fl.legs()[c.first], fusion.fused());
    prop_assert_eq!(fusion.parts(), &lay.legs()[c.first..c.first + c.count]);
    prop_assert_eq!(fl.flux(), lay.flux());
    prop_assert_eq!(fl.stored_elements(), lay.stored_elements());
    let want = fused_dense(&dense, c.first, c.count, &fusion);
    let got = f.to_dense(ctl).unwrap();
    prop_assert_eq!(got.dtype(), c.dtype);
    prop_assert!(
        got.to_c64_vec() == want,
        "fuse_legs {:?}: the dense embedding is not the permuted one",
        c
    );
    let fs = f.plan_summary().unwrap();
    prop_assert_eq!(fs.bytes_through_root, 0);
    // One item per allowed fused block, each input block copied once.
    prop_assert_eq!(
        (fs.work_items, fs.block_products),
        (fl.blocks().len(), lay.blocks().len())
    );

    // split inverts fuse exactly: same layout (tilings included), same values.
    let s = split_leg(ctl, &f, c.first, &fusion).unwrap();
    prop_assert_eq!(s.layout().unwrap(), &lay);
    prop_assert!(s.to_dense(ctl).unwrap() == dense, "split_leg(fuse_legs(t)) != t");
    let ss = s.plan_summary().unwrap();
    prop_assert_eq!(
        (ss.bytes_moved, ss.notes.len()),
        (0, 0),
        "a split of whole sectors moves nothing"
    );
    prop_assert_eq!(
        (ss.work_items, ss.block_products),
        (lay.blocks().len(), lay.blocks().len())
    );

    // The fused tensor retiled: the split reblocks its leg first, same values.
    let fr = reblock(ctl, &f, c.retile).unwrap();
    let sr = split_leg(ctl, &fr, c.first, &fusion).unwrap();
    prop_assert!(sr.to_dense(ctl).unwrap() == dense, "split of a retiled fused tensor");
    let fused_leg = &fr.layout().unwrap().legs()[c.first];
    let cut = (0..fused_leg.sectors().len()).any(|q| fused_leg.sector_tiles(q).len() > 1);
    prop_assert_eq!(
        sr.plan_summary().unwrap().notes.iter().any(|n| n.contains("reblocked")),
        cut,
        "a reblock only when the fused leg has cut sectors"
    );

    // The conjugate splits into the dual parts: conj(t).
    let cf = conj(ctl, &f).unwrap();
    let sc = split_leg(ctl, &cf, c.first, &fusion).unwrap();
    let scl = sc.layout().unwrap();
    for (x, y) in scl.legs().iter().zip(lay.legs()) {
        prop_assert_eq!(x, &y.dual());
    }
    prop_assert_eq!(scl.flux(), &g.dual(lay.flux()).unwrap());
    prop_assert!(
        sc.to_dense(ctl).unwrap() == local::conj(&dense, 1).unwrap(),
        "split of the conjugate"
    );
    Ok(())
}

/// A reblock case: a layout, a block size, explicit per-leg tile sizes.
#[derive(Clone, Debug)]
pub struct ReblockCase {
    pub layout: LayoutSpec,
    pub block: usize,
    pub per_leg: Vec<usize>,
    pub dtype: DType,
    pub seed: u64,
}

pub fn reblock_case() -> impl Strategy<Value = ReblockCase> {
    layout_spec(1, 4)
        .prop_flat_map(|layout| {
            let r = layout.legs.len();
            (
                Just(layout),
                1usize..=4,
                prop::collection::vec(1usize..=3, r),
                0usize..4,
                any::<u64>(),
            )
        })
        .prop_map(|(layout, block, per_leg, d, seed)| ReblockCase {
            layout,
            block,
            per_leg,
            dtype: DTYPES[d],
            seed,
        })
}

/// Retiling by a block size, per leg, and by explicit extents: the legs
/// retiled as asked, only allowed blocks built, the same dense embedding.
pub fn check_reblock(ctl: &Controller<'_>, c: &ReblockCase) -> Result<(), TestCaseError> {
    let lay = c.layout.layout();
    let t = sym_random(ctl, lay.clone(), c.dtype, c.seed).unwrap();
    let dense = t.to_dense(ctl).unwrap();
    let r = reblock(ctl, &t, c.block).unwrap();
    let rl = r.layout().unwrap();
    for (x, y) in rl.legs().iter().zip(lay.legs()) {
        prop_assert_eq!(x, &y.retiled(c.block).unwrap());
    }
    prop_assert_eq!(r.manifest(ctl).unwrap().blocks.len(), rl.blocks().len());
    prop_assert!(r.to_dense(ctl).unwrap() == dense, "reblock by {}", c.block);
    if let Some(s) = r.plan_summary() {
        prop_assert_eq!(s.bytes_through_root, 0);
        prop_assert_eq!(s.work_items, rl.blocks().len());
    }
    // Explicit extents: each leg cut by its own tile size, sector by sector.
    let legs: Vec<Leg> = lay
        .legs()
        .iter()
        .zip(&c.per_leg)
        .map(|(l, &n)| l.retiled(n).unwrap())
        .collect();
    let extents: Vec<Vec<usize>> = legs
        .iter()
        .map(|l| {
            (0..l.sectors().len())
                .flat_map(|s| l.sector_tiles(s).to_vec())
                .collect()
        })
        .collect();
    let blocking = Blocking::from_extents(&lay.dense_shape(), extents).unwrap();
    let e = reblock(ctl, &r, blocking.clone()).unwrap();
    prop_assert_eq!(e.layout().unwrap().legs(), legs.as_slice());
    prop_assert!(e.to_dense(ctl).unwrap() == dense, "reblock by explicit extents");
    // The same tiling again: the same tensor (same blocks), nothing runs.
    let same = reblock(ctl, &e, blocking).unwrap();
    prop_assert_eq!(same.manifest(ctl).unwrap(), e.manifest(ctl).unwrap());
    Ok(())
}

/// A creation-and-reduction case: a layout, a dtype and a seed.
#[derive(Clone, Debug)]
pub struct CreateCase {
    pub layout: LayoutSpec,
    pub dtype: DType,
    pub seed: u64,
}

pub fn create_case() -> impl Strategy<Value = CreateCase> {
    (layout_spec(1, 4), 0usize..4, any::<u64>()).prop_map(|(layout, d, seed)| CreateCase {
        layout,
        dtype: DTYPES[d],
        seed,
    })
}

/// True when the dense element `idx` satisfies the charge rule of `lay`:
/// the signed charges of the sectors holding each index fuse to the flux
/// (computed from the legs' sector offsets, not from the layout's block
/// list).
fn allowed(lay: &SymmetricLayout, idx: &[usize]) -> bool {
    let g = lay.symmetry();
    let mut q = g.identity();
    for (l, &i) in lay.legs().iter().zip(idx) {
        let s = (0..l.sectors().len())
            .rfind(|&s| l.sector_offset(s) <= i)
            .expect("an index inside the leg");
        q = g.fuse(&q, &l.signed_charge(s).unwrap()).unwrap();
    }
    &q == lay.flux()
}

/// `sym_random` is the dense `random` tensor with the same seed, zero
/// exactly where the charge rule forbids (element by element); `norm`,
/// `inner` and `max_abs` of symmetric tensors equal the local kernels on
/// the embeddings; `from_dense` inverts `to_dense`; `sym_zeros` is zero.
pub fn check_create_reduce(ctl: &Controller<'_>, c: &CreateCase) -> Result<(), TestCaseError> {
    let lay = c.layout.layout();
    let shape = lay.dense_shape();
    let a = sym_random(ctl, lay.clone(), c.dtype, c.seed).unwrap();
    let b = sym_random(ctl, lay.clone(), c.dtype, c.seed ^ 0x77).unwrap();
    let (la, lb) = (a.to_dense(ctl).unwrap(), b.to_dense(ctl).unwrap());
    let dense = random(ctl, &shape, c.dtype, 3, c.seed).unwrap().to_local(ctl).unwrap();
    let (got, full) = (la.to_c64_vec(), dense.to_c64_vec());
    let mut idx = vec![0usize; shape.len()];
    for (g, (x, y)) in got.iter().zip(&full).enumerate() {
        let mut rest = g;
        for k in (0..shape.len()).rev() {
            idx[k] = rest % shape[k];
            rest /= shape[k];
        }
        let want = if allowed(&lay, &idx) { *y } else { C64::new(0.0, 0.0) };
        prop_assert_eq!(*x, want, "element {} ({:?})", g, idx);
    }
    prop_assert_eq!(a.manifest(ctl).unwrap().blocks.len(), lay.blocks().len());
    let t = tol(c.dtype);
    let want_norm = local::norm_sqr(&la, 1).sqrt();
    prop_assert!((norm(ctl, &a).unwrap() - want_norm).abs() <= t * want_norm.max(1.0));
    prop_assert_eq!(max_abs(ctl, &a).unwrap(), local::max_abs(&la, 1));
    let want_inner = local::inner(&la, &lb, 1).unwrap();
    let got_inner = inner(ctl, &a, &b).unwrap();
    prop_assert!(
        (got_inner - want_inner).norm() <= t * want_norm.max(1.0) * local::norm_sqr(&lb, 1).sqrt().max(1.0),
        "inner {} vs {}",
        got_inner,
        want_inner
    );
    let back = DistTensor::from_dense(ctl, &la, lay.clone(), 0.0).unwrap();
    prop_assert_eq!(back.to_dense(ctl).unwrap(), la);
    let z = uni20::dist::sym_zeros(ctl, lay, c.dtype).unwrap();
    prop_assert_eq!(norm(ctl, &z).unwrap(), 0.0);
    Ok(())
}
