//! Every code block of the user guide (`docs/guide`) is tested, or it fails here.
//!
//! The rules (the guide's "Contributing" chapter states them for authors):
//!
//! - A ```` ```rust ```` block holds exactly one `{{#include PATH}}` or
//!   `{{#include PATH:ANCHOR}}` of a Rust file that cargo builds and a test runs: a
//!   file of an example (`examples/NAME.rs`, or `examples/NAME/`) declared with
//!   `test = true` in `Cargo.toml`, run under MPI by `cargo xtask test` (its
//!   `MPI_EXAMPLES`), or with a test of its own (`tests/NAME.rs`); or a file under
//!   `tests/`. The anchor must exist in the file (line-number ranges are refused: they
//!   drift silently when the file changes).
//! - A ```` ```sh ```` block holds commands that this test understands: `cargo
//!   run|build|test|install` and `cargo xtask` with options cargo or the xtask accept
//!   and targets that exist, the arguments after `--` against the target's own
//!   options (its clap `Args`), the built binaries under `./target/*/`, `mpirun`
//!   with such a binary, `apt-get install` of packages `.ci/run` installs, `python3`
//!   and `pip install` of existing paths, `mdbook build docs/guide`; environment
//!   variables set before a command must be ones the code reads.
//! - A ```` ```python ```` block holds one `{{#include PATH}}` of an existing `.py` file.
//! - A ```` ```text ```` block is output, a synopsis or a file fragment: not checked.
//! - Any block may instead follow a `<!-- tested-by: PATH -->` line: PATH is a test
//!   that reads this page (the file must exist and name the page's file).
//! - An untagged block (which mdBook would present as Rust) or any other language is
//!   refused.
//!
//! The pages are every `.md` file under `docs/guide/src` and every Markdown file they
//! include (the Python package's README, `docs/performance.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The repository root (xtask lives one level below it).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}

/// One fenced code block of a page.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    /// The first word of the info string (`rust` of `rust,no_run`), maybe empty.
    lang: String,
    /// The lines between the fences.
    body: Vec<String>,
    /// The PATH of a `<!-- tested-by: PATH -->` line right before the fence.
    tested_by: Option<String>,
}

