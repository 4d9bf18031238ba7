//! Collectives of an SPMD universe over the point-to-point [`Transport`]:
//! gather, broadcast, all-gather, barrier, reduce and all-reduce of
//! postcard-encodable values, identical on both transports.
//!
//! Every collective message travels with [`TAG_COLL`] in a [`CollFrame`]
//! carrying the collective's sequence number (the count of collectives this
//! rank has entered) and its kind, so ranks that call different collectives
//! (or a different number of them) are told so instead of exchanging
//! mismatched payloads: the receiving rank stops the universe with a
//! [`JobError::Protocol`] naming both. Algorithms are linear and go through
//! rank 0: gather sends to the root; broadcast posts from the root to every
//! rank; all-gather is a gather to rank 0 and a broadcast of the list.
//! Reductions fold the gathered values in rank order, so every rank computes
//! bit-identical results (floating-point sums included). Every wait is a
//! transport wait: it fails at once when the universe is aborted or the peer
//! has left.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::diag::JobError;
use crate::envelope::{decode_exact, encode};
use crate::transport::TAG_COLL;

use super::SpmdContext;

/// One collective message.
#[derive(Debug, Serialize, Deserialize)]
struct CollFrame {
    /// Sequence number of the collective on the sending rank.
    seq: u64,
    /// Kind of the collective and step (e.g. `all_gather/bcast`).
    kind: String,
    /// The step's payload.
    payload: ByteBuf,
}

/// The operator of [`SpmdContext::all_reduce_num`] and [`SpmdContext::reduce_num`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveOp {
    /// Sum, in rank order.
    Sum,
    /// Product, in rank order.
    Prod,
    /// Smallest value (the first one for floating-point ties and NaN).
    Min,
    /// Largest value (the first one for floating-point ties and NaN).
    Max,
}

/// Numbers [`CollectiveOp`] applies to.
pub trait Number: Copy + PartialOrd + Serialize + DeserializeOwned {
    /// `a + b`.
    fn add(self, other: Self) -> Self;
    /// `a * b`.
    fn mul(self, other: Self) -> Self;
}

macro_rules! number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn add(self, other: Self) -> Self {
                self + other
            }
            fn mul(self, other: Self) -> Self {
                self * other
            }
        }
    )*};
}
number!(i32, i64, u32, u64, usize, f32, f64);

impl CollectiveOp {
    fn apply<N: Number>(self, a: N, b: N) -> N {
        match self {
            CollectiveOp::Sum => a.add(b),
            CollectiveOp::Prod => a.mul(b),
            CollectiveOp::Min => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            CollectiveOp::Max => {
                if b > a {
                    b
                } else {
                    a
                }
            }
        }
    }
}

impl<'a> SpmdContext<'a> {
    /// Starts the next collective: checks for an earlier failure and returns
    /// its sequence number.
    fn enter(&self) -> Result<u64, JobError> {
        self.check()?;
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        Ok(seq)
    }

    fn frame(seq: u64, kind: &str, payload: Vec<u8>) -> Arc<[u8]> {
        encode(&CollFrame {
            seq,
            kind: kind.to_string(),
            payload: ByteBuf::from(payload),
        })
        .into()
    }

    fn post_frame(&self, dest: usize, frame: Arc<[u8]>) -> Result<(), JobError> {
        self.transport
            .post(dest, TAG_COLL, frame)
            .map_err(|e| self.fail(JobError::Transport(e)))
    }

    /// Receives the frame of collective `seq`/`kind` from `src`.
    fn recv_frame(&self, src: usize, seq: u64, kind: &str) -> Result<Vec<u8>, JobError> {
        let bytes = self
            .transport
            .recv(src, TAG_COLL)
            .map_err(|e| self.fail(JobError::Transport(e)))?;
        let frame: CollFrame = decode_exact(&bytes, "collective frame").map_err(|e| {
            self.fail(JobError::Protocol(format!(
                "rank {}: undecodable collective frame from rank {src}: {e}",
                self.rank()
            )))
        })?;
        if frame.seq != seq || frame.kind != kind {
            return Err(self.fail(JobError::Protocol(format!(
                "collective mismatch: rank {src} is in collective #{} (`{}`) while rank {} is in collective #{seq} \
                 (`{kind}`): every rank must call the same collectives in the same order",
                frame.seq,
                frame.kind,
                self.rank()
            ))));
        }
        Ok(frame.payload.into_vec())
    }

