//! Helpers shared by the CLI tests.

#![allow(dead_code)]

use std::process::Command;

/// Runs the `uni20` binary with `args` on three in-process ranks; returns its exit code (-1
/// if killed by a signal), stdout and stderr.
pub fn uni20(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uni20"))
        .args(args)
        .env("UNI20_RANKS", "3")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A version-1.0 `.npy` file: the header dictionary (dtype `descr`, C order, `shape` as a
/// Python tuple literal) padded to a multiple of 64 bytes, then `payload`.
pub fn npy(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    v.extend_from_slice(dict.as_bytes());
    v.extend_from_slice(payload);
    v
}
