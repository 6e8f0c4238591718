//! How many candidates to put under the next test run: an exact dynamic
//! programme over prefix tests, solved once per failure-rate grid point.
//!
//! ## The model
//!
//! Every run tests the landed fixes plus a *prefix* of the undecided ones
//! (see the module docs for why only prefixes). The knowledge between runs is
//! fully described by two numbers: `n`, the undecided fixes left, and `u`,
//! an optional *bound*: "some failing run shows the first failing candidate
//! is among the first `u`". With fixes failing independently with rate `p`
//! (`q = 1 − p`), the expected number of runs to decide everything is
//!
//! ```text
//! V(0)    = 0
//! V(n)    = min over k in 1..=min(n, K) of  1 + qᵏ·V(n−k) + (1−qᵏ)·W(n, k)
//! W(n, 1) = V(n−1)                              (the first candidate is dropped)
//! W(n, u) = min over k in 1..=u/2 of  1 + a·W(n−k, u−k) + (1−a)·W(n, k)
//!           where a = (qᵏ − qᵘ) / (1 − qᵘ) = P(prefix k passes | first failure ≤ u)
//! ```
//!
//! Testing `k` and passing lands `k` fixes; failing tightens the bound to
//! `k`. The argmins are stored as tables for `n ≤ TABLE_ROWS` and `u, k ≤ K`
//! ([`MAX_BATCH`](super::MAX_BATCH)); beyond `TABLE_ROWS` the last row is
//! used, where the policy has long become stationary.
//!
//! Two facts shape the tables:
//! - at `p ≥ (3 − √5)/2 ≈ 0.382` the minimum is always `k = 1`, i.e. testing
//!   one by one is optimal (Ungar, 1960) — the threshold `auto` switches at;
//! - bounded splits are restricted to `k ≤ u/2`. The unrestricted optimum
//!   never goes past the half anyway (the first failure is more likely early
//!   in the bound), and the restriction turns it into a guarantee: every
//!   failing run at least halves the bound, which is what the documented
//!   worst-case run count rests on.
//!
//! The tables cost about 190k cheap steps per grid point, are computed
//! lazily on first use and shared by every verifier in the process (they
//! are a pure function of the grid point).

use std::sync::OnceLock;

use super::MAX_BATCH;

/// Rows of the stored tables (remaining fixes); larger counts use the last row.
const TABLE_ROWS: usize = 128;

/// Failure rates the tables are solved for; an estimate uses the nearest one
/// on a log scale. The last point sits just below the one-by-one threshold.
pub(crate) const RATE_GRID: [f64; 19] = [
    0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12, 0.14, 0.17, 0.2, 0.24,
    0.28, 0.33, 0.38,
];

/// The argmin tables for one failure rate.
#[derive(Debug)]
struct Tables {
    /// `unbounded[n]`: batch size with `n` undecided fixes and no bound.
    unbounded: Vec<u8>,
    /// `bounded[n][u]`: batch size with `n` undecided fixes and bound `u ≥ 2`.
    bounded: Vec<[u8; MAX_BATCH + 1]>,
}

static TABLES: [OnceLock<Tables>; RATE_GRID.len()] = [const { OnceLock::new() }; RATE_GRID.len()];

/// Index of the grid point nearest to `rate` on a log scale.
fn grid_index(rate: f64) -> usize {
    let target = rate
        .clamp(RATE_GRID[0], RATE_GRID[RATE_GRID.len() - 1])
        .ln();
    let mut best = 0;
    let mut best_distance = f64::INFINITY;
    for (i, point) in RATE_GRID.iter().enumerate() {
        let distance = (point.ln() - target).abs();
        if distance < best_distance {
            best = i;
            best_distance = distance;
        }
    }
    best
}

fn tables(index: usize) -> &'static Tables {
    TABLES[index].get_or_init(|| solve(RATE_GRID[index], TABLE_ROWS).0)
}

/// The expected number of runs `V(n)` of the optimal policy for `n` fixes
/// at exactly failure rate `p` (not a grid point), by the same programme.
pub(crate) fn expected_runs(n: usize, p: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    solve(p.clamp(0.0, 1.0), n).1[n]
}

/// The queue length the pass rule judges longer passes by: its threshold
/// for 64 fixes (the lowest grid rate, 1 %) holds for every longer pass,
/// as it did when 64 was the largest batch.
const PASS_RULE_SPAN: usize = 64;

/// The largest grid rate at which the stored policy tests `n` fixes
/// (at most [`PASS_RULE_SPAN`]) all at once; `0.0` when it does at none.
pub(crate) fn whole_batch_rate(n: usize) -> f64 {
    let n = n.clamp(1, PASS_RULE_SPAN);
    (0..RATE_GRID.len())
        .rev()
        .find(|&i| usize::from(tables(i).unbounded[n]) == n)
        .map_or(0.0, |i| RATE_GRID[i])
}

