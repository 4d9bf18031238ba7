//! Operation families: each is one module with its public calls, a pure
//! planner, and its registered worker-side command. `deferred` holds what
//! every family shares on the root (waiting for inputs in program order,
//! submitting without blocking, filling or poisoning the outputs).

pub(crate) mod contract;
pub(crate) mod create;
pub(crate) mod decomp;
pub(crate) mod deferred;
pub(crate) mod elementwise;
pub(crate) mod reblock;
pub(crate) mod reduce;
pub(crate) mod replicate;
