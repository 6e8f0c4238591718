//! One attempt at one finding, as an [`Agent`] for the retry executor
//! ([`FixStep`]): the agent's fix, its write-set checked, the tests, and a
//! failure rolled back; with the gate and event sink the attempts run under.

use orchestrator_core::agent::Usage;

use super::*;

/// A gate for the fix milestones: an escalation means "attempts exhausted",
/// answered with Stop, so the finding is reported failed rather than waiting
/// for a human.
#[derive(Debug)]
pub(super) struct StopOnEscalation;

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
pub(super) struct MilestoneSink<'a>(pub(super) &'a dyn EventSink);

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
pub(super) struct StepState {
    pub(super) attempt: u32,
    pub(super) stop: Option<AgentError>,
    pub(super) failed: Vec<KnownFailure>,
    pub(super) write_set: Option<Vec<String>>,
    pub(super) digest: Option<String>,
    pub(super) last_error: Option<String>,
    /// The agent session of the last answered attempt: the next attempt
    /// resumes it, so the agent keeps what it read and tried.
    pub(super) session: Option<String>,
    /// The run stopped at a run limit before or during this finding's
    /// attempt: the finding stays pending for `--resume`.
    pub(super) halted: bool,
    /// The agent found every edit of the fix already applied by an earlier
    /// fix (`"already_applied": true`): fixed, with nothing to commit.
    pub(super) already_applied: bool,
}

/// One attempt at one finding, as an [`Agent`] for the retry executor: the
/// inner agent's fix, then the tests; a failure restores the write-set.
#[derive(Debug)]
pub(super) struct FixStep<'a> {
    pub(super) shared: &'a Shared,
    pub(super) tree: &'a Tree,
    pub(super) progress: &'a Progress,
    pub(super) finding: &'a Finding,
    pub(super) pattern: Option<String>,
    pub(super) checkpoint: &'a Checkpoint,
    /// The edit history of each file of the finding's suggestions, as they
    /// were before the fix (`None`: unrecorded changes).
    pub(super) histories: BTreeMap<String, Option<EditHistory>>,
    pub(super) state: Mutex<StepState>,
}

