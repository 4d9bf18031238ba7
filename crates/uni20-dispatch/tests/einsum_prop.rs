//! Property tests of the numpy einsum forms: random one- and two-operand specs with repeated
//! labels, ellipses (right-aligned broadcasting, extent-1 dimensions), broadcast extent-1
//! labels, explicit and implicit output, mixed dtypes, alpha/beta and C. Every backend list
//! (reference, faer with 1 and 3 threads) is checked against an oracle written here directly
//! from numpy's definition (no spec resolution, no diagonal views), and the resolved spec is
//! checked to give the same result when taken literally. A second property feeds arbitrary
//! strings to the parser and resolver: errors, never panics, and a canonical form that
//! round-trips.

mod kernels_common;

use kernels_common::{any_dtype, drawn_scalars, random_tensor, Rng};
use proptest::prelude::*;
use uni20_dispatch::*;
/// One subscript: a label or the ellipsis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sym {
    L(char),
    Ell,
}

/// A generated problem: subscripts per operand (and output, `None` = implicit), shapes.
#[derive(Debug)]
struct Form {
    terms: Vec<Vec<Sym>>,
    out: Option<Vec<Sym>>,
    shapes: Vec<Vec<usize>>,
}

fn text(terms: &[Vec<Sym>], out: &Option<Vec<Sym>>) -> String {
    let term = |t: &[Sym]| -> String {
        t.iter()
            .map(|s| match s {
                Sym::L(c) => c.to_string(),
                Sym::Ell => "...".to_string(),
            })
            .collect()
    };
    let mut s = terms.iter().map(|t| term(t)).collect::<Vec<_>>().join(",");
    if let Some(o) = out {
        s += "->";
        s += &term(o);
    }
    s
}

/// A random valid numpy einsum form with small extents.
fn form(rng: &mut Rng) -> Form {
    let pool = ['a', 'b', 'C', 'd'];
    let base: Vec<usize> = pool.iter().map(|_| [0, 1, 2, 2, 3, 3][rng.below(6)]).collect();
    let nb = rng.below(3);
    let bshape: Vec<usize> = (0..nb).map(|_| 1 + rng.below(3)).collect();
    let n_ops = 1 + rng.below(2);
    let (mut terms, mut shapes) = (Vec::new(), Vec::new());
    for _ in 0..n_ops {
        let n_labels = rng.below(4);
        let mut t: Vec<Sym> = (0..n_labels).map(|_| Sym::L(pool[rng.below(pool.len())])).collect();
        let with_ell = nb > 0 && rng.below(3) > 0 || rng.below(6) == 0;
        if with_ell {
            let at = rng.below(t.len() + 1);
            t.insert(at, Sym::Ell);
        }
        // Extent per label in this operand: the label's extent or (broadcast) 1.
        let own: Vec<usize> = pool
            .iter()
            .enumerate()
            .map(|(k, _)| if rng.below(5) == 0 { 1 } else { base[k] })
            .collect();
        let e = if with_ell { rng.below(nb + 1) } else { 0 };
        let ell: Vec<usize> = (nb - e..nb)
            .map(|j| if rng.below(4) == 0 { 1 } else { bshape[j] })
            .collect();
        let mut shape = Vec::new();
        for s in &t {
            match s {
                Sym::L(c) => shape.push(own[pool.iter().position(|x| x == c).unwrap()]),
                Sym::Ell => shape.extend(&ell),
            }
        }
        terms.push(t);
        shapes.push(shape);
    }
    let any_ell = terms.iter().flatten().any(|s| *s == Sym::Ell);
    let out = (rng.below(2) == 0).then(|| {
        let mut labels: Vec<char> = pool
            .iter()
            .copied()
            .filter(|c| terms.iter().flatten().any(|s| *s == Sym::L(*c)) && rng.below(2) == 0)
            .collect();
        rng.shuffle(&mut labels);
        let mut o: Vec<Sym> = labels.into_iter().map(Sym::L).collect();
        if any_ell {
            let at = rng.below(o.len() + 1);
            o.insert(at, Sym::Ell);
        }
        o
    });
    Form { terms, out, shapes }
}

