//! Execution: stages in order, groups in worktrees or the main tree, one
//! verified commit per finding, landing by cherry-pick.
//!
//! Per finding: analyse → apply the fix (agent) → run the tests → on failure
//! restore exactly the fix's write-set and try again with the failure output,
//! up to `max_iterations` attempts → on success commit exactly the write-set
//! as `fix({dimension}): {title} [{id}]`. The attempts go through the core
//! retry executor ([`run_milestone`]): each attempt is one milestone attempt
//! whose failure text (agent error or test output) is fed into the next
//! attempt's prompt. The group's `fix-progress-N.json` is rewritten at every
//! step.
//!
//! Verification: with `--verify each` (or serial isolation) [`verify_fix`]
//! tests each fix in its tree, re-running a failure on the identical tree up
//! to `flaky_reruns` times, and [`land_stage`] cherry-picks a parallel
//! stage's commits. With `batch`/`auto` a worktree tree has `defer` set: a
//! fix still has to apply and its write-set is still checked, but it is
//! committed untested, and `crate::landing` verifies the stage's commits
//! at landing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::edit::{AppliedEdit, EditHistory};
use orchestrator_core::event::{Event, EventSink, JobStatus};
use orchestrator_core::finding::{Finding, digest_hex};
use orchestrator_core::gate::{Answer, Gate, GateError, Question};
use orchestrator_core::retry::{
    ESCALATION_QUESTION_ID, Milestone, MilestoneOutcome, RetryPolicy, run_milestone,
};
use orchestrator_core::state::write_json_atomic;
use orchestrator_core::test_runner::{TestReport, TestRequest, TestRunner};
use orchestrator_core::vcs::{Checkpoint, CherryPick, CommitId, Vcs, VcsError};

use crate::files::{
    ActiveSession, CurrentFinding, ExecutionMode, FixPlan, FixProgress, FixResult, FlowControl,
    FlowStep, InFlight, KnownFailure, PlanGroup, ProgressError, ProgressFinding, ProgressStatus,
    ProgressSummary, ProgressVerification, VerificationStats, WorktreeRecord, now,
};
use crate::session::SessionPaths;
use crate::{Isolation, ReviewFixConfig, TestRunnerFactory, TreeEnv};
use orchestrator_core::verify::VerifyMode;

/// Ignored dependency folders linked into worktrees.
pub const LINKED_DEPENDENCY_DIRS: [&str; 3] = ["node_modules", ".venv", "vendor"];

/// The commit message of a finding's fix.
pub fn commit_message(f: &Finding) -> String {
    let title: String = f.title.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("fix({}): {} [{}]", f.dimension_or_general(), title, f.id)
}

/// Everything the groups of a session share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ReviewFixConfig,
    pub agent: Arc<dyn Agent>,
    pub vcs: Arc<dyn Vcs>,
    pub tests: Arc<dyn TestRunnerFactory>,
    pub sink: Arc<dyn EventSink>,
    pub paths: SessionPaths,
    pub plan: FixPlan,
    pub findings: HashMap<String, Finding>,
    pub active: Mutex<ActiveSession>,
    pub test_runs: AtomicU32,
    pub cargo: bool,
    /// Fixes are committed untested in worktrees and verified at landing
    /// (`batch`/`auto` with worktree isolation).
    pub batch: bool,
    /// Re-runs, each-equivalent runs and flaky failures so far.
    pub stats: Mutex<VerificationStats>,
    /// Digests of untested fixes committed in worktrees, by finding.
    pub digests: Mutex<HashMap<String, String>>,
    /// Fixes decided by batch verification: (dropped, landed).
    pub decided: Mutex<(u32, u32)>,
    /// Which edits produced which file content (`edit-history.json`).
    pub ledger: crate::ledger::Ledger,
}

impl Shared {
    /// The commits a group's worktree made since `base`, oldest first, each
    /// with the finding its message names (`None` for a commit that names
    /// none). A log that cannot be read is warned about and gives none.
    pub(crate) async fn worktree_commits(
        &self,
        group: &PlanGroup,
        wt: &dyn Vcs,
        base: &CommitId,
    ) -> Vec<(orchestrator_core::vcs::CommitInfo, Option<String>)> {
        let by_message: HashMap<String, String> = group
            .findings
            .iter()
            .filter_map(|id| self.findings.get(id))
            .map(|f| (commit_message(f), f.id.to_string()))
            .collect();
        match wt.log_since(base).await {
            Ok(commits) => commits
                .into_iter()
                .map(|c| {
                    let fid = by_message.get(c.message.trim()).cloned();
                    (c, fid)
                })
                .collect(),
            Err(e) => {
                self.warn(format!("failed to list {}'s commits: {e}", group.group_id));
                Vec::new()
            }
        }
    }

    pub(crate) fn warn(&self, message: String) {
        self.sink.emit(&Event::Warning { message });
    }

