//! The BLAS backend (feature `blas`): the shared GEMM lowering with every GEMM on the system
//! OpenBLAS through `cblas-sys`, the layout rules CBLAS imposes (one unit stride per matrix,
//! a positive leading dimension, `ConjTrans` but no conjugate-without-transpose), and the
//! thread policy (OpenBLAS itself single-threaded, the GEMM split across the rank's budget).

use std::ffi::{c_char, c_int, CStr};
use std::sync::{Mutex, Once};

use cblas_sys::{CBLAS_LAYOUT, CBLAS_TRANSPOSE};

use crate::backend::{ContractBackend, KernelError};
use crate::dtype::with_dtype;
use crate::dtype::{DType, C32, C64};
use crate::lower::{plan_of, AnyStrides, GemmCall, GemmLowering, LayoutRules, MatLayout, Plan, Side};
use crate::problem::ContractProblem;
use crate::scalar::Element;
use crate::tensor::LocalTensor;

extern "C" {
    // OpenBLAS extensions (not CBLAS), present in every OpenBLAS build.
    fn openblas_set_num_threads(n: c_int);
    fn openblas_get_num_threads() -> c_int;
    fn openblas_get_config() -> *const c_char;
    fn openblas_get_corename() -> *const c_char;
}

/// GEMM backend on the system OpenBLAS (cargo feature `blas`). Accepts every dtype.
///
/// The problem is lowered by the shared GEMM lowering (as [`crate::backends::FaerBackend`]) under the
/// CBLAS layout rules: a matrix is read in place when one of its strides is 1 and the other
/// a leading dimension of at least its extent (the `NoTrans` and `Trans` cases), all
/// dimensions fit in a C `int`, and a conjugated operand is one that BLAS reads transposed
/// (`ConjTrans`; CBLAS has no conjugate without transpose). The output is written in place
/// when it is column- or row-major (the row-major case computes `C^T = op(B)^T op(A)^T`).
///
/// **Decline rule.** By default ([`BlasBackend::new`]) the backend declines, with a reason, a
/// problem where these rules would copy more elements than a GEMM taking any strides (faer)
/// copies: negative, zero or two non-unit strides, or a conjugated operand not read
/// transposed. The next backend of the list then reads it in place. With
/// [`BlasBackend::copying`] it accepts those too and copies the operand (conjugation
/// applied) into row-major order. Problems whose GEMM dimensions exceed `i32::MAX` are always
/// declined.
///
/// **Threads.** OpenBLAS's own thread pool is set to one thread
/// (`openblas_set_num_threads(1)`, process-wide, re-applied before each contraction if
/// something else changed it), so a BLAS call never starts threads of its own. With a budget
/// `threads > 1` each GEMM's output is bisected into up to `threads` blocks (cut across the
/// longer side on multiples of 16 while a piece has at least 2^18 multiply-adds and 32 rows or
/// columns), each one sequential BLAS call, run in parallel by `rayon::join`; many small
/// GEMMs (a loop of them) are instead spread over `threads` tasks. So a rank never uses more
/// than its budget, and N ranks x budget never oversubscribes the cores however OpenBLAS was
/// configured (`OPENBLAS_NUM_THREADS` is overridden).
#[derive(Clone, Copy, Debug)]
pub struct BlasBackend {
    threads: usize,
    copy_odd_strides: bool,
}

impl BlasBackend {
    /// A BLAS backend with thread budget `threads` (`0` and `1` mean sequential) that
    /// declines problems whose strides BLAS cannot take but a strided GEMM can (see the type
    /// documentation).
    pub fn new(threads: usize) -> BlasBackend {
        BlasBackend {
            threads,
            copy_odd_strides: false,
        }
    }

    /// The same backend, accepting (`true`) or declining (`false`, the default) problems
    /// whose operand strides BLAS cannot express; accepted ones copy the operand once.
    pub fn copying(self, copy_odd_strides: bool) -> BlasBackend {
        BlasBackend {
            copy_odd_strides,
            ..self
        }
    }

