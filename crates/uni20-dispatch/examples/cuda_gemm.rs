//! Prints CUDA GEMM throughput (device-resident cuBLAS) and end-to-end `contract` throughput
//! through the CUDA backend (host packing and transfers included), or why CUDA is unavailable.
//!
//! Run: `cargo run -p uni20-dispatch --release --features cuda --example cuda_gemm`.

use std::sync::Arc;
use std::time::Instant;

use uni20_dispatch::backends::{ContractBackend, CudaBackend};
use uni20_dispatch::{contract, BackendList, DType, EinsumSpec, LocalTensor, C64};

fn main() {
    let cuda = CudaBackend::new();
    if let Err(reason) = cuda.availability() {
        println!("cuda unavailable: {reason}");
        return;
    }
    println!("device: {}", cuda.device_name().unwrap_or_default());
    for d in DType::ALL {
        for n in [1024usize, 4096, 8192] {
            match cuda.gemm_gflops(d, n, 10) {
                Ok(g) => println!("cuda gemm {d} n={n}: {g:.0} GFLOP/s (device-resident, 10 reps)"),
                Err(e) => println!("cuda gemm {d} n={n}: error {e}"),
            }
        }
    }
    let n = 4096;
    let spec = EinsumSpec::parse("ij,jk->ik").expect("spec");
    let a = LocalTensor::from_f64(&[n, n], (0..n * n).map(|x| (x % 7) as f64).collect()).expect("A");
    let list = BackendList::new(vec![Arc::new(CudaBackend::new())]);
    let one = C64::new(1.0, 0.0);
    let zero = C64::new(0.0, 0.0);
    let _ = contract(&spec, one, &a, &a, zero, None, &list);
    let t = Instant::now();
    match contract(&spec, one, &a, &a, zero, None, &list) {
        Ok(_) => {
            let s = t.elapsed().as_secs_f64();
            println!(
                "contract ij,jk->ik f64 n={n} via cuda (incl. host packing + transfers): {:.1} ms, {:.0} GFLOP/s",
                s * 1e3,
                2.0 * (n as f64).powi(3) / s / 1e9
            );
        }
        Err(e) => println!("contract via cuda failed: {e}"),
    }
}
