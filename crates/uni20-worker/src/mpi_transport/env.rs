//! What library mode requires of the host's MPI, checked before anything is
//! sent: MPI initialised and not finalised, a thread allowed to call MPI,
//! and an intra-communicator, which the universe duplicates for itself.
//!
//! Threading requirement: uni20 calls MPI only from the thread that called
//! `run_on` / `spmd_on`, and only while that call runs. With
//! `Threading::Single` or `Funneled` that thread must be the one that
//! initialised MPI (`MPI_Is_thread_main`); with `Serialized` or `Multiple`
//! any thread may be used, but the host must not call MPI from another
//! thread at the same time under `Serialized`. The rank's local kernels run
//! on other threads (the `threads_per_rank` budget) but never call MPI;
//! `Single` formally allows no other threads at all, which no common MPI
//! library enforces for threads that make no MPI calls (use
//! `threads_per_rank(1)` to stay within the letter of `Single`).

use mpi::environment::Threading;
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::diag::JobError;

/// Checks that MPI is initialised, not finalised, and callable from this
/// thread; returns the threading level the host initialised MPI with.
///
/// # Errors
/// [`JobError::Startup`] naming what is missing.
pub(crate) fn check_mpi_usable() -> Result<Threading, JobError> {
    if !mpi::environment::is_initialized() {
        return Err(JobError::Startup(
            "library mode needs MPI initialised by the host program (mpi::initialize_with_threading) before the \
             universe starts"
                .into(),
        ));
    }
    if mpi::environment::is_finalized() {
        return Err(JobError::Startup(
            "MPI has already been finalised in this process".into(),
        ));
    }
    let level = mpi::environment::threading_support();
    let mut main = 0;
    // SAFETY: MPI is initialised and not finalised (checked above);
    // MPI_Is_thread_main only writes the flag.
    unsafe {
        mpi::ffi::MPI_Is_thread_main(&mut main);
    }
    if level < Threading::Serialized && main == 0 {
        return Err(JobError::Startup(format!(
            "MPI was initialised with {level:?}, so only the thread that initialised it may call MPI, but this \
             universe was started on another thread: start it from that thread, or initialise MPI with \
             Threading::Serialized or Threading::Multiple"
        )));
    }
    Ok(level)
}

/// Duplicates the host's communicator for one universe (`MPI_Comm_dup`,
/// collective over `comm`): the universe receives every message on its own
/// communicator, so it must never share one with the host or with another
/// universe. The duplicate is freed when the universe's transport is dropped.
///
/// # Errors
/// [`JobError::Startup`] for an inter-communicator.
pub(crate) fn duplicate_host_communicator<C: Communicator>(comm: &C) -> Result<SimpleCommunicator, JobError> {
    if comm.test_inter() {
        return Err(JobError::Startup(
            "a universe needs an intra-communicator; an inter-communicator was given".into(),
        ));
    }
    Ok(comm.duplicate())
}