    /// The thread budget given to [`BlasBackend::new`].
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The linked library as OpenBLAS describes itself: its build configuration and the
    /// kernel it chose for this CPU, e.g.
    /// `OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64 (core: SkylakeX)`.
    /// When an x86-64 CPU with AVX2 got one of OpenBLAS's generic SSE kernels (Prescott,
    /// Core2, Katmai: an OpenBLAS too old to know the CPU), a note says so and how to choose
    /// a kernel (`OPENBLAS_CORETYPE`, read when the library is loaded).
    pub fn library() -> String {
        // SAFETY: both functions return pointers to static NUL-terminated strings owned by
        // OpenBLAS (never freed), or null.
        unsafe {
            let text = |p: *const c_char| {
                if p.is_null() {
                    "unknown".to_string()
                } else {
                    CStr::from_ptr(p).to_string_lossy().trim().to_string()
                }
            };
            let core = text(openblas_get_corename());
            format!(
                "{} (core: {core}{})",
                text(openblas_get_config()),
                generic_kernel_note(&core)
            )
        }
    }
}

/// A note when OpenBLAS runs a generic SSE kernel on a CPU with AVX2 (see
/// [`BlasBackend::library`]).
fn generic_kernel_note(core: &str) -> &'static str {
    let generic = ["prescott", "core2", "katmai", "northwood"]
        .iter()
        .any(|g| core.eq_ignore_ascii_case(g));
    #[cfg(target_arch = "x86_64")]
    let modern = std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    let modern = false;
    if generic && modern {
        "; a generic kernel on an AVX2 CPU: this OpenBLAS does not know the CPU, set \
         OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) before starting the program"
    } else {
        ""
    }
}

/// Makes OpenBLAS single-threaded (see [`BlasBackend`]).
fn single_threaded_blas() {
    static FIRST: Once = Once::new();
    // SAFETY: plain OpenBLAS calls without pointer arguments.
    FIRST.call_once(|| unsafe { openblas_set_num_threads(1) });
    // SAFETY: as above; OpenBLAS's thread-count calls are thread-safe.
    unsafe {
        if openblas_get_num_threads() != 1 {
            openblas_set_num_threads(1);
        }
    }
}

/// Largest GEMM dimension or leading dimension CBLAS takes (a C `int`).
const MAX_DIM: usize = i32::MAX as usize;

/// A matrix as CBLAS reads it: `op` applied to a column-major matrix with leading
/// dimension `ld`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlasMat {
    op: Op,
    ld: usize,
}

/// The CBLAS transposition flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    NoTrans,
    Trans,
    ConjTrans,
}

impl Op {
    fn cblas(self) -> CBLAS_TRANSPOSE {
        match self {
            Op::NoTrans => CBLAS_TRANSPOSE::CblasNoTrans,
            Op::Trans => CBLAS_TRANSPOSE::CblasTrans,
            Op::ConjTrans => CBLAS_TRANSPOSE::CblasConjTrans,
        }
    }
}

/// How CBLAS (column-major) reads the `rows x cols` matrix `l`, or `None` if it cannot:
/// `NoTrans` when the row stride is 1 (and not conjugated), `Trans`/`ConjTrans` when the
/// column stride is 1; the other stride is the leading dimension, at least the extent it
/// spans. A stride along an extent of 1 does not matter.
fn blas_mat(l: &MatLayout) -> Option<BlasMat> {
    if l.rows > MAX_DIM || l.cols > MAX_DIM {
        return None;
    }
    let ld_ok = |s: isize, min: usize| s > 0 && (s as usize) >= min.max(1) && (s as usize) <= MAX_DIM;
    if !l.conj && (l.rows <= 1 || l.row_stride == 1) && (l.cols <= 1 || ld_ok(l.col_stride, l.rows)) {
        let ld = if l.cols <= 1 {
            l.rows.max(1)
        } else {
            l.col_stride as usize
        };
        return Some(BlasMat { op: Op::NoTrans, ld });
    }
    if (l.cols <= 1 || l.col_stride == 1) && (l.rows <= 1 || ld_ok(l.row_stride, l.cols)) {
        let ld = if l.rows <= 1 {
            l.cols.max(1)
        } else {
            l.row_stride as usize
        };
        let op = if l.conj { Op::ConjTrans } else { Op::Trans };
        return Some(BlasMat { op, ld });
    }
    None
}