    /// Changes the active-session file and writes it.
    pub(crate) fn update_active(&self, f: impl FnOnce(&mut ActiveSession)) {
        let result = {
            let mut active = match self.active.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&mut active);
            active.last_update = now();
            write_json_atomic(self.paths.active(), &*active)
        };
        if let Err(e) = result {
            self.warn(format!("failed to write the active-session file: {e}"));
        }
    }

    /// Test runs made so far in this process.
    pub(crate) fn test_runs(&self) -> u32 {
        self.test_runs.load(Ordering::SeqCst)
    }

    /// The run number of the session (1, then +1 per resume).
    pub(crate) fn run_number(&self) -> u32 {
        match self.active.lock() {
            Ok(g) => g.run,
            Err(p) => p.into_inner().run,
        }
    }

    /// Fixes decided by batch verification so far: (dropped, landed).
    pub(crate) fn decided(&self) -> (u32, u32) {
        match self.decided.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    pub(crate) fn add_decided(&self, dropped: u32, landed: u32) {
        let mut g = match self.decided.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.0 += dropped;
        g.1 += landed;
    }

    /// The digest of an untested fix committed in a worktree.
    pub(crate) fn digest_of(&self, finding: &str) -> Option<String> {
        match self.digests.lock() {
            Ok(g) => g.get(finding).cloned(),
            Err(p) => p.into_inner().get(finding).cloned(),
        }
    }

    pub(crate) fn with_stats<R>(&self, f: impl FnOnce(&mut VerificationStats) -> R) -> R {
        match self.stats.lock() {
            Ok(mut g) => f(&mut g),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    fn dirty_before(&self) -> BTreeSet<String> {
        match self.active.lock() {
            Ok(g) => g.dirty_before.iter().cloned().collect(),
            Err(p) => p.into_inner().dirty_before.iter().cloned().collect(),
        }
    }
}

/// A group's progress file, rewritten atomically on every change.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    path: PathBuf,
    state: Arc<Mutex<FixProgress>>,
    sink: Arc<dyn EventSink>,
}

impl Progress {
    pub(crate) fn new(path: PathBuf, progress: FixProgress, sink: Arc<dyn EventSink>) -> Self {
        Self {
            path,
            state: Arc::new(Mutex::new(progress)),
            sink,
        }
    }

    pub(crate) fn snapshot(&self) -> FixProgress {
        match self.state.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Applies `f`, recounts, stamps `last_update` and writes the file.
    pub(crate) fn update(&self, f: impl FnOnce(&mut FixProgress)) {
        let result = {
            let mut st = match self.state.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            f(&mut st);
            st.recount();
            st.last_update = now();
            write_json_atomic(&self.path, &*st)
        };
        if let Err(e) = result {
            self.sink.emit(&Event::Warning {
                message: format!("failed to write progress file: {e}"),
            });
        }
    }

    fn finding(&self, id: &str, f: impl FnOnce(&mut ProgressFinding)) {
        self.update(|p| {
            if let Some(entry) = p.finding_mut(id) {
                f(entry);
            }
        });
    }

    pub(crate) fn error(&self, finding: &str, error_type: &str, message: &str) {
        self.update(|p| {
            p.errors.push(ProgressError {
                finding_id: Some(finding.to_owned()),
                error_type: error_type.to_owned(),
                message: message.to_owned(),
                timestamp: now(),
            });
        });
    }

    /// Starts a flow-control step: current finding status, phase, step.
    fn step(&self, step: &str, phase: &str, action: &str) {
        self.update(|p| {
            let ts = now();
            p.phase = phase.to_owned();
            if let Some(cur) = p.current_finding.as_mut() {
                cur.status = phase.to_owned();
                cur.action = action.to_owned();
            }
            p.flow_control.implementation_approach.push(FlowStep {
                step: step.to_owned(),
                action: action.to_owned(),
                status: "in-progress".to_owned(),
                started_at: Some(ts),
                completed_at: None,
            });
            p.flow_control.current_step = Some(step.to_owned());
        });
    }

    /// Ends the current flow-control step with `status`.
    fn end_step(&self, status: &str) {
        self.update(|p| {
            if let Some(last) = p.flow_control.implementation_approach.last_mut()
                && last.status == "in-progress"
            {
                last.status = status.to_owned();
                last.completed_at = Some(now());
            }
        });
    }
}

/// The initial progress file of a group.
pub(crate) fn init_progress(
    group: &PlanGroup,
    number: usize,
    findings: &HashMap<String, Finding>,
) -> FixProgress {
    let entries: Vec<ProgressFinding> = group
        .findings
        .iter()
        .map(|id| {
            let f = findings.get(id);
            ProgressFinding {
                finding_id: id.clone(),
                finding_title: f.map(|f| f.title.clone()).unwrap_or_default(),
                file: f.and_then(|f| f.file.clone()).unwrap_or_default(),
                line: f.and_then(|f| f.line),
                status: ProgressStatus::Pending,
                result: None,
                attempts: 0,
                started_at: None,
                completed_at: None,
                commit_hash: None,
                test_passed: None,
                error_message: None,
            }
        })
        .collect();
    let mut p = FixProgress {
        progress_id: format!("fix-progress-{number}"),
        group_id: group.group_id.clone(),
        group_name: group.group_name.clone(),
        status: ProgressStatus::Pending,
        phase: "pending".to_owned(),
        assigned_agent: None,
        started_at: None,
        last_update: now(),
        findings: entries,
        summary: ProgressSummary {
            total_findings: 0,
            pending: 0,
            in_progress: 0,
            fixed: 0,
            failed: 0,
            not_fixable: 0,
            percent_complete: 0.0,
        },
        current_finding: None,
        flow_control: FlowControl::default(),
        errors: Vec::new(),
        verification: None,
    };
    p.recount();
    p
}

/// A working tree a group runs in.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub vcs: Arc<dyn Vcs>,
    pub env: TreeEnv,
    pub is_main: bool,
    /// Commit fixes without testing them (batch verification tests them at
    /// landing).
    pub defer: bool,
}

/// A gate for the fix milestones: an escalation means "attempts exhausted",
/// answered with Stop, so the finding is reported failed rather than waiting
/// for a human.
#[derive(Debug)]
struct StopOnEscalation;

#[async_trait]
impl Gate for StopOnEscalation {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        if question.id == ESCALATION_QUESTION_ID {
            Ok(Answer::chose(1))
        } else {
            Ok(Answer::chose(0))
        }
    }
}

/// Forwards milestone events except the internal escalation and gate traffic.
#[derive(Debug)]
struct MilestoneSink<'a>(&'a dyn EventSink);

impl EventSink for MilestoneSink<'_> {
    fn emit(&self, event: &Event) {
        match event {
            Event::Escalated { .. } | Event::GateAsked { .. } | Event::GateAnswered { .. } => {}
            other => self.0.emit(other),
        }
    }
}

/// Per-finding attempt state.
#[derive(Debug, Default)]
struct StepState {
    attempt: u32,
    stop: Option<AgentError>,
    failed: Vec<KnownFailure>,
    write_set: Option<Vec<String>>,
    digest: Option<String>,
    last_error: Option<String>,
}

/// One attempt at one finding, as an [`Agent`] for the retry executor: the
/// inner agent's fix, then the tests; a failure restores the write-set.
#[derive(Debug)]
struct FixStep<'a> {
    shared: &'a Shared,
    tree: &'a Tree,
    progress: &'a Progress,
    finding: &'a Finding,
    pattern: Option<String>,
    checkpoint: &'a Checkpoint,
    /// The edit history of each file of the finding's suggestions, as they
    /// were before the fix (`None`: unrecorded changes).
    histories: BTreeMap<String, Option<EditHistory>>,
    state: Mutex<StepState>,
}

