//! MPI integration test (run by `cargo xtask test` under `mpirun -n 2` and
//! `-n 3`): control frames far above MPI's eager limit, in both directions at
//! once, and payloads split into chunks.
//!
//! - `i,i->` over a vector in blocks of one element: a contraction plan of
//!   hundreds of kilobytes (the case that hung `uni20 contract` under MPI),
//!   whose one item's rank receives most of it.
//! - storage requests carrying 8 MB objects, submitted without waiting: the
//!   root posts an 8 MB `Put` frame to each worker while the workers reply
//!   with 8 MB `Get` answers (this deadlocked when sends were blocking).
//! - a chunk size of about 40,000 bytes (not a power of two), so every frame
//!   and every block above it travels as several messages, including a block
//!   whose encoding is exactly one chunk (then an empty last part).
//!
//! Every result is checked against a value computed here. A failure panics
//! on the root, which aborts the communicator: non-zero exit.
// uni20-mpi-ranks: 2, 3

use std::cell::RefCell;
use std::rc::Rc;

use uni20::persist::{StorageRequest, StorageResponse};
use uni20::prelude::*;
use uni20::worker::commands::StorageCommand;

/// Elements of the block whose encoding is exactly one chunk.
const EXACT: usize = 5000;

/// Payload of each storage request frame (the encoding of its bytes through
/// serde dominates the run time of a debug build, so not more).
const FRAME_BYTES: usize = 8_000_000;

fn vector(n: usize) -> (LocalTensor, f64) {
    let x: Vec<f64> = (0..n).map(|i| (i % 7) as f64 - 3.0).collect();
    let dot = x.iter().map(|v| v * v).sum();
    (LocalTensor::from_f64(&[n], x).unwrap(), dot)
}

fn matrix(rows: usize, cols: usize, salt: usize) -> Vec<f64> {
    (0..rows * cols).map(|k| ((k * 3 + salt) % 5) as f64 - 2.0).collect()
}

/// `i,i->` with blocks of one element: a plan of `n` terms and about `n`
/// transfers, far above the eager limit.
fn long_dot(ctl: &Controller<'_>, n: usize) {
    let (x, want) = vector(n);
    let dx = DistTensor::from_local(ctl, &x, 1).unwrap();
    let c = contract(ctl, "i,i->", &dx, &dx).unwrap();
    let got = c.to_local(ctl).unwrap();
    assert_eq!(got.to_c64_vec()[0].re, want, "i,i-> over {n} blocks");
    let m = dx.manifest(ctl).unwrap();
    let plan = uni20::dist::plan::plan_contract(&ctl.compute_ranks(), "i,i->", &[&m, &m], &Default::default()).unwrap();
    // Each participant receives its share of the plan: the rank of the one
    // item gets its 20,000 terms and the transfers it receives.
    let whole = plan.descriptor_bytes();
    let frame = plan.share_bytes().iter().map(|s| s.1).max().unwrap_or(0);
    assert!(frame > 128 << 10, "the largest frame is only {frame} bytes");
    println!(
        "mpi_large_frames: i,i-> over {n} one-element blocks, largest plan frame {frame} bytes (whole plan {whole}): ok"
    );
}

/// Rounds of (Put 8 MB to every worker, Get it back from every worker),
/// all submitted before any reply is collected.
fn crossing_frames(ctl: &Controller<'_>, rounds: usize) {
    let workers = ctl.non_root_ranks();
    let done = Rc::new(RefCell::new(0usize));
    for round in 0..rounds {
        let payload: Vec<u8> = (0..FRAME_BYTES).map(|i| (i * 31 + round) as u8).collect();
        let id = ctl.store().commit(payload).unwrap().id();
        let (meta, bytes) = ctl.store().encoded_for_transfer(id).unwrap();
        let put = StorageRequest::Put {
            meta,
            bytes: bytes.to_vec(),
        };
        let n = workers.len();
        let d = done.clone();
        ctl.submit_nowait::<StorageCommand>(&put, &workers, move |_, r| {
            let replies = r.unwrap();
            assert_eq!(replies.len(), n);
            assert!(replies.iter().all(|(_, a)| *a == StorageResponse::Done), "put refused");
            *d.borrow_mut() += 1;
        })
        .unwrap();
        let d = done.clone();
        let want = bytes.clone();
        ctl.submit_nowait::<StorageCommand>(&StorageRequest::Get(id), &workers, move |_, r| {
            for (rank, answer) in r.unwrap() {
                match answer {
                    StorageResponse::Object { bytes, .. } => {
                        assert!(bytes == *want, "rank {rank} returned other bytes")
                    }
                    other => panic!("rank {rank}: {other:?}"),
                }
            }
            *d.borrow_mut() += 1;
        })
        .unwrap();
    }
    ctl.drain().unwrap();
    assert_eq!(*done.borrow(), 2 * rounds);
    println!(
        "mpi_large_frames: {rounds} rounds of {FRAME_BYTES}-byte put + get frames to {} worker(s): ok",
        workers.len()
    );
}

/// A matrix product whose blocks (125 x 125 f64: 3 chunks and a rest) cross
/// between workers and the root, and a block of exactly one chunk.
fn chunked_blocks(ctl: &Controller<'_>, chunk: usize) {
    let (m, k, n) = (200, 250, 160);
    let a = matrix(m, k, 1);
    let b = matrix(k, n, 2);
    let mut want = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
        }
    }
    let da = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[m, k], a).unwrap(), 125).unwrap();
    let db = DistTensor::from_local(ctl, &LocalTensor::from_f64(&[k, n], b).unwrap(), 125).unwrap();
    let c = contract(ctl, "ij,jk->ik", &da, &db).unwrap().to_local(ctl).unwrap();
    let got: Vec<f64> = c.to_c64_vec().iter().map(|z| z.re).collect();
    assert_eq!(got, want, "ij,jk->ik with blocks above the chunk size");
    let exact = LocalTensor::from_f64(&[EXACT], (0..EXACT).map(|i| i as f64).collect()).unwrap();
    assert_eq!(exact.encode().len(), chunk);
    let back = DistTensor::from_local(ctl, &exact, EXACT)
        .unwrap()
        .to_local(ctl)
        .unwrap();
    assert_eq!(back.to_c64_vec(), exact.to_c64_vec());
    println!("mpi_large_frames: blocks split into {chunk}-byte chunks: ok");
}

fn main() {
    // The chunk size: the encoding of a block of EXACT f64 (40,000 bytes of
    // elements plus the block header).
    let chunk = LocalTensor::zeros(DType::F64, &[EXACT]).unwrap().encode().len();
    let size = uni20::universe()
        .chunk_bytes(chunk)
        .run(|ctl| {
            assert_eq!(
                ctl.transport_kind(),
                uni20::worker::transport::TransportKind::Mpi,
                "not launched by mpirun"
            );
            long_dot(ctl, 20_000);
            crossing_frames(ctl, 2);
            chunked_blocks(ctl, chunk);
            ctl.size()
        })
        .unwrap();
    println!("mpi_large_frames: passed on {size} ranks");
}