fn transposed(l: &MatLayout) -> MatLayout {
    MatLayout {
        rows: l.cols,
        cols: l.rows,
        row_stride: l.col_stride,
        col_stride: l.row_stride,
        conj: l.conj,
    }
}

/// How a GEMM writing `dst` is posed to CBLAS: `Direct` computes `C = op(A) op(B)` into a
/// column-major C; `Transposed` computes `C^T = op(B^T) op(A^T)` into a row-major C (which is
/// a column-major C^T). `None` if `dst` is neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Direct,
    Transposed,
}

fn form(dst: &MatLayout) -> Option<Form> {
    let plain = MatLayout { conj: false, ..*dst };
    if blas_mat(&plain).is_some_and(|m| m.op == Op::NoTrans) {
        Some(Form::Direct)
    } else if blas_mat(&transposed(&plain)).is_some_and(|m| m.op == Op::NoTrans) {
        Some(Form::Transposed)
    } else {
        None
    }
}

/// The CBLAS layout rules (see [`BlasBackend`]).
struct BlasRules;

impl LayoutRules for BlasRules {
    fn dst_ok(&self, dst: &MatLayout) -> bool {
        form(dst).is_some()
    }
    fn operand_ok(&self, _side: Side, op: &MatLayout, dst: &MatLayout) -> bool {
        match form(dst) {
            Some(Form::Direct) => blas_mat(op).is_some(),
            Some(Form::Transposed) => blas_mat(&transposed(op)).is_some(),
            None => false,
        }
    }
}

/// A CBLAS GEMM for one element type.
trait BlasScalar: Element {
    /// `cblas_?gemm` in column-major layout with `beta` 0 or 1.
    ///
    /// # Safety
    /// The pointers and leading dimensions describe valid matrices for the given `op`s and
    /// dimensions (CBLAS's contract), `c` is writable and aliases neither `a` nor `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        ta: CBLAS_TRANSPOSE,
        tb: CBLAS_TRANSPOSE,
        dims: [c_int; 3],
        alpha: Self,
        a: (*const Self, c_int),
        b: (*const Self, c_int),
        accumulate: bool,
        c: (*mut Self, c_int),
    );
}

const COL: CBLAS_LAYOUT = CBLAS_LAYOUT::CblasColMajor;

/// `BlasScalar` for a real type through its `cblas_?gemm` (scalars by value).
macro_rules! real_gemm {
    ($t:ty, $gemm:ident) => {
        impl BlasScalar for $t {
            unsafe fn gemm(
                ta: CBLAS_TRANSPOSE,
                tb: CBLAS_TRANSPOSE,
                [m, n, k]: [c_int; 3],
                alpha: $t,
                a: (*const $t, c_int),
                b: (*const $t, c_int),
                accumulate: bool,
                c: (*mut $t, c_int),
            ) {
                let beta = if accumulate { 1.0 } else { 0.0 };
                // SAFETY: the caller upholds `BlasScalar::gemm`'s contract: pointers valid for
                // the given dimensions and leading dimensions, `c` not aliased by `a` or `b`.
                unsafe {
                    cblas_sys::$gemm(COL, ta, tb, m, n, k, alpha, a.0, a.1, b.0, b.1, beta, c.0, c.1);
                }
            }
        }
    };
}

