//! Invoking cargo: builds with JSON messages, workspace metadata.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Name of the root (facade) package, which owns the examples and MPI tests.
pub const ROOT_PACKAGE: &str = "uni20";

/// Package that owns the `uni20` binary.
pub const CLI_PACKAGE: &str = "uni20-cli";

/// The workspace root (the parent of the xtask crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// A `cargo` command running in the workspace root.
///
/// Uses `$CARGO` (set by `cargo run`) so the same toolchain is used throughout.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace_root());
    cmd
}

/// Runs a command to completion with inherited stdio, returning its status.
pub fn status(cmd: &mut Command) -> Result<ExitStatus> {
    cmd.status()
        .with_context(|| format!("failed to run {:?}", cmd.get_program()))
}

/// The kind of a cargo target that can be built into an executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetKind {
    /// `--bin NAME`
    Bin,
    /// `--example NAME`
    Example,
    /// `--test NAME`
    Test,
    /// `--bench NAME` (a `harness = false` bench: a program of its own)
    Bench,
}

impl TargetKind {
    /// The cargo flag selecting a target of this kind (e.g. `--example`).
    pub fn flag(self) -> &'static str {
        match self {
            TargetKind::Bin => "--bin",
            TargetKind::Example => "--example",
            TargetKind::Test => "--test",
            TargetKind::Bench => "--bench",
        }
    }

    /// The `kind` string cargo uses in JSON messages and metadata.
    pub fn cargo_kind(self) -> &'static str {
        match self {
            TargetKind::Bin => "bin",
            TargetKind::Example => "example",
            TargetKind::Test => "test",
            TargetKind::Bench => "bench",
        }
    }
}

/// A target to build: its kind and name.
pub type Target = (TargetKind, String);

/// Builds `targets` of `package` with the `mpi` feature (plus `features`) and
/// returns the path of each target's executable.
///
/// Runs `cargo build --message-format=json-render-diagnostics`, so compiler
/// diagnostics are rendered to stderr as usual while the artifact paths are
/// read from the JSON `compiler-artifact` messages on stdout.
pub fn build_mpi(
    package: &str,
    targets: &[Target],
    release: bool,
    features: &[String],
) -> Result<HashMap<Target, PathBuf>> {
    let mut all_features = vec!["mpi".to_string()];
    all_features.extend(
        features
            .iter()
            .flat_map(|f| f.split([',', ' ']))
            .filter(|f| !f.is_empty() && *f != "mpi")
            .map(str::to_string),
    );
    build(package, targets, release, &all_features)
}

/// Builds `targets` of `package` with exactly `features` (none: the
/// package's defaults, without `mpi`) and returns each executable's path.
/// The path of a binary is shared by every feature set: copy the file
/// before building the same target with other features.
pub fn build(
    package: &str,
    targets: &[Target],
    release: bool,
    features: &[String],
) -> Result<HashMap<Target, PathBuf>> {
    let mut cmd = cargo();
    cmd.args(["build", "--package", package]);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    cmd.arg("--message-format=json-render-diagnostics");
    if release {
        cmd.arg("--release");
    }
    for (kind, name) in targets {
        cmd.args([kind.flag(), name]);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());

    let mut child = cmd.spawn().context("failed to start cargo build")?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut found = HashMap::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo output")?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            // Not a JSON message (should not happen); show it rather than lose it.
            eprintln!("{line}");
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let name = msg["target"]["name"].as_str().unwrap_or_default();
        let kinds = msg["target"]["kind"].as_array().cloned().unwrap_or_default();
        for (kind, wanted) in targets {
            if name == wanted && kinds.iter().any(|k| k == kind.cargo_kind()) {
                found.insert((*kind, wanted.clone()), PathBuf::from(exe));
            }
        }
    }
    let status = child.wait().context("waiting for cargo build")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    for target in targets {
        if !found.contains_key(target) {
            bail!(
                "cargo build succeeded but reported no executable for {} {}",
                target.0.flag(),
                target.1
            );
        }
    }
    Ok(found)
}

/// A target of the root package, as reported by `cargo metadata`.
#[derive(Debug, Clone)]
pub struct MetaTarget {
    /// Target name (e.g. `mpi_smoke`).
    pub name: String,
    /// Target kinds (e.g. `["test"]`).
    pub kinds: Vec<String>,
    /// Path of the target's main source file.
    pub src_path: PathBuf,
}

/// Workspace facts xtask needs from `cargo metadata --no-deps`.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// The cargo target directory.
    pub target_directory: PathBuf,
    /// Targets of the root package [`ROOT_PACKAGE`].
    pub root_targets: Vec<MetaTarget>,
}

/// Runs `cargo metadata --no-deps --format-version 1` and extracts [`Metadata`].
pub fn metadata() -> Result<Metadata> {
    let output = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .context("failed to run cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed ({})", output.status);
    }
    let meta: Value = serde_json::from_slice(&output.stdout).context("parsing cargo metadata output")?;
    let target_directory = meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata: no target_directory")?;
    let root = meta["packages"]
        .as_array()
        .and_then(|pkgs| pkgs.iter().find(|p| p["name"] == ROOT_PACKAGE))
        .with_context(|| format!("cargo metadata: package `{ROOT_PACKAGE}` not found"))?;
    let root_targets = root["targets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|t| MetaTarget {
            name: t["name"].as_str().unwrap_or_default().to_string(),
            kinds: t["kind"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect(),
            src_path: PathBuf::from(t["src_path"].as_str().unwrap_or_default()),
        })
        .collect();
    Ok(Metadata {
        target_directory,
        root_targets,
    })
}

impl Metadata {
    /// Root-package targets of the given kind.
    pub fn targets_of(&self, kind: TargetKind) -> impl Iterator<Item = &MetaTarget> {
        self.root_targets
            .iter()
            .filter(move |t| t.kinds.iter().any(|k| k == kind.cargo_kind()))
    }
}
