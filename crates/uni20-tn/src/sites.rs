//! Site types: a local basis with named operators and, where the site has
//! them, the charges of its basis states ([`Site`]). Spin-S for any S
//! ([`Site::spin`]), spinless fermions ([`Site::fermion`]), spinful
//! (Hubbard) fermions ([`Site::electron`]) and bosons with a cutoff
//! ([`Site::boson`]); a new site type is a basis, a few matrices and
//! [`Site::with_op`].
//!
//! Operators are dense `d x d` matrices `O[s, t] = <s|O|t>` (row: outgoing
//! state, column: incoming state), stored as complex numbers. An operator
//! marked fermionic anticommutes with fermionic operators on other sites;
//! the MPO builder ([`crate::OpSum`]) inserts the site's Jordan-Wigner
//! string operator `F` between them. Within one site with several fermionic
//! modes (the electron site), the local operators already carry the
//! in-site sign, as in TeNPy's `SpinHalfFermionSite`.

use std::collections::BTreeMap;

use uni20_dispatch::C64;
use uni20_dist::symmetry::{Charge, GroupFactor, Symmetry};

use crate::error::TnError;

/// A named operator of a site.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteOp {
    /// `d x d` row-major matrix `<s|O|t>`.
    pub matrix: Vec<C64>,
    /// True for an operator of odd fermion parity (it anticommutes with
    /// fermionic operators on other sites).
    pub fermionic: bool,
}

/// What a site conserves: selects the charges its basis states carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conserve {
    /// No charges (dense tensors).
    None,
    /// U(1) of `2 Sz` (spins; for electrons, `N_up - N_down`).
    Sz,
    /// U(1) of the particle number `N`.
    N,
    /// U(1) x U(1) of `(N, 2 Sz)` (electrons).
    NSz,
    /// Z_2 parity: of `N` for fermions and bosons, of the number of spin
    /// flips from the fully polarised state (`S - Sz`) for spins.
    Parity,
}

/// A site type: basis labels, named operators, and optional charges.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    name: String,
    states: Vec<String>,
    ops: BTreeMap<String, SiteOp>,
    charges: Option<(Symmetry, Vec<Charge>)>,
}

fn real(m: Vec<f64>) -> Vec<C64> {
    m.into_iter().map(|x| C64::new(x, 0.0)).collect()
}

pub(crate) fn matmul(d: usize, a: &[C64], b: &[C64]) -> Vec<C64> {
    let mut c = vec![C64::new(0.0, 0.0); d * d];
    for i in 0..d {
        for k in 0..d {
            let x = a[i * d + k];
            if x != C64::new(0.0, 0.0) {
                for j in 0..d {
                    c[i * d + j] += x * b[k * d + j];
                }
            }
        }
    }
    c
}

pub(crate) fn dagger(d: usize, a: &[C64]) -> Vec<C64> {
    let mut c = vec![C64::new(0.0, 0.0); d * d];
    for i in 0..d {
        for j in 0..d {
            c[j * d + i] = a[i * d + j].conj();
        }
    }
    c
}

fn diag(v: &[f64]) -> Vec<C64> {
    let d = v.len();
    let mut m = vec![C64::new(0.0, 0.0); d * d];
    for (i, x) in v.iter().enumerate() {
        m[i * d + i] = C64::new(*x, 0.0);
    }
    m
}

impl Site {
    /// A site with basis labels `states` and only the identity `Id`; add
    /// operators with [`Site::with_op`] and charges with
    /// [`Site::with_charges`].
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for an empty basis.
    pub fn new(name: &str, states: Vec<String>) -> Result<Site, TnError> {
        if states.is_empty() {
            return Err(TnError::InvalidOption {
                name: "site basis",
                value: "[]".into(),
                expected: "at least one state",
            });
        }
        let d = states.len();
        let mut ops = BTreeMap::new();
        ops.insert(
            "Id".to_string(),
            SiteOp {
                matrix: diag(&vec![1.0; d]),
                fermionic: false,
            },
        );
        Ok(Site {
            name: name.to_string(),
            states,
            ops,
            charges: None,
        })
    }