/// The fenced blocks of `md` (backtick or tilde fences of three or more), and the
/// `{{#include PATH...}}` targets that appear outside them.
fn parse(md: &str) -> Result<(Vec<Block>, Vec<String>), String> {
    let mut blocks = Vec::new();
    let mut includes = Vec::new();
    let mut open: Option<(String, Block)> = None;
    let mut last_nonblank = String::new();
    for (i, raw) in md.lines().enumerate() {
        let trimmed = raw.trim_start();
        if let Some((fence, block)) = open.as_mut() {
            if trimmed.starts_with(fence.as_str())
                && trimmed.trim_end().chars().all(|c| c == fence.as_bytes()[0] as char)
            {
                blocks.push(open.take().expect("open block").1);
            } else {
                block.body.push(raw.to_string());
            }
            continue;
        }
        let fence_char = trimmed.chars().next();
        if matches!(fence_char, Some('`') | Some('~')) {
            let c = fence_char.expect("checked");
            let n = trimmed.chars().take_while(|&x| x == c).count();
            if n >= 3 {
                let info = trimmed[n..].trim();
                let lang = info.split([',', ' ', '{']).next().unwrap_or("").to_string();
                let tested_by = last_nonblank
                    .trim()
                    .strip_prefix("<!-- tested-by:")
                    .and_then(|s| s.strip_suffix("-->"))
                    .map(|s| s.trim().to_string());
                open = Some((
                    c.to_string().repeat(n),
                    Block {
                        line: i + 1,
                        lang,
                        body: Vec::new(),
                        tested_by,
                    },
                ));
                continue;
            }
        }
        let mut rest = raw;
        while let Some(at) = rest.find("{{#include ") {
            let after = &rest[at + "{{#include ".len()..];
            if rest[..at].ends_with('\\') {
                // `\{{#include ..}}` is mdBook's escape: shown, not expanded.
                rest = after;
                continue;
            }
            let end = after
                .find("}}")
                .ok_or_else(|| format!("line {}: unterminated {{{{#include", i + 1))?;
            includes.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
        if !raw.trim().is_empty() {
            last_nonblank = raw.to_string();
        }
    }
    if let Some((_, b)) = open {
        return Err(format!("line {}: code block never closed", b.line));
    }
    Ok((blocks, includes))
}

/// `a/b/../c` without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Splits `PATH[:ANCHOR]` of an include; refuses line ranges.
fn split_include(spec: &str) -> Result<(String, Option<String>), String> {
    match spec.split_once(':') {
        None => Ok((spec.to_string(), None)),
        Some((path, rest)) => {
            if rest.is_empty() || rest.chars().next().is_some_and(|c| c.is_ascii_digit()) || rest.contains(':') {
                Err(format!(
                    "`{spec}`: a line range drifts when the file changes; use `// ANCHOR: name` and `:name`"
                ))
            } else {
                Ok((path.to_string(), Some(rest.to_string())))
            }
        }
    }
}

/// What the checks look things up in: the repository's manifests and sources.
struct Repo {
    root: PathBuf,
    /// `[[example]]` names with `test = true` in the root Cargo.toml.
    tested_examples: BTreeSet<String>,
    /// Examples `cargo xtask test` runs under MPI.
    mpi_examples: BTreeSet<String>,
    /// Workspace package name -> directory.
    packages: BTreeMap<String, PathBuf>,
    /// Upper-case string literals (`"UNI20_RANKS"`) of the sources: the environment
    /// variables the code reads or sets.
    env_vars: BTreeSet<String>,
    /// Packages `.ci/run` installs.
    ci_packages: BTreeSet<String>,
}

impl Repo {
    fn load(root: &Path) -> Repo {
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("reading {p}: {e}"));
        let cargo = read("Cargo.toml");
        let mut tested_examples = BTreeSet::new();
        for section in cargo.split("[[").skip(1) {
            if !section.starts_with("example]]") {
                continue;
            }
            let name = section
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = \"").and_then(|s| s.strip_suffix('"')));
            if let Some(name) = name {
                if section.lines().any(|l| l.trim() == "test = true") {
                    tested_examples.insert(name.to_string());
                }
            }
        }
        let test_rs = read("xtask/src/test.rs");
        let mpi_block = test_rs
            .split("pub const MPI_EXAMPLES")
            .nth(1)
            .and_then(|s| s.split("];").next())
            .expect("xtask/src/test.rs declares MPI_EXAMPLES");
        let mut mpi_examples: BTreeSet<String> = quoted(mpi_block).into_iter().collect();
        if mpi_block.contains("SMOKE_EXAMPLE") {
            let smoke = test_rs
                .split("pub const SMOKE_EXAMPLE: &str = ")
                .nth(1)
                .and_then(|s| quoted(s).into_iter().next())
                .expect("SMOKE_EXAMPLE is a string");
            mpi_examples.insert(smoke);
        }
        let mut packages = BTreeMap::new();
        packages.insert("uni20".to_string(), root.to_path_buf());
        for entry in std::fs::read_dir(root.join("crates")).expect("crates/").flatten() {
            if let Ok(toml) = std::fs::read_to_string(entry.path().join("Cargo.toml")) {
                if let Some(name) = toml
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("name = \"").and_then(|s| s.strip_suffix('"')))
                {
                    packages.insert(name.to_string(), entry.path());
                }
            }
        }
        packages.insert("xtask".to_string(), root.join("xtask"));
        let mut env_vars = BTreeSet::new();
        let mut sources = Vec::new();
        for dir in ["src", "examples", "xtask/src", "crates"] {
            rust_files(&root.join(dir), &mut sources);
        }
        for f in &sources {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            for q in quoted(&text) {
                if q.len() > 2
                    && q.chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                {
                    env_vars.insert(q);
                }
            }
        }
        let ci = read(".ci/run");
        let ci_packages = ci
            .lines()
            .find_map(|l| l.strip_prefix("PACKAGES=("))
            .expect(".ci/run declares PACKAGES=(...)")
            .trim_end_matches(')')
            .split_whitespace()
            .map(str::to_string)
            .collect();
        Repo {
            root: root.to_path_buf(),
            tested_examples,
            mpi_examples,
            packages,
            env_vars,
            ci_packages,
        }
    }

    /// Checks one block of `page`; returns its problems.
    fn check_block(&self, page: &Path, b: &Block) -> Vec<String> {
        let page_dir = page.parent().expect("a page has a directory");
        if let Some(test) = &b.tested_by {
            let path = self.root.join(test);
            let name = page.file_name().expect("a page has a name").to_string_lossy();
            return match std::fs::read_to_string(&path) {
                Ok(text) if text.contains(name.as_ref()) => Vec::new(),
                Ok(_) => vec![format!("tested-by `{test}` does not read `{name}`")],
                Err(e) => vec![format!("tested-by `{test}`: {e}")],
            };
        }
        let lines: Vec<&str> = b.body.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect();
        match b.lang.as_str() {
            "text" => Vec::new(),
            "" => vec!["untagged block (mdBook shows it as Rust): tag it `text`, `sh`, `rust` or `python`".into()],
            "rust" | "python" => {
                let [only] = lines.as_slice() else {
                    return vec![format!(
                        "a `{}` block must be exactly one {{{{#include FILE[:ANCHOR]}}}} of a tested file",
                        b.lang
                    )];
                };
                let Some(spec) = only.strip_prefix("{{#include ").and_then(|s| s.strip_suffix("}}")) else {
                    return vec![format!(
                        "inline `{}` code is not compiled by any test: move it into a tested file and {{{{#include}}}} it",
                        b.lang
                    )];
                };
                let (path, anchor) = match split_include(spec.trim()) {
                    Ok(x) => x,
                    Err(e) => return vec![e],
                };
                let file = normalize(&page_dir.join(&path));
                let mut errs = Vec::new();
                let text = match std::fs::read_to_string(&file) {
                    Ok(t) => t,
                    Err(e) => return vec![format!("include `{path}`: {e}")],
                };
                if let Some(a) = &anchor {
                    if !text.contains(&format!("ANCHOR: {a}")) || !text.contains(&format!("ANCHOR_END: {a}")) {
                        errs.push(format!(
                            "include `{path}`: no `ANCHOR: {a}` ... `ANCHOR_END: {a}` in the file"
                        ));
                    }
                }
                if b.lang == "rust" {
                    if let Err(e) = self.tested_rust_file(&file) {
                        errs.push(format!("include `{path}`: {e}"));
                    }
                } else if file.extension().is_none_or(|e| e != "py") {
                    errs.push(format!("include `{path}`: a python block includes a .py file"));
                }
                errs
            }
            "sh" => {
                let mut errs = Vec::new();
                for cmd in logical_lines(&b.body) {
                    if let Err(e) = self.check_command(&cmd) {
                        errs.push(format!("`{cmd}`: {e}"));
                    }
                }
                errs
            }
            other => vec![format!(
                "language `{other}` is not checked: use `text`, `sh`, `rust` or `python`"
            )],
        }
    }

    /// Whether `file` is compiled by cargo and run by a test.
    fn tested_rust_file(&self, file: &Path) -> Result<(), String> {
        let rel = file
            .strip_prefix(&self.root)
            .map_err(|_| "outside the repository".to_string())?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if rel.extension().is_none_or(|e| e != "rs") {
            return Err("not a .rs file".into());
        }
        // The package directory: the root, or crates/NAME.
        let (pkg_dir, rest) = if parts.first().map(String::as_str) == Some("crates") && parts.len() > 2 {
            (self.root.join(&parts[0]).join(&parts[1]), &parts[2..])
        } else {
            (self.root.clone(), &parts[..])
        };
        match rest.first().map(String::as_str) {
            Some("tests") => Ok(()),
            Some("examples") if rest.len() >= 2 => {
                let name = rest[1].trim_end_matches(".rs").to_string();
                let is_target = if rest.len() == 2 {
                    true
                } else {
                    pkg_dir.join("examples").join(&name).join("main.rs").exists()
                };
                if !is_target {
                    return Err(format!(
                        "examples/{name}/ has no main.rs, so cargo builds no example from it"
                    ));
                }
                if pkg_dir != self.root {
                    return if pkg_dir.join("tests").join(format!("{name}.rs")).exists() {
                        Ok(())
                    } else {
                        Err(format!(
                            "example `{name}` of {} has no test that runs it",
                            pkg_dir.display()
                        ))
                    };
                }
                if self.tested_examples.contains(&name)
                    || self.mpi_examples.contains(&name)
                    || self.root.join("tests").join(format!("{name}.rs")).exists()
                {
                    Ok(())
                } else {
                    Err(format!(
                        "example `{name}` is built but nothing runs it: declare it with `test = true` in Cargo.toml, \
                         add it to MPI_EXAMPLES in xtask/src/test.rs, or give it a tests/{name}.rs"
                    ))
                }
            }
            _ => Err("not a file of examples/ or tests/, which cargo builds".into()),
        }
    }

    /// Checks one shell command line.
    fn check_command(&self, cmd: &str) -> Result<(), String> {
        let mut words = shell_words(cmd)?;
        if words.first().map(String::as_str) == Some("export") {
            words.remove(0);
        }
        // Leading VAR=value assignments.
        while let Some((var, _)) = words.first().and_then(|w| w.split_once('=')) {
            if !var
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                break;
            }
            if !self.env_vars.contains(var) {
                return Err(format!("no source reads the environment variable `{var}`"));
            }
            words.remove(0);
        }
        let Some(program) = words.first().cloned() else {
            return Ok(());
        };
        let args = &words[1..];
        match program.as_str() {
            "cargo" => self.check_cargo(args),
            "mpirun" => {
                let mut i = 0;
                while i < args.len() {
                    match args[i].as_str() {
                        "-n" | "-np" | "--bind-to" | "-x" => i += 2,
                        "--mca" => i += 3,
                        "--allow-run-as-root" | "--oversubscribe" | "--tag-output" => i += 1,
                        p if p.starts_with("./") || p.starts_with('/') => return self.check_binary(p, &args[i + 1..]),
                        "python3" | "python" => return self.check_python(&args[i + 1..]),
                        other => return Err(format!("mpirun option `{other}` is not one this guide uses")),
                    }
                }
                Err("mpirun without a program".into())
            }
            p if p.starts_with("./target/") => self.check_binary(p, args),
            "apt-get" => {
                let [install, pkgs @ ..] = args else {
                    return Err("apt-get without a command".into());
                };
                if install != "install" {
                    return Err(format!("apt-get `{install}`"));
                }
                for p in pkgs.iter().filter(|p| !p.starts_with('-')) {
                    if !self.ci_packages.contains(p) {
                        return Err(format!("package `{p}` is not one .ci/run installs"));
                    }
                }
                Ok(())
            }
            "python3" | "python" => self.check_python(args),
            "pytest" => self.paths_exist(args),
            "pip" | "pip3" => match args.split_first() {
                // Paths must exist; bare names are registry packages.
                Some((install, rest)) if install == "install" => self.paths_exist(rest),
                _ => Err("only `pip install ...` is checked".into()),
            },
            "maturin" => match args.split_first() {
                Some((sub, rest)) if sub == "develop" || sub == "build" => {
                    match rest.iter().position(|a| a == "-m" || a == "--manifest-path") {
                        Some(i) => self.exists(rest.get(i + 1).ok_or("`-m` needs a path")?),
                        None => Ok(()),
                    }
                }
                _ => Err("only `maturin develop|build` is checked".into()),
            },
            "mdbook" => match args {
                [build, dir] if build == "build" => self.exists(&format!("{dir}/book.toml")),
                _ => Err("only `mdbook build DIR` is checked".into()),
            },
            other => Err(format!(
                "`{other}` is a command this test does not check: mark the block `text`, or teach xtask/tests/guide_blocks.rs"
            )),
        }
    }

    /// `python3 -c CODE`, `python3 -m pytest PATHS`, `python3 SCRIPT ARGS`.
    fn check_python(&self, args: &[String]) -> Result<(), String> {
        match args.split_first() {
            Some((c, _)) if c == "-c" => Ok(()),
            Some((m, rest)) if m == "-m" => match rest.split_first() {
                Some((module, paths)) if module == "pytest" => self.paths_exist(paths),
                Some((module, _)) => Err(format!("`python3 -m {module}` is not checked")),
                None => Err("`-m` without a module".into()),
            },
            Some((script, _)) => self.exists(script),
            None => Err("python3 without a script".into()),
        }
    }

    /// Every argument that looks like a path (has a `/`, or ends in `.py`) exists.
    fn paths_exist(&self, args: &[String]) -> Result<(), String> {
        for a in args
            .iter()
            .filter(|a| !a.starts_with('-') && (a.contains('/') || a.ends_with(".py")))
        {
            self.exists(a)?;
        }
        Ok(())
    }

    fn exists(&self, path: &str) -> Result<(), String> {
        if self.root.join(path).exists() {
            Ok(())
        } else {
            Err(format!("`{path}` does not exist in the repository"))
        }
    }

    /// `cargo run|build|test|install|xtask ...`.
    fn check_cargo(&self, args: &[String]) -> Result<(), String> {
        let (sub, rest) = args.split_first().ok_or("cargo without a command")?;
        match sub.as_str() {
            "xtask" => self.check_xtask(rest),
            "install" => match rest.first().map(String::as_str) {
                Some("mdbook") => Ok(()),
                _ => Err("only `cargo install mdbook` is checked".into()),
            },
            "run" | "build" | "test" | "bench" => {
                let (own, target_args) = split_dashdash(rest);
                let mut package = "uni20".to_string();
                let mut target: Option<(&str, String)> = None;
                let mut i = 0;
                while i < own.len() {
                    let a = own[i].as_str();
                    let value = || own.get(i + 1).cloned().ok_or(format!("`{a}` needs a value"));
                    match a {
                        "--release" | "--workspace" | "--quiet" | "--lib" | "--all-targets" => i += 1,
                        "--features" | "-F" => i += 2,
                        "-p" | "--package" => {
                            package = value()?;
                            if !self.packages.contains_key(&package) {
                                return Err(format!("no workspace package `{package}`"));
                            }
                            i += 2;
                        }
                        "--example" | "--test" | "--bin" | "--bench" => {
                            target = Some((a, value()?));
                            i += 2;
                        }
                        other => return Err(format!("cargo option `{other}` is not one this test knows")),
                    }
                }
                let source = match &target {
                    Some((kind, name)) => Some(self.target_source(&package, kind, name)?),
                    None if package == "uni20-cli" => Some(self.packages["uni20-cli"].join("src/main.rs")),
                    None => None,
                };
                match source {
                    Some(src) => check_args(&src, target_args),
                    None if target_args.is_empty() => Ok(()),
                    None => Err("arguments after `--` without a target".into()),
                }
            }
            other => Err(format!("`cargo {other}` is not checked")),
        }
    }

    /// The source file of a cargo target.
    fn target_source(&self, package: &str, kind: &str, name: &str) -> Result<PathBuf, String> {
        let dir = &self.packages[package];
        let candidates = match kind {
            "--example" => vec![
                dir.join("examples").join(format!("{name}.rs")),
                dir.join("examples").join(name).join("main.rs"),
            ],
            "--test" => vec![dir.join("tests").join(format!("{name}.rs"))],
            "--bench" => vec![dir.join("benches").join(format!("{name}.rs"))],
            _ if name == "uni20" => vec![self.packages["uni20-cli"].join("src/main.rs")],
            _ => vec![dir.join("src/bin").join(format!("{name}.rs"))],
        };
        candidates
            .into_iter()
            .find(|p| p.exists())
            .ok_or_else(|| format!("package `{package}` has no {} `{name}`", kind.trim_start_matches('-')))
    }

    /// `cargo xtask SUB ...`, against the xtask's own clap definitions.
    fn check_xtask(&self, args: &[String]) -> Result<(), String> {
        let src = self.root.join("xtask/src/main.rs");
        let text = std::fs::read_to_string(&src).map_err(|e| e.to_string())?;
        let (sub, rest) = args.split_first().ok_or("cargo xtask without a task")?;
        let variant = subcommand_variant(&text, "enum Task", sub).ok_or(format!("no xtask task `{sub}`"))?;
        let (own, target_args) = split_dashdash(rest);
        let Some(args_struct) = variant else {
            return if own.is_empty() && target_args.is_empty() {
                Ok(())
            } else {
                Err(format!("`cargo xtask {sub}` takes no arguments"))
            };
        };
        let opts = clap_options(&text, &format!("struct {args_struct} "))?;
        let mut target = None;
        let mut i = 0;
        while i < own.len() {
            let a = own[i].as_str();
            let (name, inline_value) = match a.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (a, None),
            };
            let takes = *opts
                .get(name)
                .ok_or(format!("`cargo xtask {sub}` has no option `{name}`"))?;
            if takes && inline_value.is_none() {
                let v = own.get(i + 1).ok_or(format!("`{name}` needs a value"))?;
                if matches!(name, "--example" | "--test" | "--bin") {
                    target = Some((name.to_string(), v.clone()));
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        match target {
            Some((kind, name)) => {
                let src = self.target_source("uni20", &kind, &name)?;
                check_args(&src, target_args)
            }
            None if target_args.is_empty() || sub == "bench" => Ok(()),
            None => Err("arguments after `--` without a target".into()),
        }
    }

    /// `./target/PROFILE/examples/NAME ARGS` or `./target/PROFILE/uni20 ARGS`.
    fn check_binary(&self, path: &str, args: &[String]) -> Result<(), String> {
        let parts: Vec<&str> = path.trim_start_matches("./").split('/').collect();
        match parts.as_slice() {
            ["target", "release" | "debug", "examples", name] => {
                let src = self.target_source("uni20", "--example", name)?;
                check_args(&src, args)
            }
            ["target", "release" | "debug", "uni20"] => {
                let src = self.packages["uni20-cli"].join("src/main.rs");
                check_args(&src, args)
            }
            _ => Err(format!("`{path}` is not a binary this workspace builds")),
        }
    }
}

/// Checks `args` against the clap definitions in `src` (`struct Args`/`struct Cli`, and
/// subcommand variants of `enum Command`); a program without clap gets its `--options`
/// checked against the string literals of its source.
fn check_args(src: &Path, args: &[String]) -> Result<(), String> {
    if args.is_empty() {
        return Ok(());
    }
    let text = std::fs::read_to_string(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let name = src.display();
    if !text.contains("derive(Parser") && !text.contains("derive(Debug, Parser") {
        for a in args.iter().filter(|a| a.starts_with("--")) {
            let flag = a.split('=').next().unwrap_or(a);
            if !text.contains(&format!("\"{flag}\"")) {
                return Err(format!("{name} does not know the option `{flag}`"));
            }
        }
        return Ok(());
    }
    let mut opts = BTreeMap::new();
    for header in ["struct Args ", "struct Cli "] {
        if text.contains(header) {
            opts.extend(clap_options(&text, header)?);
        }
    }
    let mut rest = args;
    if text.contains("enum Command") {
        if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
            match subcommand_variant(&text, "enum Command", first) {
                Some(_) => {
                    let variant = capitalize(first);
                    if let Ok(more) = clap_options(&text, &format!("{variant} {{")) {
                        opts.extend(more);
                    }
                    rest = &args[1..];
                }
                None => return Err(format!("{name} has no subcommand `{first}`")),
            }
        }
    }
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        if !a.starts_with('-') || a == "-" || a.parse::<f64>().is_ok() {
            i += 1;
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        let takes = *opts.get(flag).ok_or(format!("{name} has no option `{flag}`"))?;
        i += if takes && !a.contains('=') { 2 } else { 1 };
    }
    Ok(())
}

/// The variant of `enum_header` that the kebab-case `sub` names: `Some(Some(Args))` for
/// `Name(Args)`, `Some(None)` for a unit or struct-like variant.
fn subcommand_variant(text: &str, enum_header: &str, sub: &str) -> Option<Option<String>> {
    let body = text.split(enum_header).nth(1)?;
    let want = capitalize(sub);
    let mut depth = 0i32;
    for line in body.lines() {
        let t = line.trim();
        if depth == 1 && !t.starts_with("///") && !t.starts_with("#[") {
            let ident: String = t.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if ident == want {
                let after = &t[ident.len()..];
                return Some(
                    after
                        .strip_prefix('(')
                        .and_then(|s| s.split(')').next())
                        .map(str::to_string),
                );
            }
        }
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        if depth <= 0 && t.contains('}') {
            break;
        }
    }
    None
}

/// `dmrg-only` -> `DmrgOnly`.
fn capitalize(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The options of the clap-derived struct (or struct-like variant) whose definition
/// starts with `header`: `--long`/`-s` -> whether it takes a value. Flattened structs
/// (`#[command(flatten)]`) of the same file are included; `--help` always is.
fn clap_options(text: &str, header: &str) -> Result<BTreeMap<String, bool>, String> {
    let start = text.find(header).ok_or(format!("no `{header}` in the source"))?;
    let body = &text[start..];
    let open = body.find('{').ok_or("no body")?;
    let mut opts = BTreeMap::new();
    opts.insert("--help".to_string(), false);
    opts.insert("-h".to_string(), false);
    let mut attrs = String::new();
    let mut depth = 0i32;
    for line in body[open..].lines() {
        let t = line.trim();
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        if depth <= 0 {
            break;
        }
        if t.starts_with("///") || t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[") || !attrs.is_empty() && !attrs.trim_end().ends_with(")]") {
            attrs.push_str(t);
            attrs.push(' ');
            continue;
        }
        let Some((field, ty)) = t.split_once(':') else {
            continue;
        };
        let field = field.trim().trim_start_matches("pub ").trim();
        if !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || field.is_empty() {
            attrs.clear();
            continue;
        }
        let ty = ty.trim().trim_end_matches(',');
        if attrs.contains("flatten") {
            opts.extend(clap_options(text, &format!("struct {ty} "))?);
        } else if attrs.contains("#[arg(") {
            let takes = ty != "bool";
            if let Some(l) = attr_value(&attrs, "long") {
                opts.insert(format!("--{l}"), takes);
            } else if has_word(&attrs, "long") {
                opts.insert(format!("--{}", field.replace('_', "-")), takes);
            }
            if let Some(s) = attr_value(&attrs, "short") {
                opts.insert(format!("-{s}"), takes);
            } else if has_word(&attrs, "short") {
                opts.insert(format!("-{}", &field[..1]), takes);
            }
        }
        attrs.clear();
    }
    Ok(opts)
}

