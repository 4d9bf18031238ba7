//! Decoding hardening: command envelopes and `ContractDescriptorV1`
//! (through the hidden `uni20_dist::fuzz` entry points) decoded from arbitrary bytes never panic and never allocate much more
//! than their input. One million mutated inputs per run (half envelopes,
//! half descriptors), derived from the committed seed corpus in
//! `tests/corpus/` (regenerate with `UNI20_WRITE_CORPUS=1`).
//!
//! Mutations: bit flips, byte overwrites (including 0xff runs that forge
//! huge varint lengths), truncation, insertion and splicing of seeds. The
//! generator is a fixed-seed xorshift, so every run checks the same inputs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use uni20_dispatch::{ContractOptions, DType};
use uni20_dist::fuzz::{contract_descriptor_bytes, decode_contract_descriptor};
use uni20_dist::plan::plan_contract;
use uni20_dist::{Blocking, Manifest};
use uni20_persist::ObjectId;
use uni20_worker::Envelope;

/// Counts the largest single allocation made on this thread's watch.
struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to the system allocator with the caller's
// arguments unchanged; the only addition is a relaxed counter update.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc`/`realloc` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`; the caller checked `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn manifest(shape: &[usize], block: usize, origin: u32) -> Manifest {
    let blocking = Blocking::regular(shape, block).unwrap();
    let blocks = (0..blocking.num_blocks())
        .map(|b| uni20_dist::BlockRef {
            owner: 1 + b % 3,
            id: ObjectId::new(origin, b as u64),
        })
        .collect();
    Manifest {
        shape: shape.to_vec(),
        dtype: DType::C64,
        blocking,
        symmetric: None,
        blocks,
    }
}

/// Seeds: real descriptors of a few plans, and envelopes carrying them.
fn make_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let plans = [
        ("abc,bcd->ad", vec![4, 3, 5], vec![3, 5, 2]),
        ("ij,jk->ki", vec![5, 6], vec![6, 3]),
        ("bij,bjk->bik", vec![2, 3, 4], vec![2, 4, 1]),
        ("ij,ij->", vec![3, 3], vec![3, 3]),
    ];
    for (i, (spec, sa, sb)) in plans.iter().enumerate() {
        let a = manifest(sa, 2, 1);
        let b = manifest(sb, 2, 2);
        let plan = plan_contract(&[1, 2, 3], *spec, &[&a, &b], &ContractOptions::default()).unwrap();
        let desc = contract_descriptor_bytes(&plan);
        let env = Envelope {
            op_id: 7 + i as u64,
            command_id: uni20_worker::command_id("uni20.contract.v1"),
            wire_name: "uni20.contract.v1".into(),
            debug_name: "contract".into(),
            schema_version: 1,
            descriptor: desc.clone(),
        };
        seeds.push((format!("descriptor-{i}.bin"), desc));
        seeds.push((format!("envelope-{i}.bin"), env.encode()));
    }
    seeds
}

fn load_seeds() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    if std::env::var_os("UNI20_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(corpus_dir()).unwrap();
        for (name, bytes) in make_seeds() {
            std::fs::write(corpus_dir().join(name), bytes).unwrap();
        }
    }
    let (mut env, mut desc) = (Vec::new(), Vec::new());
    let mut names: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for p in names {
        let bytes = std::fs::read(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("envelope") {
            env.push(bytes);
        } else if name.starts_with("descriptor") {
            desc.push(bytes);
        }
    }
    assert!(
        env.len() >= 4 && desc.len() >= 4,
        "seed corpus missing in {}",
        corpus_dir().display()
    );
    (env, desc)
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seeds[rng.below(seeds.len())]);
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                // a run of 0xff: forges a huge varint length
                let i = rng.below(len);
                for b in out.iter_mut().skip(i).take(1 + rng.below(10)) {
                    *b = 0xff;
                }
            }
            3 => out.truncate(rng.below(len + 1)),
            4 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(i..i, junk);
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            _ => {
                let n = rng.below(64);
                out.clear();
                out.extend((0..n).map(|_| rng.next() as u8));
            }
        }
    }
}

#[test]
fn a_million_mutated_inputs_decode_without_panic_or_large_allocation() {
    let (env_seeds, desc_seeds) = load_seeds();
    // The seeds themselves decode.
    for s in &env_seeds {
        Envelope::decode(s).unwrap();
    }
    for s in &desc_seeds {
        decode_contract_descriptor(s).unwrap();
    }
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut buf = Vec::new();
    let (mut ok, mut rejected) = (0usize, 0usize);
    let n: usize = std::env::var("UNI20_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    for i in 0..n {
        let envelope = i % 2 == 0;
        mutate(&mut rng, if envelope { &env_seeds } else { &desc_seeds }, &mut buf);
        LARGEST.store(0, Ordering::Relaxed);
        let accepted = if envelope {
            Envelope::decode(&buf).is_ok()
        } else {
            decode_contract_descriptor(&buf).is_ok()
        };
        let largest = LARGEST.load(Ordering::Relaxed);
        // postcard preallocates at most what the remaining input can hold
        // (serde's cautious size hint caps it at 1 MiB); anything beyond
        // that would mean a forged length reached the allocator.
        assert!(
            largest <= (1 << 20) + 16 * buf.len(),
            "input {i}: allocation of {largest} bytes for a {}-byte input",
            buf.len()
        );
        if accepted {
            ok += 1;
        } else {
            rejected += 1;
        }
    }
    println!("{n} inputs: {ok} decoded, {rejected} rejected, no panic");
    assert!(
        ok > 0 && rejected > 0,
        "mutations too weak or too strong: {ok} decoded, {rejected} rejected"
    );
}
