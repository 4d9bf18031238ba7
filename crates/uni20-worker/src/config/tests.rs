//! Parsing of every runtime variable, malformed and well-formed, through
//! [`RankConfig::from_vars`] (no process environment is touched).

use std::time::Duration;

use super::*;
use crate::fault::FaultKind;

fn parse(vars: &[(&str, &str)]) -> Result<RankConfig, JobError> {
    RankConfig::from_vars(vars.iter().copied())
}

/// The error for one malformed variable: its fields and its one-line text.
fn refused(variable: &str, value: &str) -> (String, String) {
    match parse(&[(variable, value)]) {
        Err(e @ JobError::Config { .. }) => {
            let JobError::Config {
                variable: v,
                value: got,
                expected,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(v, variable);
            assert_eq!(got, value);
            let text = e.to_string();
            assert!(!text.contains('\n'), "not one line: {text}");
            assert!(text.contains(variable) && text.contains(value), "{text}");
            (expected.clone(), text)
        }
        other => panic!("{variable}={value:?} was accepted: {other:?}"),
    }
}

#[test]
fn defaults_without_variables() {
    let c = parse(&[]).unwrap();
    assert_eq!(c, RankConfig::default());
    assert_eq!(c.startup_timeout, Duration::from_secs(60));
    assert_eq!(c.chunk_bytes, 1 << 30);
    assert_eq!(c.max_envelope_bytes, 256 << 20);
    assert_eq!(c.backends, BackendChoice::Cpu);
    assert!(c.faults.is_empty());
    assert_eq!(c.launcher, LauncherEnv::default());
}

#[test]
fn empty_values_count_as_unset() {
    let c = parse(&[
        ("UNI20_RANKS", ""),
        ("UNI20_STORE_BUDGET", "  "),
        ("UNI20_STORE_DIR", ""),
    ])
    .unwrap();
    assert_eq!(c, RankConfig::default());
}

#[test]
fn ranks() {
    assert_eq!(parse(&[("UNI20_RANKS", "3")]).unwrap().ranks, Some(3));
    assert_eq!(parse(&[("UNI20_RANKS", " 1024 ")]).unwrap().ranks, Some(1024));
    for bad in ["abc", "0", "-2", "3.0", "1025", "3100", "+3"] {
        let (expected, _) = refused("UNI20_RANKS", bad);
        assert_eq!(expected, "an integer from 1 to 1024");
    }
}

#[test]
fn threads_per_rank() {
    assert_eq!(
        parse(&[("UNI20_THREADS_PER_RANK", "8")]).unwrap().threads_per_rank,
        Some(8)
    );
    for bad in ["0", "many", "-1", "2 cores"] {
        refused("UNI20_THREADS_PER_RANK", bad);
    }
}

#[test]
fn startup_timeout() {
    let t = |v| parse(&[("UNI20_STARTUP_TIMEOUT", v)]).unwrap().startup_timeout;
    assert_eq!(t("3"), Duration::from_secs(3));
    assert_eq!(t("2.5"), Duration::from_millis(2500));
    for bad in ["-3", "0", "0.0", "inf", "NaN", "1e3", "10s", "soon"] {
        let (expected, _) = refused("UNI20_STARTUP_TIMEOUT", bad);
        assert!(expected.contains("positive number of seconds"), "{expected}");
    }
}

#[test]
fn abort_timeout() {
    assert_eq!(parse(&[]).unwrap().abort_timeout, Duration::from_secs(30));
    let t = |v| parse(&[("UNI20_ABORT_TIMEOUT", v)]).unwrap().abort_timeout;
    assert_eq!(t("4"), Duration::from_secs(4));
    assert_eq!(t("0.5"), Duration::from_millis(500));
    for bad in ["0", "-1", "never", "5m"] {
        let (expected, _) = refused("UNI20_ABORT_TIMEOUT", bad);
        assert!(expected.contains("positive number of seconds"), "{expected}");
    }
}

#[test]
fn store_dir() {
    let c = parse(&[("UNI20_STORE_DIR", "/tmp/uni20-store")]).unwrap();
    assert_eq!(c.store_dir, Some(PathBuf::from("/tmp/uni20-store")));
}

#[test]
fn sizes_accept_units_and_refuse_everything_else() {
    let b = |v| parse(&[("UNI20_STORE_BUDGET", v)]).unwrap().store_budget.unwrap();
    assert_eq!(b("65536"), 65536);
    assert_eq!(b("64KiB"), 65536);
    assert_eq!(b("64 KiB"), 65536);
    assert_eq!(b("64kib"), 65536);
    assert_eq!(b("64KB"), 64_000);
    assert_eq!(b("10MB"), 10_000_000);
    assert_eq!(b("10MiB"), 10 << 20);
    assert_eq!(b("2GiB"), 2 << 30);
    assert_eq!(b("3GB"), 3_000_000_000);
    assert_eq!(b("1TiB"), 1 << 40);
    assert_eq!(b("7B"), 7);
    for bad in [
        "64KB!",
        "64K",
        "64k",
        "1.5GiB",
        "-1",
        "KiB",
        "lots",
        "20000000TiB",
        "0x10",
    ] {
        for var in ["UNI20_STORE_BUDGET", "UNI20_REPLICA_BYTES"] {
            let (expected, text) = refused(var, bad);
            assert!(expected.contains("64KiB") && expected.contains("10MB"), "{expected}");
            assert!(text.starts_with(&format!("{var}=")), "{text}");
        }
    }
    let r = |v| parse(&[("UNI20_REPLICA_BYTES", v)]).unwrap().replica_bytes;
    assert_eq!(r("0"), 0);
    assert_eq!(r("16MiB"), 16 << 20);
    assert_eq!(r(""), crate::config::DEFAULT_REPLICA_BYTES);
}

#[test]
fn storage_ranks() {
    assert_eq!(parse(&[("UNI20_STORAGE_RANKS", "0")]).unwrap().storage_ranks, 0);
    assert_eq!(parse(&[("UNI20_STORAGE_RANKS", "2")]).unwrap().storage_ranks, 2);
    for bad in ["-1", "one", "1.5"] {
        refused("UNI20_STORAGE_RANKS", bad);
    }
}

#[test]
fn inject_fault() {
    let c = parse(&[("UNI20_INJECT_FAULT", "panic@rank=1,op=2;io@rank=2")]).unwrap();
    assert!(c.faults.at(1, 2, &[FaultKind::Panic]).is_some());
    assert!(c.faults.has(2, FaultKind::Io));
    let (expected, text) = refused("UNI20_INJECT_FAULT", "boom@rank=1");
    assert!(expected.contains("unknown kind"), "{expected}");
    assert!(text.contains("KIND@rank=R"), "{text}");
    refused("UNI20_INJECT_FAULT", "panic@rank=x");
}

#[test]
fn backends() {
    assert_eq!(
        parse(&[("UNI20_BACKENDS", "cpu")]).unwrap().backends,
        BackendChoice::Cpu
    );
    assert_eq!(
        parse(&[("UNI20_BACKENDS", "gpu-first")]).unwrap().backends,
        BackendChoice::GpuFirst
    );
    let (expected, _) = refused("UNI20_BACKENDS", "gpu-frist");
    assert_eq!(expected, "`cpu` or `gpu-first`");
    refused("UNI20_BACKENDS", "GPU");
}

#[test]
fn max_envelope_bytes() {
    let c = parse(&[("UNI20_MAX_ENVELOPE_BYTES", "512MiB")]).unwrap();
    assert_eq!(c.max_envelope_bytes, 512 << 20);
    for bad in ["0", "big", "256M"] {
        refused("UNI20_MAX_ENVELOPE_BYTES", bad);
    }
}

#[test]
fn chunk_bytes() {
    let c = |v| parse(&[("UNI20_CHUNK_BYTES", v)]).unwrap().chunk_bytes;
    assert_eq!(c("64KiB"), 65536);
    assert_eq!(c("64"), MIN_CHUNK_BYTES);
    assert_eq!(c("2147483647"), MAX_CHUNK_BYTES);
    assert_eq!(c("1GiB"), DEFAULT_CHUNK_BYTES);
    for bad in ["2GiB", "63", "0", "1.5MiB", "lots"] {
        let (expected, _) = refused("UNI20_CHUNK_BYTES", bad);
        assert!(expected.contains("between 64 B and 2147483647 B"), "{expected}");
    }
}

#[test]
fn allow_no_mpi() {
    for (v, want) in [("1", true), ("true", true), ("YES", true), ("0", false), ("off", false)] {
        assert_eq!(parse(&[("UNI20_ALLOW_NO_MPI", v)]).unwrap().allow_no_mpi, want, "{v}");
    }
    refused("UNI20_ALLOW_NO_MPI", "maybe");
}

#[test]
fn launcher_variables() {
    let c = parse(&[("OMPI_COMM_WORLD_SIZE", "3"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")]).unwrap();
    assert_eq!(c.launcher.detected, Some("OMPI_COMM_WORLD_SIZE"));
    assert_eq!(c.launcher.world_size, Some(("OMPI_COMM_WORLD_SIZE", 3)));
    assert_eq!(c.launcher.local_size, Some(2));
    let c = parse(&[("PMI_SIZE", "4"), ("PMI_RANK", "0")]).unwrap();
    assert_eq!(c.launcher.world_size, Some(("PMI_SIZE", 4)));
    // Not ours to judge: an unreadable launcher value is "unknown", not an error.
    let c = parse(&[("PMI_SIZE", "lots")]).unwrap();
    assert_eq!(c.launcher.detected, Some("PMI_SIZE"));
    assert_eq!(c.launcher.world_size, None);
}

#[test]
fn a_build_without_mpi_refuses_a_launcher_with_several_processes() {
    let c = parse(&[("OMPI_COMM_WORLD_SIZE", "3")]).unwrap();
    let e = c.check_mpi_support(false).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, JobError::Startup(_)), "{e:?}");
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.contains("--features mpi") && text.contains("OMPI_COMM_WORLD_SIZE=3"),
        "{text}"
    );
    assert!(text.contains("UNI20_ALLOW_NO_MPI=1"), "{text}");
    // With MPI built, or with the opt-out, or alone, it starts.
    c.check_mpi_support(true).unwrap();
    let c = parse(&[("PMI_SIZE", "2"), ("UNI20_ALLOW_NO_MPI", "1")]).unwrap();
    c.check_mpi_support(false).unwrap();
    let c = parse(&[("OMPI_COMM_WORLD_SIZE", "1")]).unwrap();
    c.check_mpi_support(false).unwrap();
    parse(&[]).unwrap().check_mpi_support(false).unwrap();
}

#[test]
fn validate_checks_values_set_by_code() {
    let mut c = RankConfig::default();
    c.validate().unwrap();
    c.chunk_bytes = 10;
    assert!(c.validate().unwrap_err().to_string().contains("chunk size 10 B"));
    c.chunk_bytes = 1 << 31;
    assert!(c.validate().is_err());
}

#[test]
fn size_parser_edges() {
    assert_eq!(parse::size("0"), Some(0));
    assert_eq!(parse::size("18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse::size("18446744073709551616"), None);
    assert_eq!(parse::size("16777216TiB"), None); // 2^64: overflow
    assert_eq!(parse::size(""), None);
    assert_eq!(parse::size(" 5 mb "), Some(5_000_000));
}
