//! Exact free-fermion dynamics of the open XX chain shared by the TEBD and
//! TDVP tests: `H = sum (Sx Sx + Sy Sy)` maps by Jordan-Wigner to hopping
//! of amplitude 1/2, with one-particle modes `phi_k(i) = sqrt(2/(L+1))
//! sin(pi k (i+1)/(L+1))` of energy `cos(pi k/(L+1))`.
#![allow(dead_code)]

/// `<Sz_i(t)>` of the Neel state (sites 0, 2, .. up) evolved by the XX chain
/// of `l` sites: `sum_j |U_ij(t)|^2 n_j - 1/2` with `U = exp(-i T t)` of the
/// hopping matrix `T`, from its eigenvectors.
pub fn neel_sz(l: usize, t: f64) -> Vec<f64> {
    let modes: Vec<(f64, Vec<f64>)> = (1..=l)
        .map(|k| {
            let q = std::f64::consts::PI * k as f64 / (l + 1) as f64;
            let norm = (2.0 / (l + 1) as f64).sqrt();
            (q.cos(), (0..l).map(|i| norm * (q * (i + 1) as f64).sin()).collect())
        })
        .collect();
    (0..l)
        .map(|i| {
            let mut n = 0.0;
            for j in (0..l).step_by(2) {
                let (mut re, mut im) = (0.0, 0.0);
                for (e, phi) in &modes {
                    re += phi[i] * phi[j] * (e * t).cos();
                    im -= phi[i] * phi[j] * (e * t).sin();
                }
                n += re * re + im * im;
            }
            n - 0.5
        })
        .collect()
}

/// Ground energy of the open XX chain of `l` sites: the sum of the negative
/// one-particle energies.
pub fn xx_ground_energy(l: usize) -> f64 {
    (1..=l)
        .map(|k| (std::f64::consts::PI * k as f64 / (l + 1) as f64).cos())
        .filter(|&x| x < 0.0)
        .sum()
}

/// `max_i |a_i - b_i|`.
pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// Ground energy of the open transverse-field Ising chain
/// `-J sum sx sx - g sum sz` of `l` sites: minus the sum of the singular
/// values of the `l x l` matrix with `g` on the diagonal and `J` above it
/// (P. Pfeuty, Ann. Phys. 57, 79 (1970)).
pub fn tfi_ground_energy(l: usize, j: f64, g: f64) -> f64 {
    let mut a = vec![0.0; l * l];
    for i in 0..l {
        a[i * l + i] = g;
        if i + 1 < l {
            a[i * l + i + 1] = j;
        }
    }
    let t = uni20::dispatch::LocalTensor::from_f64(&[l, l], a).unwrap();
    let s = uni20::dispatch::decomp::svd(
        &t,
        &Default::default(),
        &uni20::dispatch::decomp::SvdBackendList::default_cpu(1),
    )
    .unwrap()
    .s;
    -s.iter().sum::<f64>()
}
