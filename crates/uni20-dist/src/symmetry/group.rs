//! Abelian symmetry groups and their charges: the runtime descriptor
//! [`Symmetry`] (a product of U(1) and Z_n factors, sent on the wire with
//! every symmetric tensor's metadata) and [`Charge`] (one component per
//! factor). Pure values, no ranks.
//!
//! A charge of a product group is the tuple of its factors' charges: U(1)
//! components are any integer, Z_n components are kept in `0..n`. Fusion is
//! component-wise addition (modulo n for Z_n), the dual is the negation,
//! and charges are totally ordered lexicographically by component, so that
//! the sectors of a leg have one canonical order. The trivial group (no
//! factors, one charge `()`) describes a dense tensor.
//!
//! Non-abelian groups (SU(2)) would add multiplicities and fusion trees; the
//! types here keep the group behind [`Symmetry`] and the sector behind
//! [`Charge`], so such a group would add variants, not change callers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a charge, sector list or leg is not valid for its symmetry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SymmetryError {
    /// A charge has a different number of components than the group has
    /// factors.
    #[error("charge {charge} has {got} components; the symmetry {symmetry} has {expected} factors")]
    ComponentCount {
        /// The charge given.
        charge: Charge,
        /// Components it has.
        got: usize,
        /// Factors of the group.
        expected: usize,
        /// The group.
        symmetry: Symmetry,
    },
    /// A Z_n component lies outside `0..n`.
    #[error("component {component} of charge {charge} is {value}, outside 0..{modulus} of its Z_{modulus} factor")]
    OutOfRange {
        /// The charge given.
        charge: Charge,
        /// Which component.
        component: usize,
        /// Its value.
        value: i64,
        /// The factor's n.
        modulus: u32,
    },
    /// A Z_n factor with n < 2 (Z_1 is the trivial group: omit the factor).
    #[error("Z_{0} is not a valid factor; n must be at least 2")]
    BadModulus(u32),
    /// Fusing U(1) charges left the range of `i64`.
    #[error("fusing the U(1) charges {a} and {b} overflows")]
    Overflow {
        /// One charge.
        a: Charge,
        /// The other.
        b: Charge,
    },
    /// Two things that must have the same symmetry group do not.
    #[error("{what}: symmetry {first} does not match {second}")]
    GroupMismatch {
        /// What was compared.
        what: String,
        /// One group.
        first: Symmetry,
        /// The other.
        second: Symmetry,
    },
    /// The sectors of a leg are not in strictly increasing charge order
    /// (each charge at most once).
    #[error("sector {index} of the leg has charge {charge}, not after the previous charge {previous}; sectors must be sorted with each charge once")]
    UnsortedSectors {
        /// Index of the offending sector.
        index: usize,
        /// Its charge.
        charge: Charge,
        /// The charge before it.
        previous: Charge,
    },
    /// A sector of dimension zero, or tiles that do not add up to the
    /// sector's dimension, or a zero tile.
    #[error("sector {index} (charge {charge}): {reason}")]
    BadSector {
        /// Index of the sector in its leg.
        index: usize,
        /// Its charge.
        charge: Charge,
        /// What is wrong.
        reason: String,
    },
    /// A list that needs one entry per leg has another length.
    #[error("{what}: expected {expected} entries (one per leg), got {got}")]
    LegCount {
        /// What the list is.
        what: String,
        /// Legs.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// No combination of the legs' sectors satisfies the charge rule with
    /// this flux: the tensor could only be zero.
    #[error("no block of the {legs} legs can carry flux {flux}: check the flux and the legs' charges and directions")]
    NoAllowedBlock {
        /// The flux asked for.
        flux: Charge,
        /// Number of legs.
        legs: usize,
    },
    /// An index is outside its range (a leg, sector or fused position).
    #[error("{what} {index} is out of range (there are {len})")]
    OutOfBounds {
        /// What was indexed.
        what: &'static str,
        /// The index.
        index: usize,
        /// How many there are.
        len: usize,
    },
}

/// One factor of an abelian product group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GroupFactor {
    /// U(1): integer charges, fusion by addition (particle number, or 2 Sz).
    U1,
    /// Z_n (n >= 2): charges `0..n`, fusion by addition modulo n (parity for
    /// n = 2).
    Z(u32),
}

/// An abelian symmetry group given as a product of U(1) and Z_n factors: the
/// runtime descriptor that travels with a symmetric tensor's metadata.
///
/// `Symmetry::trivial()` (no factors) is the group of a dense tensor; its one
/// charge is the empty tuple.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<GroupFactor>", into = "Vec<GroupFactor>")]
pub struct Symmetry {
    factors: Vec<GroupFactor>,
}

impl TryFrom<Vec<GroupFactor>> for Symmetry {
    type Error = SymmetryError;
    fn try_from(factors: Vec<GroupFactor>) -> Result<Self, SymmetryError> {
        Symmetry::product(factors)
    }
}