impl FixStep<'_> {
    fn with<R>(&self, f: impl FnOnce(&mut StepState) -> R) -> R {
        match self.state.lock() {
            Ok(mut g) => f(&mut g),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    async fn restore(&self) {
        if let Err(e) = self.tree.vcs.restore(self.checkpoint).await {
            let msg = format!("failed to roll back the fix of {}: {e}", self.finding.id);
            self.progress
                .error(self.finding.id.as_str(), "vcs_error", &msg);
            self.shared.warn(msg);
        }
    }

    /// Extends the ledger with the edits the agent says it applied
    /// (`{"applied_edits": {file: [...]}}`, the builtin agent's answer).
    fn record_edits(&self, structured: Option<&serde_json::Value>) {
        let Some(applied) = structured.and_then(|v| v.get("applied_edits")) else {
            return;
        };
        let Ok(applied) =
            serde_json::from_value::<BTreeMap<String, Vec<AppliedEdit>>>(applied.clone())
        else {
            return;
        };
        for (file, edits) in applied {
            if let Some(Some(before)) = self.histories.get(&file)
                && let Err(e) =
                    self.shared
                        .ledger
                        .record(&self.tree.env.root, &file, before, &edits)
            {
                self.shared.warn(format!(
                    "failed to record the edits of {}: {e}",
                    self.finding.id
                ));
            }
        }
    }

    fn fail(&self, error: AgentError, error_type: &str) -> Result<AgentResponse, AgentError> {
        // The plain message for a failure of ours (tests, write-set); the
        // agent's own errors keep their kind.
        let message = match &error {
            AgentError::Failed { message, .. } => message.clone(),
            other => other.to_string(),
        };
        self.progress
            .error(self.finding.id.as_str(), error_type, &message);
        self.with(|s| s.last_error = Some(message));
        Err(error)
    }
}

#[async_trait]
impl Agent for FixStep<'_> {
    fn name(&self) -> &str {
        self.shared.agent.name()
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let id = self.finding.id.to_string();
        let (attempt, stop) = self.with(|s| {
            s.attempt += 1;
            (s.attempt, s.stop.clone())
        });
        if let Some(stop) = stop {
            // A refusal or an unrecoverable state repeats: do not call again.
            return Err(stop);
        }
        self.progress.update(|p| {
            if let Some(f) = p.finding_mut(&id) {
                f.attempts = attempt;
            }
            // Each attempt restarts the flow after the analysis.
            p.flow_control
                .implementation_approach
                .retain(|s| s.step == "analyze_context");
        });
        self.progress.step(
            "apply_fix",
            "fixing",
            "Applying code changes per recommendations",
        );
        match self.shared.agent.run(request).await {
            Ok(response) => self.record_edits(response.structured.as_ref()),
            Err(e) => {
                self.restore().await;
                self.progress.end_step("failed");
                let kind = if matches!(e, AgentError::Unsupported { .. }) {
                    self.with(|s| s.stop = Some(e.clone()));
                    "not_fixable"
                } else {
                    "agent_error"
                };
                return self.fail(e, kind);
            }
        }
        let changed = match self.tree.vcs.changed_since(self.checkpoint).await {
            Ok(c) => c,
            Err(VcsError::TouchedDirty { paths }) => {
                let e = AgentError::Failed {
                    message: format!(
                        "the fix changed files that had uncommitted changes before the run ({}); they are left as they are",
                        paths.join(", ")
                    ),
                    exit_code: None,
                };
                self.with(|s| s.stop = Some(e.clone()));
                self.progress.end_step("failed");
                return self.fail(e, "vcs_error");
            }
            Err(other) => {
                self.restore().await;
                self.progress.end_step("failed");
                return self.fail(
                    AgentError::Failed {
                        message: format!("failed to read the fix's write-set: {other}"),
                        exit_code: None,
                    },
                    "vcs_error",
                );
            }
        };
        if changed.is_empty() {
            self.progress.end_step("failed");
            return self.fail(
                AgentError::Failed {
                    message: "the agent changed no file".to_owned(),
                    exit_code: None,
                },
                "agent_error",
            );
        }
        self.progress.end_step("completed");
        let digest = write_set_digest(&self.tree.env.root, &changed);
        let earlier = self.with(|s| {
            s.failed
                .iter()
                .find(|k| k.digest == digest)
                .map(|k| k.message.clone())
        });
        if let Some(message) = earlier {
            // The same change already failed its tests: the result is known.
            self.restore().await;
            return self.fail(
                AgentError::Failed {
                    message,
                    exit_code: None,
                },
                "test_failure",
            );
        }
        if self.tree.defer {
            // Batch verification: the fix is tested at landing.
            self.with(|s| {
                s.write_set = Some(changed.clone());
                s.digest = Some(digest);
            });
            return Ok(AgentResponse::text(format!(
                "fix applied to {}; tests run at landing",
                changed.join(", ")
            ))
            .with_files_changed(changed));
        }
        self.progress
            .step("run_tests", "testing", "Running test suite to verify fix");
        let report = match test_with_reruns(self.shared, self.tree, &id, self.pattern.clone()).await
        {
            Ok(r) => r,
            Err(message) => {
                self.restore().await;
                self.progress.end_step("failed");
                return self.fail(
                    AgentError::Failed {
                        message,
                        exit_code: None,
                    },
                    "test_failure",
                );
            }
        };
        let runs = 1 + report.reruns;
        self.progress.update(|p| {
            let v = p
                .verification
                .get_or_insert(ProgressVerification::empty(VerifyMode::Each));
            v.test_runs += runs;
            v.reruns += report.reruns;
            v.each_runs += runs;
        });
        if let Some(flaky) = &report.flaky {
            record_flaky(self.shared, self.progress, &id, flaky);
        }
        let report = report.last;
        if report.is_pass() {
            self.progress.end_step("completed");
            self.with(|s| {
                s.write_set = Some(changed.clone());
                s.digest = Some(digest);
            });
            return Ok(AgentResponse::text(format!(
                "fix applied to {}; tests passed",
                changed.join(", ")
            ))
            .with_files_changed(changed));
        }
        self.restore().await;
        self.progress.end_step("failed");
        let message = describe_failure(&report);
        self.with(|s| {
            s.failed.push(KnownFailure {
                digest,
                message: message.clone(),
            })
        });
        self.fail(
            AgentError::Failed {
                message,
                exit_code: report.exit_code,
            },
            "test_failure",
        )
    }
}

/// The one place a fix is verified one by one: runs the tests in the fix's
/// tree. Counted in the session's test runs; emits [`Event::TestsRan`].
pub(crate) async fn verify_fix(
    shared: &Shared,
    tree: &Tree,
    finding: &str,
    pattern: Option<String>,
) -> Result<TestReport, String> {
    run_tests(shared, &tree.env, Some(finding.to_owned()), pattern).await
}

/// Runs the tests once in `env`: counted, reported as [`Event::TestsRan`].
pub(crate) async fn run_tests(
    shared: &Shared,
    env: &TreeEnv,
    id: Option<String>,
    pattern: Option<String>,
) -> Result<TestReport, String> {
    let runner: Arc<dyn TestRunner> = shared.tests.runner(env);
    shared.test_runs.fetch_add(1, Ordering::SeqCst);
    let report = runner
        .run(TestRequest {
            workdir: env.root.clone(),
            pattern,
            time_limit: shared.config.test_time_limit,
        })
        .await
        .map_err(|e| format!("the tests could not run: {e}"));
    shared.sink.emit(&Event::TestsRan {
        id,
        passed: report.as_ref().is_ok_and(TestReport::is_pass),
        failing: report
            .as_ref()
            .map(|r| r.failing_tests.clone())
            .unwrap_or_default(),
    });
    report
}

/// The last report of a test run and its re-runs, and the failure a re-run
/// showed to be flaky.
struct Rerun {
    last: TestReport,
    flaky: Option<FlakyFailure>,
    /// Re-runs made after the first run.
    reruns: u32,
}

