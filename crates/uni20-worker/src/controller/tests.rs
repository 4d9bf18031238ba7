//! The controller against a scripted transport ([`Scripted`]): the test
//! plays workers 1 and 2 by queueing their replies, so every ordering and
//! failure is exact and nothing runs on another thread.

use std::cell::RefCell;
use std::rc::Rc;

use uni20_dispatch::BackendList;
use uni20_persist::Store;

use super::*;
use crate::commands::{Flush, Noop};
use crate::context::CommandSpec;
use crate::scripted::Scripted;
use crate::transport::{TAG_CMD, TAG_REPLY, TAG_ROOT_DATA};

fn controller(t: &Scripted) -> Controller<'_> {
    Controller::new(
        t,
        Registry::linked().unwrap(),
        Store::in_memory(0),
        BackendList::default_cpu(1),
        1,
        0,
        FaultPlan::default(),
    )
}

type Log = Rc<RefCell<Vec<(u64, Result<Vec<(usize, u64)>, String>)>>>;

/// Submits a `Flush` to workers 1 and 2 without waiting; its completion is
/// logged as `(op_id, replies or error text)`.
fn flush_nowait(ctl: &Controller<'_>, log: &Log) -> u64 {
    let log = log.clone();
    let op = Rc::new(RefCell::new(0));
    let op_in_cb = op.clone();
    let id = ctl
        .submit_nowait::<Flush>(&(), &[1, 2], move |_, r| {
            log.borrow_mut()
                .push((*op_in_cb.borrow(), r.map_err(|e| e.to_string())));
        })
        .unwrap();
    *op.borrow_mut() = id;
    id
}

#[test]
fn replies_out_of_order_complete_the_operation_they_name() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let log: Log = Rc::default();
    let op1 = flush_nowait(&ctl, &log);
    let op2 = flush_nowait(&ctl, &log);
    assert_eq!((op1, op2), (1, 2));
    assert_eq!(ctl.in_flight(), 2);
    // Each op went to both workers as one posted Run frame, in submission order.
    let frames: Vec<(usize, Option<u64>)> = t.sent().iter().map(|s| (s.dest, s.op_id())).collect();
    assert_eq!(frames, [(1, Some(1)), (2, Some(1)), (1, Some(2)), (2, Some(2))]);
    assert!(t.sent().iter().all(|s| s.tag == TAG_CMD));
    // Op 2 completes entirely before op 1; replies within an op also cross.
    t.reply(2, op2, &22u64);
    t.reply(1, op2, &21u64);
    t.reply(2, op1, &12u64);
    ctl.progress().unwrap();
    assert_eq!(ctl.in_flight(), 1, "op 2 done, op 1 still waits for rank 1");
    t.reply(1, op1, &11u64);
    ctl.drain().unwrap();
    assert_eq!(
        *log.borrow(),
        [(2, Ok(vec![(1, 21), (2, 22)])), (1, Ok(vec![(1, 11), (2, 12)]))]
    );
    assert_eq!(ctl.in_flight(), 0);
    assert!(!ctl.has_failed() && t.aborted().is_none());
}

#[test]
fn finish_in_any_order_keeps_replies_of_other_operations() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let a = ctl.begin::<Flush>(&(), &[1, 2]).unwrap();
    let b = ctl.begin::<Flush>(&(), &[1]).unwrap();
    // Op a's replies arrive first, but the root waits for op b first.
    t.reply(1, a.op_id, &1u64);
    t.reply(2, a.op_id, &2u64);
    t.reply(1, b.op_id, &3u64);
    assert_eq!(ctl.finish(b).unwrap(), [(1, 3)]);
    assert_eq!(t.unread(), 0, "op a's replies were collected on the way");
    assert_eq!(ctl.finish(a).unwrap(), [(1, 1), (2, 2)]);
}