    /// Gathers one byte string per rank on `root` (in rank order there,
    /// `None` elsewhere).
    fn gather_step(&self, root: usize, seq: u64, kind: &str, mine: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, JobError> {
        if self.rank() != root {
            self.post_frame(root, Self::frame(seq, kind, mine))?;
            return Ok(None);
        }
        let mut mine = Some(mine);
        let mut all = Vec::with_capacity(self.size());
        for r in 0..self.size() {
            if r == root {
                all.push(mine.take().unwrap_or_default());
            } else {
                all.push(self.recv_frame(r, seq, kind)?);
            }
        }
        Ok(Some(all))
    }

    /// Broadcasts `bytes` (used on `root` only) from `root` to every rank.
    fn bcast_step(&self, root: usize, seq: u64, kind: &str, bytes: Vec<u8>) -> Result<Vec<u8>, JobError> {
        if self.rank() != root {
            return self.recv_frame(root, seq, kind);
        }
        if self.size() > 1 {
            let frame = Self::frame(seq, kind, bytes.clone());
            for r in (0..self.size()).filter(|&r| r != root) {
                self.post_frame(r, frame.clone())?;
            }
        }
        Ok(bytes)
    }

    /// Every rank's byte string, in rank order, on every rank.
    pub(crate) fn all_gather_bytes(&self, kind: &str, mine: Vec<u8>) -> Result<Vec<Vec<u8>>, JobError> {
        let seq = self.enter()?;
        let gathered = self.gather_step(0, seq, &format!("{kind}/gather"), mine)?;
        let list = match gathered {
            Some(all) => encode(&all.into_iter().map(ByteBuf::from).collect::<Vec<_>>()),
            None => Vec::new(),
        };
        let list = self.bcast_step(0, seq, &format!("{kind}/bcast"), list)?;
        let all: Vec<ByteBuf> = decode_exact(&list, "all-gathered list")
            .map_err(|e| self.fail(JobError::Protocol(format!("undecodable all-gathered list: {e}"))))?;
        Ok(all.into_iter().map(ByteBuf::into_vec).collect())
    }

    fn decode_from<T: DeserializeOwned>(&self, bytes: &[u8], src: usize, what: &str) -> Result<T, JobError> {
        decode_exact(bytes, "collective value").map_err(|e| {
            self.fail(JobError::Protocol(format!(
                "{what}: the value of rank {src} does not decode as this rank's type: {e}"
            )))
        })
    }

    /// Waits until every rank has entered the barrier.
    ///
    /// # Errors
    /// [`JobError::Transport`] if the universe was aborted or a rank left;
    /// [`JobError::Protocol`] if the ranks are in different collectives;
    /// [`JobError::Stopped`] after an earlier failure.
    pub fn barrier(&self) -> Result<(), JobError> {
        self.all_gather_bytes("barrier", Vec::new()).map(drop)
    }

    /// Broadcasts `value` from `root`: on return every rank's `value` equals
    /// root's (the values other ranks pass in are overwritten; MPI's
    /// `broadcast_into`).
    ///
    /// # Errors
    /// As [`SpmdContext::barrier`]; [`JobError::Protocol`] if root's value
    /// does not decode as this rank's type, or for `root >= size`.
    pub fn broadcast<T: Serialize + DeserializeOwned>(&self, root: usize, value: &mut T) -> Result<(), JobError> {
        self.check_root(root)?;
        let seq = self.enter()?;
        let bytes = if self.rank() == root { encode(value) } else { Vec::new() };
        let got = self.bcast_step(root, seq, "broadcast", bytes)?;
        if self.rank() != root {
            *value = self.decode_from(&got, root, "broadcast")?;
        }
        Ok(())
    }

    /// Gathers every rank's `value` on `root`: `Some` (rank order) there,
    /// `None` elsewhere.
    ///
    /// # Errors
    /// As [`SpmdContext::broadcast`].
    pub fn gather<T: Serialize + DeserializeOwned>(&self, root: usize, value: &T) -> Result<Option<Vec<T>>, JobError> {
        self.check_root(root)?;
        let seq = self.enter()?;
        match self.gather_step(root, seq, "gather", encode(value))? {
            None => Ok(None),
            Some(all) => all
                .iter()
                .enumerate()
                .map(|(r, b)| self.decode_from(b, r, "gather"))
                .collect::<Result<Vec<T>, _>>()
                .map(Some),
        }
    }

    /// Every rank's `value`, in rank order, on every rank.
    ///
    /// # Errors
    /// As [`SpmdContext::barrier`]; [`JobError::Protocol`] if a value does
    /// not decode as this rank's type.
    pub fn all_gather<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>, JobError> {
        let all = self.all_gather_bytes("all_gather", encode(value))?;
        all.iter()
            .enumerate()
            .map(|(r, b)| self.decode_from(b, r, "all_gather"))
            .collect()
    }

    /// `op(...op(op(v0, v1), v2)..., v_{n-1})` over every rank's value, on
    /// `root` (`None` elsewhere).
    ///
    /// # Errors
    /// As [`SpmdContext::gather`].
    pub fn reduce<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: T,
        op: impl Fn(T, T) -> T,
    ) -> Result<Option<T>, JobError> {
        Ok(self.gather(root, &value)?.and_then(|all| all.into_iter().reduce(op)))
    }

