//! Plan agreement (design note `distributed_kernel_dispatch.md`, not in this
//! repository, "Collective acceptance"): before a collective operation moves any payload, every rank
//! exchanges a digest of the plan it computed, one 64-bit FNV-1a value per
//! named plan field, in one all-gather. Identical digests commit the plan;
//! any difference is a terminal [`Disagreement`] that every rank computes
//! from the same gathered list, naming the operation, the op id, the groups
//! of ranks with identical plans and the first differing field.

use serde::{Deserialize, Serialize};

use crate::diag::{Disagreement, JobError};
use crate::envelope::encode;

use super::SpmdContext;

/// 64-bit FNV-1a of `bytes` (the digest of one plan field).
pub fn digest_bytes(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The digest of a plan field: FNV-1a of its postcard encoding.
pub fn plan_digest<T: Serialize + ?Sized>(value: &T) -> u64 {
    // postcard cannot fail on an in-memory `Vec` except for a sequence
    // of unknown length, which no plan type has.
    digest_bytes(&postcard::to_stdvec(value).unwrap_or_default())
}

/// What one rank says about the operation it is about to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PlanDigests {
    pub(crate) op_id: u64,
    pub(crate) operation: String,
    pub(crate) fields: Vec<(String, u64)>,
}

/// The disagreement among `all` (indexed by rank), if any.
pub(crate) fn disagreement(all: &[PlanDigests]) -> Option<Disagreement> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (rank, d) in all.iter().enumerate() {
        match groups.iter_mut().find(|(first, _)| all[*first] == *d) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((rank, vec![rank])),
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let (a, b) = (&all[groups[0].0], &all[groups[1].0]);
    let field = if a.operation != b.operation {
        Some("operation".to_string())
    } else if a.op_id != b.op_id {
        Some("op_id".to_string())
    } else {
        a.fields
            .iter()
            .zip(&b.fields)
            .find(|(x, y)| x != y)
            .map(|(x, y)| {
                if x.0 == y.0 {
                    x.0.clone()
                } else {
                    format!("{} / {}", x.0, y.0)
                }
            })
            .or_else(|| (a.fields.len() != b.fields.len()).then(|| "number of plan fields".to_string()))
    };
    Some(Disagreement {
        operation: a.operation.clone(),
        op_id: a.op_id,
        groups: groups.into_iter().map(|(_, ranks)| ranks).collect(),
        field,
    })
}

impl<'a> SpmdContext<'a> {
    /// Agrees on the plan of the next collective operation: every rank
    /// passes the operation's name and its plan as named field digests
    /// ([`plan_digest`]); returns the operation's op id once every rank
    /// passed the same. Collective: every rank must call it.
    ///
    /// # Errors
    /// [`JobError::Disagreement`] on every rank when the plans differ (the
    /// universe stops); the errors of [`SpmdContext::all_gather`].
    pub fn agree(&self, operation: &str, fields: &[(&str, u64)]) -> Result<u64, JobError> {
        self.check()?;
        let op_id = self.next_op.get();
        self.next_op.set(op_id + 1);
        let mine = PlanDigests {
            op_id,
            operation: operation.to_string(),
            fields: fields.iter().map(|(n, d)| (n.to_string(), *d)).collect(),
        };
        let all = self.all_gather_bytes("agree", encode(&mine))?;
        let all: Vec<PlanDigests> = all
            .iter()
            .enumerate()
            .map(|(r, b)| {
                crate::envelope::decode_exact(b, "plan digests").map_err(|e| {
                    self.fail(JobError::Protocol(format!(
                        "rank {r} sent undecodable plan digests: {e}"
                    )))
                })
            })
            .collect::<Result<_, _>>()?;
        match disagreement(&all) {
            None => Ok(op_id),
            Some(d) => {
                tracing::warn!(rank = self.rank(), "{d}");
                Err(self.fail(JobError::Disagreement(Box::new(d))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(op_id: u64, operation: &str, fields: &[(&str, u64)]) -> PlanDigests {
        PlanDigests {
            op_id,
            operation: operation.into(),
            fields: fields.iter().map(|(n, d)| (n.to_string(), *d)).collect(),
        }
    }

    #[test]
    fn fnv1a_reference_values() {
        assert_eq!(digest_bytes(b""), 0xcbf29ce484222325);
        assert_eq!(digest_bytes(b"a"), 0xaf63dc4c8601ec8c);
        assert_ne!(plan_digest(&[2usize, 2]), plan_digest(&[2usize, 3]));
    }

    #[test]
    fn equal_plans_agree() {
        let p = plan(3, "uni20.contract.v1", &[("spec", 1), ("items", 2)]);
        assert_eq!(disagreement(&[p.clone(), p.clone(), p]), None);
    }

    #[test]
    fn the_first_differing_field_and_the_groups_are_named() {
        let a = plan(3, "scatter", &[("shape", 1), ("blocking", 2), ("owners", 3)]);
        let b = plan(3, "scatter", &[("shape", 1), ("blocking", 9), ("owners", 8)]);
        let d = disagreement(&[a.clone(), b, a]).unwrap();
        assert_eq!(d.groups, vec![vec![0, 2], vec![1]]);
        assert_eq!(d.field.as_deref(), Some("blocking"));
        assert_eq!(
            d.to_string(),
            "plan disagreement in `scatter` at op_id 3: ranks 0, 2 computed one plan, rank 1 another; \
             first differing plan field: `blocking`"
        );
    }

    #[test]
    fn ranks_at_different_operations_are_named() {
        let a = plan(4, "scatter", &[]);
        let b = plan(4, "contract", &[]);
        let c = plan(5, "scatter", &[]);
        assert_eq!(
            disagreement(&[a.clone(), b]).unwrap().field.as_deref(),
            Some("operation")
        );
        let d = disagreement(&[a, c.clone(), c]).unwrap();
        assert_eq!(d.field.as_deref(), Some("op_id"));
        assert_eq!(d.groups, vec![vec![0], vec![1, 2]]);
    }
}
