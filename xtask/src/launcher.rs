//! Finding `mpirun`, detecting its flavour, and building the launch command.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::proc::{self, Outcome};

/// Environment variable that overrides the launcher program (default `mpirun`).
pub const LAUNCHER_ENV: &str = "UNI20_MPIRUN";

/// Which MPI implementation `mpirun` belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Open MPI (`mpirun (Open MPI) 4.1.4`).
    OpenMpi,
    /// MPICH or a Hydra-based derivative (Intel MPI, MVAPICH).
    Mpich,
    /// Something else; launched with `-n` only.
    Unknown,
}

impl Flavor {
    /// Classifies the output of `mpirun --version`.
    pub fn from_version_output(text: &str) -> Flavor {
        let lower = text.to_lowercase();
        if lower.contains("open mpi") || lower.contains("openrte") || lower.contains("prrte") {
            Flavor::OpenMpi
        } else if lower.contains("hydra") || lower.contains("mpich") || lower.contains("intel(r) mpi") {
            Flavor::Mpich
        } else {
            Flavor::Unknown
        }
    }
}

/// A located and identified MPI launcher.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// Path to the launcher program.
    pub program: PathBuf,
    /// The detected implementation.
    pub flavor: Flavor,
    /// First line of `--version` output, for logs.
    pub version: String,
}

/// Searches `PATH` for an executable called `name`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;

    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

impl Launcher {
    /// Finds `mpirun` (or `$UNI20_MPIRUN`) and detects its flavour.
    ///
    /// Returns `Ok(None)` when no launcher is installed.
    pub fn detect() -> Result<Option<Launcher>> {
        let program = match std::env::var_os(LAUNCHER_ENV) {
            Some(p) if !p.is_empty() => {
                let p = PathBuf::from(p);
                if p.components().count() > 1 {
                    p
                } else {
                    match find_in_path(&p.to_string_lossy()) {
                        Some(found) => found,
                        None => return Ok(None),
                    }
                }
            }
            _ => match find_in_path("mpirun") {
                Some(found) => found,
                None => return Ok(None),
            },
        };
        let output = Command::new(&program)
            .arg("--version")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("failed to run `{} --version`", program.display()))?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        let version = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("unknown version")
            .to_string();
        Ok(Some(Launcher {
            flavor: Flavor::from_version_output(&text),
            program,
            version,
        }))
    }

    /// Builds the full launch command for `ranks` copies of `exe args...`.
    ///
    /// Adds the flags that make oversubscribed runs on a small machine work and
    /// behave (no binding, yield when idle, allowed as root) and per-line rank
    /// tags, and sets `RAYON_NUM_THREADS` / `UNI20_THREADS_PER_RANK` to
    /// `max(1, cores / ranks)` unless they are already set. Standard input is
    /// detached when it is a terminal (mpirun runs in a background process
    /// group and would otherwise be stopped by `SIGTTIN`).
    pub fn command(&self, ranks: u32, exe: &Path, args: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        let threads = threads_per_rank(ranks).to_string();
        let mut exported = Vec::new();
        for var in ["RAYON_NUM_THREADS", "UNI20_THREADS_PER_RANK"] {
            if std::env::var_os(var).is_none() {
                cmd.env(var, &threads);
            }
            exported.push(var);
        }
        cmd.arg("-n").arg(ranks.to_string());
        match self.flavor {
            Flavor::OpenMpi => {
                cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                    .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
                // Cross-memory-attach needs ptrace rights that containers
                // usually deny; fall back to copy-in/copy-out unless told.
                if std::env::var_os("OMPI_MCA_btl_vader_single_copy_mechanism").is_none() {
                    cmd.env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
                }
                cmd.args(["--oversubscribe", "--bind-to", "none"])
                    .args(["--mca", "mpi_yield_when_idle", "1"])
                    .arg("--tag-output");
                for var in exported {
                    cmd.args(["-x", var]);
                }
            }
            Flavor::Mpich => {
                // Hydra oversubscribes freely, forwards the whole environment
                // and never refuses root.
                cmd.args(["-bind-to", "none", "-prepend-rank"]);
            }
            Flavor::Unknown => {}
        }
        cmd.arg(exe).args(args);
        // SAFETY: isatty only inspects file descriptor 0.
        if unsafe { libc::isatty(0) } == 1 {
            cmd.stdin(Stdio::null());
        }
        cmd
    }

    /// Launches `ranks` copies of `exe args...` under a hard `timeout`,
    /// echoing the command line first. See [`proc::run_with_timeout`].
    ///
    /// With `forward_stdin` false, standard input is always detached (for
    /// tests, which must not consume the caller's input).
    pub fn run(
        &self,
        ranks: u32,
        exe: &Path,
        args: &[OsString],
        timeout: Duration,
        forward_stdin: bool,
    ) -> Result<(Outcome, Duration)> {
        let mut cmd = self.command(ranks, exe, args);
        if !forward_stdin {
            cmd.stdin(Stdio::null());
        }
        eprintln!("xtask: {}", describe(&cmd));
        proc::run_with_timeout(&mut cmd, timeout)
    }
}

/// `max(1, available cores / ranks)`.
pub fn threads_per_rank(ranks: u32) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / ranks.max(1) as usize).max(1)
}

/// Renders a command as a shell-like line including the env it sets.
pub fn describe(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    parts.push(cmd.get_program().to_string_lossy().into_owned());
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavors() {
        assert_eq!(
            Flavor::from_version_output("mpirun (Open MPI) 4.1.4\n\nReport bugs"),
            Flavor::OpenMpi
        );
        assert_eq!(
            Flavor::from_version_output("HYDRA build details:\n    Version: 4.0.2"),
            Flavor::Mpich
        );
        assert_eq!(Flavor::from_version_output("whatever"), Flavor::Unknown);
    }

    #[test]
    fn threads_at_least_one() {
        assert!(threads_per_rank(1000) >= 1);
        assert!(threads_per_rank(0) >= 1);
    }
}