/// A failing run that passed on a re-run of the identical tree.
#[derive(Debug, Clone)]
pub(crate) struct FlakyFailure {
    /// What failed, in one line (failing tests or the first log line).
    pub failure: String,
    /// Runs that failed before the passing one.
    pub failed_runs: u32,
}

/// `each`: one run, and on failure up to `flaky_reruns` re-runs of the
/// identical tree; a re-run that passes makes the failure flaky.
async fn test_with_reruns(
    shared: &Shared,
    tree: &Tree,
    finding: &str,
    pattern: Option<String>,
) -> Result<Rerun, String> {
    let first = verify_fix(shared, tree, finding, pattern.clone()).await?;
    let mut reruns = 0;
    let mut last = first;
    let mut flaky = None;
    while !last.is_pass() && reruns < shared.config.flaky_reruns {
        reruns += 1;
        let again = verify_fix(shared, tree, finding, pattern.clone()).await?;
        if again.is_pass() {
            flaky = Some(FlakyFailure {
                failure: short_failure(&last),
                failed_runs: reruns,
            });
        }
        last = again;
    }
    shared.with_stats(|s| {
        s.reruns += reruns;
        s.each_runs += 1 + reruns;
    });
    Ok(Rerun {
        last,
        flaky,
        reruns,
    })
}

/// Records a flaky failure: an error entry `flaky_test` in the progress
/// file, a warning event, and the session's count.
pub(crate) fn record_flaky(
    shared: &Shared,
    progress: &Progress,
    finding: &str,
    flaky: &FlakyFailure,
) {
    let message = format!(
        "flaky tests: the tests failed ({}), then passed on a re-run of the identical tree; the failure is not blamed on the fix, which is kept",
        first_line(&flaky.failure)
    );
    progress.error(finding, "flaky_test", &message);
    progress.update(|p| {
        if let Some(v) = p.verification.as_mut() {
            v.flaky += 1;
        }
    });
    shared.with_stats(|s| s.flaky += 1);
    shared.warn(format!(
        "flaky tests while verifying {finding}: {} failing run(s), then a pass on the identical tree; the fix is kept",
        flaky.failed_runs
    ));
}

/// A failing run in one line: its failing tests, or the first log line.
pub(crate) fn short_failure(report: &TestReport) -> String {
    if !report.failing_tests.is_empty() {
        return format!("failing: {}", report.failing_tests.join(", "));
    }
    let line = report
        .log
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    match report.exit_code {
        Some(code) if line.is_empty() => format!("exit status {code}"),
        _ => line.to_owned(),
    }
}

/// The failure text fed back to the agent.
pub(crate) fn describe_failure(report: &TestReport) -> String {
    describe_failure_as(
        report,
        "the tests failed with the fix applied",
        "the fix was rolled back",
    )
}

/// The failure text: `what` happened (with the failing tests), `then`,
/// and the tail of the test output.
pub(crate) fn describe_failure_as(report: &TestReport, what: &str, then: &str) -> String {
    const TAIL: usize = 4000;
    let log = report.log.trim();
    let tail = match log.char_indices().rev().nth(TAIL) {
        Some((i, _)) => &log[i..],
        None => log,
    };
    let failing = if report.failing_tests.is_empty() {
        String::new()
    } else {
        format!(" (failing: {})", report.failing_tests.join(", "))
    };
    format!("{what}{failing}; {then}. Test output (tail):\n{tail}")
}

/// A digest of the changed files' paths and contents.
fn write_set_digest(root: &Path, changed: &[String]) -> String {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for path in changed {
        chunks.push(path.as_bytes().to_vec());
        chunks.push(std::fs::read(root.join(path)).unwrap_or_else(|_| b"\0deleted".to_vec()));
    }
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    digest_hex(&refs)
}

/// The prompt for fixing one finding.
fn fix_prompt(f: &Finding, group: &PlanGroup) -> String {
    let mut s = format!(
        "Fix review finding {id} ({sev}, {dim}) in {file}{line}: {title}\n",
        id = f.id,
        sev = f.severity,
        dim = f.dimension_or_general(),
        file = f.file_or_unknown(),
        line = f.line.map(|l| format!(":{l}")).unwrap_or_default(),
        title = f.title,
    );
    if !f.description.is_empty() {
        s.push_str(&format!("\n{}\n", f.description));
    }
    if !f.recommendations.is_empty() {
        s.push_str("\nRecommendations:\n");
        for r in &f.recommendations {
            s.push_str(&format!("- {r}\n"));
        }
    }
    s.push_str(&format!(
        "\nGroup strategy: {}\nChange only what the fix needs and keep the code style; do not commit, the engine runs the tests and commits.",
        group.fix_strategy.approach
    ));
    s
}

/// Runs one group in one tree; returns when every finding is completed.
pub(crate) async fn run_group(
    shared: &Shared,
    group: &PlanGroup,
    tree: &Tree,
    progress: &Progress,
    landed: &HashMap<String, CommitId>,
) {
    let gid = group.group_id.clone();
    shared.sink.emit(&Event::JobStarted {
        id: gid.clone(),
        title: Some(group.group_name.clone()),
    });
    progress.update(|p| {
        p.status = ProgressStatus::InProgress;
        p.assigned_agent = Some(shared.agent.name().to_owned());
        if p.started_at.is_none() {
            p.started_at = Some(now());
        }
    });
    for fid in &group.findings {
        let done = progress
            .snapshot()
            .findings
            .iter()
            .any(|f| &f.finding_id == fid && f.status == ProgressStatus::Completed);
        if done {
            continue;
        }
        let Some(finding) = shared.findings.get(fid) else {
            progress.finding(fid, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Failed);
                f.error_message = Some("the finding is missing from findings.json".to_owned());
            });
            continue;
        };
        if let Some(commit) = landed.get(&commit_message(finding)) {
            // Committed by an earlier run whose progress write was lost.
            progress.finding(fid, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(commit.to_string());
                f.test_passed = Some(true);
                f.completed_at.get_or_insert_with(now);
            });
            continue;
        }
        fix_one(shared, group, tree, progress, finding, FixStart::default()).await;
    }
    if tree.defer {
        // The group's fixes wait for verification at landing.
        progress.update(|p| {
            p.phase = "verifying".to_owned();
            p.current_finding = None;
            p.flow_control = FlowControl::default();
        });
        return;
    }
    finish_group(shared, group, progress);
}

/// Marks a group completed and reports it.
pub(crate) fn finish_group(shared: &Shared, group: &PlanGroup, progress: &Progress) {
    let gid = group.group_id.clone();
    let snapshot = progress.snapshot();
    let failed = snapshot.summary.failed;
    progress.update(|p| {
        p.status = ProgressStatus::Completed;
        p.phase = "done".to_owned();
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: gid,
        status: if failed == 0 {
            JobStatus::Completed
        } else {
            JobStatus::Failed
        },
        detail: Some(format!(
            "{} fixed, {} failed",
            snapshot.summary.fixed, snapshot.summary.failed
        )),
    });
}