/// `BlasScalar` for a complex type through its `cblas_?gemm` (scalars by pointer to
/// `[re, im]`; `Complex<T>` is `repr(C)` (re, im), the layout of CBLAS's complex types).
macro_rules! complex_gemm {
    ($t:ty, $re:ty, $gemm:ident) => {
        impl BlasScalar for $t {
            unsafe fn gemm(
                ta: CBLAS_TRANSPOSE,
                tb: CBLAS_TRANSPOSE,
                [m, n, k]: [c_int; 3],
                alpha: $t,
                a: (*const $t, c_int),
                b: (*const $t, c_int),
                accumulate: bool,
                c: (*mut $t, c_int),
            ) {
                let beta: [$re; 2] = [if accumulate { 1.0 } else { 0.0 }, 0.0];
                let alpha = [alpha.re, alpha.im];
                // SAFETY: the caller upholds `BlasScalar::gemm`'s contract: pointers valid for
                // the given dimensions and leading dimensions, `c` not aliased by `a` or `b`.
                unsafe {
                    cblas_sys::$gemm(
                        COL,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        &alpha,
                        a.0.cast(),
                        a.1,
                        b.0.cast(),
                        b.1,
                        &beta,
                        c.0.cast(),
                        c.1,
                    );
                }
            }
        }
    };
}

real_gemm!(f32, cblas_sgemm);
real_gemm!(f64, cblas_dgemm);
complex_gemm!(C32, f32, cblas_cgemm);
complex_gemm!(C64, f64, cblas_zgemm);

/// Smallest GEMM (multiply-adds) split across threads, as [`crate::backends::FaerBackend`] does.
const SPLIT_MIN_MACS: usize = 1 << 18;
/// Block edges are multiples of this many rows or columns.
const SPLIT_ALIGN: usize = 16;

/// Runs `g` as up to `parts` sequential BLAS calls on disjoint output blocks, in parallel.
fn split_call<T: BlasScalar>(g: GemmCall<T>, parts: usize, err: &Mutex<Option<String>>) {
    let macs = g.m.saturating_mul(g.n).saturating_mul(g.k);
    let parts = parts.min(g.m.max(g.n) / SPLIT_ALIGN);
    if parts <= 1 || macs < SPLIT_MIN_MACS {
        if let Err(e) = blas_call(&g) {
            err.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        }
        return;
    }
    let first = parts / 2;
    let along_rows = g.m > g.n;
    let len = if along_rows { g.m } else { g.n };
    let cut = (len as u128 * first as u128 / parts as u128) as usize;
    let cut = cut
        .div_ceil(SPLIT_ALIGN)
        .saturating_mul(SPLIT_ALIGN)
        .clamp(SPLIT_ALIGN, len - 1);
    let (mut lo, mut hi) = (g, g);
    if along_rows {
        lo.m = cut;
        hi.m = g.m - cut;
        hi.a = g.a.wrapping_offset(cut as isize * g.a_rs);
        hi.dst = g.dst.wrapping_offset(cut as isize * g.d_rs);
    } else {
        lo.n = cut;
        hi.n = g.n - cut;
        hi.b = g.b.wrapping_offset(cut as isize * g.b_cs);
        hi.dst = g.dst.wrapping_offset(cut as isize * g.d_cs);
    }
    rayon::join(
        move || split_call(lo, first, err),
        move || split_call(hi, parts - first, err),
    );
}

