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