    /// Adds (or replaces) operator `name` with the row-major `d x d` matrix
    /// `matrix` (`<s|O|t>`); `fermionic` marks odd fermion parity.
    ///
    /// # Errors
    /// [`TnError::Shape`] when `matrix` is not `d x d`;
    /// [`TnError::InvalidOption`] for a non-finite entry or the reserved
    /// name `Id`.
    pub fn with_op(mut self, name: &str, matrix: Vec<C64>, fermionic: bool) -> Result<Site, TnError> {
        let d = self.dim();
        if matrix.len() != d * d {
            return Err(TnError::Shape {
                what: format!("operator {name} of site {}", self.name),
                expected: vec![d, d],
                got: vec![matrix.len()],
            });
        }
        if name == "Id" {
            return Err(TnError::InvalidOption {
                name: "operator name",
                value: name.into(),
                expected: "a name other than Id (the identity is built in)",
            });
        }
        if matrix.iter().any(|z| !(z.re.is_finite() && z.im.is_finite())) {
            return Err(TnError::InvalidOption {
                name: "operator entries",
                value: name.into(),
                expected: "finite numbers",
            });
        }
        self.ops.insert(name.to_string(), SiteOp { matrix, fermionic });
        Ok(self)
    }

    /// Adds a real operator (see [`Site::with_op`]).
    ///
    /// # Errors
    /// As [`Site::with_op`].
    pub fn with_real_op(self, name: &str, matrix: Vec<f64>, fermionic: bool) -> Result<Site, TnError> {
        self.with_op(name, real(matrix), fermionic)
    }

    /// Gives the basis states the charges `charges` of `symmetry` (one per
    /// state).
    ///
    /// # Errors
    /// [`TnError::Shape`] for a wrong count; [`TnError::Symmetry`] for a
    /// charge not of the group.
    pub fn with_charges(mut self, symmetry: Symmetry, charges: Vec<Charge>) -> Result<Site, TnError> {
        if charges.len() != self.dim() {
            return Err(TnError::Shape {
                what: format!("charges of site {}", self.name),
                expected: vec![self.dim()],
                got: vec![charges.len()],
            });
        }
        for c in &charges {
            symmetry.check(c)?;
        }
        self.charges = Some((symmetry, charges));
        Ok(self)
    }

    /// The site type's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Local dimension `d`.
    pub fn dim(&self) -> usize {
        self.states.len()
    }

    /// The basis labels, in basis order.
    pub fn states(&self) -> &[String] {
        &self.states
    }

    /// The index of the basis state labelled `label`.
    ///
    /// # Errors
    /// [`TnError::UnknownState`] naming the site's states.
    pub fn state(&self, label: &str) -> Result<usize, TnError> {
        self.states
            .iter()
            .position(|s| s == label)
            .ok_or_else(|| TnError::UnknownState {
                state: label.into(),
                site: self.name.clone(),
                known: self.states.join(", "),
            })
    }

