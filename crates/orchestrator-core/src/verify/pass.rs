//! The low failure-rate rule: verify a whole pass as one batch at its end.
//!
//! A pass (one review-fix session) often has several stages: groups that
//! share files run one stage after another. Verified stage by stage, every
//! stage costs at least one test run of its own. Verified as one queue at
//! the end of the pass — every fix committed one commit each on top of the
//! previous stages' untested fixes, then the queue verified by prefixes as
//! usual — the pass costs one run when every fix passes.
//!
//! ## The expected runs
//!
//! With fixes failing independently at rate `p`, the optimal prefix policy
//! for `n` fixes needs `V(n)` runs on average (the programme in `policy.rs`:
//! `V(n) = min over k of 1 + qᵏ·V(n−k) + (1−qᵏ)·W(n, k)`, `q = 1 − p`).
//! A pass of stages `n₁ … n_S` (`N = Σ nₛ`) costs
//!
//! ```text
//! stage by stage (today's rule):  E_stages(p) = Σₛ V(nₛ)
//! as one queue (the pass rule):   E_pass(p)   = V(N) ≤ Σₛ V(nₛ)
//! ```
//!
//! `V` is subadditive — "verify the first stage optimally, then the next"
//! is one of the policies the minimum runs over for the whole queue — so
//! the whole pass never needs more runs on average, at any `p` in `[0, 1]`;
//! at `p ≥ (3 − √5)/2`, where testing one by one is optimal, both are `N`.
//! When every fix passes, the queue is tested once: the policy's first
//! batch is the whole queue (up to 64 fixes, and up to about a hundred at
//! the lowest rate; [`MAX_BATCH`](super::MAX_BATCH) at most) at rates up to
//! [`whole_pass_rate`].
//!
//! ## The rule
//!
//! What the model leaves out decides the switch: a fix dropped in an early
//! stage makes the later stages' fixes, built on top of it, be re-applied
//! (or made again by the agent), and the untested fixes wait longer. So a
//! pass is verified as one queue only when the evidence says drops are
//! rare — the failure-rate estimate `p̂` (the Beta posterior over the
//! session's decided fixes, with a prior that the caller picks: low for
//! machine-applicable suggestions) is at most [`whole_pass_rate`]`(N)`, the
//! rate up to which the policy would test the whole queue in its first run.
//! Otherwise the stages are verified one by one as before, and so is every
//! later pass whose estimate has risen above the threshold.

use super::policy;

/// The largest failure rate (a point of the policy's rate grid) at which
/// the verification policy tests all of `n` fixes (a longer pass counts as
/// 64) in its first run: about 0.01 for 64 fixes, 0.02 for 35, 0.1 for 3.
/// `0.0` when it does at none of the grid's rates.
pub fn whole_pass_rate(n: usize) -> f64 {
    policy::whole_batch_rate(n)
}

/// The pass rule: verify a pass of about `n` fixes as one queue at its end
/// when the estimated failure rate is at most [`whole_pass_rate`]`(n)`.
pub fn verify_pass_whole(n: usize, estimate: f64) -> bool {
    n > 0 && estimate <= whole_pass_rate(n)
}

/// `V(n)`: the expected number of test runs of the optimal prefix policy
/// for `n` fixes failing independently at rate `rate` (clamped to
/// `[0, 1]`), batches capped at [`MAX_BATCH`](super::MAX_BATCH).
pub fn expected_runs(n: usize, rate: f64) -> f64 {
    policy::expected_runs(n, rate)
}

/// Expected test runs of a pass with `stages` (fixes per stage) at failure
/// rate `rate`: `Σ V(nₛ)` verified stage by stage, `V(Σ nₛ)` as one queue.
pub fn expected_pass_runs(stages: &[usize], rate: f64, whole: bool) -> f64 {
    if whole {
        expected_runs(stages.iter().sum(), rate)
    } else {
        stages.iter().map(|&n| expected_runs(n, rate)).sum()
    }
}

/// Expected test runs of a pass under the pass rule, deciding with the
/// failure rate itself as the estimate: as one queue when
/// [`verify_pass_whole`] holds, else stage by stage.
pub fn expected_pass_runs_by_rule(stages: &[usize], rate: f64) -> f64 {
    let whole = verify_pass_whole(stages.iter().sum(), rate);
    expected_pass_runs(stages, rate, whole)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_threshold_follows_the_policy() {
        // Small queues are tested whole at higher rates than large ones.
        assert!(whole_pass_rate(3) >= whole_pass_rate(35));
        assert!(whole_pass_rate(35) >= whole_pass_rate(64));
        assert!(whole_pass_rate(64) > 0.0);
        assert_eq!(whole_pass_rate(64), whole_pass_rate(200));
        assert!(verify_pass_whole(64, 0.005));
        assert!(!verify_pass_whole(64, 0.1));
        assert!(!verify_pass_whole(0, 0.0));
    }

    #[test]
    fn the_model_at_its_ends() {
        // Nothing fails: one run for the queue, one per stage otherwise.
        assert!((expected_pass_runs(&[30, 20, 10], 0.0, true) - 1.0).abs() < 1e-9);
        assert!((expected_pass_runs(&[30, 20, 10], 0.0, false) - 3.0).abs() < 1e-9);
        // Everything fails: one run per fix either way.
        assert!((expected_pass_runs(&[30, 20, 10], 1.0, true) - 60.0).abs() < 1e-9);
        assert!((expected_pass_runs(&[30, 20, 10], 1.0, false) - 60.0).abs() < 1e-9);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The acceptance property: at every failure rate the pass rule
        /// needs no more test runs on average than stage by stage.
        #[test]
        fn the_pass_rule_never_costs_runs(
            stages in proptest::collection::vec(1_usize..40, 1..5),
            rate in 0.0_f64..=1.0,
        ) {
            let today = expected_pass_runs(&stages, rate, false);
            let rule = expected_pass_runs_by_rule(&stages, rate);
            let whole = expected_pass_runs(&stages, rate, true);
            prop_assert!(rule <= today + 1e-9, "rule {rule} > today {today}");
            prop_assert!(whole <= today + 1e-9, "whole {whole} > today {today}");
        }
    }
}
