//! Operator sums ([`OpSum`]) compiled into exact, compressed MPOs
//! ([`LocalMpo`]).
//!
//! A term is a coefficient times a product of named site operators
//! (`0.5 * Sp_3 Sm_7`). [`OpSum::to_mpo`] first brings each term into a
//! product of one local operator per site: the operators are sorted by
//! site (a stable sort; swapping two fermionic operators on different
//! sites gives a minus sign), operators on one site are multiplied in the
//! order written, and the Jordan-Wigner string is inserted (a site gets the
//! site's `F` on the right of its operator when an odd number of fermionic
//! operators stand further right). Then, at every bond, the terms that
//! cross it give a coefficient matrix `M[left string, right string]`
//! whose singular value decomposition (per charge block, when the sites
//! carry charges) gives the bond's channels: the construction of ITensor's
//! `OpSum -> MPO` and of the finite-state-automaton MPOs of TeNPy, with the
//! bond dimension `2 + rank(M)`. Standard models come out at their minimal
//! bond dimensions (Heisenberg 5, transverse-field Ising 3, Hubbard 6), an
//! exponentially decaying coupling at a bond dimension independent of the
//! length, and a power law to the tolerance [`MpoOptions::cutoff`].
//!
//! The bond states are, in order: `0` = the term is complete (identity to
//! the right), `1 ..= K` = the channels, `K + 1` = no operator placed yet
//! (identity to the left). The first bond has only the last kind and the
//! final bond only the first, so the boundary vectors are `[1.0]`.
//!
//! | file | part |
//! |---|---|
//! | `mod.rs` | `OpTerm`, `OpSum`, `MpoOptions`, `OpSum::to_mpo`, the common symmetry of the sites |
//! | `normal.rs` | interned local operators (`OpTable`) and the normal form of a term: site order, fermion signs, Jordan-Wigner strings, charges |
//! | `compress.rs` | the bond-by-bond SVD compression into channels and the site tensors |
//! | `local_mpo.rs` | `LocalMpo`: bond dimensions and charges, the dense matrix, distribution as an `Mpo` |

mod compress;
mod local_mpo;
mod normal;
#[cfg(test)]
mod tests;

use uni20_dispatch::C64;
use uni20_dist::symmetry::Symmetry;

use crate::error::TnError;
use crate::mpo::check_sites;
use crate::sites::Site;

use compress::build;
pub use local_mpo::LocalMpo;
use normal::{normalize, OpTable};

/// One term: `coeff * ops[0] ops[1] ...` (operator name, site index), in
/// the order written.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTerm {
    /// The coefficient.
    pub coeff: C64,
    /// The operators and their sites, as written.
    pub ops: Vec<(String, usize)>,
}

/// A sum of products of site operators: a Hamiltonian, or any operator to
/// measure.
///
/// ```
/// use uni20_tn::{Conserve, OpSum, Site};
/// // The open Heisenberg chain of 6 spins 1/2.
/// let sites = vec![Site::spin(1, Conserve::Sz).unwrap(); 6];
/// let mut h = OpSum::new();
/// for i in 0..5 {
///     h.add(0.5, &[("Sp", i), ("Sm", i + 1)]);
///     h.add(0.5, &[("Sm", i), ("Sp", i + 1)]);
///     h.add(1.0, &[("Sz", i), ("Sz", i + 1)]);
/// }
/// let mpo = h.to_mpo(&sites, &Default::default()).unwrap();
/// assert_eq!(mpo.max_bond(), 5);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpSum {
    terms: Vec<OpTerm>,
}

/// Options of [`OpSum::to_mpo`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MpoOptions {
    /// Relative cutoff of the bond compression: at every bond, singular
    /// values of the coefficient matrix at or below `cutoff` times its
    /// largest are dropped (finite, `>= 0`). `1e-13` keeps the MPO exact to
    /// rounding; a larger value compresses power-law couplings.
    pub cutoff: f64,
}

impl Default for MpoOptions {
    fn default() -> Self {
        MpoOptions { cutoff: 1e-13 }
    }
}

impl OpSum {
    /// An empty sum.
    pub fn new() -> OpSum {
        OpSum::default()
    }

    /// Adds `coeff * ops[0] ops[1] ...`; `ops` are (operator name, site)
    /// pairs in the order of the product. Names and sites are checked by
    /// [`OpSum::to_mpo`].
    pub fn add(&mut self, coeff: impl Into<C64>, ops: &[(&str, usize)]) -> &mut OpSum {
        self.terms.push(OpTerm {
            coeff: coeff.into(),
            ops: ops.iter().map(|&(n, i)| (n.to_string(), i)).collect(),
        });
        self
    }

    /// The terms, in the order added.
    pub fn terms(&self) -> &[OpTerm] {
        &self.terms
    }

    /// Compiles the sum into an MPO on `sites` (one site type per site).
    ///
    /// # Errors
    /// [`TnError::UnknownOperator`]; [`TnError::BadTerm`] for a term with
    /// no operators, a site beyond the chain, a non-finite coefficient, an
    /// odd number of fermionic operators, a fermionic operator whose string
    /// crosses a site without `F`, or (on charged sites) a term that
    /// changes the total charge; [`TnError::ChargeMismatch`] for an
    /// operator without a definite charge; [`TnError::InvalidOption`] for a
    /// bad cutoff or chain length; [`TnError::Krylov`] if a compression SVD
    /// fails.
    pub fn to_mpo(&self, sites: &[Site], opts: &MpoOptions) -> Result<LocalMpo, TnError> {
        check_sites(sites.len())?;
        if !(opts.cutoff.is_finite() && opts.cutoff >= 0.0) {
            return Err(TnError::InvalidOption {
                name: "cutoff",
                value: opts.cutoff.to_string(),
                expected: "finite and >= 0",
            });
        }
        let symmetry = common_symmetry(sites)?;
        let mut table = OpTable::new(sites);
        let mut terms = Vec::with_capacity(self.terms.len());
        for (k, t) in self.terms.iter().enumerate() {
            if let Some(n) = normalize(k, t, sites, &mut table, symmetry.as_ref())? {
                terms.push(n);
            }
        }
        build(sites, &table, &terms, opts, symmetry.as_ref())
    }
}

/// The group shared by all sites, or `None` when no site has charges.
fn common_symmetry(sites: &[Site]) -> Result<Option<Symmetry>, TnError> {
    let with: Vec<_> = sites.iter().filter_map(|s| s.charges()).collect();
    if with.is_empty() {
        return Ok(None);
    }
    if with.len() != sites.len() {
        return Err(TnError::InvalidOption {
            name: "site charges",
            value: "some sites with charges, some without".into(),
            expected: "all sites with charges of one group, or none",
        });
    }
    let g = with[0].0.clone();
    if let Some((h, _)) = with.iter().find(|(h, _)| **h != g) {
        return Err(uni20_dist::symmetry::SymmetryError::GroupMismatch {
            what: "the sites of an MPO".into(),
            first: g,
            second: (*h).clone(),
        }
        .into());
    }
    Ok(Some(g))
}