/// One CBLAS call for `g`; `Err` if its layout is one the rules should have excluded.
fn blas_call<T: BlasScalar>(g: &GemmCall<T>) -> Result<(), String> {
    let lay = |rows, cols, row_stride, col_stride, conj| MatLayout {
        rows,
        cols,
        row_stride,
        col_stride,
        conj,
    };
    let dst = lay(g.m, g.n, g.d_rs, g.d_cs, false);
    let a = lay(g.m, g.k, g.a_rs, g.a_cs, g.conj_a);
    let b = lay(g.k, g.n, g.b_rs, g.b_cs, g.conj_b);
    let int = |x: usize| c_int::try_from(x).map_err(|_| format!("BLAS dimension {x} exceeds a C int"));
    let (first, second, c, dims, p1, p2) = match form(&dst) {
        Some(Form::Direct) => (blas_mat(&a), blas_mat(&b), blas_mat(&dst), [g.m, g.n, g.k], g.a, g.b),
        Some(Form::Transposed) => (
            blas_mat(&transposed(&b)),
            blas_mat(&transposed(&a)),
            blas_mat(&transposed(&dst)),
            [g.n, g.m, g.k],
            g.b,
            g.a,
        ),
        None => (None, None, None, [0; 3], g.a, g.b),
    };
    let (Some(x), Some(y), Some(c)) = (first, second, c) else {
        return Err(format!(
            "internal error: a GEMM layout BLAS cannot take reached the BLAS backend ({g:?})"
        ));
    };
    let dims = [int(dims[0])?, int(dims[1])?, int(dims[2])?];
    // SAFETY: `GemmCall` guarantees every (row, col) index of A, B and dst at their strides
    // is a live element (dst writable, unaliased); `blas_mat` described exactly those
    // matrices to CBLAS (unit stride plus a leading dimension >= the extent it spans, all
    // fitting in a C int), so CBLAS touches only those elements.
    unsafe {
        T::gemm(
            x.op.cblas(),
            y.op.cblas(),
            dims,
            g.alpha,
            (p1, int(x.ld)?),
            (p2, int(y.ld)?),
            g.accumulate,
            (g.dst, int(c.ld)?),
        );
    }
    Ok(())
}

impl ContractBackend for BlasBackend {
    fn name(&self) -> &str {
        "blas"
    }
    fn accepts_types(&self, _dtype: DType) -> Result<(), String> {
        Ok(())
    }
    fn accepts(&self, p: &ContractProblem<'_>) -> Result<(), String> {
        with_dtype!(p.dtype(), T => self.accepts_typed::<T>(p))
    }
    fn run(&self, p: &ContractProblem<'_>) -> Result<LocalTensor, KernelError> {
        single_threaded_blas();
        let threads = self.threads.max(1);
        with_dtype!(p.dtype(), T => run_blas::<T>(p, threads))
    }
}

impl BlasBackend {
    fn accepts_typed<T: Element>(&self, p: &ContractProblem<'_>) -> Result<(), String> {
        let Some(plan) = plan_of::<T>(p, &BlasRules).map_err(|e| e.to_string())? else {
            return Ok(()); // no GEMM at all: beta * C or zeros
        };
        let dim = |ls: &[char]| {
            ls.iter()
                .map(|&l| p.dim(l).unwrap_or(1))
                .try_fold(1usize, |a, d| a.checked_mul(d))
        };
        for (what, ls) in [("m", &plan.m), ("n", &plan.n), ("k", &plan.k)] {
            if dim(ls).is_none_or(|d| d > MAX_DIM) {
                return Err(format!("GEMM dimension {what} exceeds a C int ({})", i32::MAX));
            }
        }
        if self.copy_odd_strides {
            return Ok(());
        }
        let strided = plan_of::<T>(p, &AnyStrides).map_err(|e| e.to_string())?;
        let copied = |pl: &Plan| pl.copied_elements();
        match strided {
            Some(s) if copied(&plan) > copied(&s) => Err(format!(
                "strides or conjugation BLAS cannot express: {} elements would be copied that a strided GEMM reads in place ({})",
                copied(&plan) - copied(&s),
                odd_parts(&plan, &s)
            )),
            _ => Ok(()),
        }
    }
}

/// Which parts the BLAS plan copies beyond the strided plan.
fn odd_parts(blas: &Plan, strided: &Plan) -> String {
    let mut v = Vec::new();
    if blas.copy_a && !strided.copy_a {
        v.push("operand A");
    }
    if blas.copy_b && !strided.copy_b {
        v.push("operand B");
    }
    if !blas.direct && strided.direct {
        v.push("the output");
    }
    if v.is_empty() {
        v.push("a different grouping");
    }
    v.join(", ")
}

