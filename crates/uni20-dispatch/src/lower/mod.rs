//! Lowering of contractions to GEMM, shared by the GEMM backends and reusable by other
//! operation families: labelled operands and matricization (`operand.rs`), the batched GEMM
//! plan with in-place operands where the layout allows (`gemm.rs`), and the fully packed
//! form for device GEMMs (`packed.rs`). Nothing here depends on a particular GEMM library.

mod gemm;
mod operand;
mod packed;

pub(crate) use gemm::{GemmCall, GemmLowering};
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use packed::Packed;