    /// `op(...op(op(v0, v1), v2)..., v_{n-1})` over every rank's value, in
    /// rank order: the identical result on every rank.
    ///
    /// # Errors
    /// As [`SpmdContext::all_gather`].
    pub fn all_reduce<T: Serialize + DeserializeOwned>(&self, value: T, op: impl Fn(T, T) -> T) -> Result<T, JobError> {
        let all = self.all_gather(&value)?;
        // At least this rank's value is in the list.
        Ok(all.into_iter().reduce(op).unwrap_or(value))
    }

    /// [`SpmdContext::all_reduce`] of a number with a [`CollectiveOp`].
    ///
    /// # Errors
    /// As [`SpmdContext::all_gather`].
    pub fn all_reduce_num<N: Number>(&self, value: N, op: CollectiveOp) -> Result<N, JobError> {
        self.all_reduce(value, |a, b| op.apply(a, b))
    }

    /// [`SpmdContext::reduce`] of a number with a [`CollectiveOp`].
    ///
    /// # Errors
    /// As [`SpmdContext::gather`].
    pub fn reduce_num<N: Number>(&self, root: usize, value: N, op: CollectiveOp) -> Result<Option<N>, JobError> {
        self.reduce(root, value, |a, b| op.apply(a, b))
    }

    fn check_root(&self, root: usize) -> Result<(), JobError> {
        if root < self.size() {
            return Ok(());
        }
        Err(self.fail(JobError::Protocol(format!(
            "collective root {root} is not a rank of this universe of {} ranks",
            self.size()
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_ops_fold_in_order() {
        assert_eq!(CollectiveOp::Sum.apply(2, 3), 5);
        assert_eq!(CollectiveOp::Prod.apply(2.0, 3.5), 7.0);
        assert_eq!(CollectiveOp::Min.apply(-1i64, 4), -1);
        assert_eq!(CollectiveOp::Max.apply(7u64, 4), 7);
        // NaN never replaces the value on the left.
        assert_eq!(CollectiveOp::Max.apply(1.0f64, f64::NAN), 1.0);
    }
}
