//! Merge-queue style verification of an ordered sequence of candidate fixes:
//! which fixes land, decided with as few test runs as possible.
//!
//! A [`Verifier`] is a sans-I/O state machine. The driver asks it for the next
//! [`Step`]; a [`Step::Test`] names a [`Trial`] — "the landed fixes plus these
//! next candidates, in order" — which the driver builds (for example by
//! landing the candidates' commits on top of the landed tip), runs the tests
//! on, and reports back with [`Verifier::record`]. When the machine answers
//! [`Step::Done`], [`Verifier::report`] tells which fixes landed (in order),
//! which were dropped (with the failing run's output reference), which test
//! failures were flaky, and how many runs it took.
//!
//! ```
//! use orchestrator_core::verify::{verify_with, RunOutcome, VerifyConfig, VerifyMode};
//!
//! // Eight fixes; the tests fail whenever "f3" is applied.
//! let fixes: Vec<String> = (1..=8).map(|i| format!("f{i}")).collect();
//! let report = verify_with(fixes, VerifyConfig::new(VerifyMode::Batch), |trial, tree| {
//!     if tree.iter().any(|f| f == "f3") {
//!         RunOutcome::fail(format!("logs/{}.txt", trial.run))
//!     } else {
//!         RunOutcome::Pass
//!     }
//! })
//! .unwrap();
//! assert_eq!(report.landed.len(), 7);
//! assert_eq!(report.dropped[0].fix, "f3");
//! assert!(report.runs < 8 + report.reruns); // fewer runs than one per fix
//! ```
//!
//! ## What lands: exactly what `each` lands
//!
//! The reference is [`VerifyMode::Each`]: walk the fixes in order, apply fix
//! `i` on top of the fixes landed so far, run the tests, keep it if they pass
//! and drop it otherwise. The other modes land *the same fixes in the same
//! order* whenever tests are deterministic and a failure persists once
//! introduced — a tree fails iff some fix in it fails given the fixes below
//! it. Fixes may interact freely (a fix may fail only with, or only without,
//! some earlier fix); what is excluded is a later fix *repairing* a failure
//! an earlier one introduced, the premise of every merge queue.
//!
//! To keep that guarantee, every run tests the landed fixes plus a **prefix**
//! of the undecided ones, never a subset with gaps: a candidate is only ever
//! tested on top of exactly the fixes `each` would have landed below it. A
//! passing prefix lands whole; a failing one bounds the first failing
//! candidate; once a failing run's tree is "landed + one candidate" that
//! candidate is dropped and the next runs go on from the last good state.
//!
//! ## Modes
//!
//! - [`VerifyMode::Each`] — one run per fix: the seed's behaviour.
//! - [`VerifyMode::Batch`] — group testing over prefixes. The next batch size
//!   (with no failure pending) and the next split (while bisecting a failing
//!   prefix) come from an exact dynamic programme over the expected number of
//!   runs for the estimated failure rate (see `policy.rs`): e.g. about 7
//!   fixes per batch at a 10 % failure rate, 14 at 5 %, 3 at 20 %, and splits
//!   skewed toward the front, where the first failure most likely is. The
//!   rate is estimated from the session so far with a Beta prior
//!   (`prior_failures`, `prior_passes`, default one failure in ten). `Batch`
//!   never lets the estimate go above [`BATCH_MAX_RATE`], so it keeps batching
//!   however often fixes fail.
//! - [`VerifyMode::Auto`] (the default) — starts as `Batch` with the estimate
//!   unclamped, switches to one-by-one once the estimate reaches
//!   `to_each_rate` (≈ 0.38, where testing one by one is optimal) and back to
//!   batching when it falls below `to_batch_rate`.
//!
//! ## A whole pass at once
//!
//! When fixes rarely fail, a caller with several stages of fixes can verify
//! them as one queue rather than stage by stage: [`verify_pass_whole`]
//! decides it from the failure-rate estimate, and [`expected_pass_runs`]
//! gives the expected runs of both ways (see `pass.rs`: one queue never
//! needs more on average, at any failure rate).
//!
//! ## Flaky tests
//!
//! A failing run is never blamed on a fix before the identical tree has been
//! re-run up to `flaky_reruns` times (default 1). The machine defers those
//! re-runs to the moment they decide something: when the failing tree has
//! become "landed + one candidate" (which is immediately in `each`). A failing
//! run that a smaller failing run supersedes needed no re-run: the larger tree
//! contains the smaller one and fails with it. A re-run that passes records a
//! [`FlakyEvent`] and the candidate lands; a failure that survives every
//! re-run drops the candidate.
//!
//! ## How many runs
//!
//! `each` takes exactly `N + reruns` runs on deterministic tests; that is the
//! baseline of [`VerifyReport::runs_saved`]. `batch` and `auto` never take
//! more than
//!
//! ```text
//! runs ≤ landed + (dropped + flaky) · (1 + ⌊log₂ max_batch⌋) + reruns
//! reruns ≤ (dropped + flaky) · flaky_reruns
//! ```
//!
//! because a passing fresh run lands at least one fix, every failing fresh
//! run either opens a bound of at most `max_batch` or at least halves it, and
//! every bound ends in a drop or a flaky event. On average they need far
//! fewer than `each`: the `verify` workload in `benches/` measures 7.9 runs
//! for 16 fixes at a 10 % failure rate (`each`: 16; the entropy bound is 7.5)
//! and 29.9 for 100 fixes at 5 % (`each`: 100); at a 40 % rate, where one by
//! one is optimal, `auto` needs 1.17× the runs of `each` for 16 fixes and
//! 1.04× for 100.

