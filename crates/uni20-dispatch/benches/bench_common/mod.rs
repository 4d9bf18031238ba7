//! Helpers shared by the benches of this crate: the thread count, faer's parallelism for it,
//! interleaved median timing (each side's calls alternate with the other sides', so
//! that drifting machine load affects every side alike), and flat-sampling benchmark groups.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};

use faer::Par;

/// The machine's available parallelism (1 if unknown).
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |c| c.get())
}

/// faer's parallelism for `threads`: sequential for 0 or 1.
pub fn par(threads: usize) -> Par {
    if threads <= 1 {
        Par::Seq
    } else {
        Par::rayon(threads)
    }
}

/// Median seconds of `reps` interleaved calls of each side (after one warm-up call each).
pub fn interleaved(reps: usize, sides: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let mut times = vec![Vec::with_capacity(reps); sides.len()];
    for side in sides.iter_mut() {
        side();
    }
    for _ in 0..reps {
        for (k, side) in sides.iter_mut().enumerate() {
            let t = Instant::now();
            side();
            times[k].push(t.elapsed().as_secs_f64());
        }
    }
    times
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect()
}

/// A benchmark group `name` with flat sampling: `samples` samples after `warm_up`, measured
/// over `measure`.
pub fn flat_group<'c>(
    c: &'c mut Criterion,
    name: &str,
    samples: usize,
    warm_up: Duration,
    measure: Duration,
) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(samples)
        .warm_up_time(warm_up)
        .measurement_time(measure);
    g
}