/// The quoted value of `key = "v"` or `key = 'v'` in an attribute.
fn attr_value(attrs: &str, key: &str) -> Option<String> {
    let at = attrs.find(&format!("{key} = "))?;
    let rest = &attrs[at + key.len() + 3..];
    let q = rest.chars().next()?;
    if q != '"' && q != '\'' {
        return None;
    }
    rest[1..].split(q).next().map(str::to_string)
}

/// Whether the attribute holds `word` as a bare key (`long,` or `long)`).
fn has_word(attrs: &str, word: &str) -> bool {
    attrs
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| w == word)
}

/// Splits at a `--` argument.
fn split_dashdash(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[]),
    }
}

/// The double-quoted strings of a source text.
fn quoted(text: &str) -> Vec<String> {
    text.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The commands of a shell block: continuation lines joined, blank and comment lines
/// dropped.
fn logical_lines(body: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in body {
        let t = l.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(t);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Shell words with single and double quotes; a word starting with `#` ends the line.
/// Pipes, `&&`, `;` and redirections are refused (one command a line keeps it checkable).
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            // A `<placeholder>` inside a word (`r0:N@<nonce>`) is text, not a redirection.
            '<' if in_word => {
                cur.push(c);
                for x in chars.by_ref() {
                    cur.push(x);
                    if x == '>' {
                        break;
                    }
                    if !(x.is_ascii_alphanumeric() || x == '_' || x == '-') {
                        return Err("`<`: one plain command per line".into());
                    }
                }
            }
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(x) if x == c => break,
                        Some(x) => cur.push(x),
                        None => return Err("unclosed quote".into()),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '|' | '&' | ';' | '>' | '<' => return Err(format!("`{c}`: one plain command per line")),
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The guide's pages: every .md under docs/guide/src, and the Markdown files they
/// include (followed once).
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut todo: Vec<PathBuf> = Vec::new();
    let src = root.join("docs/guide/src");
    for e in std::fs::read_dir(&src).expect("docs/guide/src").flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            todo.push(e.path());
        }
    }
    todo.sort();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    while let Some(p) = todo.pop() {
        let p = normalize(&p);
        if !seen.insert(p.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if let Ok((_, includes)) = parse(&text) {
            for inc in includes {
                let path = inc.split(':').next().unwrap_or(&inc);
                if path.ends_with(".md") {
                    todo.push(p.parent().expect("dir").join(path));
                }
            }
        }
        out.push(p);
    }
    out.sort();
    out
}

/// Checks every page; returns (blocks checked, problems).
fn check_guide(root: &Path) -> (usize, Vec<String>) {
    let repo = Repo::load(root);
    let mut count = 0;
    let mut problems = Vec::new();
    for page in pages(root) {
        let rel = page.strip_prefix(root).unwrap_or(&page).display().to_string();
        let text = std::fs::read_to_string(&page).expect("page read above");
        let (blocks, includes) = match parse(&text) {
            Ok(x) => x,
            Err(e) => {
                problems.push(format!("{rel}: {e}"));
                continue;
            }
        };
        for inc in includes {
            let path = inc.split(':').next().unwrap_or(&inc);
            if !normalize(&page.parent().expect("dir").join(path)).exists() {
                problems.push(format!("{rel}: {{{{#include {inc}}}}}: no such file"));
            }
        }
        for b in &blocks {
            count += 1;
            for p in repo.check_block(&page, b) {
                problems.push(format!("{rel}:{}: {p}", b.line));
            }
        }
    }
    (count, problems)
}

#[test]
fn every_guide_block_is_tested() {
    let (count, problems) = check_guide(&root());
    assert!(count >= 20, "only {count} code blocks found under docs/guide/src");
    assert!(
        problems.is_empty(),
        "{} of {count} guide code blocks are not tested (see the guide's Contributing chapter):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_readme_stays_a_landing_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; move reference material into docs/guide"
    );
    let first_block = readme
        .find("```sh")
        .expect("README.md opens with a sh block of the two commands");
    let block = &readme[first_block
        ..readme[first_block + 5..]
            .find("```")
            .map_or(readme.len(), |e| e + first_block + 5)];
    for cmd in ["cargo run --release --example dmrg", "cargo xtask test"] {
        assert!(block.contains(cmd), "the README's first command block lacks `{cmd}`");
    }
    // The README's own sh blocks follow the guide's rules.
    let repo = Repo::load(&root());
    let (blocks, _) = parse(&readme).expect("README.md parses");
    let page = root().join("README.md");
    let problems: Vec<String> = blocks
        .iter()
        .filter(|b| b.lang == "sh")
        .flat_map(|b| {
            repo.check_block(&page, b)
                .into_iter()
                .map(move |p| format!("README.md:{}: {p}", b.line))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// The checker itself, on pages made up for the purpose: each rule must refuse what it
// is there to refuse.

/// Checks one made-up page placed in docs/guide/src.
fn check_page(md: &str) -> Vec<String> {
    let repo = Repo::load(&root());
    let page = root().join("docs/guide/src/made-up.md");
    let (blocks, _) = parse(md).expect("made-up page parses");
    blocks.iter().flat_map(|b| repo.check_block(&page, b)).collect()
}

#[test]
fn inline_and_untagged_rust_is_refused() {
    assert_eq!(check_page("```rust\nfn main() {}\n```\n").len(), 1);
    assert_eq!(check_page("```\nlet x = 1;\n```\n").len(), 1);
    assert_eq!(check_page("~~~rust,no_run\nfn main() {}\n~~~\n").len(), 1);
    assert_eq!(check_page("```toml\n[dependencies]\n```\n").len(), 1);
    assert!(check_page("```text\nanything at all\n```\n").is_empty());
}

#[test]
fn rust_includes_must_be_tested_files_with_their_anchor() {
    // A tested example (test = true), with its anchor.
    assert!(check_page("```rust\n{{#include ../../../examples/guide_tensors.rs:guide}}\n```\n").is_empty());
    // Run under MPI by cargo xtask test, and run by tests/kit_family.rs.
    assert!(check_page("```rust\n{{#include ../../../examples/embed.rs}}\n```\n").is_empty());
    assert!(check_page("```rust\n{{#include ../../../examples/kit_family/abs/plan.rs}}\n```\n").is_empty());
    // Missing anchor, line range, missing file, a file no test runs, a library source.
    for bad in [
        "../../../examples/guide_tensors.rs:nosuchanchor",
        "../../../examples/guide_tensors.rs:3:10",
        "../../../examples/no_such_example.rs",
        "../../../examples/einsum_timing.rs",
        "../../../src/lib.rs",
    ] {
        let errs = check_page(&format!("```rust\n{{{{#include {bad}}}}}\n```\n"));
        assert_eq!(errs.len(), 1, "{bad}: {errs:?}");
    }
}

#[test]
fn shell_commands_must_name_existing_targets_and_options() {
    for good in [
        "cargo run --release --example dmrg -- --sites 100 --chi-max 100",
        "UNI20_RANKS=2 cargo run --release --example heisenberg",
        "cargo xtask mpirun -n 3 --release --example checkpoint -- --store /tmp/x --steps 4",
        "cargo xtask bench --dmrg-only",
        "cargo xtask test --require-mpi",
        "./target/release/uni20 contract 'ij,jk->ik' a.npy b.npy -o c.npy --block 8 --plan --ranks 3",
        "mpirun --allow-run-as-root --oversubscribe -n 3 ./target/release/examples/heisenberg",
        "cargo build --release -p uni20-cli --features mpi",
        "apt-get install libopenmpi-dev openmpi-bin",
        "pip install ./crates/uni20-py",
        "pip install maturin numpy pytest",
        "python3 -m pytest xtask/tests",
        "maturin develop -m xtask/Cargo.toml",
        "mdbook build docs/guide",
    ] {
        assert_eq!(
            check_page(&format!("```sh\n{good}\n```\n")),
            Vec::<String>::new(),
            "{good}"
        );
    }
    for bad in [
        "cargo run --release --example dmrg -- --chi 100",   // no such option
        "cargo run --example no_such_example",               // no such example
        "cargo xtask bench --dmrg",                          // no such xtask option
        "cargo xtask deploy",                                // no such task
        "cargo xtask test --dmrg-only",                      // an option of another task
        "UNI20_NO_SUCH_VARIABLE=1 cargo run --example dmrg", // unknown variable
        "./target/release/uni20 contrakt ij a.npy -o b.npy", // no such subcommand
        "./target/release/uni20 contract ij a.npy --out b.npy", // no such option
        "apt-get install cowsay",                            // not a CI package
        "curl -O https://example.invalid/x",                 // not a checked command
        "cargo run --example dmrg | tee log",                // a pipeline
        "cargo build -p uni20-nosuch",                       // no such package
        "pip install ./crates/no-such-package",              // no such path
        "mpirun -n 3 python3 no_such_script.py",             // no such script
        "python3 -m pytest no/such/tests",                   // no such test path
        "maturin develop -m no/such/Cargo.toml",             // no such manifest
    ] {
        assert_eq!(check_page(&format!("```sh\n{bad}\n```\n")).len(), 1, "{bad}");
    }
}

#[test]
fn tested_by_needs_a_file_that_reads_the_page() {
    // xtask/tests/guide_blocks.rs names `made-up.md`, so it counts as reading it.
    assert!(check_page("<!-- tested-by: xtask/tests/guide_blocks.rs -->\n```python\nprint(1)\n```\n").is_empty());
    assert_eq!(
        check_page("<!-- tested-by: xtask/src/proc.rs -->\n```python\nprint(1)\n```\n").len(),
        1
    );
    assert_eq!(
        check_page("<!-- tested-by: no/such/file.py -->\n```python\nprint(1)\n```\n").len(),
        1
    );
}
