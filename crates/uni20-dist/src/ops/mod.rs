//! Operation families: each is one folder with the same three files,
//! `mod.rs` (its public calls), `plan.rs` (its pure planner, unit-tested
//! without a universe) and `command.rs` (its descriptor, worker-side
//! compute and `command!` line), and extra files where it needs them. What
//! every family shares lives in `kit` (item assignment, block sources,
//! item plans and their submission, size limits, the deferred
//! submit/fill/poison machinery, the generic item handler); a family
//! imports the kit, never another family's internals.

pub(crate) mod contract;
pub(crate) mod create;
pub(crate) mod decomp;
pub(crate) mod elementwise;
pub(crate) mod kit;
pub(crate) mod reblock;
pub(crate) mod reduce;
pub(crate) mod replicate;
