//! Property test: distributed `contract` equals the local reference backend
//! (naive loops, the oracle) on random specs (up to 6 indices of every class:
//! batch, free, contracted, summed), sizes 0-5, all four dtypes, random block
//! sizes, with alpha/beta and an existing C.

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use uni20::dispatch::{contract as local_contract, BackendList};
use uni20::prelude::*;
use uni20::{EinsumSpec, TensorData, C32};

#[derive(Clone, Debug)]
struct Problem {
    a: Vec<char>,
    b: Vec<char>,
    out: Vec<char>,
    sizes: Vec<usize>,
    dtypes: (DType, DType),
    block: usize,
    alpha: f64,
    beta: Option<f64>,
    seed: u64,
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::C32), Just(DType::C64)]
}

fn problem() -> impl Strategy<Value = Problem> {
    (1usize..=6)
        .prop_flat_map(|n| {
            (
                proptest::collection::vec(0u8..6, n), // class of each label
                proptest::collection::vec(0usize..=5, n),
                (dtype(), dtype()),
                1usize..=4,
                prop_oneof![Just(1.0), Just(0.0), Just(2.5)],
                prop_oneof![Just(None), Just(Some(0.0)), Just(Some(-0.75)), Just(Some(1.0))],
                any::<u64>(),
                any::<[u64; 3]>(),
            )
        })
        .prop_map(|(classes, sizes, dtypes, block, alpha, beta, seed, perm_seeds)| {
            let labels: Vec<char> = "abcdef".chars().take(classes.len()).collect();
            // classes: 0 batch, 1 free A, 2 free B, 3 contracted, 4 summed A, 5 summed B
            let pick = |want: &[u8]| -> Vec<char> {
                labels
                    .iter()
                    .zip(&classes)
                    .filter(|(_, c)| want.contains(c))
                    .map(|(l, _)| *l)
                    .collect()
            };
            let shuffle = |mut v: Vec<char>, s: u64| {
                let mut x = s | 1;
                for i in (1..v.len()).rev() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    v.swap(i, (x % (i as u64 + 1)) as usize);
                }
                v
            };
            Problem {
                a: shuffle(pick(&[0, 1, 3, 4]), perm_seeds[0]),
                b: shuffle(pick(&[0, 2, 3, 5]), perm_seeds[1]),
                out: shuffle(pick(&[0, 1, 2]), perm_seeds[2]),
                sizes,
                dtypes,
                block,
                alpha,
                beta,
                seed,
            }
        })
}

fn random_tensor(dtype: DType, shape: &[usize], seed: &mut u64) -> LocalTensor {
    let n: usize = shape.iter().product();
    let mut next = || {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|_| next() as f32).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| next()).collect()),
        DType::C32 => TensorData::C32((0..n).map(|_| C32::new(next() as f32, next() as f32)).collect()),
        DType::C64 => TensorData::C64((0..n).map(|_| C64::new(next(), next())).collect()),
    };
    LocalTensor::from_data(shape, data).unwrap()
}

fn check(ctl: &Controller<'_>, p: &Problem) -> Result<(), TestCaseError> {
    let size = |l: &char| p.sizes[(*l as u8 - b'a') as usize];
    let spec = format!(
        "{},{}->{}",
        p.a.iter().collect::<String>(),
        p.b.iter().collect::<String>(),
        p.out.iter().collect::<String>()
    );
    let mut seed = p.seed;
    let a = random_tensor(p.dtypes.0, &p.a.iter().map(size).collect::<Vec<_>>(), &mut seed);
    let b = random_tensor(p.dtypes.1, &p.b.iter().map(size).collect::<Vec<_>>(), &mut seed);
    let c = p
        .beta
        .map(|_| random_tensor(p.dtypes.0, &p.out.iter().map(size).collect::<Vec<_>>(), &mut seed));
    let alpha = C64::new(p.alpha, 0.0);
    let beta = C64::new(p.beta.unwrap_or(0.0), 0.0);
    let parsed = EinsumSpec::parse(&spec).unwrap();
    let want = local_contract(&parsed, alpha, &a, &b, beta, c.as_ref(), &BackendList::reference_only()).unwrap();

    let da = DistTensor::from_local(ctl, &a, p.block).unwrap();
    let db = DistTensor::from_local(ctl, &b, p.block).unwrap();
    let dc = c.as_ref().map(|c| DistTensor::from_local(ctl, c, p.block).unwrap());
    let opts = ContractOptions {
        alpha,
        beta,
        c: dc.as_ref(),
        ..Default::default()
    };
    let out = contract_with(ctl, &spec, &da, &db, &opts).unwrap();
    out.wait(ctl).unwrap();
    let plan = out.plan_summary().expect("plan of an executed contraction");
    prop_assert_eq!(plan.bytes_through_root, 0);
    let got = out.to_local(ctl).unwrap();
    // The distributed result may promote to C's dtype even when beta == 0.
    let want = if got.dtype() != want.dtype() {
        want.cast(got.dtype()).unwrap()
    } else {
        want
    };
    prop_assert_eq!(got.shape(), want.shape(), "{}", spec);
    let scale = want.to_c64_vec().iter().map(|z| z.norm()).fold(1.0, f64::max);
    let terms: usize = p.sizes.iter().map(|&s| s.max(1)).product();
    let tol = common::tolerance(&want) * scale * terms as f64;
    let diff = got.max_abs_diff(&want).unwrap();
    prop_assert!(
        diff <= tol,
        "{}: diff {:e} > tol {:e} (block {})",
        spec,
        diff,
        tol,
        p.block
    );
    Ok(())
}

#[test]
fn distributed_contract_equals_reference_backend() {
    for ranks in [1, 3] {
        uni20::universe()
            .ranks(ranks)
            .run(|ctl| {
                let mut runner = TestRunner::new(Config {
                    cases: 96,
                    failure_persistence: None,
                    ..Config::default()
                });
                runner.run(&problem(), |p| check(ctl, &p)).unwrap();
            })
            .unwrap();
    }
}
