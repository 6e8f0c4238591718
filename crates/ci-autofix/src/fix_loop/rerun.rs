//! Re-running failed checks at the same commit, to tell failures that are
//! not the code's fault from broken code: before the first fix of a test
//! failure (`rerun_before_fix`: flaky if it passes), and once for an
//! infrastructure failure (the cadence's `rerun-once`). The cost — runs and
//! wall time — is recorded with the iteration.

use std::time::{Duration, Instant};

use crate::classify::failing_tests;
use crate::handoff::FailedCheck;
use crate::provider::{CheckLog, RerunOutcome};
use crate::state::RerunRecord;

use super::*;

/// What re-running the failed checks showed.
#[derive(Debug, Clone)]
pub(super) struct Reran {
    /// The checks that passed.
    pub(super) passed: Vec<String>,
    /// The new attempts of the checks that failed again (or could not be
    /// re-run: then the old one).
    pub(super) failed: Vec<FailedCheck>,
    /// Checks the provider cannot re-run.
    pub(super) unsupported: Vec<String>,
    /// How many re-runs were started.
    pub(super) runs: u32,
    /// Wall time of the whole re-run.
    pub(super) wall: Duration,
}

impl Reran {
    /// Every failed check passed on its re-run.
    pub(super) fn all_passed(&self) -> bool {
        self.failed.is_empty() && self.unsupported.is_empty() && !self.passed.is_empty()
    }

    /// The record for the audit log and the state file.
    pub(super) fn record(&self, reason: &str, logs: &[CheckLog]) -> RerunRecord {
        let mut tests = Vec::new();
        for l in logs {
            for t in failing_tests(&l.log) {
                if !tests.contains(&t) {
                    tests.push(t);
                }
            }
        }
        RerunRecord {
            reason: reason.to_owned(),
            runs: self.runs,
            wall_secs: (self.wall.as_secs_f64() * 10.0).round() / 10.0,
            passed: self.passed.clone(),
            failed_again: self.failed.iter().map(|f| f.name.clone()).collect(),
            tests,
        }
    }
}

/// Re-runs each of `failures` once and waits for the results.
pub(super) async fn rerun_failed(
    ctx: &AutofixContext,
    failures: &[FailedCheck],
) -> Result<Reran, AutofixError> {
    let start = Instant::now();
    let mut reran = Reran {
        passed: Vec::new(),
        failed: Vec::new(),
        unsupported: Vec::new(),
        runs: 0,
        wall: Duration::ZERO,
    };
    for check in failures {
        match ctx.provider.rerun(check).await? {
            RerunOutcome::Passed => {
                reran.runs += 1;
                reran.passed.push(check.name.clone());
            }
            RerunOutcome::Failed(again) => {
                reran.runs += 1;
                reran.failed.push(again);
            }
            RerunOutcome::TimedOut => {
                reran.runs += 1;
                reran.failed.push(check.clone());
            }
            RerunOutcome::Unsupported => {
                reran.unsupported.push(check.name.clone());
                reran.failed.push(check.clone());
            }
        }
    }
    reran.wall = start.elapsed();
    Ok(reran)
}

/// Whether a failure of `class` at `iteration` is re-run before anything
/// is done with it: a test failure (semantic or unknown; a format or lint
/// failure fails the same way again), at the first iteration, when the run
/// asks for it and has not re-run yet.
pub(super) fn rerun_first(
    cfg: &AutofixConfig,
    iteration: u32,
    class: Classification,
    done: bool,
) -> bool {
    cfg.rerun_before_fix
        && !done
        && iteration <= 1
        && matches!(class, Classification::Semantic | Classification::Unknown)
}

/// The outcome of failures that all passed on their re-run: `class` is
/// `flaky` or `infrastructure`. Recorded in the history and the audit log;
/// the state file goes (nothing is left to resume).
pub(super) fn passed_on_rerun(
    file: &StateFile,
    state: &mut AutofixState,
    mut entry: HistoryEntry,
    class: Classification,
    record: RerunRecord,
    report: &ClassificationReport,
    audit: (&std::path::Path, &str, Timestamp),
) -> Result<AutofixOutcome, AutofixError> {
    entry.classification = class.as_str().into();
    entry.sub_class = class.sub_class_str().into();
    entry.action = format!(
        "passed on a re-run at the same commit ({}); no commit",
        class.as_str()
    );
    entry.rerun = Some(record.clone());
    finish(
        file,
        state,
        entry,
        Some(report),
        (audit.0, audit.1),
        audit.2,
        None,
    )?;
    file.remove()?;
    Ok(AutofixOutcome::PassedOnRerun {
        class,
        checks: record.passed,
        tests: record.tests,
        runs: record.runs,
        wall: Duration::from_secs_f64(record.wall_secs),
    })
}
