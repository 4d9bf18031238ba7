//! Helpers shared by the kernel tests: `.npy` fixtures (header parsed by `npyz`), naive
//! matrix algebra in `C64` as the oracle, and deterministic test matrices.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use uni20_dispatch::backends::{ContractBackend, ContractProblem, KernelError};
use uni20_dispatch::{random_block, DType, LocalTensor, TensorData, C32, C64};

/// The scalars the property tests draw by index: `alpha` 0, 1 or 2.5 (2.5 - 0.5i for a
/// complex output dtype `out`) and `beta` 0, 1 or -0.75.
pub fn drawn_scalars(alpha_i: usize, beta_i: usize, out: DType) -> (C64, C64) {
    let alpha = match alpha_i {
        0 => C64::new(0.0, 0.0),
        1 => C64::new(1.0, 0.0),
        _ if out.is_complex() => C64::new(2.5, -0.5),
        _ => C64::new(2.5, 0.0),
    };
    (alpha, C64::new([0.0, 1.0, -0.75][beta_i], 0.0))
}

/// `crates/uni20-dispatch/tests/fixtures/kernels/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kernels")
        .join(name)
}

/// Reads a C-order `.npy` file of dtype `<f4`, `<f8`, `<c8` or `<c16`.
pub fn read_npy(path: &Path) -> LocalTensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = &bytes[..];
    let header = npyz::NpyHeader::from_reader(&mut reader).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(header.order(), npyz::Order::C, "{}", path.display());
    let descr = match header.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => panic!("{}: unsupported dtype {other:?}", path.display()),
    };
    let dtype = DType::from_npy_descr(&descr).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let shape: Vec<usize> = header.shape().iter().map(|&d| d as usize).collect();
    LocalTensor::from_bytes(dtype, &shape, reader).unwrap()
}

/// Elements of a rank-2 tensor as `C64`, with its `(rows, cols)`.
pub fn mat(t: &LocalTensor) -> (Vec<C64>, usize, usize) {
    let &[r, c] = t.shape() else {
        panic!("not a matrix: {:?}", t.shape())
    };
    (t.to_c64_vec(), r, c)
}

/// Naive `a (m x k) * b (k x n)` in `C64`.
pub fn matmul(a: &[C64], b: &[C64], m: usize, k: usize, n: usize) -> Vec<C64> {
    let mut out = vec![C64::new(0.0, 0.0); m * n];
    for i in 0..m {
        for l in 0..k {
            let x = a[i * k + l];
            for j in 0..n {
                out[i * n + j] += x * b[l * n + j];
            }
        }
    }
    out
}

/// The adjoint of a row-major `r x c` matrix.
pub fn adjoint(a: &[C64], r: usize, c: usize) -> Vec<C64> {
    let mut out = Vec::with_capacity(r * c);
    for j in 0..c {
        for i in 0..r {
            out.push(a[i * c + j].conj());
        }
    }
    out
}

/// `max |x - y|`.
pub fn max_diff(x: &[C64], y: &[C64]) -> f64 {
    assert_eq!(x.len(), y.len());
    x.iter().zip(y).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max)
}

/// `max |x|` (0 for empty).
pub fn max_norm(x: &[C64]) -> f64 {
    x.iter().map(|a| a.norm()).fold(0.0, f64::max)
}

/// `max |Q^H Q - I|` for the `r x c` matrix `q` (orthonormal columns).
pub fn column_orthonormality(q: &[C64], r: usize, c: usize) -> f64 {
    let g = matmul(&adjoint(q, r, c), q, c, r, c);
    let id: Vec<C64> = (0..c * c)
        .map(|i| C64::new(if i / c == i % c { 1.0 } else { 0.0 }, 0.0))
        .collect();
    max_diff(&g, &id)
}

/// `max |Q Q^H - I|` for the `r x c` matrix `q` (orthonormal rows).
pub fn row_orthonormality(q: &[C64], r: usize, c: usize) -> f64 {
    column_orthonormality(&adjoint(q, r, c), c, r)
}

/// Narrows `C64` values into a tensor of `dtype` (real part for real dtypes).
pub fn from_c64(dtype: DType, shape: &[usize], v: &[C64]) -> LocalTensor {
    let data = if dtype == DType::F32 {
        TensorData::F32(v.iter().map(|z| z.re as f32).collect())
    } else if dtype == DType::F64 {
        TensorData::F64(v.iter().map(|z| z.re).collect())
    } else if dtype == DType::C32 {
        TensorData::C32(v.iter().map(|z| C32::new(z.re as f32, z.im as f32)).collect())
    } else {
        TensorData::C64(v.to_vec())
    };
    LocalTensor::from_data(shape, data).unwrap()
}

