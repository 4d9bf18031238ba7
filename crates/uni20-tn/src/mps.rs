//! Matrix-product states ([`Mps`]) on distributed tensors: site `i` is
//! `M_i[a, s, b]` (left bond, physical index, right bond), the outer bonds
//! of extent 1. [`Mps::random`] builds a seeded random state on the workers
//! and right-normalises it by LQ decompositions; [`Mps::add_to_checkpoint`]
//! and [`Mps::from_checkpoint`] store and rebuild the site tensors by
//! manifest, so a checkpoint costs no copy of the data.

use uni20_dispatch::DType;
use uni20_dist::decomp::QrOptions;
use uni20_dist::{contract, lq, norm, random, scale, Checkpoint, DistTensor};
use uni20_worker::Controller;

use crate::error::TnError;

/// Name of site `i`'s tensor in a checkpoint.
pub fn site_name(i: usize) -> String {
    format!("mps.{i}")
}

/// A seed for site `i` derived from the state's seed (SplitMix64 of both),
/// so neighbouring sites get unrelated random tensors.
pub(crate) fn site_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A finite matrix-product state of distributed tensors.
///
/// Site `i` is `M_i[a, s, b]` of shape `(chi_i, d_i, chi_(i+1))` with
/// `chi_0 = chi_L = 1`. The type does not track a canonical form; the DMRG
/// sweep documents the form it expects and leaves
/// ([`crate::Dmrg`]).
#[derive(Clone, Debug)]
pub struct Mps {
    sites: Vec<DistTensor>,
}

impl Mps {
    /// An MPS of the given site tensors, checked.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for an empty chain; [`TnError::Shape`] if a
    /// tensor is not of rank 3, neighbouring bonds differ, or an outer bond
    /// is not 1.
    pub fn from_sites(sites: Vec<DistTensor>) -> Result<Mps, TnError> {
        if sites.is_empty() {
            return Err(TnError::InvalidOption {
                name: "MPS length",
                value: "0".into(),
                expected: "at least one site",
            });
        }
        let n = sites.len();
        for (i, m) in sites.iter().enumerate() {
            let s = m.shape();
            let left = if i == 0 {
                1
            } else {
                sites[i - 1].shape().get(2).copied().unwrap_or(0)
            };
            let ok = s.len() == 3 && s[0] == left && (i + 1 < n || s[2] == 1);
            if !ok {
                let right = if i + 1 == n { 1 } else { s.get(2).copied().unwrap_or(0) };
                return Err(TnError::Shape {
                    what: format!("MPS site {i} (M[a, s, b])"),
                    expected: vec![left, s.get(1).copied().unwrap_or(0), right],
                    got: s.to_vec(),
                });
            }
        }
        Ok(Mps { sites })
    }

    /// A random state of `len` sites of local dimension `d`, right-normalised
    /// (`sum_(s,b) M_i[a,s,b] conj(M_i[a',s,b]) = delta(a,a')` for every
    /// `i >= 1`) and of norm 1, with bond dimensions
    /// `chi_i = min(bond, d^i, d^(len-i))`, f64, blocks of `block`.
    ///
    /// The site tensors are made by the workers with [`random`] (uniform on
    /// `[-1, 1)`, site `i` seeded by a SplitMix64 mix of `seed` and `i`), so
    /// the state depends only on `(len, d, bond, seed)`, not on the block
    /// size or the number of ranks. They are then right-normalised from the
    /// right by [`lq`] (`M_i = L Q`, `Q` kept, `L` absorbed into `M_(i-1)`,
    /// which is then divided by its norm), so every site tensor keeps norm
    /// `O(1)` as the state is built, whatever its length, and the first site
    /// ends with norm 1.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for `len == 0` or above
    /// [`crate::MAX_SITES`], `d == 0`, `bond == 0` or `block == 0`; the
    /// errors of the distributed operations.
    pub fn random(
        ctl: &Controller<'_>,
        len: usize,
        d: usize,
        bond: usize,
        block: usize,
        seed: u64,
    ) -> Result<Mps, TnError> {
        crate::mpo::check_sites(len)?;
        for (name, v) in [("local dimension", d), ("initial bond", bond), ("block", block)] {
            if v == 0 {
                return Err(TnError::InvalidOption {
                    name,
                    value: "0".into(),
                    expected: "at least 1",
                });
            }
        }
        let cap = |k: usize| -> usize {
            // min(bond, d^k), without overflow.
            let mut x = 1usize;
            for _ in 0..k {
                x = x.saturating_mul(d);
                if x >= bond {
                    return bond;
                }
            }
            x.min(bond)
        };
        let chi: Vec<usize> = (0..=len).map(|i| cap(i).min(cap(len - i))).collect();
        let mut sites = Vec::with_capacity(len);
        for i in 0..len {
            sites.push(random(
                ctl,
                &[chi[i], d, chi[i + 1]],
                DType::F64,
                block,
                site_seed(seed, i),
            )?);
        }
        right_normalize(ctl, &mut sites, block)?;
        Mps::from_sites(sites)
    }

