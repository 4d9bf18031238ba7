//! Interned local operators and the normal form of a term (see the
//! parent module's docs).

use std::collections::HashMap;

use uni20_dispatch::C64;
use uni20_dist::symmetry::{Charge, Symmetry};

use crate::error::TnError;
use crate::sites::{matmul, Site};

use super::OpTerm;

/// Local operators interned per site: id 0 is the identity.
pub(super) struct OpTable {
    pub(super) mats: Vec<Vec<Vec<C64>>>,
    index: Vec<HashMap<Vec<(u64, u64)>, usize>>,
}

fn key(m: &[C64]) -> Vec<(u64, u64)> {
    m.iter()
        .map(|z| ((z.re + 0.0).to_bits(), (z.im + 0.0).to_bits()))
        .collect()
}

impl OpTable {
    pub(super) fn new(sites: &[Site]) -> OpTable {
        let mut t = OpTable {
            mats: vec![Vec::new(); sites.len()],
            index: vec![HashMap::new(); sites.len()],
        };
        for (i, s) in sites.iter().enumerate() {
            let id = s.op("Id").map(|o| o.matrix.clone()).unwrap_or_default();
            t.intern(i, id);
        }
        t
    }

    fn intern(&mut self, site: usize, m: Vec<C64>) -> usize {
        let k = key(&m);
        if let Some(&id) = self.index[site].get(&k) {
            return id;
        }
        let id = self.mats[site].len();
        self.mats[site].push(m);
        self.index[site].insert(k, id);
        id
    }
}

/// A term brought into normal form: one local operator id per site from
/// `first` to `first + ops.len() - 1`.
pub(super) struct NormalTerm {
    pub(super) coeff: C64,
    pub(super) first: usize,
    pub(super) ops: Vec<usize>,
}

fn bad(term: usize, reason: String) -> TnError {
    TnError::BadTerm { term, reason }
}

pub(super) fn normalize(
    k: usize,
    t: &OpTerm,
    sites: &[Site],
    table: &mut OpTable,
    symmetry: Option<&Symmetry>,
) -> Result<Option<NormalTerm>, TnError> {
    if !(t.coeff.re.is_finite() && t.coeff.im.is_finite()) {
        return Err(bad(k, format!("coefficient {} is not finite", t.coeff)));
    }
    if t.ops.is_empty() {
        return Err(bad(
            k,
            "no operators (add a constant as a multiple of Id on a site)".into(),
        ));
    }
    let l = sites.len();
    let mut ops = Vec::with_capacity(t.ops.len());
    for (name, i) in &t.ops {
        if *i >= l {
            return Err(bad(
                k,
                format!("operator {name} on site {i}, but the chain has {l} sites"),
            ));
        }
        ops.push((name.as_str(), *i, sites[*i].op(name)?));
    }
    if t.coeff == C64::new(0.0, 0.0) {
        return Ok(None);
    }
    // Sign of the stable sort by site: each pair of fermionic operators in the wrong order.
    let mut sign = 1.0;
    for p in 0..ops.len() {
        for q in p + 1..ops.len() {
            if ops[p].2.fermionic && ops[q].2.fermionic && ops[p].1 > ops[q].1 {
                sign = -sign;
            }
        }
    }
    let fermionic = ops.iter().filter(|o| o.2.fermionic).count();
    if fermionic % 2 == 1 {
        return Err(bad(
            k,
            "an odd number of fermionic operators (the term changes fermion parity)".into(),
        ));
    }
    let mut sorted = ops.clone();
    sorted.sort_by_key(|o| o.1);
    let first = sorted[0].1;
    let last = sorted[sorted.len() - 1].1;
    let mut local = Vec::with_capacity(last - first + 1);
    let mut total: Option<Charge> = symmetry.map(Symmetry::identity);
    for (site, site_type) in sites.iter().enumerate().take(last + 1).skip(first) {
        let d = site_type.dim();
        let mut m: Option<Vec<C64>> = None;
        for o in sorted.iter().filter(|o| o.1 == site) {
            m = Some(match m {
                None => o.2.matrix.clone(),
                Some(prev) => matmul(d, &prev, &o.2.matrix),
            });
            if let (Some(g), Some(acc)) = (symmetry, total.as_mut()) {
                let q = site_type.op_charge(o.0)?.unwrap_or_else(|| g.identity());
                *acc = g.fuse(acc, &q)?;
            }
        }
        let right = sorted.iter().filter(|o| o.1 > site && o.2.fermionic).count();
        if right % 2 == 1 {
            let f = site_type.jw_string().ok_or_else(|| {
                bad(
                    k,
                    format!(
                        "a fermionic operator's Jordan-Wigner string crosses site {site} ({}), which has no F operator",
                        site_type.name()
                    ),
                )
            })?;
            m = Some(match m {
                None => f.matrix.clone(),
                Some(prev) => matmul(d, &prev, &f.matrix),
            });
        }
        local.push(match m {
            None => 0,
            Some(m) => table.intern(site, m),
        });
    }
    if let (Some(g), Some(q)) = (symmetry, &total) {
        if *q != g.identity() {
            return Err(bad(
                k,
                format!("the term carries charge {q}; an MPO under a conservation law must be neutral"),
            ));
        }
    }
    Ok(Some(NormalTerm {
        coeff: t.coeff * sign,
        first,
        ops: local,
    }))
}

/// The charge of an interned local operator (identity when it is zero).
pub(super) fn local_charge(site: &Site, g: &Symmetry, m: &[C64]) -> Result<Charge, TnError> {
    Ok(site
        .matrix_charge("(a product of operators)", m)?
        .unwrap_or_else(|| g.identity()))
}
