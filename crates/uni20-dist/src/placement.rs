//! Which ranks own the blocks of a new tensor ([`Placement`]) and the
//! round-robin assignment of blocks to them. Pure: the controller only
//! supplies the rank lists.

use uni20_worker::Controller;

use crate::error::DistError;

/// Which ranks own the blocks of a new tensor (round-robin over them).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// The compute workers ([`Controller::compute_ranks`]).
    Workers,
    /// The storage ranks ([`Controller::storage_ranks`]); an error if the
    /// universe has none.
    Storage,
    /// Explicit ranks (the root only when it is alone).
    Ranks(Vec<usize>),
}

impl Placement {
    /// The ranks this placement names in the universe of `ctl`.
    ///
    /// # Errors
    /// [`DistError::NoRanks`] if it names no rank; [`DistError::BadRank`] for
    /// a rank outside the universe, or the root in a universe of more than
    /// one rank (the root never owns blocks then).
    pub fn ranks(&self, ctl: &Controller<'_>) -> Result<Vec<usize>, DistError> {
        let ranks = match self {
            Placement::Workers => ctl.compute_ranks(),
            Placement::Storage => ctl.storage_ranks(),
            Placement::Ranks(r) => r.clone(),
        };
        if ranks.is_empty() {
            return Err(DistError::NoRanks(format!("placement {self:?}")));
        }
        if let Some(&bad) = ranks.iter().find(|&&r| r >= ctl.size() || (r == 0 && ctl.size() > 1)) {
            return Err(DistError::BadRank {
                rank: bad,
                size: ctl.size(),
                what: format!("placement {self:?}: cannot own blocks"),
            });
        }
        Ok(ranks)
    }

    /// Owner of each of `n` blocks: block `b` goes to `ranks[b % ranks.len()]`.
    ///
    /// # Errors
    /// As [`Placement::ranks`].
    pub fn owners(&self, ctl: &Controller<'_>, n: usize) -> Result<Vec<usize>, DistError> {
        let ranks = self.ranks(ctl)?;
        Ok((0..n).map(|b| ranks[b % ranks.len()]).collect())
    }
}