impl From<Symmetry> for Vec<GroupFactor> {
    fn from(s: Symmetry) -> Self {
        s.factors
    }
}

impl fmt::Display for Symmetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.factors.is_empty() {
            return f.write_str("trivial");
        }
        for (k, g) in self.factors.iter().enumerate() {
            if k > 0 {
                f.write_str(" x ")?;
            }
            match g {
                GroupFactor::U1 => f.write_str("U(1)")?,
                GroupFactor::Z(n) => write!(f, "Z_{n}")?,
            }
        }
        Ok(())
    }
}

impl Symmetry {
    /// The trivial group (dense tensors): no factors, one charge.
    pub fn trivial() -> Symmetry {
        Symmetry { factors: Vec::new() }
    }

    /// U(1) alone (for example total Sz, counted in units of 1/2, or N).
    pub fn u1() -> Symmetry {
        Symmetry {
            factors: vec![GroupFactor::U1],
        }
    }

    /// Z_n alone (Z_2: fermion or spin-flip parity).
    ///
    /// # Errors
    /// [`SymmetryError::BadModulus`] for `n < 2`.
    pub fn zn(n: u32) -> Result<Symmetry, SymmetryError> {
        Symmetry::product(vec![GroupFactor::Z(n)])
    }

    /// The product of the given factors, in that order (for example
    /// `[U1, U1]` for particle number and Sz, `[U1, Z(2)]`).
    ///
    /// # Errors
    /// [`SymmetryError::BadModulus`] for a Z_n factor with `n < 2`.
    pub fn product(factors: Vec<GroupFactor>) -> Result<Symmetry, SymmetryError> {
        if let Some(GroupFactor::Z(n)) = factors.iter().find(|g| matches!(g, GroupFactor::Z(n) if *n < 2)) {
            return Err(SymmetryError::BadModulus(*n));
        }
        Ok(Symmetry { factors })
    }

    /// The factors, in order.
    pub fn factors(&self) -> &[GroupFactor] {
        &self.factors
    }

    /// True for the trivial group.
    pub fn is_trivial(&self) -> bool {
        self.factors.is_empty()
    }

    /// The identity charge (all components zero).
    pub fn identity(&self) -> Charge {
        Charge(vec![0; self.factors.len()])
    }

    /// Checks that `c` is a charge of this group (component count, Z_n
    /// range).
    ///
    /// # Errors
    /// [`SymmetryError::ComponentCount`] or [`SymmetryError::OutOfRange`].
    pub fn check(&self, c: &Charge) -> Result<(), SymmetryError> {
        if c.0.len() != self.factors.len() {
            return Err(SymmetryError::ComponentCount {
                charge: c.clone(),
                got: c.0.len(),
                expected: self.factors.len(),
                symmetry: self.clone(),
            });
        }
        for (k, (g, &v)) in self.factors.iter().zip(&c.0).enumerate() {
            if let GroupFactor::Z(n) = *g {
                if v < 0 || v >= i64::from(n) {
                    return Err(SymmetryError::OutOfRange {
                        charge: c.clone(),
                        component: k,
                        value: v,
                        modulus: n,
                    });
                }
            }
        }
        Ok(())
    }

    /// The charge with components `components`, Z_n components reduced into
    /// `0..n` (so `-1` in Z_2 is `1`).
    ///
    /// # Errors
    /// [`SymmetryError::ComponentCount`] when the count differs from the
    /// number of factors.
    pub fn charge(&self, components: &[i64]) -> Result<Charge, SymmetryError> {
        if components.len() != self.factors.len() {
            let c = Charge(components.to_vec());
            return Err(SymmetryError::ComponentCount {
                got: c.0.len(),
                charge: c,
                expected: self.factors.len(),
                symmetry: self.clone(),
            });
        }
        Ok(Charge(
            self.factors
                .iter()
                .zip(components)
                .map(|(g, &v)| match *g {
                    GroupFactor::U1 => v,
                    GroupFactor::Z(n) => v.rem_euclid(i64::from(n)),
                })
                .collect(),
        ))
    }

    /// The fusion `a + b` of two charges of this group.
    ///
    /// # Errors
    /// [`SymmetryError::Overflow`] when a U(1) component leaves `i64`.
    /// Both charges must be charges of this group (see [`Symmetry::check`]);
    /// a component-count mismatch is [`SymmetryError::ComponentCount`].
    pub fn fuse(&self, a: &Charge, b: &Charge) -> Result<Charge, SymmetryError> {
        self.check_len(a)?;
        self.check_len(b)?;
        let mut out = Vec::with_capacity(self.factors.len());
        for ((g, &x), &y) in self.factors.iter().zip(&a.0).zip(&b.0) {
            out.push(match *g {
                GroupFactor::U1 => x.checked_add(y).ok_or_else(|| SymmetryError::Overflow {
                    a: a.clone(),
                    b: b.clone(),
                })?,
                GroupFactor::Z(n) => (x + y).rem_euclid(i64::from(n)),
            });
        }
        Ok(Charge(out))
    }