mod pass;
mod policy;
#[cfg(test)]
mod tests;

pub use pass::{
    expected_pass_runs, expected_pass_runs_by_rule, expected_runs, verify_pass_whole,
    whole_pass_rate,
};

use std::fmt;
use std::fmt::Write as _;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The largest batch (prefix) the machine ever tests at once, and the upper
/// limit of [`VerifyConfig::max_batch`]. At the lowest failure rates the
/// policy tests a whole queue this long in one run (at 1 %, up to about a
/// hundred fixes: a first lint pass of 80 machine-applicable fixes is one
/// run, not 64 and then 16).
pub const MAX_BATCH: usize = 128;

/// The failure rate at and above which testing one by one is optimal for
/// prefix group testing: (3 − √5) / 2.
pub const EACH_OPTIMAL_RATE: f64 = 0.381_966_011_250_105_1;

/// The highest failure-rate estimate [`VerifyMode::Batch`] sizes its batches
/// for: above it, batching stops paying, and `Batch` still batches.
pub const BATCH_MAX_RATE: f64 = 0.33;

/// Why a verifier could not be built or a result could not be recorded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A mode name other than each, batch or auto.
    #[error("unknown verify mode `{value}` (expected each, batch or auto)")]
    UnknownMode {
        /// The value found.
        value: String,
    },
    /// A configuration field is out of range.
    #[error("invalid verify configuration: `{field}` is {value}, expected {expected}")]
    InvalidConfig {
        /// The field name.
        field: &'static str,
        /// The value found, formatted.
        value: String,
        /// What the field accepts.
        expected: &'static str,
    },
    /// A result was recorded while no run was outstanding.
    #[error("no test run is outstanding, but a result for {run} was recorded")]
    NoRunOutstanding {
        /// The run the result was recorded for.
        run: RunId,
    },
    /// [`Verifier::resume`] got more outcomes than the session asked for.
    #[error("cannot resume verification: outcome {index} was recorded after every fix was decided")]
    ResumePastEnd {
        /// 0-based index of the first extra outcome.
        index: usize,
    },
    /// A result was recorded for another run than the outstanding one.
    #[error("the outstanding test run is {expected}, but a result for {got} was recorded")]
    WrongRun {
        /// The outstanding run.
        expected: RunId,
        /// The run the result was recorded for.
        got: RunId,
    },
}

/// How the fixes of a stage are verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyMode {
    /// One test run per fix, in order.
    Each,
    /// Group testing over prefixes, bisecting a failing prefix.
    Batch,
    /// `Batch` while the estimated failure rate is low, `Each` when it is high.
    #[default]
    Auto,
}

impl VerifyMode {
    /// The mode's name: `each`, `batch` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::Each => "each",
            VerifyMode::Batch => "batch",
            VerifyMode::Auto => "auto",
        }
    }
}

