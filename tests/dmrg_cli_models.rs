//! `examples/dmrg.rs --model NAME --measure --output DIR` as a user runs it:
//! the transverse-field Ising chain (L = 8, g = 0.5) ends at the
//! free-fermion ground energy (computed here from the singular values of
//! the L x L matrix with g on the diagonal and 1 above it) to 1e-9, prints
//! a vanishing energy variance, and writes files that read back:
//! `sweeps.json` (the printed energies), `profile.npy` (`<Sz_i>`, mirror
//! symmetric on the open chain), `entropy.npy` (L - 1 bonds) and an SVG of
//! the stated size. `--excited 2` on the spin-1 chain gives the three
//! lowest levels of the dense spectrum.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn example_binary() -> PathBuf {
    common::example_binary("dmrg")
}

fn read_npy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f64>().unwrap())
}

fn tfi_exact(l: usize, g: f64) -> f64 {
    let mut a = vec![0.0; l * l];
    for i in 0..l {
        a[i * l + i] = g;
        if i + 1 < l {
            a[i * l + i + 1] = 1.0;
        }
    }
    let t = uni20::dispatch::LocalTensor::from_f64(&[l, l], a).unwrap();
    -uni20::dispatch::decomp::svd(
        &t,
        &Default::default(),
        &uni20::dispatch::decomp::SvdBackendList::default_cpu(1),
    )
    .unwrap()
    .s
    .iter()
    .sum::<f64>()
}

#[test]
fn tfi_model_with_measurements_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let l = 8;
    let res = Command::new(example_binary())
        .args([
            "--model",
            "tfi",
            "--g",
            "0.5",
            "--sites",
            "8",
            "--chi-max",
            "16",
            "--block",
            "8",
        ])
        .args(["--measure", "--output"])
        .arg(&out)
        .env("UNI20_RANKS", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(stdout.contains("MPO bond dimension 3"), "{stdout}");
    let final_line = stdout.lines().find(|l| l.starts_with("final: E = ")).unwrap();
    let e: f64 = final_line["final: E = ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let exact = tfi_exact(l, 0.5);
    assert!((e - exact).abs() < 1e-9, "DMRG {e}, free fermions {exact}");
    let var_line = stdout.lines().find(|l| l.contains("<H^2> - <H>^2")).unwrap();
    let var: f64 = var_line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(var.abs() < 1e-8, "{var_line}");

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweeps.json")).unwrap()).unwrap();
    let sweeps = doc["sweeps"].as_array().unwrap();
    assert!(!sweeps.is_empty());
    assert!(
        (sweeps.last().unwrap()["energy"].as_f64().unwrap() - e).abs() < 1e-11,
        "JSON and printed energy"
    );
    assert_eq!(doc["model"], "tfi");
    let (shape, sz) = read_npy(&out.join("profile.npy"));
    assert_eq!(shape, vec![l as u64]);
    for i in 0..l / 2 {
        assert!(
            (sz[i] - sz[l - 1 - i]).abs() < 1e-8,
            "mirror symmetry of <Sz_i>: {sz:?}"
        );
    }
    assert!(
        sz.iter().all(|m| *m > 0.0 && *m <= 0.5),
        "the field aligns the spins: {sz:?}"
    );
    let (eshape, _) = read_npy(&out.join("entropy.npy"));
    assert_eq!(eshape, vec![l as u64 - 1]);
    let svg = std::fs::read_to_string(out.join("dmrg.svg")).unwrap();
    let head = &svg[..svg.find('>').unwrap()];
    assert!(
        head.contains("width=\"900\"") && head.contains("height=\"400\""),
        "{head}"
    );
    assert!(svg.trim_end().ends_with("</svg>"));
}

#[test]
fn unknown_model_is_refused() {
    let res = Command::new(example_binary())
        .args(["--model", "potts"])
        .output()
        .unwrap();
    assert!(!res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("potts"));
}

/// `--excited 2` on the spin-1 chain at L = 6: the singlet and two members of
/// the edge-state triplet, against the spectrum of the dense Hamiltonian
/// (eigh of the 729 x 729 matrix from the model's MPO), printed and in
/// `sweeps.json` (`levels`).
#[test]
fn excited_levels_of_the_spin1_chain() {
    let l = 6;
    let model = uni20::tn::models::spin1(l, 1.0, 0.0, uni20::tn::Conserve::None).unwrap();
    let local = model
        .hamiltonian
        .to_mpo(&model.sites, &uni20::tn::MpoOptions::default())
        .unwrap();
    let n = 729;
    let h: Vec<f64> = local.dense_matrix().unwrap().iter().map(|z| z.re).collect();
    let exact = uni20::dispatch::decomp::eigh(
        &uni20::dispatch::LocalTensor::from_f64(&[n, n], h).unwrap(),
        &Default::default(),
        &uni20::dispatch::decomp::EighBackendList::default_cpu(1),
    )
    .unwrap()
    .values;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let res = Command::new(example_binary())
        .args([
            "--model",
            "spin1",
            "--sites",
            "6",
            "--chi-max",
            "32",
            "--cutoff",
            "1e-14",
            "--block",
            "8",
            "--tol",
            "1e-12",
            "--excited",
            "2",
            "--output",
        ])
        .arg(&out)
        .env("UNI20_RANKS", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let printed: Vec<f64> = (0..3)
        .map(|k| {
            let tag = format!("level {k}: E = ");
            let line = stdout.lines().find(|x| x.starts_with(&tag)).unwrap();
            line[tag.len()..].split_whitespace().next().unwrap().parse().unwrap()
        })
        .collect();
    let want = [exact[0], exact[1], exact[2]];
    for k in 0..3 {
        assert!(
            (printed[k] - want[k]).abs() < 1e-8,
            "level {k}: {} vs exact {}",
            printed[k],
            want[k]
        );
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweeps.json")).unwrap()).unwrap();
    let levels: Vec<f64> = doc["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(levels.len(), 3);
    for k in 0..3 {
        assert!((levels[k] - printed[k]).abs() < 1e-11);
    }
    // Refused with checkpoints.
    let res = Command::new(example_binary())
        .args(["--model", "spin1", "--sites", "6", "--excited", "1", "--checkpoint"])
        .arg(dir.path().join("ck"))
        .env("UNI20_RANKS", "1")
        .output()
        .unwrap();
    assert!(!res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("--excited"));
}
