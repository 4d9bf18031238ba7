//! The tensor-network toolkit (`uni20::tn`) from Python, one file per
//! concern: site types, operator sums and models (`sites`); MPOs, MPSs,
//! their builders and measurements (`mps`); two-site DMRG with Python
//! observers (`dmrg`); TEBD (`tebd`) and TDVP (`tdvp`). Bindings only:
//! every algorithm is the Rust one. This file holds the argument
//! conversions they share.

mod dmrg;
mod mps;
mod sites;
mod tdvp;
mod tebd;

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use uni20::tn::{Conserve, Site as TnSite};

use crate::errors::{Failure, Kind, Res};
use crate::universe::Handle;

pub(crate) use dmrg::{Dmrg, SweepStats};
pub(crate) use mps::{Mpo, Mps};
pub(crate) use sites::{heisenberg, hubbard, j1j2, spin1, tfi, xxz, Model, OpSum, Site};
pub(crate) use tdvp::{Tdvp, TdvpStep};
pub(crate) use tebd::{Tebd, TebdStep};

/// Parses a `conserve=` argument (case-insensitive).
pub(super) fn conserve(s: &str) -> Res<Conserve> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "none" | "" => Conserve::None,
        "sz" => Conserve::Sz,
        "n" => Conserve::N,
        "nsz" | "n,sz" => Conserve::NSz,
        "parity" => Conserve::Parity,
        other => {
            return Err(Failure::new(
                Kind::Option,
                format!("conserve={other:?}: expected one of \"none\", \"Sz\", \"N\", \"NSz\", \"parity\""),
            ))
        }
    })
}

/// Locks a toolkit value (a poisoned lock still holds a usable value: the
/// panic was caught at the boundary).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks that two toolkit values (`what`) belong to one universe.
fn same_universe(a: &Arc<Handle>, b: &Arc<Handle>, what: &str) -> Res<()> {
    if Arc::ptr_eq(a, b) {
        Ok(())
    } else {
        Err(Failure::new(
            Kind::Shape,
            format!("{what} belong to different universes"),
        ))
    }
}

/// One site type for every site, or a list of them.
#[derive(FromPyObject)]
pub(crate) enum SiteList {
    /// The same site type everywhere.
    One(Site),
    /// One per site.
    Many(Vec<Site>),
}

impl SiteList {
    pub(super) fn expand(&self, l: usize) -> Res<Vec<TnSite>> {
        match self {
            SiteList::One(s) => Ok(vec![s.s.clone(); l]),
            SiteList::Many(v) if v.len() == l => Ok(v.iter().map(|s| s.s.clone()).collect()),
            SiteList::Many(v) => Err(Failure::new(
                Kind::Shape,
                format!("expected one site type per site ({l}), got {}", v.len()),
            )),
        }
    }
}

/// The group of `sites`, which must all carry charges (a model built with
/// ``conserve=``).
pub(super) fn charged(sites: &[TnSite]) -> Res<uni20::dist::symmetry::Symmetry> {
    let Some(first) = sites.first() else {
        return Err(Failure::new(Kind::Model, "a state needs at least one site"));
    };
    match first.charges() {
        Some((g, _)) if sites.iter().all(|s| s.charges().is_some()) => Ok(g.clone()),
        _ => Err(Failure::new(
            Kind::Model,
            format!(
                "site type {} has no charges: a symmetric state or MPO needs sites built with conserve= (\"Sz\", \"N\", \"NSz\" or \"parity\")",
                first.name()
            ),
        )),
    }
}