/// Marks a finding failed with `message`.
pub(crate) fn finish_failed(shared: &Shared, progress: &Progress, id: &str, message: String) {
    finish_unfixed(shared, progress, id, message, FixResult::Failed);
}

/// Marks a finding `result` (failed or not fixable) with `message`.
fn finish_unfixed(
    shared: &Shared,
    progress: &Progress,
    id: &str,
    message: String,
    result: FixResult,
) {
    progress.finding(id, |f| {
        f.status = ProgressStatus::Completed;
        f.result = Some(result);
        f.test_passed = if f.attempts > 0 { Some(false) } else { None };
        f.completed_at = Some(now());
        // An untested commit in a worktree never landed.
        f.commit_hash = None;
        f.error_message = Some(message.clone());
    });
    progress.update(|p| {
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: id.to_owned(),
        status: if result == FixResult::NotFixable {
            JobStatus::Skipped
        } else {
            JobStatus::Failed
        },
        detail: Some(first_line(&message)),
    });
}

pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

/// Where a finding's attempts start: a fresh finding, or a fix sent back by
/// batch verification.
#[derive(Debug, Clone, Default)]
pub(crate) struct FixStart {
    /// Attempts already made.
    pub attempts: u32,
    /// The failing output of the last attempt, fed into the first prompt.
    pub failure: Option<String>,
    /// Attempts known to fail, by digest.
    pub known: Vec<KnownFailure>,
}

/// A fix committed by [`fix_one`].
#[derive(Debug, Clone)]
pub(crate) struct Committed {
    pub commit: CommitId,
    pub digest: Option<String>,
    pub attempts: u32,
}

/// One finding: analyse, attempts (fix + tests) through the retry executor,
/// commit. `None` when the finding failed (recorded as failed).
pub(crate) async fn fix_one(
    shared: &Shared,
    group: &PlanGroup,
    tree: &Tree,
    progress: &Progress,
    finding: &Finding,
    start: FixStart,
) -> Option<Committed> {
    let id = finding.id.to_string();
    shared.sink.emit(&Event::JobStarted {
        id: id.clone(),
        title: Some(finding.title.clone()),
    });
    progress.update(|p| {
        if let Some(f) = p.finding_mut(&id) {
            f.status = ProgressStatus::InProgress;
            f.started_at.get_or_insert_with(now);
        }
        p.current_finding = Some(CurrentFinding {
            finding_id: id.clone(),
            finding_title: finding.title.clone(),
            file: finding.file.clone().unwrap_or_default(),
            line: finding.line,
            status: "analyzing".to_owned(),
            action: "Reading file and understanding code structure".to_owned(),
        });
        p.flow_control = FlowControl::default();
    });
    progress.step(
        "analyze_context",
        "analyzing",
        "Reading file and understanding code structure",
    );
    let files = crate::plan::finding_files(finding);
    if let Some(missing) = files.iter().find(|f| !tree.env.root.join(f).is_file()) {
        progress.end_step("failed");
        let msg = format!("{missing} does not exist in the working tree");
        progress.error(&id, "analysis", &msg);
        finish_failed(shared, progress, &id, msg);
        return None;
    }
    if tree.is_main {
        let dirty = shared.dirty_before();
        if let Some(d) = files.iter().find(|f| dirty.contains(*f)) {
            progress.end_step("failed");
            let msg = format!("{d} had uncommitted changes before the run; it is never touched");
            progress.error(&id, "dirty_file", &msg);
            finish_failed(shared, progress, &id, msg);
            return None;
        }
    }
    progress.end_step("completed");
    let checkpoint = match tree.vcs.checkpoint().await {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("failed to take a checkpoint: {e}");
            progress.error(&id, "vcs_error", &msg);
            finish_failed(shared, progress, &id, msg);
            return None;
        }
    };
    shared.update_active(|a| {
        a.in_flight.push(InFlight {
            group_id: group.group_id.clone(),
            finding_id: id.clone(),
            tree: tree.env.root.clone(),
            checkpoint: checkpoint.clone(),
        });
    });
    let pattern = Some(group.fix_strategy.test_pattern.trim().to_owned()).filter(|p| !p.is_empty());
    let edit_files: BTreeSet<String> = finding
        .suggestions
        .iter()
        .flat_map(|s| s.edits.iter().map(|e| e.file.clone()))
        .collect();
    let histories = shared.ledger.histories(&tree.env.root, &edit_files);
    let step = FixStep {
        shared,
        tree,
        progress,
        finding,
        pattern: pattern.clone(),
        checkpoint: &checkpoint,
        histories: histories.clone(),
        state: Mutex::new(StepState {
            attempt: start.attempts,
            failed: start.known.clone(),
            ..StepState::default()
        }),
    };
    let mut instruction = fix_prompt(finding, group);
    if let Some(failure) = &start.failure {
        instruction.push_str(&format!(
            "\n\nAn earlier attempt was tested at landing and dropped:\n{failure}"
        ));
    }
    let milestone = Milestone {
        id: id.clone(),
        title: finding.title.clone(),
        instruction,
        exit_criteria: Vec::new(),
    };
    let max = shared.config.max_iterations.max(1);
    let left = max.saturating_sub(start.attempts);
    if left == 0 {
        shared.update_active(|a| a.in_flight.retain(|f| f.finding_id != id));
        let message = start
            .failure
            .unwrap_or_else(|| "the fix did not pass".to_owned());
        finish_failed(
            shared,
            progress,
            &id,
            format!("max iterations reached ({max}): {message}"),
        );
        return None;
    }
    let policy = RetryPolicy {
        attempts_per_round: left,
        max_rounds: 1,
        auto_mode: true,
    };
    let mut request = AgentRequest::new(id.clone(), Role::Fix, "", tree.env.root.clone())
        .with_context(serde_json::json!({
            "finding": finding,
            "edit_history": histories,
            "group_id": group.group_id,
            "fix_strategy": group.fix_strategy,
            "test_pattern": pattern,
        }));
    if let Some(limit) = shared.config.fix_time_limit {
        request = request.with_time_limit(limit);
    }
    let outcome = run_milestone(
        &step,
        &StopOnEscalation,
        &MilestoneSink(shared.sink.as_ref()),
        &milestone,
        &policy,
        request,
        None,
    )
    .await;
    let state = match step.state.into_inner() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    let result = match (outcome, state.write_set) {
        (MilestoneOutcome::Passed { .. }, Some(write_set)) => {
            commit_fix(shared, tree, progress, finding, &write_set, &checkpoint)
                .await
                .map(|commit| Committed {
                    commit,
                    digest: state.digest.clone(),
                    attempts: state.attempt,
                })
        }
        (MilestoneOutcome::Passed { .. }, None) => {
            Err("the retry executor passed without a verified fix".to_owned())
        }
        (_, _) => Err(state
            .last_error
            .unwrap_or_else(|| "the fix did not pass".to_owned())),
    };
    shared.update_active(|a| a.in_flight.retain(|f| f.finding_id != id));
    match result {
        Ok(committed) => {
            if let Some(digest) = &committed.digest {
                match shared.digests.lock() {
                    Ok(mut g) => g.insert(id.clone(), digest.clone()),
                    Err(p) => p.into_inner().insert(id.clone(), digest.clone()),
                };
            }
            Some(committed)
        }
        Err(message) => {
            if let Some(AgentError::Unsupported { reason }) = &state.stop {
                // Declined by the agent: not a failed fix, and not retried.
                finish_unfixed(shared, progress, &id, reason.clone(), FixResult::NotFixable);
                return None;
            }
            let attempts = state.attempt.min(shared.config.max_iterations.max(1));
            let message = if attempts >= shared.config.max_iterations.max(1) {
                format!("max iterations reached ({attempts}): {message}")
            } else {
                message
            };
            finish_failed(shared, progress, &id, message);
            None
        }
    }
}

