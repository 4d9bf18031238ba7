//! `examples/quench.rs --output DIR` (TEBD) and `examples/tdvp.rs --output
//! DIR` (TDVP, the same output code) write files that read back: the JSON
//! per-step statistics, the `.npy` arrays of `<Sz_i(t)>` and of the
//! entanglement entropy (shapes, and the values at t = 0: the Neel state's
//! +-1/2 and zero entropy; at later times the staggered magnetization in the
//! JSON equals the one computed here from `sz.npy`), and an SVG picture of
//! the stated size.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn example_binary(name: &str) -> PathBuf {
    common::example_binary(name)
}

fn read_npy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f64>().unwrap())
}

#[test]
fn output_files_read_back() {
    check_outputs("quench");
}

#[test]
fn tdvp_output_files_read_back() {
    check_outputs("tdvp");
}

fn check_outputs(example: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q");
    let l = 6;
    let st = Command::new(example_binary(example))
        .args([
            "--sites", "6", "--time", "0.3", "--dt", "0.1", "--block", "4", "--output",
        ])
        .arg(&out)
        .env("UNI20_RANKS", "2")
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("steps.json")).unwrap()).unwrap();
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    let (shape, sz) = read_npy(&out.join("sz.npy"));
    assert_eq!(shape, vec![4, l as u64]);
    for (i, m) in sz[..l].iter().enumerate() {
        assert!((m - if i % 2 == 0 { 0.5 } else { -0.5 }).abs() < 1e-14);
    }
    for (k, step) in steps.iter().enumerate() {
        let m: f64 = (0..l)
            .map(|i| if i % 2 == 0 { sz[k * l + i] } else { -sz[k * l + i] })
            .sum::<f64>()
            / l as f64;
        assert!((step["staggered_magnetization"].as_f64().unwrap() - m).abs() < 1e-14);
    }
    assert!(
        steps[3]["staggered_magnetization"].as_f64().unwrap() < 0.49,
        "the state moved"
    );
    let (eshape, ent) = read_npy(&out.join("entropy.npy"));
    assert_eq!(eshape, vec![4, l as u64 - 1]);
    assert!(ent[..l - 1].iter().all(|s| s.abs() < 1e-12));
    assert!(ent[3 * (l - 1) + l / 2 - 1] > 1e-3);
    let svg = std::fs::read_to_string(out.join("sz.svg")).unwrap();
    let head = &svg[..svg.find('>').unwrap()];
    assert!(
        head.starts_with("<svg") && head.contains("width=\"800\"") && head.contains("height=\"480\""),
        "{head}"
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.matches("<polyline").count() >= 2, "two curves drawn");
}