#[test]
fn a_failure_reply_during_send_data_stops_the_job() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let op = ctl.begin::<Noop>(&(), &[1, 2]).unwrap();
    let log: Log = Rc::default();
    let other = flush_nowait(&ctl, &log);
    // Rank 2 fails while the root streams data to rank 1.
    t.fail(2, op.op_id, Noop::WIRE_NAME, "disk on fire");
    let e = ctl.send_data(1, b"payload").unwrap_err();
    let JobError::Command(d) = &e else { panic!("{e:?}") };
    assert_eq!((d.rank, d.op_id), (2, op.op_id));
    assert!(d.to_string().contains("disk on fire"));
    // Fail-stop: the job is aborted with the diagnostic, no data was sent.
    let why = t.aborted().expect("the job was aborted");
    assert!(why.starts_with("fail-stop") && why.contains("disk on fire"), "{why}");
    assert!(t.sent().iter().all(|s| s.tag != TAG_ROOT_DATA));
    assert!(ctl.has_failed());
    // The failed operation reports its own diagnostic, the other one was stopped.
    assert!(matches!(ctl.finish(op), Err(JobError::Command(d)) if d.rank == 2));
    let logged = log.borrow();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].0, other);
    assert!(logged[0]
        .1
        .as_ref()
        .unwrap_err()
        .contains("stopped by an earlier failure"));
    // Later submissions are refused.
    assert!(matches!(ctl.begin::<Noop>(&(), &[1]), Err(JobError::Stopped(_))));
}

#[test]
fn a_failure_reply_during_recv_data_stops_the_job() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let op = ctl.begin::<Noop>(&(), &[1, 2]).unwrap();
    // Rank 1 sends its first block, then rank 2 fails before sending its.
    t.deliver(1, TAG_ROOT_DATA, b"block 0".to_vec());
    t.fail(2, op.op_id, Noop::WIRE_NAME, "cannot read block 1");
    assert_eq!(ctl.recv_data(1).unwrap(), b"block 0");
    let e = ctl.recv_data(2).unwrap_err();
    assert!(
        matches!(&e, JobError::Command(d) if d.rank == 2 && d.op_id == op.op_id),
        "{e:?}"
    );
    assert!(t.aborted().is_some());
    assert!(matches!(ctl.recv_data(2), Err(JobError::Stopped(_))));
}

#[test]
fn drain_completes_everything_in_flight() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let log: Log = Rc::default();
    let ops: Vec<u64> = (0..3).map(|_| flush_nowait(&ctl, &log)).collect();
    for &op in ops.iter().rev() {
        for r in [2, 1] {
            t.reply(r, op, &(op * 10 + r as u64));
        }
    }
    assert_eq!(ctl.in_flight(), 3);
    ctl.drain().unwrap();
    assert_eq!(ctl.in_flight(), 0);
    let done: Vec<u64> = log.borrow().iter().map(|(op, _)| *op).collect();
    assert_eq!(done, [3, 2, 1]);
    for (op, r) in log.borrow().iter() {
        assert_eq!(r.as_ref().unwrap(), &vec![(1, op * 10 + 1), (2, op * 10 + 2)]);
    }
}

/// A job that never becomes ready and records how it ended.
struct Never(Rc<RefCell<Option<String>>>);

impl<'c> DeferredJob<'c> for Never {
    fn ready(&self) -> bool {
        false
    }
    fn run(self: Box<Self>, _: &Controller<'c>) {
        *self.0.borrow_mut() = Some("ran".into());
    }
    fn abandon(self: Box<Self>, error: JobError) {
        *self.0.borrow_mut() = Some(error.to_string());
    }
}

#[test]
fn drain_abandons_jobs_whose_inputs_nothing_will_write() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let log: Log = Rc::default();
    let op = flush_nowait(&ctl, &log);
    let fate = Rc::new(RefCell::new(None));
    ctl.defer(Box::new(Never(fate.clone())));
    t.reply(1, op, &1u64);
    t.reply(2, op, &2u64);
    let e = ctl.drain().unwrap_err();
    assert!(
        matches!(&e, JobError::Protocol(m) if m.contains("1 deferred operation(s)")),
        "{e}"
    );
    assert_eq!(log.borrow().len(), 1, "the operation in flight finished first");
    assert!(fate.borrow().as_deref().unwrap().contains("nothing will produce"));
    assert_eq!(ctl.deferred(), 0);
}