/// numpy's einsum, computed from its definition: every index variable (a label, or an
/// ellipsis axis of the right-aligned broadcast shape) ranges over its broadcast extent; an
/// operand dimension of extent 1 is read at 0; the result sums the product over the
/// variables absent from the output. Returns the output shape and row-major values.
fn numpy_einsum(f: &Form, ops: &[&LocalTensor]) -> (Vec<usize>, Vec<C64>) {
    // Variables: labels by char, ellipsis axes as '0', '1', ... (not letters).
    let nb = f
        .terms
        .iter()
        .zip(&f.shapes)
        .map(|(t, s)| s.len() + 1 - t.len())
        .zip(&f.terms)
        .map(|(e, t)| if t.contains(&Sym::Ell) { e } else { 0 })
        .max()
        .unwrap_or(0);
    let ell_var = |j: usize| char::from(b'0' + j as u8);
    // Per operand: the variable of each dimension.
    let dim_vars: Vec<Vec<char>> = f
        .terms
        .iter()
        .zip(&f.shapes)
        .map(|(t, s)| {
            let e = if t.contains(&Sym::Ell) {
                s.len() + 1 - t.len()
            } else {
                0
            };
            t.iter()
                .flat_map(|sym| match sym {
                    Sym::L(c) => vec![*c],
                    Sym::Ell => (nb - e..nb).map(ell_var).collect(),
                })
                .collect()
        })
        .collect();
    let mut vars: Vec<(char, usize)> = Vec::new();
    for (dv, s) in dim_vars.iter().zip(&f.shapes) {
        for (&v, &d) in dv.iter().zip(s) {
            match vars.iter_mut().find(|(x, _)| *x == v) {
                Some((_, ext)) if *ext == 1 => *ext = d,
                Some(_) => {}
                None => vars.push((v, d)),
            }
        }
    }
    let ell_vars: Vec<char> = (0..nb).map(ell_var).collect();
    let out_vars: Vec<char> = match &f.out {
        Some(o) => o
            .iter()
            .flat_map(|sym| match sym {
                Sym::L(c) => vec![*c],
                Sym::Ell => ell_vars.clone(),
            })
            .collect(),
        None => {
            let all: Vec<char> = f
                .terms
                .iter()
                .flatten()
                .filter_map(|s| match s {
                    Sym::L(c) => Some(*c),
                    Sym::Ell => None,
                })
                .collect();
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|x| *x == c).count() == 1)
                .collect();
            once.sort_unstable();
            ell_vars.iter().copied().chain(once).collect()
        }
    };
    let ext = |v: char| vars.iter().find(|(x, _)| *x == v).map_or(1, |&(_, d)| d);
    let inner: Vec<char> = vars.iter().map(|&(v, _)| v).filter(|v| !out_vars.contains(v)).collect();
    let out_shape: Vec<usize> = out_vars.iter().map(|&v| ext(v)).collect();
    let in_shape: Vec<usize> = inner.iter().map(|&v| ext(v)).collect();
    let data: Vec<Vec<C64>> = ops.iter().map(|t| t.to_c64_vec()).collect();
    let value = |assign: &dyn Fn(char) -> usize| -> C64 {
        let mut p = C64::new(1.0, 0.0);
        for ((dv, s), d) in dim_vars.iter().zip(&f.shapes).zip(&data) {
            let mut off = 0;
            for (&v, &n) in dv.iter().zip(s) {
                off = off * n + if n == 1 { 0 } else { assign(v) };
            }
            p *= d[off];
        }
        p
    };
    let count = |s: &[usize]| s.iter().product::<usize>();
    let unravel = |mut i: usize, s: &[usize]| -> Vec<usize> {
        let mut idx = vec![0; s.len()];
        for k in (0..s.len()).rev() {
            idx[k] = i % s[k];
            i /= s[k];
        }
        idx
    };
    let mut out = Vec::with_capacity(count(&out_shape));
    for o in 0..count(&out_shape) {
        let oi = unravel(o, &out_shape);
        let mut acc = C64::new(0.0, 0.0);
        for r in 0..count(&in_shape) {
            let ri = unravel(r, &in_shape);
            let assign = |v: char| match out_vars.iter().position(|&x| x == v) {
                Some(p) => oi[p],
                None => ri[inner.iter().position(|&x| x == v).unwrap_or(0)],
            };
            acc += value(&assign);
        }
        out.push(acc);
    }
    (out_shape, out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn backends_match_numpy_definition(
        seed in any::<u64>(),
        dts in prop::array::uniform2(any_dtype()),
        c_dt in prop::option::of(any_dtype()),
        alpha_i in 0usize..3,
        beta_i in 0usize..3,
    ) {
        let mut rng = Rng(seed);
        let f = form(&mut rng);
        let spec_text = text(&f.terms, &f.out);
        let ops: Vec<LocalTensor> = f.shapes.iter().zip(dts).map(|(s, d)| random_tensor(&mut rng, d, s)).collect();
        let refs: Vec<&LocalTensor> = ops.iter().collect();
        let (out_shape, want) = numpy_einsum(&f, &refs);
        let c = c_dt.map(|d| random_tensor(&mut rng, d, &out_shape));
        let out_dt = ops.iter().map(|t| t.dtype()).chain(c_dt).fold(ops[0].dtype(), DType::promote);
        let (alpha, beta) = drawn_scalars(alpha_i, beta_i, out_dt);
        let c_vals = c.as_ref().map(|c| c.to_c64_vec());
        let expected: Vec<C64> = want.iter().enumerate().map(|(i, w)| {
            let cv = match (&c_vals, beta_i) {
                (Some(v), b) if b > 0 => beta * v[i],
                _ => C64::new(0.0, 0.0),
            };
            alpha * w + cv
        }).collect();
        let maxabs = |t: &LocalTensor| t.to_c64_vec().iter().map(|z| z.norm()).fold(0.0f64, f64::max);
        let inner: f64 = f.shapes.iter().flatten().map(|&d| d.max(1) as f64).product();
        let scale = 1.0 + alpha.norm() * ops.iter().map(maxabs).product::<f64>() * inner
            + beta.norm() * c.as_ref().map_or(0.0, maxabs);
        let tol = if matches!(out_dt, DType::F32 | DType::C32) { 1e-4 } else { 1e-11 } * scale;
        let spec = EinsumSpec::parse(&spec_text).unwrap(); eprintln!("FORM {} {:?} {}", spec_text, f.shapes, spec.resolve(&f.shapes.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap());
        let shapes: Vec<&[usize]> = f.shapes.iter().map(Vec::as_slice).collect();
        let resolved = spec.resolve(&shapes).unwrap();
        prop_assert_eq!(resolved.output_shape(&shapes).unwrap(), out_shape.clone(), "{} -> {}", spec_text, resolved);
        for list in [BackendList::reference_only(), BackendList::default_cpu(1), BackendList::default_cpu(3)] {
            for literal in [false, true] {
                let r = if literal {
                    contract_operands(&resolved, alpha, &refs, beta, c.as_ref(), &list)
                } else {
                    contract_operands(spec_text.as_str(), alpha, &refs, beta, c.as_ref(), &list)
                };
                let (got, attempts) = r.unwrap();
                let ran = attempts.last().unwrap().backend.as_str();
                prop_assert_eq!(ran == "reference", list.names() == ["reference"], "{}", ran);
                prop_assert_eq!(got.dtype(), out_dt);
                prop_assert_eq!(got.shape(), out_shape.as_slice());
                let diff = got.to_c64_vec().iter().zip(&expected).map(|(g, e)| (g - e).norm()).fold(0.0f64, f64::max);
                prop_assert!(diff <= tol, "{} ({}) via {:?} literal={}: diff {} tol {}", spec_text, resolved, list.names(), literal, diff, tol);
            }
        }
    }

    #[test]
    fn parser_and_resolver_never_panic(
        raw in prop::collection::vec(prop::sample::select(vec!['a', 'b', 'i', 'I', '.', ',', '-', '>', ' ', '1']), 0..14),
        shapes in prop::collection::vec(prop::collection::vec(0usize..4, 0..5), 0..3),
    ) {
        let s: String = raw.into_iter().collect();
        if let Ok(spec) = EinsumSpec::parse(&s) {
            let canon = spec.to_string();
            prop_assert_eq!(EinsumSpec::parse(&canon).unwrap(), spec.clone());
            let shape_refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
            if let Ok(r) = spec.resolve(&shape_refs) {
                prop_assert!(r.output_shape(&shape_refs).is_ok(), "{} {:?} -> {}", canon, shapes, r);
                prop_assert_eq!(ResolvedSpec::parse(&r.to_string()).unwrap(), r);
            }
        }
    }
}