/// Commits exactly the write-set.
async fn commit_fix(
    shared: &Shared,
    tree: &Tree,
    progress: &Progress,
    finding: &Finding,
    write_set: &[String],
    checkpoint: &Checkpoint,
) -> Result<CommitId, String> {
    let id = finding.id.to_string();
    progress.step(
        "commit_changes",
        "committing",
        "Creating git commit for successful fix",
    );
    let message = commit_message(finding);
    match tree.vcs.commit(write_set, &message).await {
        Ok(commit) if tree.defer => {
            progress.end_step("completed");
            // Committed untested: the finding waits for verification.
            progress.finding(&id, |f| {
                f.commit_hash = Some(commit.to_string());
                f.error_message = None;
            });
            progress.update(|p| {
                p.current_finding = None;
                p.flow_control = FlowControl::default();
            });
            Ok(commit)
        }
        Ok(commit) => {
            progress.end_step("completed");
            progress.finding(&id, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(commit.to_string());
                f.test_passed = Some(true);
                f.completed_at = Some(now());
                f.error_message = None;
            });
            progress.update(|p| {
                p.current_finding = None;
                p.flow_control = FlowControl::default();
            });
            if tree.is_main {
                shared.sink.emit(&Event::CommitMade {
                    id: id.clone(),
                    commit: commit.to_string(),
                    summary: message,
                });
            }
            shared.sink.emit(&Event::JobFinished {
                id,
                status: JobStatus::Completed,
                detail: Some(format!("committed {}", commit.short())),
            });
            Ok(commit)
        }
        Err(e) => {
            progress.end_step("failed");
            let _ = tree.vcs.restore(checkpoint).await;
            let msg = format!("failed to commit the fix: {e}");
            progress.error(&id, "vcs_error", &msg);
            Err(msg)
        }
    }
}

/// Commits on the checked-out branch since the session's base, by message.
pub(crate) async fn landed_commits(shared: &Shared) -> HashMap<String, CommitId> {
    let base = match shared.active.lock() {
        Ok(g) => g.base_head.clone(),
        Err(p) => p.into_inner().base_head.clone(),
    };
    match shared.vcs.log_since(&CommitId(base)).await {
        Ok(log) => log
            .into_iter()
            .map(|c| (c.message.trim().to_owned(), c.id))
            .collect(),
        Err(e) => {
            shared.warn(format!("failed to read the branch log: {e}"));
            HashMap::new()
        }
    }
}

/// Runs one group in the main tree under the group time limit.
pub(crate) async fn run_group_in_main(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    landed: &HashMap<String, CommitId>,
) {
    let tree = Tree {
        vcs: Arc::clone(&shared.vcs),
        env: TreeEnv {
            root: shared.vcs.root().to_path_buf(),
            worktree_slot: None,
            cargo_target_dir: None,
        },
        is_main: true,
        defer: false,
    };
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
}

/// After a group's time limit: restore its in-flight fix in the main tree
/// and fail what is left.
async fn time_out_group(shared: &Shared, group: &PlanGroup, progress: &Progress, limit: Duration) {
    let root = shared.vcs.root().to_path_buf();
    let in_flight: Vec<InFlight> = match shared.active.lock() {
        Ok(g) => g.in_flight.clone(),
        Err(p) => p.into_inner().in_flight.clone(),
    };
    for f in in_flight.iter().filter(|f| f.group_id == group.group_id) {
        if f.tree == root
            && let Err(e) = shared.vcs.restore(&f.checkpoint).await
        {
            shared.warn(format!(
                "failed to roll back {} after the time limit: {e}",
                f.finding_id
            ));
        }
    }
    shared.update_active(|a| a.in_flight.retain(|f| f.group_id != group.group_id));
    let msg = format!("group time limit of {}s exceeded", limit.as_secs());
    let open: Vec<String> = progress
        .snapshot()
        .findings
        .iter()
        .filter(|f| f.status != ProgressStatus::Completed)
        .map(|f| f.finding_id.clone())
        .collect();
    for id in open {
        progress.error(&id, "timeout", &msg);
        finish_failed(shared, progress, &id, msg.clone());
    }
    progress.update(|p| {
        p.status = ProgressStatus::Failed;
        p.phase = "done".to_owned();
    });
    shared.sink.emit(&Event::JobFinished {
        id: group.group_id.clone(),
        status: JobStatus::TimedOut,
        detail: Some(msg),
    });
}

/// The result of a group run in a worktree, waiting to land.
pub(crate) struct WorktreeRun {
    pub(crate) group: PlanGroup,
    pub(crate) vcs: Option<Arc<dyn Vcs>>,
    path: PathBuf,
    branch: String,
    linked: Vec<PathBuf>,
}

/// Runs every stage of the plan in order.
pub(crate) async fn run_stages(shared: Arc<Shared>, progress: &HashMap<String, Progress>) {
    // A batch verification an interrupted run left: finish it first (every
    // earlier stage is done, since stages run in order).
    if let Some(state) = crate::landing::load_state(&shared) {
        crate::landing::verify_stage(&shared, state, progress, &[]).await;
    }
    for stage in shared.plan.timeline.clone() {
        let done = match shared.active.lock() {
            Ok(g) => g.stages_completed.contains(&stage.stage),
            Err(p) => p.into_inner().stages_completed.contains(&stage.stage),
        };
        let groups: Vec<PlanGroup> = stage
            .groups
            .iter()
            .filter_map(|g| shared.plan.group(g).cloned())
            .collect();
        let open: Vec<PlanGroup> = groups
            .into_iter()
            .filter(|g| {
                progress.get(&g.group_id).is_some_and(|p| {
                    p.snapshot()
                        .findings
                        .iter()
                        .any(|f| f.status != ProgressStatus::Completed)
                })
            })
            .collect();
        if done && open.is_empty() {
            continue;
        }
        shared.sink.emit(&Event::WaveStarted {
            wave: stage.stage,
            jobs: stage.groups.clone(),
        });
        let landed = landed_commits(&shared).await;
        let parallel = stage.execution_mode == ExecutionMode::Parallel
            && shared.config.isolation == Isolation::Worktree
            && open.len() > 1;
        if shared.batch {
            if parallel {
                run_batch_stage(&shared, stage.stage, &open, progress, &landed).await;
            } else {
                // Groups that share files: one after another, each on the
                // tip the previous one's verified fixes reached.
                for group in &open {
                    run_batch_stage(
                        &shared,
                        stage.stage,
                        std::slice::from_ref(group),
                        progress,
                        &landed,
                    )
                    .await;
                }
            }
        } else if parallel {
            run_parallel_stage(&shared, stage.stage, &open, progress, &landed).await;
        } else {
            for group in &open {
                if let Some(p) = progress.get(&group.group_id) {
                    run_group_in_main(&shared, group, p, &landed).await;
                }
            }
        }
        shared.update_active(|a| {
            if !a.stages_completed.contains(&stage.stage) {
                a.stages_completed.push(stage.stage);
            }
        });
    }
}