/// A deterministic `rows x cols` matrix with entries uniform in [-1, 1).
pub fn rand_matrix(seed: u64, dtype: DType, rows: usize, cols: usize) -> LocalTensor {
    random_block(seed, dtype, &[rows, cols], &[0, 0], &[rows, cols]).unwrap()
}

/// Machine epsilon of the dtype's real type.
pub fn eps(dtype: DType) -> f64 {
    if dtype == DType::F32 || dtype == DType::C32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    }
}

/// `c * a`, computed in `C64` and rounded once to `a`'s dtype.
pub fn scaled(a: &LocalTensor, c: f64) -> LocalTensor {
    let v: Vec<C64> = a.to_c64_vec().iter().map(|z| z * c).collect();
    from_c64(a.dtype(), a.shape(), &v)
}

/// Scales spanning the dtype's normal range: `1e-300 .. 1e300` (every 25 decades), 1e±155
/// and 1e±165 (around where faer's SVD broke) and 1e±307 (the edges, where its eigh and QR
/// broke) for `f64`/`c64`; `1e-30 .. 1e30` (every 5 decades) and 1e±37 for `f32`/`c32`.
pub fn extreme_scales(dtype: DType) -> Vec<f64> {
    let exps: Vec<i32> = if eps(dtype) > 1e-10 {
        let mut e: Vec<i32> = (-30..=30).step_by(5).collect();
        e.extend([-37, 37]);
        e
    } else {
        let mut e: Vec<i32> = (-300..=300).step_by(25).collect();
        e.extend([-307, -165, -155, 155, 165, 307]);
        e
    };
    exps.into_iter().map(|k| format!("1e{k}").parse().unwrap()).collect()
}

/// SplitMix64: deterministic values from a seed (a proptest-chosen one in the property
/// tests), shared so that every test file draws the same sequence from the same seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-2, 2).
    pub fn val(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    /// Fisher-Yates shuffle of `v`.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// A tensor of `dtype` and `shape` with entries (real and imaginary parts) uniform in
/// [-2, 2).
pub fn random_tensor(rng: &mut Rng, dtype: DType, shape: &[usize]) -> LocalTensor {
    let n: usize = shape.iter().product();
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|_| rng.val() as f32).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| rng.val()).collect()),
        DType::C32 => TensorData::C32((0..n).map(|_| C32::new(rng.val() as f32, rng.val() as f32)).collect()),
        DType::C64 => TensorData::C64((0..n).map(|_| C64::new(rng.val(), rng.val())).collect()),
    };
    LocalTensor::from_data(shape, data).unwrap()
}

/// `n` values of element type `T`, each `T::from_c64` of a complex number with parts uniform
/// in [-2, 2) (the imaginary part is dropped for real `T`).
pub fn random_values<T: uni20_dispatch::Element>(rng: &mut Rng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_c64(C64::new(rng.val(), rng.val()))).collect()
}

/// The `ij,jk->ik` spec and a `2x3` times `3x2` pair of `f64` matrices.
pub fn mats() -> (uni20_dispatch::EinsumSpec, LocalTensor, LocalTensor) {
    let spec = uni20_dispatch::EinsumSpec::parse("ij,jk->ik").unwrap();
    let a = LocalTensor::from_f64(&[2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
    let b = LocalTensor::from_f64(&[3, 2], vec![1., 0., 0., 1., 1., 1.]).unwrap();
    (spec, a, b)
}

/// Runs the generic function `$f` once for each element type: `$f::<f32>()`, `$f::<f64>()`,
/// `$f::<C32>()`, `$f::<C64>()`.
#[macro_export]
macro_rules! each_dtype {
    ($f:ident) => {{
        $f::<f32>();
        $f::<f64>();
        $f::<uni20_dispatch::C32>();
        $f::<uni20_dispatch::C64>();
    }};
}

/// A proptest strategy choosing any of the four dtypes.
pub fn any_dtype() -> impl proptest::strategy::Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

/// A contraction backend named `name` that declines every problem with `reason` (types are
/// fine), so it is never selected and never runs.
pub struct Declining {
    /// The backend's name.
    pub name: &'static str,
    /// Why it declines.
    pub reason: &'static str,
}

impl ContractBackend for Declining {
    fn name(&self) -> &str {
        self.name
    }
    fn accepts(&self, _: &ContractProblem<'_>) -> Result<(), String> {
        Err(self.reason.into())
    }
    fn run(&self, _: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        Err(KernelError::Failed(format!(
            "{} declines every problem: never selected",
            self.name
        )))
    }
}
