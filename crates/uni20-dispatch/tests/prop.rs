//! Property tests: faer and BLAS (feature `blas`) backends == reference backend on random
//! einsum problems, plus
//! encode/decode and spec display round trips.

mod kernels_common;

use kernels_common::{any_dtype, drawn_scalars, random_tensor, Rng};
use proptest::prelude::*;
use uni20_dispatch::backends::*;
use uni20_dispatch::view::*;
use uni20_dispatch::*;
/// Per label: (extent 0..=5, membership 1=A only, 2=B only, 3=both, in output).
fn labels() -> impl Strategy<Value = Vec<(usize, u8, bool)>> {
    prop::collection::vec((0usize..=5, 1u8..=3, any::<bool>()), 1..=6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn fast_backends_match_reference(
        labels in labels(),
        seed in any::<u64>(),
        a_dt in any_dtype(),
        b_dt in any_dtype(),
        c_dt in prop::option::of(any_dtype()),
        alpha_i in 0usize..3,
        beta_i in 0usize..3,
        threads in prop::sample::select(vec![1usize, 3]),
    ) {
        let mut rng = Rng(seed);
        let names: Vec<char> = "pqrstu".chars().collect();
        let mut a_l = Vec::new();
        let mut b_l = Vec::new();
        let mut out_l = Vec::new();
        for (k, &(_, m, o)) in labels.iter().enumerate() {
            if m & 1 != 0 { a_l.push(names[k]); }
            if m & 2 != 0 { b_l.push(names[k]); }
            if o { out_l.push(names[k]); }
        }
        rng.shuffle(&mut a_l);
        rng.shuffle(&mut b_l);
        rng.shuffle(&mut out_l);
        let spec = ResolvedSpec::new(&[&a_l, &b_l], &out_l).unwrap();
        let spec = ResolvedSpec::parse(&spec.to_string()).unwrap();
        let dim = |l: &char| labels[names.iter().position(|x| x == l).unwrap()].0;
        let a_shape: Vec<usize> = a_l.iter().map(dim).collect();
        let b_shape: Vec<usize> = b_l.iter().map(dim).collect();
        let out_shape = spec.output_shape(&[&a_shape, &b_shape]).unwrap();
        let a = random_tensor(&mut rng, a_dt, &a_shape);
        let b = random_tensor(&mut rng, b_dt, &b_shape);
        let c = c_dt.map(|d| random_tensor(&mut rng, d, &out_shape));
        let out_dt = c_dt.map_or(a_dt.promote(b_dt), |d| d.promote(a_dt).promote(b_dt));
        let (alpha, beta) = drawn_scalars(alpha_i, beta_i, out_dt);

        let reference = contract(&spec, alpha, &a, &b, beta, c.as_ref(), &BackendList::reference_only()).unwrap();
        prop_assert_eq!(reference.dtype(), out_dt);
        prop_assert_eq!(reference.shape(), out_shape.as_slice());

        // Error scale: |alpha| * sum |a||b| bound + |beta| * max |c|.
        let maxabs = |t: &LocalTensor| t.to_c64_vec().iter().map(|z| z.norm()).fold(0.0f64, f64::max);
        let inner: usize = a_l.iter().chain(&b_l)
            .filter(|l| !out_l.contains(l))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter().map(dim).product();
        let scale = 1.0 + alpha.norm() * maxabs(&a) * maxabs(&b) * inner as f64
            + beta.norm() * c.as_ref().map_or(0.0, maxabs);
        let tol = if matches!(out_dt, DType::F32 | DType::C32) { 1e-4 } else { 1e-10 };

        // The default list (the first backend accepting runs), and each fast backend alone.
        #[cfg_attr(not(feature = "blas"), allow(unused_mut))]
        let mut lists = vec![
            (BackendList::default_cpu(threads), None),
            (BackendList::new(vec![std::sync::Arc::new(FaerBackend::new(threads))]), Some("faer")),
        ];
        #[cfg(feature = "blas")]
        lists.push((
            BackendList::new(vec![std::sync::Arc::new(BlasBackend::new(threads).copying(true))]),
            Some("blas"),
        ));
        for (list, expect) in lists {
            let (fast, attempts) = contract_with_attempts(&spec, alpha, &a, &b, beta, c.as_ref(), &list).unwrap();
            let ran = &attempts.last().unwrap().backend;
            prop_assert_ne!(ran.as_str(), "reference");
            if let Some(name) = expect {
                prop_assert_eq!(ran.as_str(), name);
            }
            prop_assert_eq!(fast.dtype(), out_dt);
            prop_assert_eq!(fast.shape(), out_shape.as_slice());
            let diff = fast.max_abs_diff(&reference).unwrap();
            prop_assert!(diff <= tol * scale, "{} spec {} diff {} scale {}", ran, spec, diff, scale);
        }
    }

    #[test]
    fn encode_decode_round_trip(
        shape in prop::collection::vec(0usize..4, 0..4),
        dt in any_dtype(),
        seed in any::<u64>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let t = random_tensor(&mut Rng(seed), dt, &shape);
        let enc = t.encode();
        prop_assert_eq!(LocalTensor::decode(&enc).unwrap(), t.clone());
        let k = cut.index(enc.len());
        prop_assert!(LocalTensor::decode(&enc[..k]).is_err());
    }

    #[test]
    fn spec_display_round_trip(labels in labels(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let names: Vec<char> = "aBcDeF".chars().collect();
        let (mut a, mut b, mut out) = (vec![], vec![], vec![]);
        for (k, &(_, m, o)) in labels.iter().enumerate() {
            if m & 1 != 0 { a.push(names[k]); }
            if m & 2 != 0 { b.push(names[k]); }
            if o { out.push(names[k]); }
        }
        rng.shuffle(&mut out);
        let s = ResolvedSpec::new(&[&a, &b], &out).unwrap();
        let text = s.to_string();
        prop_assert_eq!(ResolvedSpec::parse(&text).unwrap(), s.clone());
        let spaced: String = text.chars().flat_map(|c| [c, ' ']).collect();
        // "- >" is not an arrow, so spacing must avoid splitting "->".
        let spaced = spaced.replace("- >", "->");
        prop_assert_eq!(ResolvedSpec::parse(&spaced).unwrap(), s.clone());
        // The parsed (unresolved) form prints the same text and resolves back to it.
        let parsed = EinsumSpec::parse(&spaced).unwrap();
        prop_assert_eq!(parsed.to_string(), text);
        let shapes: Vec<Vec<usize>> = [&a, &b].iter().map(|l| vec![2; l.len()]).collect();
        prop_assert_eq!(parsed.resolve(&[&shapes[0], &shapes[1]]).unwrap(), s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The reference backend on permuted, reversed (negative-stride) and conjugated views
    /// equals the reference on the equivalent contiguous tensors.
    #[test]
    fn reference_strided_views_match_contiguous(
        shape in prop::collection::vec(1usize..4, 1..4),
        n_b in 1usize..4,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let r = shape.len();
        let a = random_tensor(&mut rng, DType::C64, &shape);
        let b = random_tensor(&mut rng, DType::C64, &[shape[0], n_b]);
        let TensorData::C64(ad) = a.data() else { unreachable!() };
        let TensorData::C64(bd) = b.data() else { unreachable!() };
        let labels: Vec<char> = "ijk".chars().take(r).collect();
        // out: all of A's labels except the first, plus B's free label 'z'.
        let out: Vec<char> = labels[1..].iter().copied().chain(['z']).collect();
        let spec = ResolvedSpec::new(&[&labels, &[labels[0], 'z']], &out).unwrap();
        let expected = contract(&spec, C64::new(1.0, 0.0), &a, &b, C64::new(0.0, 0.0), None, &BackendList::reference_only()).unwrap();

        // Permuted view of A with the spec's A labels permuted the same way.
        let mut perm: Vec<usize> = (0..r).collect();
        rng.shuffle(&mut perm);
        let av = StridedView::<C64>::of_tensor(&a).unwrap().permuted(&perm).unwrap();
        let a_p: Vec<char> = perm.iter().map(|&p| labels[p]).collect();
        let spec_p = ResolvedSpec::new(&[&a_p, &[labels[0], 'z']], &out).unwrap();
        let bv = StridedView::<C64>::of_tensor(&b).unwrap();
        let got = reference_contract(&spec_p, C64::new(1.0, 0.0), &[&av, &bv], C64::new(0.0, 0.0), None).unwrap();
        prop_assert_eq!(&got, &expected.to_c64_vec());

        // B stored with its first axis reversed and conjugated, read through a negative stride
        // and the conj flag.
        let (m, n) = (shape[0], n_b);
        let mut rev = vec![C64::new(0.0, 0.0); m * n];
        for i in 0..m { for j in 0..n { rev[(m - 1 - i) * n + j] = bd[i * n + j].conj(); } }
        let bv = StridedView::new(&rev, &[m, n], &[-(n as isize), 1], (m - 1) * n, true).unwrap();
        let av = StridedView::new(ad, a.shape(), StridedView::<C64>::of_tensor(&a).unwrap().strides(), 0, false).unwrap();
        let got = reference_contract(&spec, C64::new(1.0, 0.0), &[&av, &bv], C64::new(0.0, 0.0), None).unwrap();
        let exp = expected.to_c64_vec();
        for (g, e) in got.iter().zip(&exp) {
            prop_assert!((g - e).norm() <= 1e-12 * (1.0 + e.norm()));
        }
    }
}