/// Batch verification: the groups commit their fixes untested in worktrees
/// (concurrently), then the stage's commits are verified at landing.
async fn run_batch_stage(
    shared: &Arc<Shared>,
    stage: u32,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) {
    let Some((base, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    crate::landing::land_batch(shared, stage, runs, &base, progress).await;
}

/// A parallel stage verified one fix at a time: each group in its own
/// worktree and branch (at most `max_parallel_groups` at once), every fix
/// tested there, then landed in stage order.
///
/// Each group's fixes passed on its own tree, but two groups' fixes were
/// never tested together: when more than one group made commits, the
/// combination is verified at landing like a batch stage (tested at the
/// tip, bisected on failure, a dropped fix made again on the tip through
/// the retry loop), so that only tested trees land.
async fn run_parallel_stage(
    shared: &Arc<Shared>,
    stage: u32,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) {
    let Some((base, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    let mut committing = 0;
    for run in &runs {
        if let Some(wt) = &run.vcs
            && !shared
                .worktree_commits(&run.group, wt.as_ref(), &base)
                .await
                .is_empty()
        {
            committing += 1;
        }
    }
    if committing > 1 {
        crate::landing::land_batch(shared, stage, runs, &base, progress).await;
    } else {
        land_stage(shared, runs, &base, progress).await;
    }
}

/// Runs each group in its own worktree and branch from HEAD (at most
/// `max_parallel_groups` at once); the runs come back in group order. When
/// HEAD cannot be read the groups run in the main tree and `None` is
/// returned.
async fn run_in_worktrees(
    shared: &Arc<Shared>,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) -> Option<(CommitId, Vec<WorktreeRun>)> {
    let base = match shared.vcs.head().await {
        Ok(h) => h,
        Err(e) => {
            shared.warn(format!(
                "failed to read HEAD ({e}); running the stage's groups serially"
            ));
            for g in groups {
                if let Some(p) = progress.get(&g.group_id) {
                    run_group_in_main(shared, g, p, landed).await;
                }
            }
            return None;
        }
    };
    let limit = shared.config.max_parallel_groups.max(1);
    let slots = Arc::new(Mutex::new((0..limit).rev().collect::<Vec<usize>>()));
    let semaphore = Arc::new(tokio::sync::Semaphore::new(limit));
    let landed = Arc::new(landed.clone());
    let mut set = tokio::task::JoinSet::new();
    for (index, group) in groups.iter().enumerate() {
        let Some(p) = progress.get(&group.group_id).cloned() else {
            continue;
        };
        let shared = Arc::clone(shared);
        let group = group.clone();
        let base = base.clone();
        let slots = Arc::clone(&slots);
        let semaphore = Arc::clone(&semaphore);
        let landed = Arc::clone(&landed);
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.ok();
            let slot = match slots.lock() {
                Ok(mut s) => s.pop().unwrap_or(0),
                Err(p) => p.into_inner().pop().unwrap_or(0),
            };
            let run = run_in_worktree(&shared, &group, &p, &base, slot, &landed).await;
            match slots.lock() {
                Ok(mut s) => s.push(slot),
                Err(p) => p.into_inner().push(slot),
            }
            (index, run)
        });
    }
    let mut runs: Vec<(usize, WorktreeRun)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(r) => runs.push(r),
            Err(e) => shared.warn(format!("a group task stopped: {e}")),
        }
    }
    runs.sort_by_key(|(i, _)| *i);
    Some((base, runs.into_iter().map(|(_, r)| r).collect()))
}

/// Creates the group's worktree and runs the group in it.
async fn run_in_worktree(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    base: &CommitId,
    slot: usize,
    landed: &HashMap<String, CommitId>,
) -> WorktreeRun {
    let run = match shared.active.lock() {
        Ok(g) => g.run,
        Err(p) => p.into_inner().run,
    };
    let mut path = shared.paths.worktree(run, &group.group_id);
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = shared
            .paths
            .worktree(run, &format!("{}-{n}", group.group_id));
    }
    let branch = format!(
        "review-fix/{}/{}",
        shared.paths.id(),
        path.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut out = WorktreeRun {
        group: group.clone(),
        vcs: None,
        path: path.clone(),
        branch: branch.clone(),
        linked: Vec::new(),
    };
    // Recorded before it is made: a kill while git makes it (which can leave
    // the branch without the folder) leaves a record for the resume.
    shared.update_active(|a| {
        a.worktrees.push(WorktreeRecord {
            group_id: group.group_id.clone(),
            path: path.clone(),
            branch: branch.clone(),
        })
    });
    let vcs = match shared.vcs.worktree_add(&path, &branch, base).await {
        Ok(v) => v,
        Err(e) => {
            // git may have made the branch before failing: undo what it
            // left, and keep the record for a resume when that fails too.
            if shared.vcs.worktree_remove(&path, &branch).await.is_ok() {
                shared.update_active(|a| a.worktrees.retain(|w| w.path != path));
            }
            shared.warn(format!(
                "failed to create a worktree for {} ({e}); it will run in the main tree",
                group.group_id
            ));
            return out;
        }
    };
    out.linked = link_dependency_dirs(shared, &path).await;
    let tree = Tree {
        vcs: Arc::clone(&vcs),
        env: TreeEnv {
            root: path.clone(),
            worktree_slot: Some(slot),
            cargo_target_dir: shared.cargo.then(|| shared.paths.target_dir(slot)),
        },
        is_main: false,
        defer: shared.batch,
    };
    out.vcs = Some(vcs);
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
    out
}