/// The shared lowering under [`BlasRules`], every GEMM on CBLAS.
fn run_blas<T: BlasScalar>(p: &ContractProblem<'_>, threads: usize) -> Result<LocalTensor, KernelError> {
    let mut lowering = GemmLowering::<T>::new(p, &BlasRules, threads)?;
    lowering.for_each_gemm_par(threads, &|g: GemmCall<T>, t: usize| {
        let err = Mutex::new(None);
        split_call(g, t, &err);
        err.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(Ok(()), Err)
    })?;
    lowering.finish(p, threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(rows: usize, cols: usize, rs: isize, cs: isize, conj: bool) -> MatLayout {
        MatLayout {
            rows,
            cols,
            row_stride: rs,
            col_stride: cs,
            conj,
        }
    }

    #[test]
    fn cblas_layout_rules() {
        use Op::{ConjTrans as CblasConjTrans, NoTrans as CblasNoTrans, Trans as CblasTrans};
        // Column-major, row-major (transposed), conjugated transposed.
        assert_eq!(
            blas_mat(&l(3, 4, 1, 5, false)),
            Some(BlasMat {
                op: CblasNoTrans,
                ld: 5
            })
        );
        assert_eq!(blas_mat(&l(3, 4, 4, 1, false)), Some(BlasMat { op: CblasTrans, ld: 4 }));
        assert_eq!(
            blas_mat(&l(3, 4, 4, 1, true)),
            Some(BlasMat {
                op: CblasConjTrans,
                ld: 4
            })
        );
        // Conjugated but column-major: no CBLAS form.
        assert_eq!(blas_mat(&l(3, 4, 1, 3, true)), None);
        // Leading dimension too small, negative or zero strides, two non-unit strides.
        assert_eq!(blas_mat(&l(3, 4, 1, 2, false)), None);
        assert_eq!(blas_mat(&l(3, 4, -1, 3, false)), None);
        assert_eq!(blas_mat(&l(3, 4, 0, 1, false)), None);
        assert_eq!(blas_mat(&l(3, 4, 8, 2, false)), None);
        // Extent-1 dimensions: their stride does not matter.
        assert_eq!(
            blas_mat(&l(1, 4, 0, 7, false)),
            Some(BlasMat {
                op: CblasNoTrans,
                ld: 7
            })
        );
        assert_eq!(
            blas_mat(&l(1, 4, 0, 1, true)),
            Some(BlasMat {
                op: CblasConjTrans,
                ld: 4
            })
        );
        assert_eq!(blas_mat(&l(1, 1, -3, 0, true)).map(|m| m.ld), Some(1));
        // Forms of the destination.
        assert_eq!(form(&l(3, 4, 1, 3, false)), Some(Form::Direct));
        assert_eq!(form(&l(3, 4, 4, 1, false)), Some(Form::Transposed));
        assert_eq!(form(&l(3, 4, 8, 2, false)), None);
        // A conjugated operand is in place only where it is read transposed.
        let col_dst = l(3, 4, 1, 3, false);
        let row_dst = l(3, 4, 4, 1, false);
        let a_row = l(3, 5, 5, 1, true);
        assert!(BlasRules.operand_ok(Side::A, &a_row, &col_dst));
        assert!(!BlasRules.operand_ok(Side::A, &a_row, &row_dst));
        let a_col = l(3, 5, 1, 3, true);
        assert!(!BlasRules.operand_ok(Side::A, &a_col, &col_dst));
        assert!(BlasRules.operand_ok(Side::A, &a_col, &row_dst));
    }

    #[test]
    fn reports_the_library() {
        let info = BlasBackend::library();
        assert!(info.contains("OpenBLAS"), "{info}");
    }
}
