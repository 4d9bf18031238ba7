//! Python bindings of uni20: the extension module `uni20._uni20`, which the
//! Python package `uni20` (`python/uni20`) re-exports.
//!
//! Thin by design: every function wraps one call of the Rust API
//! (`uni20::dist`, `uni20::tn`) and runs it on the root thread of the
//! universe (module `universe`); errors become Python exceptions of specific
//! classes (module `errors`) and panics are caught at the boundary. The Python
//! documentation is `README.md` of this crate; the type stubs are
//! `python/uni20/_uni20.pyi`.

#![warn(missing_docs)]

mod errors;
mod symmetric;
mod tensor;
mod tn;
mod universe;

use pyo3::prelude::*;

/// mimalloc for the extension's Rust allocations (as the `dmrg` example: the symmetric sweeps
/// allocate many small blocks, where glibc's malloc was about a quarter of a profile); Python's
/// own objects keep Python's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension module.
#[pymodule]
fn _uni20(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MPI_BUILD", cfg!(feature = "mpi"))?;
    m.add_class::<universe::Universe>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<tensor::SvdResult>()?;
    m.add_function(wrap_pyfunction!(tensor::einsum, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::axpby, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::lincomb, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::inner, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::svd, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::qr, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::lq, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::eigh, m)?)?;
    m.add_class::<symmetric::Symmetry>()?;
    m.add_class::<symmetric::Leg>()?;
    m.add_class::<symmetric::Fusion>()?;
    m.add_function(wrap_pyfunction!(symmetric::fuse_legs, m)?)?;
    m.add_function(wrap_pyfunction!(symmetric::split_leg, m)?)?;
    m.add_class::<tn::Site>()?;
    m.add_class::<tn::OpSum>()?;
    m.add_class::<tn::Model>()?;
    m.add_class::<tn::Mpo>()?;
    m.add_class::<tn::Mps>()?;
    m.add_class::<tn::Dmrg>()?;
    m.add_class::<tn::SweepStats>()?;
    m.add_class::<tn::Tebd>()?;
    m.add_class::<tn::TebdStep>()?;
    m.add_class::<tn::Tdvp>()?;
    m.add_class::<tn::TdvpStep>()?;
    m.add_function(wrap_pyfunction!(tn::heisenberg, m)?)?;
    m.add_function(wrap_pyfunction!(tn::xxz, m)?)?;
    m.add_function(wrap_pyfunction!(tn::j1j2, m)?)?;
    m.add_function(wrap_pyfunction!(tn::spin1, m)?)?;
    m.add_function(wrap_pyfunction!(tn::tfi, m)?)?;
    m.add_function(wrap_pyfunction!(tn::hubbard, m)?)?;
    m.add_function(wrap_pyfunction!(launched_by_mpi, m)?)?;
    Ok(())
}

/// True when an MPI launcher (``mpirun``) started this process.
#[pyfunction]
fn launched_by_mpi() -> bool {
    uni20::worker::launched_by_mpi()
}
