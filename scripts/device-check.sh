#!/usr/bin/env bash
# Device check for the uni20-dispatch CUDA backend. Run from the repository root on a
# machine with an NVIDIA GPU and driver (the CUDA toolkit is NOT needed: cudarc loads
# libcuda and libcublas at run time). Takes well under 5 minutes after the build.
#
#   scripts/device-check.sh            # build, CUDA tests, GEMM throughput
#
# Prints: nvidia-smi summary, the CUDA backend test output (the reference comparison and
# throughput tests are #[ignore]d in ordinary runs, where no GPU is assumed; here they run
# with --include-ignored and FAIL when no usable device is found),
# then GFLOP/s lines from the cuda_gemm example. Exit status is non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== machine"
nproc || true
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi not available") 2>&1
ls /usr/lib/x86_64-linux-gnu/libcublas.so* /usr/local/cuda*/lib64/libcublas.so* 2>/dev/null | head -3 || true

echo "== build (release, --features cuda)"
timeout 900 cargo build -p uni20-dispatch --release --features cuda --tests --examples

echo "== CUDA backend tests"
timeout 240 cargo test -p uni20-dispatch --features cuda --release --test cuda -- --include-ignored --nocapture --test-threads=1

echo "== strided property tests including the CUDA backend"
timeout 240 cargo test -p uni20-dispatch --features cuda --release --test strided -- --nocapture

echo "== GEMM throughput"
timeout 120 cargo run -p uni20-dispatch --release --features cuda --example cuda_gemm