#[test]
fn an_undecodable_reply_is_a_protocol_violation() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let op = ctl.begin::<Flush>(&(), &[1, 2]).unwrap();
    t.deliver(1, TAG_REPLY, b"\xff\xffnot a reply".to_vec());
    let e = ctl.wait_op(op.op_id).unwrap_err();
    let JobError::Protocol(m) = &e else { panic!("{e:?}") };
    assert!(
        m.contains("rank 1 sent an undecodable reply while op_id 1 (`uni20.flush.v1`) in flight"),
        "{m}"
    );
    assert!(t.aborted().unwrap().contains("undecodable reply"));
    assert!(matches!(ctl.finish(op), Err(JobError::Stopped(_))));
}

#[test]
fn a_reply_to_an_operation_not_in_flight_is_a_protocol_violation() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let op = ctl.begin::<Flush>(&(), &[1]).unwrap();
    t.reply(1, 99, &0u64);
    let e = ctl.finish(op).unwrap_err();
    assert!(
        matches!(&e, JobError::Protocol(m) if m.contains("rank 1 replied to op_id 99, which is not in flight")),
        "{e:?}"
    );
    assert!(t.aborted().is_some());
}

#[test]
fn a_reply_body_of_the_wrong_type_fails_the_operation() {
    let t = Scripted::new(2);
    let ctl = controller(&t);
    let op = ctl.begin::<Flush>(&(), &[1]).unwrap();
    // Flush replies a u64; rank 1 replies a string.
    t.reply(1, op.op_id, &"not a count");
    let e = ctl.finish(op).unwrap_err();
    assert!(
        matches!(&e, JobError::Protocol(m) if m.contains("reply body of rank 1")),
        "{e:?}"
    );
}

#[test]
fn a_transport_failure_while_waiting_stops_the_job() {
    let t = Scripted::new(2);
    let ctl = controller(&t);
    let op = ctl.begin::<Flush>(&(), &[1]).unwrap();
    // The script never replies: the scripted receive fails like an abort.
    let e = ctl.wait_op(op.op_id).unwrap_err();
    assert!(matches!(e, JobError::Transport(_)), "{e:?}");
    assert!(ctl.has_failed());
    assert!(matches!(ctl.begin::<Flush>(&(), &[1]), Err(JobError::Stopped(_))));
}

#[test]
fn profile_adds_up_reported_busy_time_per_rank_and_differences_snapshots() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    let start = ctl.profile();
    assert_eq!(start.operations, 0);
    assert!(start.worker_busy_seconds.is_empty());
    let a = ctl.begin::<Flush>(&(), &[1, 2]).unwrap();
    t.reply_busy(1, a.op_id, &1u64, 1_500_000);
    t.reply_busy(2, a.op_id, &2u64, 250_000);
    ctl.finish(a).unwrap();
    let mid = ctl.profile();
    let b = ctl.begin::<Flush>(&(), &[1]).unwrap();
    t.reply_busy(1, b.op_id, &1u64, 2_500_000);
    ctl.finish(b).unwrap();
    ctl.note_plan_lookup(true);
    ctl.note_plan_lookup(true);
    ctl.note_plan_lookup(false);
    let end = ctl.profile();
    assert_eq!(end.operations, 2);
    let busy = |p: &RootProfile, r: usize| p.worker_busy_seconds.get(&r).copied().unwrap_or(-1.0);
    assert!((busy(&end, 1) - 4.0e-3).abs() < 1e-12, "{:?}", end.worker_busy_seconds);
    assert!((busy(&end, 2) - 0.25e-3).abs() < 1e-12);
    assert!(!end.worker_busy_seconds.contains_key(&0), "the root ran nothing itself");
    let d = end.since(&mid);
    assert_eq!(d.operations, 1);
    assert!((busy(&d, 1) - 2.5e-3).abs() < 1e-12);
    assert!(busy(&d, 2).abs() < 1e-12);
    assert!((d.worker_busy_max() - 2.5e-3).abs() < 1e-12);
    assert!((d.worker_busy_mean() - 1.25e-3).abs() < 1e-12);
    assert_eq!((d.plan_cache_hits, d.plan_cache_misses), (2, 1));
    assert!((d.plan_cache_hit_rate() - 2.0 / 3.0).abs() < 1e-12);
    assert!(d.submit_seconds >= 0.0 && d.wait_seconds >= 0.0 && d.plan_seconds >= 0.0);
}

