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
