//! `cargo xtask guide`: builds the user guide (`docs/guide`) with mdBook and fails
//! on any warning or error it prints, not only on its exit status (mdBook reports
//! some problems, such as a failed `{{#include}}`, as log lines and goes on).

use std::process::Command;

use anyhow::{Context, Result};

use crate::cargo::workspace_root;

/// The mdBook version the guide is written for and `.ci/run` installs.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// How the guide stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuideOutcome {
    /// `mdbook build` passed without warnings.
    Built,
    /// `mdbook` is not installed and this is not CI: skipped with a warning.
    Skipped,
    /// The build failed, printed a warning or an error, or mdbook is missing under CI.
    Failed,
}

/// Whether this run is CI (`CI=true`, as `.ci/run` runs): a missing mdbook fails.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The mdBook log lines that count as failures: its `WARN` and `ERROR` levels.
pub fn problem_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().take(3).collect();
            words.iter().any(|w| {
                let w = w.trim_matches(|c: char| !c.is_ascii_alphabetic());
                w == "WARN" || w == "ERROR"
            })
        })
        .collect()
}

/// Runs `mdbook build docs/guide` in the workspace root; prints what happened.
pub fn build() -> Result<GuideOutcome> {
    let version = match Command::new("mdbook").arg("--version").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        _ => {
            let how = format!("cargo install mdbook --locked --version {MDBOOK_VERSION} --no-default-features");
            if in_ci() {
                eprintln!(
                    "xtask: error: mdbook not found on PATH (CI=true): the guide cannot be built; install it: {how}"
                );
                return Ok(GuideOutcome::Failed);
            }
            eprintln!("xtask: warning: mdbook not found on PATH: SKIPPING the guide build (install it: {how})");
            return Ok(GuideOutcome::Skipped);
        }
    };
    if !version.ends_with(MDBOOK_VERSION) {
        eprintln!("xtask: warning: {version} is not the pinned mdbook {MDBOOK_VERSION}");
    }
    let out = Command::new("mdbook")
        .args(["build", "docs/guide"])
        .current_dir(workspace_root())
        .output()
        .context("running mdbook build docs/guide")?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems = problem_lines(&log);
    if !out.status.success() || !problems.is_empty() {
        eprint!("{log}");
        eprintln!(
            "xtask: mdbook build docs/guide failed ({}, {} warning or error line(s)): warnings count as errors",
            out.status,
            problems.len()
        );
        return Ok(GuideOutcome::Failed);
    }
    eprintln!(
        "xtask: guide built with {version}: {}",
        workspace_root().join("target/guide/index.html").display()
    );
    Ok(GuideOutcome::Built)
}

#[cfg(test)]
mod tests {
    use super::problem_lines;

    #[test]
    fn warnings_and_errors_are_problems() {
        let log = " INFO Book building has started\n\
                   2026-12-01 23:00:00 [WARN] (mdbook_core): unclosed HTML tag\n\
                   ERROR failed to read chapter `x.md`\n\
                   WARN  Error updating \"{{#include x.rs}}\"\n\
                   INFO HTML book written to `target/guide`\n";
        assert_eq!(problem_lines(log).len(), 3);
        assert!(problem_lines(" INFO Running the html backend\n INFO HTML book written\n").is_empty());
    }
}
