//! `examples/dmrg.rs --env-budget SIZE` as a user runs it: the header names
//! the budget, `--profile` reports offloaded, written and prefetched bytes
//! per sweep, and the printed sweep energies are those of the same run
//! without a budget (the same lines, to the 12 printed decimals), with and
//! without `--no-prefetch`; a malformed size and `--no-prefetch` without a
//! budget are refused.

mod common;

use std::process::Command;

fn run(extra: &[&str]) -> (bool, String, String) {
    let res = Command::new(common::example_binary("dmrg"))
        .args([
            "--sites",
            "10",
            "--chi-max",
            "12",
            "--block",
            "4",
            "--sweeps",
            "3",
            "--tol",
            "0",
        ])
        .args(extra)
        .env("UNI20_RANKS", "2")
        .env("UNI20_THREADS_PER_RANK", "1")
        .output()
        .unwrap();
    (
        res.status.success(),
        String::from_utf8_lossy(&res.stdout).into_owned(),
        String::from_utf8_lossy(&res.stderr).into_owned(),
    )
}

/// The energy of every sweep line (`sweep   k  E = ...`).
fn energies(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("sweep "))
        .map(|l| l.split("  dE").next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_budgeted_run_prints_the_unbudgeted_energies_and_its_traffic() {
    let (ok, plain, err) = run(&[]);
    assert!(ok, "{err}");
    assert_eq!(energies(&plain).len(), 3, "{plain}");
    for extra in [
        &["--env-budget", "20K"][..],
        &["--env-budget", "20K", "--no-prefetch"][..],
    ] {
        let args: Vec<&str> = extra.iter().copied().chain(["--profile"]).collect();
        let (ok, out, err) = run(&args);
        assert!(ok, "{extra:?}: {err}");
        let prefetch = if extra.len() == 2 { "on" } else { "off" };
        assert!(
            out.contains(&format!(
                "env budget: 20.5 kB per rank (20480 bytes), prefetch {prefetch}"
            )),
            "{out}"
        );
        assert_eq!(energies(&out), energies(&plain), "{extra:?}");
        let traffic: Vec<&str> = out.lines().filter(|l| l.contains("  environments: ")).collect();
        assert_eq!(traffic.len(), 3, "{out}");
        assert!(
            !traffic[2].contains("offloaded 0.0 kB"),
            "nothing offloaded: {}",
            traffic[2]
        );
        assert_eq!(
            traffic[2].contains("prefetched 0.0 kB"),
            prefetch == "off",
            "{}",
            traffic[2]
        );
    }
}

#[test]
fn bad_budgets_are_refused() {
    let (ok, _, err) = run(&["--env-budget", "12X"]);
    assert!(!ok);
    assert!(err.contains("12X"), "{err}");
    let (ok, _, err) = run(&["--no-prefetch"]);
    assert!(!ok);
    assert!(err.contains("--env-budget"), "{err}");
}
