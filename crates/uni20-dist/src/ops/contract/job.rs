//! Submission of a validated contraction: the deferred job that plans it
//! from its operands' manifests once they are ready (in program order),
//! submits `uni20.contract.v1` without blocking, and turns the replies into
//! the output's block map.

use uni20_worker::Controller;

use super::command::ContractV1;
use super::plan::{plan, Validated};
use crate::error::DistError;
use crate::ops::deferred::{submit_filling, Input, OpJob, Output};
use crate::tensor::{collect_item_refs, DistTensor, Manifest};

/// Queues the contraction `v` of `operands` (and `c` when `v.use_c`) and
/// returns its pending output. `notes` are `(input index, note)` of inputs
/// reblocked for it (index `operands.len()` is C_in); each note gets the
/// bytes its reblock moved in the summary.
pub(crate) fn submit_contraction(
    ctl: &Controller<'_>,
    v: Validated,
    operands: &[&DistTensor],
    c: Option<&DistTensor>,
    notes: Vec<(usize, String)>,
) -> DistTensor {
    let (out, write) = DistTensor::pending(ctl, v.out.clone());
    let n_inputs = operands.len();
    let mut inputs: Vec<Input> = operands.iter().map(|t| Input::of(t)).collect();
    if let Some(c) = c.filter(|_| v.use_c) {
        inputs.push(Input::of(c));
    }
    let output = Output {
        tensor: out.clone(),
        write,
    };
    let job = OpJob::new(
        inputs,
        vec![output],
        Box::new(move |ctl, manifests: Vec<Manifest>, outputs, keep| {
            let refs: Vec<&Manifest> = manifests.iter().take(n_inputs).collect();
            let p = plan(&v, &ctl.compute_ranks(), &refs, manifests.get(n_inputs));
            let n = p.out_blocking.num_blocks();
            let items: Vec<usize> = p.descriptor.items.iter().map(|i| i.out_block).collect();
            let mut summary = p.summary();
            for (i, note) in notes {
                let moved = keep.get(i).and_then(|t| t.plan_summary()).map_or(0, |s| s.bytes_moved);
                summary.notes.push(format!("{note} ({moved} bytes moved)"));
            }
            submit_filling::<ContractV1>(
                ctl,
                &p.descriptor,
                &p.participants,
                outputs,
                keep,
                summary,
                move |replies| Ok(vec![collect_item_refs(replies, &items, n)?]),
            );
            Ok::<(), DistError>(())
        }),
    );
    ctl.defer(Box::new(job));
    out
}
