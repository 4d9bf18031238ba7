//! The main job: the spin-1/2 Heisenberg chain H = sum_i S_i . S_(i+1)
//! (open ends) as a matrix-product operator of bond dimension 5, with every
//! tensor contraction distributed across the universe's ranks.
//!
//! Computes and checks against exact values:
//! - the Neel-state energy <Neel|H|Neel> = -(L-1)/4 for L = 8..=64;
//! - Tr H^2 = 3 (L-1) 2^(L-4) for L = 12 (8448);
//! - the ground-state energy for L = 8 and 10, by contracting the MPO into
//!   the dense Hamiltonian and diagonalising it with faer.
//!
//! Run: `cargo run --release --example heisenberg` (in-process, `UNI20_RANKS`
//! ranks, default 4) or `cargo xtask mpirun -n 3 --release --example heisenberg`.
//! Exits non-zero if any value differs from its reference.

use std::process::ExitCode;

use anyhow::{bail, Context};
use uni20::prelude::*;

mod shared;

use shared::{mpo_tensor, unit, BLOCK, D};

fn scalar(ctl: &Controller<'_>, t: &DistTensor) -> anyhow::Result<f64> {
    let local = t.to_local(ctl)?;
    let v = local.to_c64_vec();
    if v.len() != 1 {
        bail!("expected a scalar, got shape {:?}", local.shape());
    }
    Ok(v[0].re)
}

struct Check {
    failures: usize,
}

impl Check {
    fn value(&mut self, what: &str, got: f64, exact: f64, tol: f64) {
        let ok = (got - exact).abs() <= tol * exact.abs().max(1.0);
        if !ok {
            self.failures += 1;
        }
        println!(
            "{what:<34} {got:>22.12} {exact:>22.12}  {}",
            if ok { "ok" } else { "MISMATCH" }
        );
    }
}

/// <Neel|H|Neel> for a chain of length `l`, by sweeping the left environment.
fn neel_energy(
    ctl: &Controller<'_>,
    l: usize,
    t_up: &DistTensor,
    t_dn: &DistTensor,
    left: &DistTensor,
    right: &DistTensor,
) -> anyhow::Result<f64> {
    let mut env = left.clone();
    for site in 0..l {
        let t = if site % 2 == 0 { t_up } else { t_dn };
        env = contract(ctl, "a,ab->b", &env, t)?;
    }
    scalar(ctl, &contract(ctl, "a,a->", &env, right)?)
}

/// The dense Hamiltonian of `l` sites, H[s1..sl, s1'..sl'], as a 2^l x 2^l
/// row-major matrix, contracted from the MPO with distributed contractions.
fn dense_hamiltonian(
    ctl: &Controller<'_>,
    l: usize,
    w: &DistTensor,
    left: &DistTensor,
    right: &DistTensor,
) -> anyhow::Result<Vec<f64>> {
    const OUT: &str = "ABCDEFGHIJKLMNOP";
    const INP: &str = "abcdefghijklmnop";
    assert!(l <= OUT.len());
    // h[x, s1.., s1'..] with x the open right bond.
    let mut h = contract(ctl, "y,yxSs->xSs", left, w)?;
    for k in 1..l {
        let (so, si) = (&OUT[..k], &INP[..k]);
        let (no, ni) = (&OUT[k..k + 1], &INP[k..k + 1]);
        let spec = format!("y{so}{si},yx{no}{ni}->x{so}{no}{si}{ni}");
        h = contract(ctl, &spec, &h, w)?;
    }
    let spec = format!("x{}{},x->{}{}", &OUT[..l], &INP[..l], &OUT[..l], &INP[..l]);
    let h = contract(ctl, &spec, &h, right)?;
    let local = h.to_local(ctl)?;
    Ok(local.to_c64_vec().into_iter().map(|z| z.re).collect())
}

fn lowest_eigenvalue(h: &[f64], n: usize) -> anyhow::Result<f64> {
    let m = faer::Mat::from_fn(n, n, |i, j| h[i * n + j]);
    let ev = m
        .as_ref()
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .map_err(|e| anyhow::anyhow!("eigensolver: {e:?}"))?;
    ev.first().copied().context("empty spectrum")
}

fn main() -> ExitCode {
    uni20::launch(|ctl| {
        println!(
            "uni20 heisenberg: {} ranks ({}), {} kernel threads per rank",
            ctl.size(),
            ctl.transport_kind(),
            ctl.threads_per_rank()
        );
        let w = DistTensor::from_local(ctl, &mpo_tensor()?, BLOCK)?;
        let left = DistTensor::from_local(ctl, &unit(D, 4)?, BLOCK)?;
        let right = DistTensor::from_local(ctl, &unit(D, 0)?, BLOCK)?;
        let mut check = Check { failures: 0 };
        println!("{:<34} {:>22} {:>22}", "quantity", "uni20", "exact");

        // Site transfer tensors of the Neel state: T[a,b] = <s| W[a,b] |s>.
        let up = DistTensor::from_local(ctl, &unit(2, 0)?, BLOCK)?;
        let dn = DistTensor::from_local(ctl, &unit(2, 1)?, BLOCK)?;
        let proj_up = contract(ctl, "s,t->st", &up, &up)?;
        let proj_dn = contract(ctl, "s,t->st", &dn, &dn)?;
        let t_up = contract(ctl, "abst,st->ab", &w, &proj_up)?;
        let t_dn = contract(ctl, "abst,st->ab", &w, &proj_dn)?;
        for l in 8..=64 {
            let e = neel_energy(ctl, l, &t_up, &t_dn, &left, &right)?;
            check.value(&format!("E_Neel(L={l})"), e, -((l - 1) as f64) / 4.0, 1e-12);
        }

        // Tr H^2: per site X[a,c,b,d] = sum_{s,t} W[a,b,s,t] W[c,d,t,s].
        let x = contract(ctl, "abst,cdts->acbd", &w, &w)?;
        let mut env = contract(ctl, "a,c->ac", &left, &left)?;
        let l = 12;
        for _ in 0..l {
            env = contract(ctl, "ac,acbd->bd", &env, &x)?;
        }
        let ends = contract(ctl, "b,d->bd", &right, &right)?;
        let tr = scalar(ctl, &contract(ctl, "bd,bd->", &env, &ends)?)?;
        check.value("Tr H^2 (L=12)", tr, (3 * (l - 1) * (1usize << (l - 4))) as f64, 1e-12);

        // Ground-state energies from the dense Hamiltonian.
        for (l, exact) in [(8usize, -3.374932598688), (10, -4.258035207283)] {
            let n = 1usize << l;
            let h = dense_hamiltonian(ctl, l, &w, &left, &right)?;
            let symmetric = (0..n).all(|i| (0..i).all(|j| (h[i * n + j] - h[j * n + i]).abs() < 1e-14));
            if !symmetric {
                bail!("dense H(L={l}) is not symmetric");
            }
            let e0 = lowest_eigenvalue(&h, n)?;
            check.value(&format!("E_0(L={l})"), e0, exact, 1e-9 / exact.abs());
        }
        if check.failures > 0 {
            bail!("{} value(s) differ from their exact references", check.failures);
        }
        println!("all values match their exact references");
        Ok(())
    })
}
