//! The random fractions that spread retries out (backoff jitter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A tiny lock-free PRNG (SplitMix64) for backoff jitter: statistical
/// quality is plenty for spreading retries, and it needs no dependency.
pub(super) struct Jitter(AtomicU64);

impl Jitter {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator seeded from the clock and a per-process counter.
    pub(super) fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // Agents built in the same nanosecond still get different streams.
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
        Self(AtomicU64::new(
            nanos ^ instance.wrapping_mul(Self::GAMMA).rotate_left(17),
        ))
    }

    fn next_u64(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(Self::GAMMA, Ordering::Relaxed)
            .wrapping_add(Self::GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub(super) fn next_fraction(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_fractions_are_in_range_and_spread() {
        let jitter = Jitter(AtomicU64::new(42));
        let draws: Vec<f64> = (0..10_000).map(|_| jitter.next_fraction()).collect();
        assert!(draws.iter().all(|f| (0.0..1.0).contains(f)));
        let low = draws.iter().filter(|f| **f < 0.5).count();
        assert!((4_500..5_500).contains(&low), "{low} of 10000 below 0.5");
    }
}
