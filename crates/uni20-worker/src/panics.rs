//! Panic policy of a rank: which panics the runtime reports as a handler's
//! failure and which end the job.
//!
//! A panic inside a command handler is caught by
//! [`run_handler`](crate::handler::run_handler) and reported to the root as a
//! [`Diagnostic`](crate::Diagnostic), so the panic hook stays quiet for it.
//! In-process, any other panic is printed by the previous hook and ends the
//! rank thread, which aborts the universe. Under MPI a panic outside a handler
//! would leave the peers blocked in MPI calls, so the hook aborts
//! `MPI_COMM_WORLD` (rsmpi issue 197).

use std::any::Any;
use std::cell::Cell;

thread_local! {
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as running a handler (or not).
pub(crate) fn set_in_handler(v: bool) {
    IN_HANDLER.with(|h| h.set(v));
}

fn in_handler() -> bool {
    IN_HANDLER.with(|h| h.get())
}

/// The text of a panic payload (`&str` or `String`), else a placeholder.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// In-process: panics inside handlers are caught and reported to the root
/// as a diagnostic, so the default hook's message would only duplicate it.
pub(crate) fn install_quiet_handler_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !in_handler() {
                previous(info);
            }
        }));
    });
}

/// Under MPI: a panic outside a handler aborts the communicator.
#[cfg(feature = "mpi")]
pub(crate) fn install_mpi_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !in_handler() {
            previous(info);
            eprintln!("uni20: panic outside a command handler; aborting MPI_COMM_WORLD");
            // SAFETY: MPI is initialised (the hook is installed after
            // `MPI_Init`); `MPI_Abort` does not return.
            unsafe {
                mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 70);
            }
        }
    }));
}