/// Solves the dynamic programme for failure rate `p` over `rows` fixes (see
/// the module docs): the argmin tables and the expected runs `V(0..=rows)`.
fn solve(p: f64, rows: usize) -> (Tables, Vec<f64>) {
    let q = 1.0 - p;
    // q_pow[k] = qᵏ for k ≤ MAX_BATCH.
    let mut q_pow = [1.0_f64; MAX_BATCH + 1];
    for k in 1..=MAX_BATCH {
        q_pow[k] = q_pow[k - 1] * q;
    }
    let mut v = vec![0.0_f64; rows + 1];
    let mut w = vec![[0.0_f64; MAX_BATCH + 1]; rows + 1];
    let mut unbounded = vec![0_u8; rows + 1];
    let mut bounded = vec![[0_u8; MAX_BATCH + 1]; rows + 1];
    for n in 1..=rows {
        let width = n.min(MAX_BATCH);
        w[n][1] = v[n - 1];
        bounded[n][1] = 1;
        for u in 2..=width {
            let mut best = f64::INFINITY;
            let mut best_k = 1;
            for k in 1..=u / 2 {
                // At p = 0 a bound never arises; any finite split will do.
                let pass = if q_pow[u] < 1.0 {
                    (q_pow[k] - q_pow[u]) / (1.0 - q_pow[u])
                } else {
                    1.0
                };
                let cost = 1.0 + pass * w[n - k][u - k] + (1.0 - pass) * w[n][k];
                if cost < best {
                    best = cost;
                    best_k = k;
                }
            }
            w[n][u] = best;
            bounded[n][u] = best_k as u8;
        }
        let mut best = f64::INFINITY;
        let mut best_k = 1;
        for k in 1..=width {
            let cost = 1.0 + q_pow[k] * v[n - k] + (1.0 - q_pow[k]) * w[n][k];
            if cost < best {
                best = cost;
                best_k = k;
            }
        }
        v[n] = best;
        unbounded[n] = best_k as u8;
    }
    (Tables { unbounded, bounded }, v)
}

/// The batch size for the next fresh run: `remaining` undecided fixes (≥ 1),
/// an optional bound (`2 ≤ bound ≤ remaining`), an estimated failure rate,
/// and a cap (`1..=MAX_BATCH`).
///
/// Always `1 ≤ k ≤ remaining`, `k ≤ cap`, and with a bound `k ≤ bound / 2`.
pub(crate) fn batch_size(remaining: usize, bound: Option<usize>, rate: f64, cap: usize) -> usize {
    let cap = cap.clamp(1, MAX_BATCH);
    let table = tables(grid_index(rate));
    let row = remaining.min(TABLE_ROWS);
    let k = match bound {
        Some(u) => {
            let u = u.clamp(2, row.clamp(2, MAX_BATCH));
            usize::from(table.bounded[row][u]).min(u / 2)
        }
        None => usize::from(table.unbounded[row]).min(remaining),
    };
    k.clamp(1, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_lookup_picks_the_nearest_point() {
        assert_eq!(RATE_GRID[grid_index(0.1)], 0.1);
        assert_eq!(RATE_GRID[grid_index(0.0)], 0.01);
        assert_eq!(RATE_GRID[grid_index(0.9)], 0.38);
        assert_eq!(RATE_GRID[grid_index(0.052)], 0.05);
    }

    #[test]
    fn known_optimal_first_batches() {
        // Classic values: at p = 0.1 about 7 per batch, at p = 0.2 about 3,
        // and one by one just below the (3 − √5)/2 threshold is nearly so.
        assert_eq!(batch_size(100, None, 0.1, MAX_BATCH), 7);
        assert_eq!(batch_size(100, None, 0.2, MAX_BATCH), 3);
        assert_eq!(batch_size(100, None, 0.05, MAX_BATCH), 14);
        // Near the end of a short sequence the whole rest is tested at once.
        assert_eq!(batch_size(16, None, 0.05, MAX_BATCH), 16);
        assert_eq!(batch_size(3, None, 0.1, MAX_BATCH), 3);
        // At 1 %, 80 fixes pass together 45 % of the time, and testing them
        // whole first is still optimal: one run, not 64 and then 16.
        assert_eq!(batch_size(80, None, 0.01, MAX_BATCH), 80);
        assert_eq!(batch_size(80, None, 0.01, 64), 64);
    }

    #[test]
    fn every_choice_respects_its_limits() {
        for (i, &p) in RATE_GRID.iter().enumerate() {
            let t = tables(i);
            for n in 1..=TABLE_ROWS {
                let k = usize::from(t.unbounded[n]);
                assert!((1..=n.min(MAX_BATCH)).contains(&k), "p={p} n={n} k={k}");
                for u in 2..=n.min(MAX_BATCH) {
                    let k = usize::from(t.bounded[n][u]);
                    assert!((1..=u / 2).contains(&k), "p={p} n={n} u={u} k={k}");
                }
            }
        }
        assert_eq!(batch_size(500, None, 0.01, 8), 8);
        assert_eq!(batch_size(500, Some(2), 0.01, 8), 1);
    }
}