impl fmt::Display for VerifyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VerifyMode {
    type Err = VerifyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "each" => Ok(VerifyMode::Each),
            "batch" => Ok(VerifyMode::Batch),
            "auto" => Ok(VerifyMode::Auto),
            other => Err(VerifyError::UnknownMode {
                value: other.to_owned(),
            }),
        }
    }
}

/// Settings of a [`Verifier`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct VerifyConfig {
    /// The mode.
    pub mode: VerifyMode,
    /// How many times a failing tree is re-run before a fix is blamed
    /// (`0` trusts every failure).
    pub flaky_reruns: u32,
    /// The most candidates tested in one run, `1..=`[`MAX_BATCH`].
    pub max_batch: usize,
    /// Beta prior of the failure-rate estimate: pseudo-count of failed fixes.
    pub prior_failures: f64,
    /// Beta prior of the failure-rate estimate: pseudo-count of passing fixes.
    pub prior_passes: f64,
    /// `Auto` tests one by one once the estimate reaches this rate.
    pub to_each_rate: f64,
    /// `Auto` goes back to batching once the estimate falls below this rate.
    pub to_batch_rate: f64,
}

/// Setters, one per field, so the struct (`#[non_exhaustive]`) can be built
/// outside this crate: start from `Default`/`new` and chain them.
impl VerifyConfig {
    /// Sets [`VerifyConfig::mode`].
    pub fn with_mode(mut self, mode: VerifyMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets [`VerifyConfig::flaky_reruns`].
    pub fn with_flaky_reruns(mut self, flaky_reruns: u32) -> Self {
        self.flaky_reruns = flaky_reruns;
        self
    }

    /// Sets [`VerifyConfig::max_batch`].
    pub fn with_max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Sets [`VerifyConfig::prior_failures`].
    pub fn with_prior_failures(mut self, prior_failures: f64) -> Self {
        self.prior_failures = prior_failures;
        self
    }

    /// Sets [`VerifyConfig::prior_passes`].
    pub fn with_prior_passes(mut self, prior_passes: f64) -> Self {
        self.prior_passes = prior_passes;
        self
    }

    /// Sets [`VerifyConfig::to_each_rate`].
    pub fn with_to_each_rate(mut self, to_each_rate: f64) -> Self {
        self.to_each_rate = to_each_rate;
        self
    }

    /// Sets [`VerifyConfig::to_batch_rate`].
    pub fn with_to_batch_rate(mut self, to_batch_rate: f64) -> Self {
        self.to_batch_rate = to_batch_rate;
        self
    }
}

impl Default for VerifyConfig {
    fn default() -> Self {
        Self {
            mode: VerifyMode::Auto,
            flaky_reruns: 1,
            max_batch: MAX_BATCH,
            prior_failures: 1.0,
            prior_passes: 9.0,
            to_each_rate: 0.38,
            to_batch_rate: 0.30,
        }
    }
}

impl VerifyConfig {
    /// The default settings with the given mode.
    pub fn new(mode: VerifyMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), VerifyError> {
        fn invalid(
            field: &'static str,
            value: impl fmt::Display,
            expected: &'static str,
        ) -> VerifyError {
            VerifyError::InvalidConfig {
                field,
                value: value.to_string(),
                expected,
            }
        }
        if !(1..=MAX_BATCH).contains(&self.max_batch) {
            return Err(invalid("max_batch", self.max_batch, "1 to 128"));
        }
        for (field, value) in [
            ("prior_failures", self.prior_failures),
            ("prior_passes", self.prior_passes),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(invalid(field, value, "a positive number"));
            }
        }
        for (field, value) in [
            ("to_each_rate", self.to_each_rate),
            ("to_batch_rate", self.to_batch_rate),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(invalid(field, value, "a rate in (0, 1]"));
            }
        }
        if self.to_batch_rate > self.to_each_rate {
            return Err(invalid(
                "to_batch_rate",
                self.to_batch_rate,
                "at most to_each_rate",
            ));
        }
        Ok(())
    }
}

/// Identifies a test run of one verifier: 1, 2, 3, … in the order asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub u32);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run {}", self.0)
    }
}

