//! End to end: `UniverseBuilder::run` reads the `UNI20_*` environment once,
//! refuses malformed values with a one-line `JobError::Config`, and builder
//! methods override the environment. One test function, because it changes
//! the process environment (this file is its own test binary).

use uni20_worker::{JobError, TransportChoice, UniverseBuilder};

fn size_of(b: UniverseBuilder) -> Result<usize, JobError> {
    b.transport(TransportChoice::InProcess).run(|ctl| ctl.size())
}

#[test]
fn environment_is_read_at_run_and_overridden_by_the_builder() {
    std::env::set_var("UNI20_RANKS", "abc");
    let e = size_of(UniverseBuilder::new()).unwrap_err();
    match &e {
        JobError::Config {
            variable,
            value,
            expected,
        } => {
            assert_eq!((variable.as_str(), value.as_str()), ("UNI20_RANKS", "abc"));
            assert_eq!(expected, "an integer from 1 to 1024");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "UNI20_RANKS=\"abc\" is not valid: expected an integer from 1 to 1024"
    );
    // The builder's value wins over the environment, but a malformed
    // variable is still refused: it is read, never skipped.
    assert!(matches!(
        size_of(UniverseBuilder::new().ranks(2)),
        Err(JobError::Config { .. })
    ));

    std::env::set_var("UNI20_RANKS", "2");
    std::env::set_var("UNI20_STORE_BUDGET", "64KB");
    assert_eq!(size_of(UniverseBuilder::new()).unwrap(), 2);
    assert_eq!(size_of(UniverseBuilder::new().ranks(3)).unwrap(), 3);

    std::env::set_var("UNI20_STORE_BUDGET", "64 kilobytes");
    let e = size_of(UniverseBuilder::new()).unwrap_err();
    assert!(
        matches!(&e, JobError::Config { variable, .. } if variable == "UNI20_STORE_BUDGET"),
        "{e:?}"
    );
    std::env::remove_var("UNI20_STORE_BUDGET");

    let e = size_of(UniverseBuilder::new().ranks(5000)).unwrap_err();
    assert!(
        matches!(&e, JobError::Startup(m) if m.contains("5000 in-process ranks") && m.contains("at most 1024")),
        "{e}"
    );
    std::env::remove_var("UNI20_RANKS");

    // A build without MPI refuses to run once per process under a launcher.
    #[cfg(not(feature = "mpi"))]
    {
        std::env::set_var("OMPI_COMM_WORLD_SIZE", "3");
        let e = size_of(UniverseBuilder::new().ranks(2)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--features mpi") && !text.contains('\n'), "{text}");
        std::env::set_var("UNI20_ALLOW_NO_MPI", "1");
        assert_eq!(size_of(UniverseBuilder::new().ranks(2)).unwrap(), 2);
        std::env::remove_var("UNI20_ALLOW_NO_MPI");
        std::env::remove_var("OMPI_COMM_WORLD_SIZE");
    }
}

/// `UNI20_TUNE_FILE`: a file that is not a tuning table is a start-up error
/// naming the variable; a new path opens an empty table that the rank's
/// backend list uses.
#[test]
fn tune_file_is_read_once_and_a_bad_one_refused() {
    let dir = std::env::temp_dir().join(format!("uni20-tune-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, b"this is not a tuning table").unwrap();
    let bad_text = bad.to_str().unwrap();
    let c = uni20_worker::config::RankConfig::from_vars([("UNI20_TUNE_FILE", bad_text)]).unwrap();
    let e = c.tuning().unwrap_err();
    match &e {
        uni20_worker::JobError::Config { variable, .. } => assert_eq!(variable, "UNI20_TUNE_FILE"),
        other => panic!("expected a configuration error, got {other}"),
    }
    assert!(e.to_string().contains("UNI20_TUNE_FILE"), "{e}");
    let fresh = dir.join("machine.json");
    let c = uni20_worker::config::RankConfig::from_vars([("UNI20_TUNE_FILE", fresh.to_str().unwrap())]).unwrap();
    let table = c.tuning().unwrap().expect("a table for a new path");
    assert!(table.is_empty());
    let again = c.tuning().unwrap().unwrap();
    assert!(std::sync::Arc::ptr_eq(&table, &again), "opened once per process");
    assert!(c.rank_backends(1).tuning().is_some());
    let none = uni20_worker::config::RankConfig::from_vars([]).unwrap();
    assert!(none.tuning().unwrap().is_none());
    assert!(none.rank_backends(1).tuning().is_none());
    std::fs::remove_dir_all(&dir).ok();
}