/// Links the main tree's ignored dependency folders into a worktree.
pub(crate) async fn link_dependency_dirs(shared: &Shared, worktree: &Path) -> Vec<PathBuf> {
    let root = shared.vcs.root().to_path_buf();
    let untracked: BTreeSet<String> = shared
        .vcs
        .status()
        .await
        .map(|s| s.untracked.into_iter().collect())
        .unwrap_or_default();
    let mut linked = Vec::new();
    for dir in LINKED_DEPENDENCY_DIRS {
        let source = root.join(dir);
        let target = worktree.join(dir);
        let is_untracked = untracked
            .iter()
            .any(|u| u == dir || u.starts_with(&format!("{dir}/")));
        if source.is_dir() && !target.exists() && !is_untracked {
            #[cfg(unix)]
            let made = std::os::unix::fs::symlink(&source, &target);
            #[cfg(not(unix))]
            let made: std::io::Result<()> = Err(std::io::Error::other("symlinks need unix"));
            match made {
                Ok(()) => linked.push(target),
                Err(e) => shared.warn(format!(
                    "failed to link {} into {}: {e}",
                    source.display(),
                    worktree.display()
                )),
            }
        }
    }
    linked
}

/// Lands a stage's worktree commits on the checked-out branch, in stage
/// order, by cherry-pick. A group whose commit does not apply (or whose
/// worktree could not be created) is re-run serially on the updated branch.
pub(crate) async fn land_stage(
    shared: &Shared,
    runs: Vec<WorktreeRun>,
    base: &CommitId,
    progress: &HashMap<String, Progress>,
) {
    let mut rerun: Vec<PlanGroup> = Vec::new();
    for run in runs {
        let Some(p) = progress.get(&run.group.group_id) else {
            continue;
        };
        let Some(wt) = run.vcs.clone() else {
            reset_unlanded(p, &BTreeSet::new());
            rerun.push(run.group.clone());
            continue;
        };
        p.update(|p| p.phase = "landing".to_owned());
        let commits = shared.worktree_commits(&run.group, wt.as_ref(), base).await;
        let mut landed_ids = BTreeSet::new();
        let mut conflict = None;
        for (c, fid) in commits {
            match shared.vcs.cherry_pick(&c.id).await {
                Ok(CherryPick::Applied { commit }) => {
                    if let Some(fid) = fid {
                        p.finding(&fid, |f| f.commit_hash = Some(commit.to_string()));
                        shared.sink.emit(&Event::CommitMade {
                            id: fid.clone(),
                            commit: commit.to_string(),
                            summary: c.message.trim().to_owned(),
                        });
                        landed_ids.insert(fid);
                    }
                }
                Ok(CherryPick::Conflict { paths }) => {
                    conflict = Some(format!("landing conflicted in {}", paths.join(", ")));
                    break;
                }
                Err(e) => {
                    conflict = Some(format!("landing failed: {e}"));
                    break;
                }
            }
        }
        if let Some(reason) = conflict {
            p.update(|p| {
                p.errors.push(ProgressError {
                    finding_id: None,
                    error_type: "landing_conflict".to_owned(),
                    message: format!("{reason}; the group is re-run on the updated branch"),
                    timestamp: now(),
                })
            });
            reset_unlanded(p, &landed_ids);
            rerun.push(run.group.clone());
        } else {
            p.update(|p| p.phase = "done".to_owned());
        }
        remove_worktree(shared, &run).await;
    }
    if !rerun.is_empty() {
        let landed = landed_commits(shared).await;
        for g in &rerun {
            if let Some(p) = progress.get(&g.group_id) {
                run_group_in_main(shared, g, p, &landed).await;
            }
        }
    }
}

/// Fixed-in-worktree findings that did not land go back to pending.
fn reset_unlanded(p: &Progress, landed: &BTreeSet<String>) {
    p.update(|p| {
        for f in &mut p.findings {
            if f.result == Some(FixResult::Fixed) && !landed.contains(&f.finding_id) {
                f.status = ProgressStatus::Pending;
                f.result = None;
                f.commit_hash = None;
                f.test_passed = None;
                f.completed_at = None;
            }
        }
        p.status = ProgressStatus::Pending;
    });
}

/// Removes a group's worktree and branch (after unlinking dependency folders).
pub(crate) async fn remove_worktree(shared: &Shared, run: &WorktreeRun) {
    for link in &run.linked {
        let _ = std::fs::remove_file(link);
    }
    match shared.vcs.worktree_remove(&run.path, &run.branch).await {
        Ok(()) => shared.update_active(|a| a.worktrees.retain(|w| w.path != run.path)),
        Err(e) => shared.warn(format!(
            "failed to remove worktree {}: {e}; remove it by hand",
            run.path.display()
        )),
    }
}

/// On resume: restore in-flight fixes of the main tree and remove the
/// worktrees an interrupted run left.
pub(crate) async fn recover(shared: &Shared) {
    let (in_flight, worktrees) = match shared.active.lock() {
        Ok(g) => (g.in_flight.clone(), g.worktrees.clone()),
        Err(p) => {
            let g = p.into_inner();
            (g.in_flight.clone(), g.worktrees.clone())
        }
    };
    let root = shared.vcs.root().to_path_buf();
    let head = shared.vcs.head().await.ok();
    for f in &in_flight {
        if f.tree != root {
            continue;
        }
        if head.as_ref() == Some(&f.checkpoint.head)
            && let Err(e) = shared.vcs.restore(&f.checkpoint).await
        {
            shared.warn(format!(
                "failed to restore the interrupted fix of {}: {e}",
                f.finding_id
            ));
        }
        // Otherwise the fix was committed before the interruption: the
        // branch log tells, and the tree is clean.
    }
    // Worktrees are recorded before they are made and forgotten after they
    // are removed, so a record may stand for a whole worktree, a dirty one
    // (killed mid-fix), a branch without its folder (killed while git made
    // or removed it), or nothing at all.
    let folder = shared.paths.worktrees();
    for WorktreeRecord { path, branch, .. } in &worktrees {
        for dir in LINKED_DEPENDENCY_DIRS {
            let link = path.join(dir);
            if link
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                let _ = std::fs::remove_file(&link);
            }
        }
        let mut removed = shared.vcs.worktree_remove(path, branch).await;
        // Only a folder the session made: directly inside its worktrees
        // folder (a record naming anything else is not deleted).
        if removed.is_err() && path.parent() == Some(folder.as_path()) && path.file_name().is_some()
        {
            // Killed mid-fix (uncommitted changes) or while git filled it.
            // Nothing in an interrupted run's worktree is kept (its landed
            // fixes are on the branch, the others are redone): its folder
            // goes, and removing the worktree then forgets the rest.
            match std::fs::remove_dir_all(path) {
                Ok(()) => removed = shared.vcs.worktree_remove(path, branch).await,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => shared.warn(format!("failed to delete {}: {e}", path.display())),
            }
        }
        if let Err(e) = removed {
            shared.warn(format!(
                "an interrupted run left worktree {} that could not be removed: {e}",
                path.display()
            ));
        }
    }
    shared.update_active(|a| {
        a.in_flight.clear();
        a.worktrees.clear();
    });
}