/// One test run the driver is asked to perform: the first `landed` landed
/// fixes (all of them, at the time it is asked) plus the candidates at
/// `candidates` (positions in the sequence given to [`Verifier::new`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trial {
    /// The run's id; pass it back to [`Verifier::record`].
    pub run: RunId,
    /// How many landed fixes are under the candidates.
    pub landed: usize,
    /// Positions of the candidates on top, in order.
    pub candidates: Range<usize>,
    /// For a re-run of an identical tree to rule out a flaky failure: the
    /// failing run it repeats.
    pub rerun_of: Option<RunId>,
}

/// What the driver should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run the tests on this tree and [`record`](Verifier::record) the outcome.
    Test(Trial),
    /// Every fix is decided; read the [`report`](Verifier::report).
    Done,
}

/// The outcome of a test run, as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RunOutcome {
    /// The tests passed.
    Pass,
    /// The tests failed (or timed out).
    Fail {
        /// Where the failing output can be found (a log path, an artifact
        /// id); it is attached to the fix that gets the blame.
        log_ref: String,
    },
}

impl RunOutcome {
    /// A failure with the given output reference.
    pub fn fail(log_ref: impl Into<String>) -> Self {
        RunOutcome::Fail {
            log_ref: log_ref.into(),
        }
    }
}

/// The tree of a [`Trial`]: landed fixes, then candidates, in order.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a, F> {
    fixes: &'a [F],
    landed: &'a [usize],
    candidates: &'a [F],
}

impl<'a, F> Tree<'a, F> {
    /// Every fix in the tree, bottom first.
    pub fn iter(&self) -> impl Iterator<Item = &'a F> + 'a {
        let fixes = self.fixes;
        self.landed
            .iter()
            .map(move |&i| &fixes[i])
            .chain(self.candidates.iter())
    }

    /// The candidates on top of the landed fixes, in order.
    pub fn candidates(&self) -> &'a [F] {
        self.candidates
    }

    /// Number of fixes in the tree.
    pub fn len(&self) -> usize {
        self.landed.len() + self.candidates.len()
    }

    /// Whether the tree has no fix at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One entry of the decision trace (positions refer to the sequence given to
/// [`Verifier::new`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    /// A test run finished.
    Tested {
        /// The run.
        run: RunId,
        /// Landed fixes under the candidates.
        landed: usize,
        /// Positions of the candidates.
        candidates: Range<usize>,
        /// The failing run this one repeated, for a flaky check.
        rerun_of: Option<RunId>,
        /// Whether it passed.
        passed: bool,
    },
    /// Candidates landed.
    Landed {
        /// Their positions.
        positions: Range<usize>,
    },
    /// A candidate was dropped.
    Dropped {
        /// Its position.
        position: usize,
        /// The failing run blamed on it.
        run: RunId,
    },
    /// A failure did not repeat on the identical tree.
    Flaky {
        /// The candidate on top of that tree (it lands).
        position: usize,
        /// The failing run.
        failed_run: RunId,
        /// The re-run that passed.
        passed_run: RunId,
    },
    /// `Auto` changed how it tests.
    Switched {
        /// Now testing as this mode (`Each` or `Batch`).
        to: VerifyMode,
        /// The failure-rate estimate that triggered it.
        estimate: f64,
    },
}

/// A fix that was dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dropped<F> {
    /// The fix.
    pub fix: F,
    /// Its position in the sequence.
    pub position: usize,
    /// The failing run blamed on it; its tree is "landed + this fix".
    pub run: RunId,
    /// The failing run's output reference.
    pub log_ref: String,
}

/// A failure that did not repeat on the identical tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlakyEvent<F> {
    /// The candidate on top of the tree that failed and then passed; it landed.
    pub fix: F,
    /// Its position in the sequence.
    pub position: usize,
    /// The failing run.
    pub failed_run: RunId,
    /// The failing run's output reference.
    pub log_ref: String,
    /// The re-run that passed.
    pub passed_run: RunId,
}

