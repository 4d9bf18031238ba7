//! End to end, in-process: a handler whose helper thread panics (a rayon
//! worker, a scoped thread) fails with the normal diagnostic on the root,
//! naming rank, op_id and command, and the job stops.

use std::cell::RefCell;
use std::sync::Mutex;

use uni20_worker::registry::HandlerFn;
use uni20_worker::{
    command_id, CommandEntry, CommandSpec, Envelope, HandlerError, HandlerLocation, JobError, Registry,
    TransportChoice, UniverseBuilder, WorkerContext,
};

/// A schema-1 command without descriptor or reply (not registered at link time: the
/// tests build their registries by hand).
macro_rules! unit_command {
    ($name:ident = $wire:literal, $debug:literal) => {
        struct $name;
        impl CommandSpec for $name {
            const WIRE_NAME: &'static str = $wire;
            const DEBUG_NAME: &'static str = $debug;
            const SCHEMA_VERSION: u32 = 1;
            type Descriptor = ();
            type Reply = ();
        }
    };
}

unit_command!(RayonPanic = "test.rayon_panic.v1", "rayon_panic");
unit_command!(ScopedPanic = "test.scoped_panic.v1", "scoped_panic");

fn rayon_panic(ctx: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
    let rank = ctx.rank();
    rayon::join(|| (), || panic!("kernel on rank {rank} gave up"));
    Ok(Vec::new())
}

fn scoped_panic(_: &mut WorkerContext<'_>, _: &Envelope) -> Result<Vec<u8>, HandlerError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("block-reader".into())
            .spawn_scoped(s, || panic!("bad block header"))
            .map(drop)
    })?;
    Ok(Vec::new())
}

fn entry(wire: &'static str, handler: HandlerFn) -> CommandEntry {
    CommandEntry {
        wire_name: wire,
        debug_name: wire,
        schema_version: 1,
        command_id: command_id(wire),
        handler,
        inline: None,
        location: HandlerLocation {
            module_path: module_path!(),
            file: file!(),
            line: line!(),
        },
    }
}

fn universe(ranks: usize) -> UniverseBuilder {
    let mut entries: Vec<CommandEntry> = Registry::linked().unwrap().entries().into_iter().copied().collect();
    entries.push(entry(RayonPanic::WIRE_NAME, rayon_panic));
    entries.push(entry(ScopedPanic::WIRE_NAME, scoped_panic));
    let mut b = UniverseBuilder::new()
        .ranks(ranks)
        .transport(TransportChoice::InProcess);
    for r in 0..ranks {
        b = b.registry_for_rank(r, entries.clone());
    }
    b
}

/// In-process, a helper panic is attributed to a handler only while it runs
/// alone in the process: the tests of this file run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn a_panic_on_a_rayon_thread_is_the_handlers_failure() {
    let _alone = ONE_AT_A_TIME.lock();
    let seen = RefCell::new(None);
    let out = universe(3).run(|ctl| {
        *seen.borrow_mut() = Some(ctl.submit::<RayonPanic>(&(), &[1, 2]).unwrap_err());
        // Fail-stop: nothing runs after it.
        assert!(matches!(ctl.submit::<RayonPanic>(&(), &[1]), Err(JobError::Stopped(_))));
    });
    // The universe as a whole reports the job stopped by that failure.
    assert!(
        matches!(&out, Err(JobError::Stopped(m)) if m.contains("gave up")),
        "{out:?}"
    );
    let err = seen.into_inner().unwrap();
    let JobError::Command(d) = &err else { panic!("{err:?}") };
    assert!(d.rank == 1 || d.rank == 2, "{d}");
    assert_eq!((d.op_id, d.wire_name.as_str()), (1, "test.rayon_panic.v1"));
    assert_eq!(
        d.error.chain[0],
        format!("handler panicked: kernel on rank {} gave up", d.rank)
    );
}

#[test]
fn a_panic_on_a_scoped_thread_is_reported_with_the_threads_message() {
    let _alone = ONE_AT_A_TIME.lock();
    let seen = RefCell::new(None);
    let out = universe(2).run(|ctl| *seen.borrow_mut() = Some(ctl.submit::<ScopedPanic>(&(), &[1]).unwrap_err()));
    assert!(matches!(out, Err(JobError::Stopped(_))), "{out:?}");
    let err = seen.into_inner().unwrap();
    let JobError::Command(d) = &err else { panic!("{err:?}") };
    assert_eq!((d.rank, d.op_id), (1, 1));
    let text = d.to_string();
    assert!(text.contains("handler panicked: a scoped thread panicked"), "{text}");
    assert!(
        text.contains("caused by: helper thread `block-reader` panicked at") && text.contains(": bad block header"),
        "{text}"
    );
}
