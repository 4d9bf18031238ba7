//! The SPMD mode on the in-process transport: collectives give the right
//! values on 1 to 4 ranks, collective commands run on their participants,
//! and every way ranks can diverge (another collective, a different plan, a
//! rank that leaves early, a failing handler) stops every rank with an
//! error naming it, quickly.

use std::time::{Duration, Instant};

use uni20_worker::commands::{Noop, SendRecv, SendRecvDesc};
use uni20_worker::fault::FaultPlan;
use uni20_worker::spmd::plan_digest;
use uni20_worker::{CollectiveOp, JobError, SpmdContext, UniverseBuilder};

fn spmd<R: Send>(ranks: usize, f: impl Fn(&SpmdContext<'_>) -> R + Sync) -> Vec<Result<R, JobError>> {
    let out = UniverseBuilder::new().ranks(ranks).threads_per_rank(1).spmd(f).unwrap();
    assert_eq!(
        out.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        (0..ranks).collect::<Vec<_>>()
    );
    out.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn collectives_give_the_right_values_on_one_to_four_ranks() {
    for n in 1..=4usize {
        let out = spmd(n, |ctx| -> Result<(), JobError> {
            let (me, n) = (ctx.rank(), ctx.size());
            assert_eq!(ctx.transport_kind(), uni20_worker::transport::TransportKind::InProcess);
            ctx.barrier()?;
            for root in 0..n {
                let mut v = if ctx.rank() == root {
                    format!("from {root}")
                } else {
                    String::new()
                };
                ctx.broadcast(root, &mut v)?;
                assert_eq!(v, format!("from {root}"));
                let g = ctx.gather(root, &(me * 10))?;
                if me == root {
                    assert_eq!(g, Some((0..n).map(|r| r * 10).collect()));
                } else {
                    assert_eq!(g, None);
                }
                let m = ctx.reduce_num(root, me as i64 - 1, CollectiveOp::Max)?;
                assert_eq!(m, (me == root).then_some(n as i64 - 2));
            }
            assert_eq!(
                ctx.all_gather(&(me, [me; 2]))?,
                (0..n).map(|r| (r, [r; 2])).collect::<Vec<_>>()
            );
            // Sums of 0.1 * (r + 1) folded in rank order, bit-identical everywhere.
            let want: f64 = (0..n).map(|r| 0.1 * (r + 1) as f64).fold(0.0, |a, b| a + b);
            assert_eq!(
                ctx.all_reduce_num(0.1 * (me + 1) as f64, CollectiveOp::Sum)?.to_bits(),
                want.to_bits()
            );
            assert_eq!(
                ctx.all_reduce_num(me as u64 + 2, CollectiveOp::Prod)?,
                (0..n as u64).map(|r| r + 2).product::<u64>()
            );
            assert_eq!(ctx.all_reduce_num(me as i32, CollectiveOp::Min)?, 0);
            // A postcard value: the ranks' words joined in rank order.
            let words = ctx.all_reduce(vec![format!("r{me}")], |mut a, b| {
                a.extend(b);
                a
            })?;
            assert_eq!(words, (0..n).map(|r| format!("r{r}")).collect::<Vec<_>>());
            Ok(())
        });
        for (rank, r) in out.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("{n} ranks, rank {rank}: {e}")).unwrap();
        }
    }
}

#[test]
fn collective_commands_run_on_their_participants() {
    let out = spmd(3, |ctx| {
        let noop = ctx.run_collective::<Noop>(&(), &[0, 1, 2], &[]).unwrap();
        assert_eq!(noop, vec![(0, ()), (1, ()), (2, ())]);
        // Rank 0 sends 300 kB straight to rank 2; rank 1 does not take part.
        let desc = SendRecvDesc {
            from: 0,
            to: 2,
            bytes: 300_000,
        };
        let got = ctx
            .run_collective::<SendRecv>(&desc, &[0, 2], &[("route", plan_digest(&(0, 2)))])
            .unwrap();
        assert_eq!(got, vec![(0, 0), (2, 300_000)]);
        ctx.rank()
    });
    assert_eq!(out.into_iter().map(Result::unwrap).collect::<Vec<_>>(), vec![0, 1, 2]);
}

