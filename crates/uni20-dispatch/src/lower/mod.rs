//! Lowering of contractions to GEMM, shared by the GEMM backends and reusable by other
//! operation families: labelled operands and matricization (`operand.rs`), the choice of
//! loop labels, group orders and copies by elements moved (`plan.rs`), the batched GEMM
//! execution with in-place operands where the backend's layout rules allow (`gemm.rs`), and
//! the fully packed form for device GEMMs (`packed.rs`). Nothing here depends on a particular
//! GEMM library.

mod gemm;
mod operand;
mod packed;
mod plan;

#[cfg_attr(not(feature = "blas"), allow(unused_imports))]
pub(crate) use gemm::plan_of;
pub(crate) use gemm::{GemmCall, GemmLowering};
#[cfg_attr(not(feature = "blas"), allow(unused_imports))]
pub(crate) use operand::MatLayout;
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use packed::Packed;
pub(crate) use plan::AnyStrides;
#[cfg_attr(not(feature = "blas"), allow(unused_imports))]
pub(crate) use plan::{LayoutRules, Plan, Side};