    /// Number of sites.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// Always false: an MPS has at least one site.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The site tensors.
    pub fn sites(&self) -> &[DistTensor] {
        &self.sites
    }

    /// Site `i`'s tensor.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn site(&self, i: usize) -> &DistTensor {
        &self.sites[i]
    }

    /// Replaces site `i`'s tensor (the caller keeps the bonds consistent;
    /// [`Mps::from_sites`] checks a whole chain).
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn set_site(&mut self, i: usize, m: DistTensor) {
        self.sites[i] = m;
    }

    /// The bond dimensions `chi_0 ..= chi_L` (`len() + 1` values, the outer
    /// ones 1).
    pub fn bond_dims(&self) -> Vec<usize> {
        std::iter::once(1)
            .chain(self.sites.iter().map(|m| m.shape()[2]))
            .collect()
    }

    /// The largest bond dimension.
    pub fn max_bond(&self) -> usize {
        self.bond_dims().into_iter().max().unwrap_or(1)
    }

    /// Adds every site tensor to `cp` under [`site_name`]`(i)`, waiting for
    /// each to be computed (only the manifests are stored: the blocks stay
    /// where they are and the checkpoint keeps them).
    ///
    /// # Errors
    /// As [`Checkpoint::add`].
    pub fn add_to_checkpoint(&self, ctl: &Controller<'_>, cp: &mut Checkpoint) -> Result<(), TnError> {
        for (i, m) in self.sites.iter().enumerate() {
            cp.add(ctl, &site_name(i), m)?;
        }
        Ok(())
    }

    /// Rebuilds the `len` sites stored by [`Mps::add_to_checkpoint`].
    ///
    /// # Errors
    /// [`TnError::BadCheckpoint`] if a site is missing or the checkpoint
    /// holds more sites than `len`; the checks of [`Mps::from_sites`]; the
    /// errors of [`Checkpoint::tensor`].
    pub fn from_checkpoint(ctl: &Controller<'_>, cp: &Checkpoint, len: usize) -> Result<Mps, TnError> {
        let stored = cp.tensors.iter().filter(|(n, _)| n.starts_with("mps.")).count();
        if stored != len {
            return Err(TnError::BadCheckpoint(format!(
                "it holds {stored} MPS site tensors, expected {len} (a chain of another length?)"
            )));
        }
        let mut sites = Vec::with_capacity(len);
        for i in 0..len {
            let name = site_name(i);
            if !cp.tensors.iter().any(|(n, _)| *n == name) {
                return Err(TnError::BadCheckpoint(format!("site tensor `{name}` is missing")));
            }
            sites.push(cp.tensor(ctl, &name)?);
        }
        Mps::from_sites(sites)
    }
}

/// Brings `sites` into right-canonical form with the norm in site 0, which
/// is normalised: from the right, `M_i = L Q` by [`lq`] (`Q` kept, new bonds
/// cut into blocks of `block`), `L` absorbed into `M_(i-1)` and the result
/// divided by its norm at once (the norm of the part built so far is the
/// product of the `L` factors' norms, which grows geometrically with the
/// length: at bond 8 it overflowed f64 near 1000 sites when divided out only
/// at the end).
pub(crate) fn right_normalize(ctl: &Controller<'_>, sites: &mut [DistTensor], block: usize) -> Result<(), TnError> {
    let opts = QrOptions {
        k_block: Some(block),
        ..QrOptions::default()
    };
    for i in (1..sites.len()).rev() {
        let f = lq(ctl, &sites[i], "a|sb", &opts)?;
        sites[i] = f.q;
        let absorbed = contract(ctl, "xsa,ak->xsk", &sites[i - 1], &f.l)?;
        let n = norm(ctl, &absorbed)?;
        sites[i - 1] = scale(ctl, 1.0 / n, &absorbed)?;
    }
    if sites.len() == 1 {
        let n0 = norm(ctl, &sites[0])?;
        sites[0] = scale(ctl, 1.0 / n0, &sites[0])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::site_seed;

    #[test]
    fn site_seeds_differ() {
        let s: Vec<u64> = (0..64).map(|i| site_seed(7, i)).collect();
        let mut u = s.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), s.len());
        assert_ne!(site_seed(7, 0), site_seed(8, 0));
    }
}
