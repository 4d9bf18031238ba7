//! Writing your own command: a descriptor type, a reply type, one handler
//! function and one `command!` line (the command type, its `CommandSpec`
//! impl and its registration).
//!
//! `example.block_norms.v1` asks every rank that owns blocks of a tensor
//! for the squared Frobenius norm of its blocks; the root adds the partial
//! sums. Only one number per rank reaches the root, never a block. The
//! program checks the result against the norm of the gathered tensor.
//!
//! ```text
//! cargo run --example custom_command                 # in-process universe
//! cargo xtask mpirun -n 3 --example custom_command   # under MPI
//! ```

use serde::{Deserialize, Serialize};
use uni20::persist::PersistentPtr;
use uni20::prelude::*;
use uni20::{command, HandlerError, WorkerContext};

command!(
    /// The command: its wire name and schema version are the ABI.
    pub BlockNormsV1 = "example.block_norms.v1", schema 1, BlockNormsDesc => BlockNormsReply, handle_block_norms
);

/// What the root sends (identical on every participant): ids only.
#[derive(Serialize, Deserialize)]
pub struct BlockNormsDesc {
    /// Every block of the tensor: owner rank and object id.
    pub blocks: Vec<uni20::dist::BlockRef>,
}

/// What each participant replies.
#[derive(Serialize, Deserialize)]
pub struct BlockNormsReply {
    /// Blocks this rank summed.
    pub blocks: usize,
    /// Sum of |x|^2 over their elements.
    pub sum_sq: f64,
}

/// Runs on every participant: loads the blocks this rank owns from its
/// store and sums their squared magnitudes.
fn handle_block_norms(ctx: &mut WorkerContext<'_>, d: BlockNormsDesc) -> Result<BlockNormsReply, HandlerError> {
    let mut reply = BlockNormsReply { blocks: 0, sum_sq: 0.0 };
    for r in d.blocks.iter().filter(|r| r.owner == ctx.rank()) {
        let block = ctx
            .store()
            .load_wait(PersistentPtr::<uni20::dist::Block>::from_id(r.id))
            .map_err(|e| HandlerError::from(e).with_object(r.id))?;
        reply.sum_sq += block.0.to_c64_vec().iter().map(|z| z.norm_sqr()).sum::<f64>();
        reply.blocks += 1;
    }
    Ok(reply)
}

/// The root side: one submission to the owners, partial sums back.
fn norm(ctl: &Controller<'_>, t: &DistTensor) -> anyhow::Result<f64> {
    let blocks = t.manifest(ctl)?.blocks;
    let mut owners: Vec<usize> = blocks.iter().map(|b| b.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    let replies = ctl.submit::<BlockNormsV1>(&BlockNormsDesc { blocks }, &owners)?;
    let counted: usize = replies.iter().map(|(_, r)| r.blocks).sum();
    anyhow::ensure!(counted == t.blocking().num_blocks(), "{counted} blocks summed");
    Ok(replies.iter().map(|(_, r)| r.sum_sq).sum::<f64>().sqrt())
}

fn main() -> std::process::ExitCode {
    uni20::launch(|ctl| {
        let (m, n) = (37, 23);
        let data: Vec<f64> = (0..m * n).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
        let local = LocalTensor::from_f64(&[m, n], data.clone())?;
        let t = DistTensor::from_local(ctl, &local, 8)?;
        let got = norm(ctl, &t)?;
        let want = data.iter().map(|x| x * x).sum::<f64>().sqrt();
        let gathered = t
            .to_local(ctl)?
            .to_c64_vec()
            .iter()
            .map(|z| z.norm_sqr())
            .sum::<f64>()
            .sqrt();
        println!(
            "block_norms over {} ranks: {got:.12} (serial {want:.12}, gathered {gathered:.12})",
            ctl.size()
        );
        anyhow::ensure!((got - want).abs() <= 1e-12 * want, "norm {got} differs from {want}");
        anyhow::ensure!(
            (gathered - want).abs() <= 1e-12 * want,
            "gathered norm {gathered} differs"
        );
        println!("ok");
        Ok(())
    })
}
