//! The plain record of one block transfer ([`Transfer`]), a leaf module:
//! plan summaries and descriptors name it without depending on the
//! transfer machinery or on the tensor types.

use serde::{Deserialize, Serialize};
use uni20_persist::ObjectId;

/// One block moving from its owner to the rank that needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The object.
    pub id: ObjectId,
    /// Sending rank (the owner).
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Payload bytes.
    pub bytes: u64,
}