#[test]
fn root_state_persists_per_type() {
    let t = Scripted::new(3);
    let ctl = controller(&t);
    ctl.with_root_state(|n: &mut u32| *n += 5);
    ctl.with_root_state(|s: &mut String| s.push('x'));
    assert_eq!(ctl.with_root_state(|n: &mut u32| *n), 5);
    assert_eq!(ctl.with_root_state(|s: &mut String| s.clone()), "x");
    // A nested call for the same type sees a fresh value.
    let inner = ctl.with_root_state(|n: &mut u32| {
        *n += 1;
        ctl.with_root_state(|m: &mut u32| *m)
    });
    assert_eq!(inner, 0);
    assert_eq!(ctl.with_root_state(|n: &mut u32| *n), 6);
}

/// What a `Run` frame carries: op_id, descriptor, releases.
type RunFrame = (u64, Vec<u8>, Vec<ObjectId>);

/// Where a completion callback leaves its outcome.
type Outcome<T> = Rc<RefCell<Option<T>>>;

/// The op_id, descriptor and releases of a `Run` frame.
fn run_frame(s: &crate::scripted::Sent) -> RunFrame {
    match s.control() {
        crate::protocol::Control::Run { envelope, releases } => {
            let env = crate::envelope::Envelope::decode(&envelope).unwrap();
            (env.op_id, env.descriptor, releases)
        }
        crate::protocol::Control::Shutdown => panic!("a shutdown frame"),
    }
}

#[test]
fn submit_nowait_each_sends_each_rank_its_own_descriptor() {
    use crate::commands::FlushObjects;
    let t = Scripted::new(3);
    let ctl = controller(&t);
    // Rank 2 has a queued release: it travels in rank 2's own frame.
    let gone = ObjectId::new(9, 9);
    ctl.ledger().retain(&[(2, gone, 8)]);
    ctl.ledger().drop_refs(&[(2, gone, 8)]);
    let mine = vec![ObjectId::new(1, 1)];
    let theirs = vec![ObjectId::new(2, 1), ObjectId::new(2, 2)];
    let log: Outcome<Result<Vec<(usize, u64)>, String>> = Rc::default();
    let l = log.clone();
    let op = ctl
        .submit_nowait_each::<FlushObjects>(vec![(1, mine.clone()), (2, theirs.clone())], move |_, r| {
            *l.borrow_mut() = Some(r.map_err(|e| e.to_string()));
        })
        .unwrap();
    let frames: Vec<(usize, RunFrame)> = t.sent().iter().map(|s| (s.dest, run_frame(s))).collect();
    assert_eq!(
        frames,
        [
            (1, (op, encode(&mine), Vec::new())),
            (2, (op, encode(&theirs), vec![gone]))
        ]
    );
    t.reply(2, op, &2u64);
    t.reply(1, op, &1u64);
    ctl.drain().unwrap();
    assert_eq!(*log.borrow(), Some(Ok(vec![(1, 1), (2, 2)])));
}

