//! `abs`: the element-wise modulus `|t|` of a distributed tensor, a family
//! written with the kit (`uni20::dist::kit`): this file holds the public
//! call, `plan.rs` the pure planner, `command.rs` the descriptor, the
//! per-item function and the `command!` line.

mod command;
mod plan;

use uni20::dist::kit::defer_items;
use uni20::dist::{DistError, DistTensor, TensorMeta};
use uni20::{Controller, DType};

pub use command::AbsV1;

/// The real dtype `|t|` has for a tensor of `dtype` (`c64` gives `f64`,
/// `c32` gives `f32`).
pub fn abs_dtype(dtype: DType) -> DType {
    match dtype {
        DType::C32 | DType::F32 => DType::F32,
        _ => DType::F64,
    }
}

/// `|t|` element by element (the modulus for complex dtypes), with `t`'s
/// shape and tiling and a real dtype ([`abs_dtype`]); each block is computed
/// by its owner (nothing moves). Returns at once, like every operation.
///
/// # Errors
/// [`DistError::WrongUniverse`] for a tensor of another universe;
/// [`DistError::Job`] if the job already stopped.
pub fn abs(ctl: &Controller<'_>, t: &DistTensor) -> Result<DistTensor, DistError> {
    t.check_universe(ctl)?;
    if ctl.has_failed() {
        ctl.progress()?;
    }
    let out = TensorMeta {
        dtype: abs_dtype(t.dtype()),
        ..t.meta().clone()
    };
    let dtype = out.dtype;
    Ok(defer_items::<AbsV1>(ctl, out, &[t], move |workers, manifests, _| {
        plan::plan_abs(workers, &manifests[0], dtype)
    }))
}