#[test]
fn different_plans_stop_every_rank_with_the_disagreement_named() {
    let start = Instant::now();
    let out = spmd(4, |ctx| {
        let block = if ctx.rank() == 2 { 3usize } else { 2 };
        let agreed = ctx.agree(
            "test.scatter",
            &[("shape", plan_digest(&[6, 4])), ("blocking", plan_digest(&block))],
        );
        let e = agreed.expect_err("the ranks disagree");
        // Later collectives report the stop instead of running.
        assert!(matches!(ctx.barrier(), Err(JobError::Stopped(_))));
        e.to_string()
    });
    let want = "plan disagreement in `test.scatter` at op_id 1: ranks 0, 1, 3 computed one plan, rank 2 another; \
                first differing plan field: `blocking`";
    for (rank, r) in out.into_iter().enumerate() {
        // The closure's value is replaced by the failure that stopped the universe.
        match r {
            Err(JobError::Disagreement(d)) => {
                assert_eq!(d.to_string(), want, "rank {rank}");
                assert_eq!(d.groups, vec![vec![0, 1, 3], vec![2]]);
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn ranks_in_different_collectives_are_told_so() {
    let out = spmd(3, |ctx| {
        if ctx.rank() == 1 {
            ctx.barrier()
        } else {
            ctx.all_gather(&7u8).map(drop)
        }
    });
    let texts: Vec<String> = out.into_iter().map(|r| r.unwrap_err().to_string()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("collective mismatch") && t.contains("`barrier/gather`")),
        "{texts:?}"
    );
    // Every rank stopped with the same first failure.
    assert!(texts.iter().all(|t| t.contains("collective mismatch")), "{texts:?}");
}

#[test]
fn a_rank_that_leaves_early_stops_the_others() {
    let start = Instant::now();
    let out = spmd(3, |ctx| {
        if ctx.rank() == 2 {
            return Ok(());
        }
        ctx.all_gather(&1u8).map(drop)
    });
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("the universe stopped");
        let text = e.to_string();
        assert!(text.contains("rank 2 has left the universe"), "rank {rank}: {text}");
    }
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_failing_handler_stops_every_rank_with_its_diagnostic() {
    let out = UniverseBuilder::new()
        .ranks(3)
        .threads_per_rank(1)
        .faults(FaultPlan::parse("error@rank=1,op=2").unwrap())
        .spmd(|ctx| {
            ctx.run_collective::<Noop>(&(), &[0, 1, 2], &[])?;
            ctx.run_collective::<Noop>(&(), &[0, 1, 2], &[])?;
            ctx.barrier()
        })
        .unwrap();
    for (rank, r) in out {
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("failed on rank 1 at op_id 2") && text.contains("injected error"),
            "rank {rank}: {text}"
        );
    }
}

#[test]
fn faults_an_spmd_universe_cannot_inject_are_refused() {
    for (fault, expected) in [
        ("exit@rank=1", "cannot be injected in an SPMD universe"),
        ("error@rank=5", "rank 5 does not exist"),
    ] {
        let e = UniverseBuilder::new()
            .ranks(2)
            .faults(FaultPlan::parse(fault).unwrap())
            .spmd(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains(expected), "{fault}: {e}");
    }
}

#[test]
fn a_panic_on_another_rank_becomes_its_error_and_stops_the_rest() {
    let out = UniverseBuilder::new()
        .ranks(3)
        .spmd(|ctx| {
            if ctx.rank() == 1 {
                panic!("deliberate SPMD panic");
            }
            ctx.barrier()
        })
        .unwrap();
    for (rank, r) in out {
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains("rank 1 panicked in the SPMD closure: deliberate SPMD panic"),
            "rank {rank}: {text}"
        );
    }
}