#[test]
fn submit_nowait_each_runs_the_roots_own_share() {
    use crate::commands::FlushObjects;
    let t = Scripted::new(2);
    let ctl = controller(&t);
    let log: Outcome<Vec<(usize, u64)>> = Rc::default();
    let l = log.clone();
    let op = ctl
        .submit_nowait_each::<FlushObjects>(vec![(0, Vec::new()), (1, vec![ObjectId::new(1, 1)])], move |_, r| {
            *l.borrow_mut() = Some(r.unwrap());
        })
        .unwrap();
    // Only rank 1 got a frame; the root ran its (empty) share itself.
    assert_eq!(t.sent().len(), 1);
    assert_eq!(t.sent()[0].dest, 1);
    assert_eq!(ctl.in_flight(), 1);
    t.reply(1, op, &7u64);
    ctl.drain().unwrap();
    assert_eq!(*log.borrow(), Some(vec![(0, 0), (1, 7)]));
}

#[test]
fn submit_nowait_each_refuses_a_rank_twice_or_outside_the_universe() {
    use crate::commands::FlushObjects;
    let t = Scripted::new(3);
    let ctl = controller(&t);
    for shares in [
        vec![(1, Vec::new()), (1, Vec::new())],
        vec![(1, Vec::new()), (3, Vec::new())],
    ] {
        let e = ctl
            .submit_nowait_each::<FlushObjects>(shares.clone(), |_, _| {})
            .unwrap_err();
        assert!(matches!(e, JobError::Protocol(_)), "{e:?}");
    }
    assert!(t.sent().is_empty() && ctl.in_flight() == 0 && !ctl.has_failed());
}

/// A descriptor that cannot be encoded: a command carrying it can only run
/// as the root's own share passed as a value.
#[derive(Debug)]
struct Unencodable(u64);

impl serde::Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this descriptor is never encoded"))
    }
}

impl<'de> serde::Deserialize<'de> for Unencodable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(Unencodable)
    }
}

struct InlineOnly;

impl CommandSpec for InlineOnly {
    const WIRE_NAME: &'static str = "uni20.test.inline_only.v1";
    const DEBUG_NAME: &'static str = "inline_only";
    const SCHEMA_VERSION: u32 = 1;
    type Descriptor = Unencodable;
    type Reply = u64;
}

fn handle_inline_only(_: &mut WorkerContext<'_>, d: Unencodable) -> Result<u64, crate::HandlerError> {
    Ok(d.0 * 2)
}

crate::register_command!(InlineOnly => handle_inline_only);

#[test]
fn the_roots_own_share_runs_from_the_value_without_encoding() {
    let t = Scripted::new(2);
    let ctl = controller(&t);
    let log: Outcome<Vec<(usize, u64)>> = Rc::default();
    let l = log.clone();
    // Root only, by value: nothing is encoded (encoding would fail), nothing is sent.
    ctl.submit_nowait_owned::<InlineOnly>(Unencodable(21), &[0], move |_, r| {
        *l.borrow_mut() = Some(r.unwrap());
    })
    .unwrap();
    ctl.drain().unwrap();
    assert!(t.sent().is_empty());
    assert_eq!(*log.borrow(), Some(vec![(0, 42)]));
    // Per-rank shares: the root's share is a value too.
    let l = log.clone();
    ctl.submit_nowait_each::<InlineOnly>(vec![(0, Unencodable(5))], move |_, r| {
        *l.borrow_mut() = Some(r.unwrap());
    })
    .unwrap();
    ctl.drain().unwrap();
    assert_eq!(*log.borrow(), Some(vec![(0, 10)]));
}

#[test]
fn an_owned_descriptor_still_reaches_other_ranks_encoded() {
    use crate::commands::FlushObjects;
    let t = Scripted::new(2);
    let ctl = controller(&t);
    let log: Outcome<Vec<(usize, u64)>> = Rc::default();
    let l = log.clone();
    let op = ctl
        .submit_nowait_owned::<FlushObjects>(Vec::new(), &[0, 1], move |_, r| {
            *l.borrow_mut() = Some(r.unwrap());
        })
        .unwrap();
    // Rank 1 got the frame with the descriptor's bytes; the root ran its share.
    assert_eq!(t.sent().len(), 1);
    assert_eq!(t.sent()[0].dest, 1);
    t.reply(1, op, &3u64);
    ctl.drain().unwrap();
    assert_eq!(*log.borrow(), Some(vec![(0, 0), (1, 3)]));
}
