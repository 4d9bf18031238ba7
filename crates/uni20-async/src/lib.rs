//! uni20-async: causal epoch channels.
//!
//! TODO crate docs
#![warn(missing_docs)]

mod buffer;
mod epoch;
mod error;
mod executor;
pub mod guide;
mod sync;
mod task_ctx;

pub use buffer::{
    Async, ReadBuffer, ReadGuard, ReadIntoMaybe, ReadMaybe, ReadOwned, ReadRef, WriteBuffer, WriteGuard, WriteOwned,
};
pub use error::{AsyncError, BlockedTask, DeadlockReport, PanicError, SharedError};
pub use executor::{JoinHandle, LocalExecutor, LocalHandle, ThreadPoolExecutor};