    /// Operator `name`.
    ///
    /// # Errors
    /// [`TnError::UnknownOperator`] naming the site's operators.
    pub fn op(&self, name: &str) -> Result<&SiteOp, TnError> {
        self.ops.get(name).ok_or_else(|| TnError::UnknownOperator {
            op: name.into(),
            site: self.name.clone(),
            known: self.ops.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The names of all operators.
    pub fn op_names(&self) -> Vec<&str> {
        self.ops.keys().map(String::as_str).collect()
    }

    /// The symmetry and the charges of the basis states, if the site has
    /// them.
    pub fn charges(&self) -> Option<(&Symmetry, &[Charge])> {
        self.charges.as_ref().map(|(g, c)| (g, c.as_slice()))
    }

    /// The Jordan-Wigner string operator `F` (the fermion parity), if the
    /// site has fermionic operators.
    pub fn jw_string(&self) -> Option<&SiteOp> {
        self.ops.get("F")
    }

    /// The charge that operator `name` carries (`q_s - q_t` for every
    /// nonzero `<s|O|t>`), or `None` for a site without charges.
    ///
    /// # Errors
    /// [`TnError::ChargeMismatch`] when the operator mixes charges (it does
    /// not commute with the conserved quantity up to a fixed shift, e.g.
    /// `Sx` under `Sz` conservation); [`TnError::UnknownOperator`].
    pub fn op_charge(&self, name: &str) -> Result<Option<Charge>, TnError> {
        let op = self.op(name)?;
        self.matrix_charge(name, &op.matrix)
    }

    /// The charge of the `d x d` matrix `m` on this site (as
    /// [`Site::op_charge`]; `what` names it in the error), `None` without
    /// charges; a zero matrix has the identity charge.
    pub(crate) fn matrix_charge(&self, what: &str, m: &[C64]) -> Result<Option<Charge>, TnError> {
        let Some((g, q)) = &self.charges else {
            return Ok(None);
        };
        let d = self.dim();
        let mut found: Option<Charge> = None;
        for s in 0..d {
            for t in 0..d {
                if m[s * d + t].norm() > 1e-14 {
                    let c = g.fuse(&q[s], &g.dual(&q[t])?)?;
                    match &found {
                        None => found = Some(c),
                        Some(f) if *f == c => {}
                        Some(f) => {
                            return Err(TnError::ChargeMismatch {
                                op: what.into(),
                                site: self.name.clone(),
                                first: f.to_string(),
                                second: c.to_string(),
                            })
                        }
                    }
                }
            }
        }
        Ok(Some(found.unwrap_or_else(|| g.identity())))
    }

    /// Spin `S = two_s / 2` (`two_s >= 1`), basis `Sz = S, S-1, ..., -S`
    /// (labels `"up"`, `"down"` for S = 1/2; `"2Sz=k"` otherwise), with
    /// `Sz`, `Sp`, `Sm`, `Sx`, `Sy` (complex) and `Id`.
    /// Charges: `2 Sz` under [`Conserve::Sz`], the parity of `S - Sz` under
    /// [`Conserve::Parity`].
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for `two_s == 0` or a conservation law a
    /// spin does not have.
    pub fn spin(two_s: u32, conserve: Conserve) -> Result<Site, TnError> {
        if two_s == 0 || two_s > 64 {
            return Err(TnError::InvalidOption {
                name: "2S",
                value: two_s.to_string(),
                expected: "between 1 and 64",
            });
        }
        let d = two_s as usize + 1;
        let s = f64::from(two_s) / 2.0;
        let m: Vec<f64> = (0..d).map(|i| s - i as f64).collect();
        let states = if two_s == 1 {
            vec!["up".into(), "down".into()]
        } else {
            (0..d)
                .map(|i| format!("2Sz={}", i64::from(two_s) - 2 * i as i64))
                .collect()
        };
        let name = if two_s.is_multiple_of(2) {
            format!("spin-{}", two_s / 2)
        } else {
            format!("spin-{two_s}/2")
        };
        let mut sp = vec![C64::new(0.0, 0.0); d * d];
        for i in 1..d {
            // <m+1|S+|m> = sqrt(S(S+1) - m(m+1)); state i-1 has m + 1.
            let v = (s * (s + 1.0) - m[i] * (m[i] + 1.0)).sqrt();
            sp[(i - 1) * d + i] = C64::new(v, 0.0);
        }
        let sm = dagger(d, &sp);
        let sx: Vec<C64> = sp.iter().zip(&sm).map(|(a, b)| (a + b) * 0.5).collect();
        let sy: Vec<C64> = sp.iter().zip(&sm).map(|(a, b)| (a - b) * C64::new(0.0, -0.5)).collect();
        let mut site = Site::new(&name, states)?
            .with_op("Sz", diag(&m), false)?
            .with_op("Sp", sp, false)?
            .with_op("Sm", sm, false)?
            .with_op("Sx", sx, false)?
            .with_op("Sy", sy, false)?;
        match conserve {
            Conserve::None => {}
            Conserve::Sz => {
                let g = Symmetry::u1();
                let q = (0..d)
                    .map(|i| g.charge(&[i64::from(two_s) - 2 * i as i64]))
                    .collect::<Result<_, _>>()?;
                site = site.with_charges(g, q)?;
            }
            Conserve::Parity => {
                let g = Symmetry::zn(2)?;
                let q = (0..d).map(|i| g.charge(&[i as i64])).collect::<Result<_, _>>()?;
                site = site.with_charges(g, q)?;
            }
            other => return Err(not_conserved(other, "a spin")),
        }
        Ok(site)
    }

    /// Spinless fermions: basis `"empty"`, `"full"`; operators `C`, `Cdag`
    /// (fermionic), `N`, `F = (-1)^N`, `Id`. Charges: `N` under
    /// [`Conserve::N`], its parity under [`Conserve::Parity`].
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for another conservation law.
    pub fn fermion(conserve: Conserve) -> Result<Site, TnError> {
        let site = Site::new("fermion", vec!["empty".into(), "full".into()])?
            .with_real_op("C", vec![0.0, 1.0, 0.0, 0.0], true)?
            .with_real_op("Cdag", vec![0.0, 0.0, 1.0, 0.0], true)?
            .with_real_op("N", vec![0.0, 0.0, 0.0, 1.0], false)?
            .with_real_op("F", vec![1.0, 0.0, 0.0, -1.0], false)?;
        number_charges(site, conserve, "a spinless fermion")
    }

    /// Spin-1/2 fermions (the Hubbard site): basis `"empty"`, `"up"`,
    /// `"down"`, `"updown"` (`|ud> = c+_up c+_down |0>`); operators `Cup`,
    /// `Cdagup`, `Cdn`, `Cdagdn` (fermionic, with the in-site sign of the
    /// order up before down), `Nup`, `Ndn`, `Ntot`, `NupNdn`, `Sz`, `Sp`,
    /// `Sm`, `F = (-1)^Ntot`, `Id`. Charges: `N`, `2 Sz`, `(N, 2 Sz)` or
    /// the parity of `N`.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for an unknown conservation law.
    pub fn electron(conserve: Conserve) -> Result<Site, TnError> {
        let d = 4;
        // Fock basis |n_up n_dn>: 0 = |00>, 1 = |10>, 2 = |01>, 3 = |11>.
        // c_up: |10> -> |00>, |11> -> |01> (no sign: up is first).
        let mut cup = vec![C64::new(0.0, 0.0); 16];
        cup[1] = C64::new(1.0, 0.0);
        cup[2 * d + 3] = C64::new(1.0, 0.0);
        // c_dn: |01> -> |00>, |11> -> -|10> (passes the up fermion).
        let mut cdn = vec![C64::new(0.0, 0.0); 16];
        cdn[2] = C64::new(1.0, 0.0);
        cdn[d + 3] = C64::new(-1.0, 0.0);
        let nup = matmul(d, &dagger(d, &cup), &cup);
        let ndn = matmul(d, &dagger(d, &cdn), &cdn);
        let ntot: Vec<C64> = nup.iter().zip(&ndn).map(|(a, b)| a + b).collect();
        let nn = matmul(d, &nup, &ndn);
        let sz: Vec<C64> = nup.iter().zip(&ndn).map(|(a, b)| (a - b) * 0.5).collect();
        let sp = matmul(d, &dagger(d, &cup), &cdn);
        let sm = dagger(d, &sp);
        let site = Site::new(
            "electron",
            vec!["empty".into(), "up".into(), "down".into(), "updown".into()],
        )?
        .with_op("Cdagup", dagger(d, &cup), true)?
        .with_op("Cup", cup, true)?
        .with_op("Cdagdn", dagger(d, &cdn), true)?
        .with_op("Cdn", cdn, true)?
        .with_op("Nup", nup, false)?
        .with_op("Ndn", ndn, false)?
        .with_op("Ntot", ntot, false)?
        .with_op("NupNdn", nn, false)?
        .with_op("Sz", sz, false)?
        .with_op("Sp", sp, false)?
        .with_op("Sm", sm, false)?
        .with_real_op(
            "F",
            vec![1.0, 0., 0., 0., 0., -1.0, 0., 0., 0., 0., -1.0, 0., 0., 0., 0., 1.0],
            false,
        )?;
        let n = [0i64, 1, 1, 2];
        let two_sz = [0i64, 1, -1, 0];
        let (g, q): (Symmetry, Vec<Vec<i64>>) = match conserve {
            Conserve::None => return Ok(site),
            Conserve::N => (Symmetry::u1(), n.iter().map(|&x| vec![x]).collect()),
            Conserve::Sz => (Symmetry::u1(), two_sz.iter().map(|&x| vec![x]).collect()),
            Conserve::NSz => (
                Symmetry::product(vec![GroupFactor::U1, GroupFactor::U1])?,
                n.iter().zip(&two_sz).map(|(&a, &b)| vec![a, b]).collect(),
            ),
            Conserve::Parity => (Symmetry::zn(2)?, n.iter().map(|&x| vec![x]).collect()),
        };
        let q = q.iter().map(|c| g.charge(c)).collect::<Result<_, _>>()?;
        site.with_charges(g, q)
    }

    /// Bosons with at most `nmax` per site: basis `"0"` .. `"nmax"`;
    /// operators `B`, `Bdag`, `N`, `NN` (`N^2`), `Id`. Charges: `N` or its
    /// parity.
    ///
    /// # Errors
    /// [`TnError::InvalidOption`] for `nmax == 0`, `nmax > 256`, or another
    /// conservation law.
    pub fn boson(nmax: usize, conserve: Conserve) -> Result<Site, TnError> {
        if nmax == 0 || nmax > 256 {
            return Err(TnError::InvalidOption {
                name: "boson cutoff nmax",
                value: nmax.to_string(),
                expected: "between 1 and 256",
            });
        }
        let d = nmax + 1;
        let mut b = vec![C64::new(0.0, 0.0); d * d];
        for n in 1..d {
            b[(n - 1) * d + n] = C64::new((n as f64).sqrt(), 0.0);
        }
        let nums: Vec<f64> = (0..d).map(|n| n as f64).collect();
        let sq: Vec<f64> = nums.iter().map(|n| n * n).collect();
        let site = Site::new(&format!("boson(nmax={nmax})"), (0..d).map(|n| n.to_string()).collect())?
            .with_op("Bdag", dagger(d, &b), false)?
            .with_op("B", b, false)?
            .with_op("N", diag(&nums), false)?
            .with_op("NN", diag(&sq), false)?;
        number_charges(site, conserve, "a boson")
    }
}

/// Charges `N` (basis state `n` holds `n` particles) or its parity.
fn number_charges(site: Site, conserve: Conserve, what: &'static str) -> Result<Site, TnError> {
    let g = match conserve {
        Conserve::None => return Ok(site),
        Conserve::N => Symmetry::u1(),
        Conserve::Parity => Symmetry::zn(2)?,
        other => return Err(not_conserved(other, what)),
    };
    let q = (0..site.dim())
        .map(|n| g.charge(&[n as i64]))
        .collect::<Result<_, _>>()?;
    site.with_charges(g, q)
}

fn not_conserved(c: Conserve, what: &'static str) -> TnError {
    TnError::InvalidOption {
        name: "conserve",
        value: format!("{c:?}"),
        expected: match what {
            "a spin" => "None, Sz or Parity for a spin",
            "a spinless fermion" => "None, N or Parity for a spinless fermion",
            _ => "None, N or Parity for a boson",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(site: &Site, op: &str) -> Vec<C64> {
        site.op(op).unwrap().matrix.clone()
    }

    fn close(a: &[C64], b: &[C64]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).norm() < 1e-12)
    }

    /// [Sz, S+] = S+ and S^2 = S(S+1) for S = 1/2 .. 5/2.
    #[test]
    fn spin_algebra() {
        for two_s in 1..=5u32 {
            let site = Site::spin(two_s, Conserve::None).unwrap();
            let d = site.dim();
            let (sz, sp, sm, sx, sy) = (
                get(&site, "Sz"),
                get(&site, "Sp"),
                get(&site, "Sm"),
                get(&site, "Sx"),
                get(&site, "Sy"),
            );
            let comm: Vec<C64> = matmul(d, &sz, &sp)
                .iter()
                .zip(matmul(d, &sp, &sz))
                .map(|(a, b)| a - b)
                .collect();
            assert!(close(&comm, &sp), "[Sz, S+] = S+ for 2S = {two_s}");
            let s = f64::from(two_s) / 2.0;
            let s2: Vec<C64> = (0..d * d)
                .map(|k| matmul(d, &sx, &sx)[k] + matmul(d, &sy, &sy)[k] + matmul(d, &sz, &sz)[k])
                .collect();
            assert!(close(&s2, &diag(&vec![s * (s + 1.0); d])), "S^2 for 2S = {two_s}");
            assert!(close(&sm, &dagger(d, &sp)));
        }
    }

    /// Anticommutators inside the electron site and charges of its operators.
    #[test]
    fn electron_operators() {
        let site = Site::electron(Conserve::NSz).unwrap();
        let d = 4;
        let (cu, cd) = (get(&site, "Cup"), get(&site, "Cdn"));
        let anti = |a: &[C64], b: &[C64]| -> Vec<C64> {
            matmul(d, a, b)
                .iter()
                .zip(matmul(d, b, a))
                .map(|(x, y)| x + y)
                .collect()
        };
        assert!(close(&anti(&cu, &cd), &[C64::new(0.0, 0.0); 16]), "{{c_up, c_dn}} = 0");
        assert!(close(&anti(&cu, &dagger(d, &cd)), &[C64::new(0.0, 0.0); 16]));
        assert!(close(&anti(&cu, &dagger(d, &cu)), &diag(&[1.0; 4])));
        assert!(close(&anti(&cd, &dagger(d, &cd)), &diag(&[1.0; 4])));
        let g = Symmetry::product(vec![GroupFactor::U1, GroupFactor::U1]).unwrap();
        assert_eq!(site.op_charge("Cdagup").unwrap(), Some(g.charge(&[1, 1]).unwrap()));
        assert_eq!(site.op_charge("Cdn").unwrap(), Some(g.charge(&[-1, 1]).unwrap()));
        assert_eq!(site.op_charge("Sp").unwrap(), Some(g.charge(&[0, 2]).unwrap()));
        assert_eq!(site.op_charge("NupNdn").unwrap(), Some(g.identity()));
    }

    #[test]
    fn charges_and_errors() {
        let s = Site::spin(2, Conserve::Sz).unwrap();
        assert_eq!(s.dim(), 3);
        assert_eq!(s.op_charge("Sp").unwrap().unwrap().components(), &[2]);
        assert!(matches!(s.op_charge("Sx"), Err(TnError::ChargeMismatch { .. })));
        assert!(matches!(s.op("Q"), Err(TnError::UnknownOperator { .. })));
        assert!(matches!(s.state("x"), Err(TnError::UnknownState { .. })));
        assert!(Site::spin(0, Conserve::None).is_err());
        assert!(Site::spin(1, Conserve::N).is_err());
        assert!(Site::boson(0, Conserve::None).is_err());
        let b = Site::boson(3, Conserve::N).unwrap();
        let (bb, bd) = (get(&b, "B"), get(&b, "Bdag"));
        // B^dag B = N
        assert!(close(&matmul(4, &bd, &bb), &get(&b, "N")));
        let p = Site::spin(1, Conserve::Parity).unwrap();
        assert_eq!(p.op_charge("Sp").unwrap().unwrap().components(), &[1]);
        assert!(Site::new("x", vec!["a".into()])
            .unwrap()
            .with_real_op("Id", vec![1.0], false)
            .is_err());
        assert!(Site::new("x", vec!["a".into()])
            .unwrap()
            .with_real_op("X", vec![1.0, 0.0], false)
            .is_err());
    }
}