/// The result of a verification (partial until [`Step::Done`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport<F> {
    /// The configured mode.
    pub mode: VerifyMode,
    /// Landed fixes, in order.
    pub landed: Vec<F>,
    /// Dropped fixes, in order, with the failing run blamed on each.
    pub dropped: Vec<Dropped<F>>,
    /// Failures that passed on a re-run of the identical tree.
    pub flaky: Vec<FlakyEvent<F>>,
    /// Test runs performed, re-runs included.
    pub runs: u32,
    /// Of which re-runs of an identical tree (flaky checks).
    pub reruns: u32,
    /// What `each` would have needed on deterministic tests: one run per
    /// decided fix plus the same re-runs.
    pub each_runs: u32,
    /// `each_runs − runs` (negative when batching cost more).
    pub runs_saved: i64,
    /// The final failure-rate estimate.
    pub estimate: f64,
}

/// A failing run whose tree is "landed + the first `len` undecided", with no
/// failing run known for a shorter prefix: the first failing candidate is
/// among those `len`.
#[derive(Debug, Clone)]
struct Bound {
    len: usize,
    run: RunId,
    log_ref: String,
    reruns: u32,
}

/// The verification state machine; see the module docs.
#[derive(Debug, Clone)]
pub struct Verifier<F> {
    config: VerifyConfig,
    fixes: Vec<F>,
    /// Position of the first undecided fix; everything after it is undecided.
    next: usize,
    /// Positions of the landed fixes, in order.
    landed: Vec<usize>,
    dropped: Vec<(usize, RunId, String)>,
    flaky: Vec<(usize, RunId, String, RunId)>,
    bound: Option<Bound>,
    pending: Option<Trial>,
    runs: u32,
    reruns: u32,
    /// `Auto` is currently testing one by one.
    one_by_one: bool,
    trace: Vec<Decision>,
}

impl<F> Verifier<F> {
    /// A verifier for `fixes`, in the order they would land.
    pub fn new(fixes: Vec<F>, config: VerifyConfig) -> Result<Self, VerifyError> {
        config.validate()?;
        Ok(Self {
            one_by_one: config.mode == VerifyMode::Each,
            config,
            fixes,
            next: 0,
            landed: Vec::new(),
            dropped: Vec::new(),
            flaky: Vec::new(),
            bound: None,
            pending: None,
            runs: 0,
            reruns: 0,
            trace: Vec::new(),
        })
    }

