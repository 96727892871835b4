//! Zipfian ranks, exactly (SPEC W: "8-byte keys, uniform and Zipfian (θ = 0.99 by default)").
//!
//! [`Zipf`] draws rank `k ∈ 1..=n` with probability `k^-θ / ζ(n, θ)` by **rejection-inversion**
//! (Hörmann & Derflinger, "Rejection-inversion to generate variates from monotone discrete
//! distributions", ACM TOMACS 1996): O(1) per draw, no O(n) ζ table, and exact for every
//! `θ ≥ 0` including θ = 1.
//!
//! Why not YCSB's `ZipfianGenerator` (Gray et al., SIGMOD 1994)? It is exact for ranks 1 and 2
//! only and approximates the rest with a continuous inverse: for n = 1000 and θ = 0.99 it
//! gives rank 3 a probability 17% too high, rank 4 11%, rank 5 7.5% (computed from its
//! closed form). Benchmarks here report skew sweeps, so the distribution must be the one its
//! label says.
//!
//! [`ScrambledZipf`] maps ranks to item indices `0..n` through a seed-derived affine bijection
//! `(a·(k-1) + b) mod n` with `gcd(a, n) = 1`, so hot items are spread over the key space
//! (YCSB's "scrambled" Zipfian) while each item keeps exactly its rank's probability — YCSB
//! hashes ranks modulo n instead, which merges ranks.

use crate::rng::Rng;

/// The papers' default skew.
pub const DEFAULT_THETA: f64 = 0.99;

/// Zipf(n, θ) over ranks `1..=n`.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    h_x1: f64,
    h_n: f64,
    squeeze: f64,
}

/// `expm1(t)/t`, continuous at 0.
fn helper2(t: f64) -> f64 {
    if t.abs() > 1e-8 {
        t.exp_m1() / t
    } else {
        1.0 + t / 2.0 * (1.0 + t / 3.0 * (1.0 + t / 4.0))
    }
}

/// `ln(1+t)/t`, continuous at 0.
fn helper1(t: f64) -> f64 {
    if t.abs() > 1e-8 {
        t.ln_1p() / t
    } else {
        1.0 - t * (0.5 - t * (1.0 / 3.0 - t * 0.25))
    }
}

impl Zipf {
    /// Zipf over `1..=n` with exponent `theta` (0 = uniform). Panics if `n == 0`, θ < 0 or θ
    /// is not finite: these are programming errors, the CLI validates user input first.
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n > 0, "Zipf needs at least one item");
        assert!(theta.is_finite() && theta >= 0.0, "Zipf exponent must be finite and >= 0, got {theta}");
        let mut z = Zipf { n, theta, h_x1: 0.0, h_n: 0.0, squeeze: 0.0 };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(n as f64 + 0.5);
        z.squeeze = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        z
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The unnormalised density `x^-θ`.
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// An antiderivative of `h`: `(x^(1-θ) - 1)/(1-θ)`, or `ln x` at θ = 1.
    fn big_h(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.theta) * lx) * lx
    }

    /// The inverse of [`Zipf::big_h`].
    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (1.0 - self.theta) * y;
        (helper1(t) * y).exp()
    }

    /// A rank in `1..=n`; rank 1 is the most popular.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.theta == 0.0 {
            return 1 + rng.below(self.n);
        }
        loop {
            let u = self.h_n + rng.f64() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = ((x + 0.5).floor() as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.big_h(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }

    /// The exact probabilities of ranks `1..=n` (O(n): for tests and reports, not hot loops).
    pub fn pmf(n: u64, theta: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-theta)).collect();
        let zeta: f64 = w.iter().sum();
        w.into_iter().map(|x| x / zeta).collect()
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Zipf over item indices `0..n`, hot items spread by a bijection.
#[derive(Clone, Debug)]
pub struct ScrambledZipf {
    zipf: Zipf,
    a: u64,
    b: u64,
}

impl ScrambledZipf {
    pub fn new(n: u64, theta: f64, seed: u64) -> ScrambledZipf {
        let zipf = Zipf::new(n, theta);
        let mut r = Rng::derive(seed, 0x5a19f);
        let (mut a, b) = (1, r.below(n));
        if n > 2 {
            loop {
                a = 1 + r.below(n - 1);
                if gcd(a, n) == 1 {
                    break;
                }
            }
        }
        ScrambledZipf { zipf, a, b }
    }

    /// The item that rank `k` (1-based) maps to.
    pub fn item_of_rank(&self, k: u64) -> u64 {
        let n = self.zipf.n as u128;
        ((self.a as u128 * (k - 1) as u128 + self.b as u128) % n) as u64
    }

    /// An item index in `0..n`.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        self.item_of_rank(self.zipf.sample(rng))
    }

    pub fn zipf(&self) -> &Zipf {
        &self.zipf
    }
}