impl FixStep<'_> {
    fn with<R>(&self, f: impl FnOnce(&mut StepState) -> R) -> R {
        match self.state.lock() {
            Ok(mut g) => f(&mut g),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Rolls the fix's tree back to the checkpoint. A rollback that fails
    /// leaves the tree with a change nobody accounted for: the run stops
    /// (exit 3, resumable) rather than measure the next attempt on it; the
    /// worktree is the engine's, and the pool replaces it.
    async fn restore(&self) {
        if let Err(e) = self.tree.vcs.restore(self.checkpoint).await {
            let msg = format!(
                "the fix of {} could not be rolled back in its tree {}: {e}; the run stops, and --resume starts the fix again in a fresh worktree",
                self.finding.id,
                self.tree.env.root.display()
            );
            self.progress
                .error(self.finding.id.as_str(), "rollback_failed", &msg);
            self.shared.halt_for_human(msg);
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

    fn fail<T>(&self, error: AgentError, error_type: &str) -> Result<T, AgentError> {
        // The plain message for a failure of ours (tests, write-set); the
        // agent's own errors keep their kind.
        let message = match &error {
            AgentError::Failed { message, .. } => message.clone(),
            AgentError::LoopDetected { signature, .. } if error_type == "repeat" => {
                signature.clone()
            }
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
    fn changes_files(&self) -> bool {
        self.shared.agent.changes_files()
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let attempt = self.start_attempt(&mut request)?;
        let response = self.call_agent(request, attempt).await?;
        let already = response
            .structured
            .as_ref()
            .and_then(|v| v.get("already_applied"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        if already && response.files_changed.is_empty() {
            self.progress.end_step("completed");
            self.with(|s| s.already_applied = true);
            return Ok(response);
        }
        let changed = self.write_set(&response.files_changed).await?;
        self.progress.end_step("completed");
        let digest = write_set_digest(&self.tree.env.root, &changed);
        let earlier = self.with(|s| s.failed.iter().find(|k| k.digest == digest).cloned());
        if let Some(known) = earlier {
            // The same change already failed its tests: the result is known,
            // and an agent that answered the failure with the identical
            // change would answer it so again. The finding stops here: no
            // test run, no further attempt.
            self.restore().await;
            let error = repeated(attempt, &known);
            self.with(|s| s.stop = Some(error.clone()));
            return self.fail(error, "repeat");
        }
        if self.tree.defer {
            // Batch verification: the fix is tested at landing.
            return Ok(self.accept(changed, digest, "tests run at landing"));
        }
        self.test_fix(attempt, changed, digest).await
    }
}

impl FixStep<'_> {
    /// Starts an attempt unless none may start (the run halted, the finding
    /// stopped or out of budget): counts it, resumes the agent's session and
    /// passes what is left of the finding's budget with the call.
    fn start_attempt(&self, request: &mut AgentRequest) -> Result<u32, AgentError> {
        let id = self.finding.id.as_str();
        if self.shared.halted().is_some() {
            // The run's limit is reached: no new attempt starts. Cancelled,
            // so the retry executor counts no attempt.
            self.with(|s| s.halted = true);
            return Err(AgentError::Cancelled);
        }
        let (attempt, stop, session) = self.with(|s| {
            s.attempt += 1;
            (s.attempt, s.stop.clone(), s.session.clone())
        });
        if request.resume_session.is_none() {
            request.resume_session = session;
        }
        if let Some(stop) = stop {
            // A refusal or an unrecoverable state repeats: do not call again.
            return Err(stop);
        }
        // The finding's own budget, over every attempt so far (earlier runs
        // and landings included: the spend is kept in the progress file).
        let spent = self.progress.snapshot().finding(id).and_then(|f| f.spend);
        if let Some(message) = spent.and_then(|s| s.exhausted(&self.shared.config.item_limits)) {
            let error = AgentError::Budget {
                message: format!("the finding's budget: {message}"),
            };
            self.with(|s| s.stop = Some(error.clone()));
            return self.fail(error, "budget");
        }
        // What is left of it goes with the call, so an agent that can stop
        // mid-call (claude's `--max-budget-usd`) stops at the limit.
        request.spend_limits = self
            .shared
            .config
            .item_limits
            .left_after(&spent.unwrap_or_default());
        self.progress.update(|p| {
            if let Some(f) = p.finding_mut(id) {
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
        Ok(attempt)
    }

    /// Calls the agent for the fix and accounts its spend. A failed call is
    /// rolled back and recorded; one stopped by the run's limit leaves the
    /// finding pending, as if the attempt had not started.
    async fn call_agent(
        &self,
        request: AgentRequest,
        attempt: u32,
    ) -> Result<AgentResponse, AgentError> {
        let id = self.finding.id.as_str();
        let answer = self.shared.agent.run(request).await;
        if let Err(AgentError::Budget { message }) = &answer {
            // The run's limit (the finding's own is checked above): the
            // attempt did not happen. The tree goes back to the checkpoint
            // and the finding stays pending, to be resumed.
            self.restore().await;
            self.progress.end_step("stopped");
            self.shared.halt(message);
            self.with(|s| {
                s.halted = true;
                s.attempt = attempt - 1;
            });
            self.progress.finding(id, |f| f.attempts = attempt - 1);
            return Err(AgentError::Cancelled);
        }
        self.record_spend(answer.as_ref().ok().and_then(|r| r.usage.as_ref()));
        match answer {
            Ok(response) => {
                if let Some(session) = &response.session {
                    self.with(|s| s.session = Some(session.clone()));
                }
                self.record_edits(response.structured.as_ref());
                Ok(response)
            }
            Err(e) => {
                self.restore().await;
                self.progress.end_step("failed");
                let kind = match &e {
                    AgentError::Unsupported { .. } => "not_fixable",
                    AgentError::Conflict { .. } => "deferred",
                    AgentError::Budget { .. } | AgentError::CallLimit { .. } => "budget",
                    _ => "agent_error",
                };
                if e.is_final() {
                    // A refusal, a spent budget, an unusable agent: asking
                    // again gives the same answer, so no further attempt.
                    self.with(|s| s.stop = Some(e.clone()));
                }
                self.fail(e, kind)
            }
        }
    }

    /// Adds an agent call's usage to the finding's spend and reports it.
    fn record_spend(&self, usage: Option<&Usage>) {
        let id = self.finding.id.as_str();
        self.progress.finding(id, |f| {
            f.spend
                .get_or_insert_with(crate::files::AgentSpend::default)
                .add_call(usage);
        });
        let mut call = crate::files::AgentSpend::default();
        call.add_call(usage);
        if let Some(total) = self.progress.snapshot().finding(id).and_then(|f| f.spend) {
            self.shared.sink.emit(&Event::AgentCall {
                id: id.to_owned(),
                spend: call,
                total,
            });
        }
    }

    /// The files the fix changed since the checkpoint: measured in the
    /// tree, or the agent's own list when it is exact
    /// ([`Agent::reports_exact_changes`]: one status read fewer per fix).
    /// A fix that touched the user's uncommitted files, or changed nothing,
    /// fails the attempt.
    async fn write_set(&self, reported: &[String]) -> Result<Vec<String>, AgentError> {
        let measured = if self.shared.agent.reports_exact_changes() {
            reported_change(reported, self.checkpoint)
        } else {
            self.tree.vcs.changed_since(self.checkpoint).await
        };
        let changed = match measured {
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
        Ok(changed)
    }

    /// Keeps the fix: its write-set and digest go to the commit.
    fn accept(&self, changed: Vec<String>, digest: String, tested: &str) -> AgentResponse {
        self.with(|s| {
            s.write_set = Some(changed.clone());
            s.digest = Some(digest);
        });
        AgentResponse::text(format!("fix applied to {}; {tested}", changed.join(", ")))
            .with_files_changed(changed)
    }

    /// Runs the tests on the fix (with re-runs of a failure): a pass keeps
    /// it, a failure rolls it back and is remembered by its digest.
    async fn test_fix(
        &self,
        attempt: u32,
        changed: Vec<String>,
        digest: String,
    ) -> Result<AgentResponse, AgentError> {
        let id = self.finding.id.as_str();
        self.progress
            .step("run_tests", "testing", "Running test suite to verify fix");
        let report = match test_with_reruns(self.shared, self.tree, id, self.pattern.clone()).await
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
            record_flaky(self.shared, self.progress, id, flaky);
        }
        let report = report.last;
        if report.is_pass() {
            self.progress.end_step("completed");
            return Ok(self.accept(changed, digest, "tests passed"));
        }
        self.restore().await;
        self.progress.end_step("failed");
        let message = describe_failure(&report);
        self.with(|s| {
            s.failed.push(KnownFailure {
                digest,
                message: message.clone(),
                attempt,
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

/// Attempt `attempt` made the change that `known` already failed with.
fn repeated(attempt: u32, known: &KnownFailure) -> AgentError {
    let earlier = if known.attempt == 0 {
        "an earlier attempt".to_owned()
    } else {
        format!("attempt {}", known.attempt)
    };
    AgentError::LoopDetected {
        signature: format!(
            "attempt {attempt} repeats {earlier} (the identical change), which failed: {}",
            known.message
        ),
        count: 2,
    }
}

/// An exact agent's list of changed files as the change since
/// `checkpoint`: sorted, each once; one the checkpoint holds as
/// uncommitted is the user's, touched ([`VcsError::TouchedDirty`]).
fn reported_change(reported: &[String], checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
    let mut changed = reported.to_vec();
    changed.sort();
    changed.dedup();
    let touched: Vec<String> = changed
        .iter()
        .filter(|p| checkpoint.dirty.contains_key(*p))
        .cloned()
        .collect();
    if touched.is_empty() {
        Ok(changed)
    } else {
        Err(VcsError::TouchedDirty { paths: touched })
    }
}

/// A digest of the changed files' paths and contents.
pub(super) fn write_set_digest(root: &Path, changed: &[String]) -> String {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for path in changed {
        chunks.push(path.as_bytes().to_vec());
        chunks.push(std::fs::read(root.join(path)).unwrap_or_else(|_| b"\0deleted".to_vec()));
    }
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    digest_hex(&refs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_report_is_the_change_and_a_dirty_file_in_it_is_touched() {
        let mut dirty = BTreeMap::new();
        dirty.insert("notes.txt".to_owned(), Some("d".to_owned()));
        let checkpoint = Checkpoint::new(orchestrator_core::CommitId("c".repeat(40)), dirty);
        let reported = ["src/b.rs", "src/a.rs", "src/b.rs"].map(str::to_owned);
        assert_eq!(
            reported_change(&reported, &checkpoint).unwrap(),
            ["src/a.rs", "src/b.rs"]
        );
        let over = ["notes.txt", "src/a.rs"].map(str::to_owned);
        match reported_change(&over, &checkpoint) {
            Err(VcsError::TouchedDirty { paths }) => assert_eq!(paths, ["notes.txt"]),
            other => panic!("expected TouchedDirty, got {other:?}"),
        }
    }
}