    /// The dual (inverse) charge `-a`.
    ///
    /// # Errors
    /// [`SymmetryError::Overflow`] for a U(1) component of `i64::MIN`;
    /// [`SymmetryError::ComponentCount`] on a count mismatch.
    pub fn dual(&self, a: &Charge) -> Result<Charge, SymmetryError> {
        self.check_len(a)?;
        let mut out = Vec::with_capacity(self.factors.len());
        for (g, &x) in self.factors.iter().zip(&a.0) {
            out.push(match *g {
                GroupFactor::U1 => x.checked_neg().ok_or_else(|| SymmetryError::Overflow {
                    a: a.clone(),
                    b: a.clone(),
                })?,
                GroupFactor::Z(n) => (-x).rem_euclid(i64::from(n)),
            });
        }
        Ok(Charge(out))
    }

    fn check_len(&self, c: &Charge) -> Result<(), SymmetryError> {
        if c.0.len() == self.factors.len() {
            Ok(())
        } else {
            Err(SymmetryError::ComponentCount {
                charge: c.clone(),
                got: c.0.len(),
                expected: self.factors.len(),
                symmetry: self.clone(),
            })
        }
    }
}

/// A charge (quantum number) of an abelian product group: one integer per
/// factor of its [`Symmetry`] (Z_n components in `0..n`).
///
/// Build charges with [`Symmetry::charge`] or [`Symmetry::identity`], which
/// normalise Z_n components. The order (lexicographic by component) is the
/// canonical order of a leg's sectors.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Charge(Vec<i64>);

impl Charge {
    /// The components, one per factor of the group.
    pub fn components(&self) -> &[i64] {
        &self.0
    }
}

impl fmt::Display for Charge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (k, v) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zn_charges_are_reduced_and_checked() {
        let z3 = Symmetry::zn(3).unwrap();
        assert_eq!(z3.charge(&[-1]).unwrap().components(), &[2]);
        assert_eq!(z3.charge(&[7]).unwrap().components(), &[1]);
        assert!(matches!(
            z3.check(&Charge(vec![3])),
            Err(SymmetryError::OutOfRange { modulus: 3, .. })
        ));
        assert!(matches!(Symmetry::zn(1), Err(SymmetryError::BadModulus(1))));
        assert!(matches!(Symmetry::zn(0), Err(SymmetryError::BadModulus(0))));
    }

    #[test]
    fn fusion_of_a_product_group() {
        let g = Symmetry::product(vec![GroupFactor::U1, GroupFactor::Z(2)]).unwrap();
        let a = g.charge(&[3, 1]).unwrap();
        let b = g.charge(&[-5, 1]).unwrap();
        assert_eq!(g.fuse(&a, &b).unwrap().components(), &[-2, 0]);
        assert_eq!(g.dual(&a).unwrap().components(), &[-3, 1]);
        assert_eq!(g.fuse(&a, &g.dual(&a).unwrap()).unwrap(), g.identity());
        assert_eq!(g.to_string(), "U(1) x Z_2");
        assert!(matches!(
            g.fuse(&a, &Charge(vec![1])),
            Err(SymmetryError::ComponentCount {
                got: 1,
                expected: 2,
                ..
            })
        ));
    }

    #[test]
    fn u1_overflow_is_an_error() {
        let g = Symmetry::u1();
        let a = g.charge(&[i64::MAX]).unwrap();
        let one = g.charge(&[1]).unwrap();
        assert!(matches!(g.fuse(&a, &one), Err(SymmetryError::Overflow { .. })));
        assert!(matches!(
            g.dual(&g.charge(&[i64::MIN]).unwrap()),
            Err(SymmetryError::Overflow { .. })
        ));
    }

    #[test]
    fn descriptor_round_trips_and_refuses_bad_factors() {
        let g = Symmetry::product(vec![GroupFactor::U1, GroupFactor::U1, GroupFactor::Z(4)]).unwrap();
        let bytes = postcard::to_allocvec(&g).unwrap();
        assert_eq!(postcard::from_bytes::<Symmetry>(&bytes).unwrap(), g);
        let bad = postcard::to_allocvec(&vec![GroupFactor::Z(1)]).unwrap();
        assert!(postcard::from_bytes::<Symmetry>(&bad).is_err());
    }

    #[test]
    fn trivial_group_has_one_charge() {
        let t = Symmetry::trivial();
        assert!(t.is_trivial());
        assert_eq!(t.identity().components(), &[] as &[i64]);
        assert_eq!(t.fuse(&t.identity(), &t.identity()).unwrap(), t.identity());
        assert_eq!(t.to_string(), "trivial");
    }
}