    /// Rebuilds a verifier after a restart: the machine is deterministic, so
    /// feeding it the outcomes recorded so far (in run order) brings it back
    /// to the same state. Persist the outcomes as they come (they serialize
    /// as `{"outcome": "pass"}` / `{"outcome": "fail", "log_ref": …}`); the
    /// fixes and configuration must be the same as in the first session.
    pub fn resume(
        fixes: Vec<F>,
        config: VerifyConfig,
        outcomes: impl IntoIterator<Item = RunOutcome>,
    ) -> Result<Self, VerifyError> {
        let mut verifier = Self::new(fixes, config)?;
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match verifier.next_step() {
                Step::Test(trial) => verifier.record(trial.run, outcome)?,
                Step::Done => return Err(VerifyError::ResumePastEnd { index }),
            }
        }
        Ok(verifier)
    }

    /// The configuration.
    pub fn config(&self) -> &VerifyConfig {
        &self.config
    }

    /// Every fix, in the order given.
    pub fn fixes(&self) -> &[F] {
        &self.fixes
    }

    /// The fixes landed so far, in order.
    pub fn landed(&self) -> impl Iterator<Item = &F> + '_ {
        self.landed.iter().map(|&i| &self.fixes[i])
    }

    /// The fixes not decided yet, in order.
    pub fn undecided(&self) -> &[F] {
        &self.fixes[self.next..]
    }

    /// Whether every fix is decided (settled right after each
    /// [`record`](Self::record)).
    pub fn is_done(&self) -> bool {
        self.next >= self.fixes.len()
    }

    /// The decision trace so far.
    pub fn trace(&self) -> &[Decision] {
        &self.trace
    }

    /// The failure-rate estimate: the Beta posterior mean over decided fixes.
    pub fn estimate(&self) -> f64 {
        let failures = self.config.prior_failures + self.dropped.len() as f64;
        let total = self.config.prior_failures + self.config.prior_passes + self.next as f64;
        failures / total
    }

    /// How the machine currently tests: `Each` or `Batch`.
    pub fn testing_as(&self) -> VerifyMode {
        if self.one_by_one {
            VerifyMode::Each
        } else {
            VerifyMode::Batch
        }
    }

    /// The tree a trial asks for.
    ///
    /// Only meaningful for the outstanding trial (the landed set moves on
    /// once its result is recorded).
    pub fn tree(&self, trial: &Trial) -> Tree<'_, F> {
        let landed = &self.landed[..trial.landed.min(self.landed.len())];
        let end = trial.candidates.end.min(self.fixes.len());
        let start = trial.candidates.start.min(end);
        Tree {
            fixes: &self.fixes,
            landed,
            candidates: &self.fixes[start..end],
        }
    }

    /// The next thing to do. Asking again before recording the outstanding
    /// run's result returns the same trial.
    pub fn next_step(&mut self) -> Step {
        if let Some(trial) = &self.pending {
            return Step::Test(trial.clone());
        }
        // `record` settles every decision it can; this is a no-op safeguard.
        self.settle();
        if self.is_done() {
            return Step::Done;
        }
        let (len, confirm) = match &self.bound {
            // Settled: a bound of one still has re-runs to go.
            Some(bound) if bound.len == 1 => (1, Some(bound.run)),
            Some(bound) => (self.batch_size(Some(bound.len)), None),
            None => (self.batch_size(None), None),
        };
        self.runs += 1;
        let trial = Trial {
            run: RunId(self.runs),
            landed: self.landed.len(),
            candidates: self.next..self.next + len,
            rerun_of: confirm,
        };
        self.pending = Some(trial.clone());
        Step::Test(trial)
    }

    /// Drops the first undecided fix when a failing run's tree is "landed +
    /// that fix" and every re-run of it failed too.
    fn settle(&mut self) {
        if let Some(bound) = &self.bound
            && bound.len == 1
            && bound.reruns >= self.config.flaky_reruns
        {
            self.drop_first();
        }
    }

    /// Records the outcome of the outstanding run.
    pub fn record(&mut self, run: RunId, outcome: RunOutcome) -> Result<(), VerifyError> {
        let trial = match self.pending.take() {
            None => return Err(VerifyError::NoRunOutstanding { run }),
            Some(trial) if trial.run != run => {
                let expected = trial.run;
                self.pending = Some(trial);
                return Err(VerifyError::WrongRun { expected, got: run });
            }
            Some(trial) => trial,
        };
        self.trace.push(Decision::Tested {
            run,
            landed: trial.landed,
            candidates: trial.candidates.clone(),
            rerun_of: trial.rerun_of,
            passed: outcome == RunOutcome::Pass,
        });
        let len = trial.candidates.len();
        match (trial.rerun_of, outcome) {
            (Some(failed_run), RunOutcome::Pass) => {
                self.reruns += 1;
                let log_ref = self.bound.take().map(|b| b.log_ref).unwrap_or_default();
                self.trace.push(Decision::Flaky {
                    position: self.next,
                    failed_run,
                    passed_run: run,
                });
                self.flaky.push((self.next, failed_run, log_ref, run));
                self.land(1);
            }
            (Some(_), RunOutcome::Fail { .. }) => {
                self.reruns += 1;
                if let Some(bound) = &mut self.bound {
                    bound.reruns += 1;
                }
            }
            (None, RunOutcome::Pass) => {
                if let Some(bound) = &mut self.bound {
                    // The bisection guarantees len < bound.len.
                    bound.len = bound.len.saturating_sub(len).max(1);
                }
                self.land(len);
            }
            (None, RunOutcome::Fail { log_ref }) => {
                self.bound = Some(Bound {
                    len,
                    run,
                    log_ref,
                    reruns: 0,
                });
            }
        }
        self.settle();
        Ok(())
    }

    /// The result so far (final once [`next_step`](Self::next_step) says
    /// [`Step::Done`]).
    pub fn report(&self) -> VerifyReport<F>
    where
        F: Clone,
    {
        let each_runs = self.next as u32 + self.reruns;
        VerifyReport {
            mode: self.config.mode,
            landed: self.landed().cloned().collect(),
            dropped: self
                .dropped
                .iter()
                .map(|(position, run, log_ref)| Dropped {
                    fix: self.fixes[*position].clone(),
                    position: *position,
                    run: *run,
                    log_ref: log_ref.clone(),
                })
                .collect(),
            flaky: self
                .flaky
                .iter()
                .map(|(position, failed_run, log_ref, passed_run)| FlakyEvent {
                    fix: self.fixes[*position].clone(),
                    position: *position,
                    failed_run: *failed_run,
                    log_ref: log_ref.clone(),
                    passed_run: *passed_run,
                })
                .collect(),
            runs: self.runs,
            reruns: self.reruns,
            each_runs,
            runs_saved: i64::from(each_runs) - i64::from(self.runs),
            estimate: self.estimate(),
        }
    }

    /// The decision trace as text, one line per decision.
    pub fn render_trace(&self) -> String
    where
        F: fmt::Display,
    {
        let names = |range: &Range<usize>| {
            self.fixes[range.clone()]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut out = String::new();
        for decision in &self.trace {
            let _ = match decision {
                Decision::Tested {
                    run,
                    landed,
                    candidates,
                    rerun_of,
                    passed,
                } => {
                    let verdict = if *passed { "pass" } else { "fail" };
                    let again = rerun_of
                        .map(|r| format!(" (re-run of {r})"))
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "{run}: {landed} landed + [{}]{again} -> {verdict}",
                        names(candidates)
                    )
                }
                Decision::Landed { positions } => writeln!(out, "  land [{}]", names(positions)),
                Decision::Dropped { position, run } => {
                    writeln!(out, "  drop {} (blamed {run})", self.fixes[*position])
                }
                Decision::Flaky {
                    position,
                    failed_run,
                    passed_run,
                } => writeln!(
                    out,
                    "  flaky: {failed_run} failed, {passed_run} passed on the same tree; keep {}",
                    self.fixes[*position]
                ),
                Decision::Switched { to, estimate } => {
                    writeln!(
                        out,
                        "  switch to {to} (estimated failure rate {estimate:.2})"
                    )
                }
            };
        }
        out
    }

    fn batch_size(&self, bound: Option<usize>) -> usize {
        let remaining = self.fixes.len() - self.next;
        if self.one_by_one {
            return 1;
        }
        let mut rate = self.estimate();
        if self.config.mode == VerifyMode::Batch {
            rate = rate.min(BATCH_MAX_RATE);
        }
        policy::batch_size(remaining, bound, rate, self.config.max_batch)
    }

    fn land(&mut self, count: usize) {
        let positions = self.next..self.next + count;
        self.landed.extend(positions.clone());
        self.next += count;
        self.trace.push(Decision::Landed { positions });
        self.after_decision();
    }

    fn drop_first(&mut self) {
        if let Some(bound) = self.bound.take() {
            self.trace.push(Decision::Dropped {
                position: self.next,
                run: bound.run,
            });
            self.dropped.push((self.next, bound.run, bound.log_ref));
            self.next += 1;
            self.after_decision();
        }
    }

    fn after_decision(&mut self) {
        if self.config.mode != VerifyMode::Auto {
            return;
        }
        let estimate = self.estimate();
        let switch_to = if !self.one_by_one && estimate >= self.config.to_each_rate {
            Some(VerifyMode::Each)
        } else if self.one_by_one && estimate < self.config.to_batch_rate {
            Some(VerifyMode::Batch)
        } else {
            None
        };
        if let Some(to) = switch_to {
            self.one_by_one = to == VerifyMode::Each;
            self.trace.push(Decision::Switched { to, estimate });
        }
    }
}

/// Runs a verifier to completion with a synchronous test oracle: `test` gets
/// each trial and its tree and says whether the tests pass.
pub fn verify_with<F, T>(
    fixes: Vec<F>,
    config: VerifyConfig,
    mut test: T,
) -> Result<VerifyReport<F>, VerifyError>
where
    F: Clone,
    T: FnMut(&Trial, Tree<'_, F>) -> RunOutcome,
{
    let mut verifier = Verifier::new(fixes, config)?;
    while let Step::Test(trial) = verifier.next_step() {
        let outcome = test(&trial, verifier.tree(&trial));
        verifier.record(trial.run, outcome)?;
    }
    Ok(verifier.report())
}
