//! One finding: the fix attempts (agent, write-set, tests) through the
//! retry executor, then exactly one commit.

use super::*;

use super::commit::{commit_fix, leave_pending};
use super::step::{FixStep, MilestoneSink, StepState, StopOnEscalation};

/// The prompt for fixing one finding.
pub(super) fn fix_prompt(f: &Finding, group: &PlanGroup) -> String {
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
    /// The commit of the fix.
    pub commit: CommitId,
    /// The digest of the fix's write-set, when its attempt recorded one.
    pub digest: Option<String>,
    /// The attempts made at the finding, this one included.
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
    if shared.halted().is_some() {
        // Stopped at a run limit: the finding stays pending for --resume.
        return None;
    }
    let run = FindingRun {
        shared,
        group,
        tree,
        progress,
        finding,
        id: finding.id.to_string(),
    };
    run.analyse()?;
    let checkpoint = run.checkpoint().await?;
    let max = shared.config.max_iterations.max(1);
    let left = max.saturating_sub(start.attempts);
    if left == 0 {
        run.forget_in_flight();
        let message = start
            .failure
            .unwrap_or_else(|| "the fix did not pass".to_owned());
        let message = format!("max iterations reached ({max}): {message}");
        finish_failed(shared, progress, &run.id, message);
        return None;
    }
    let (outcome, state) = run.attempts(&checkpoint, &start, left).await;
    run.settle(outcome, state, &checkpoint).await
}

/// What a rollback of `finding`'s attempts is for, in the trash's words:
/// its id and its title on one line (`finding clippy::len_zero@src/a.rs:3:4
/// (length comparison to zero)`).
fn rollback_reason(finding: &Finding) -> String {
    let title = finding
        .title
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    format!("finding {} ({title})", finding.id)
}

/// One finding's run: what the steps of [`fix_one`] work on.
struct FindingRun<'a> {
    shared: &'a Shared,
    group: &'a PlanGroup,
    tree: &'a Tree,
    progress: &'a Progress,
    finding: &'a Finding,
    /// The finding's id.
    id: String,
}

impl FindingRun<'_> {
    /// Starts the finding and checks that its fix can be tried: its files
    /// exist and none of them had the user's uncommitted changes. `None`
    /// when it cannot (recorded as failed).
    fn analyse(&self) -> Option<()> {
        let (shared, progress, finding, id) = (self.shared, self.progress, self.finding, &self.id);
        shared.sink.emit(&Event::JobStarted {
            id: id.clone(),
            title: Some(finding.title.clone()),
        });
        progress.update(|p| {
            if let Some(f) = p.finding_mut(id) {
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
        if let Some(missing) = files.iter().find(|f| !self.tree.env.root.join(f).is_file()) {
            progress.end_step("failed");
            let msg = format!("{missing} does not exist in the working tree");
            progress.error(id, "analysis", &msg);
            finish_failed(shared, progress, id, msg);
            return None;
        }
        // A fix of a file the user has uncommitted changes in could never
        // land (it would be in the way of their work): not tried at all.
        let dirty = shared.dirty_before();
        if let Some(d) = files.iter().find(|f| dirty.contains(*f)) {
            progress.end_step("failed");
            let msg = format!("{d} had uncommitted changes before the run; it is never touched");
            progress.error(id, "dirty_file", &msg);
            finish_failed(shared, progress, id, msg);
            return None;
        }
        progress.end_step("completed");
        Some(())
    }

    /// Takes the checkpoint the attempts roll back to, named for the
    /// finding (so what a rollback saves to the trash says whose it was),
    /// and records the fix as in flight when it is made in the repository's
    /// own working tree (what a resume after a kill names).
    /// `None` when no checkpoint could be taken (recorded as failed).
    async fn checkpoint(&self) -> Option<Checkpoint> {
        let checkpoint = match self.tree.vcs.checkpoint().await {
            Ok(c) => c.with_reason(rollback_reason(self.finding)),
            Err(e) => {
                let msg = format!("failed to take a checkpoint: {e}");
                self.progress.error(&self.id, "vcs_error", &msg);
                finish_failed(self.shared, self.progress, &self.id, msg);
                return None;
            }
        };
        // Only a fix in the repository's own working tree needs the record
        // (a resume warns about it); a resume removes an engine worktree
        // whole, so a fix there is not recorded (two synced rewrites of the
        // session file per fix fewer).
        if self.tree.env.root == self.shared.vcs.root() {
            self.shared.update_active(|a| {
                a.in_flight.push(InFlight {
                    group_id: self.group.group_id.clone(),
                    finding_id: self.id.clone(),
                    tree: self.tree.env.root.clone(),
                    checkpoint: checkpoint.clone(),
                });
            });
        }
        Some(checkpoint)
    }

    /// The fix is no longer in flight.
    fn forget_in_flight(&self) {
        self.shared.forget_in_flight(|f| f.finding_id == self.id);
    }

    /// Runs the `left` attempts left through the retry executor, each one
    /// a [`FixStep`]; returns its outcome and the attempts' state.
    async fn attempts(
        &self,
        checkpoint: &Checkpoint,
        start: &FixStart,
        left: u32,
    ) -> (MilestoneOutcome, StepState) {
        let (shared, finding, group) = (self.shared, self.finding, self.group);
        let pattern =
            Some(group.fix_strategy.test_pattern.trim().to_owned()).filter(|p| !p.is_empty());
        let edit_files: BTreeSet<String> = finding
            .suggestions
            .iter()
            .flat_map(|s| s.edits.iter().map(|e| e.file.clone()))
            .collect();
        let histories = shared.ledger.histories(&self.tree.env.root, &edit_files);
        let request = self.request(&histories, pattern.as_deref());
        let step = FixStep {
            shared,
            tree: self.tree,
            progress: self.progress,
            finding,
            pattern,
            checkpoint,
            histories,
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
            id: self.id.clone(),
            title: finding.title.clone(),
            instruction,
            exit_criteria: Vec::new(),
        };
        let policy = RetryPolicy {
            attempts_per_round: left,
            max_rounds: 1,
            auto_mode: true,
        };
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
        (outcome, state)
    }

    /// The agent request of the fix: the finding and its context, the
    /// worktree's environment, and the test command as the one command the
    /// agent may run.
    fn request(
        &self,
        histories: &BTreeMap<String, Option<EditHistory>>,
        pattern: Option<&str>,
    ) -> AgentRequest {
        let (shared, tree, group) = (self.shared, self.tree, self.group);
        let mut request = AgentRequest::new(self.id.clone(), Role::Fix, "", tree.env.root.clone())
            .with_artifacts_dir(shared.paths.dir.clone())
            .with_context(serde_json::json!({
                "finding": self.finding,
                "edit_history": histories,
                "group_id": group.group_id,
                "fix_strategy": group.fix_strategy,
                "test_pattern": pattern,
            }));
        if let Some(limit) = shared.config.fix_time_limit {
            request = request.with_time_limit(limit);
        }
        // The agent's own commands (its test runs) get the worktree's
        // environment and build folder, as the engine's test runs do.
        let mut env = tree.env.env.clone();
        if let Some(dir) = &tree.env.cargo_target_dir {
            env.insert("CARGO_TARGET_DIR".to_owned(), dir.display().to_string());
        }
        request = request.with_env(env);
        // The agent may run the tests that will judge its fix, and nothing else
        // by default (see `AgentRequest::allowed_commands`).
        if let Some(argv) = &shared.config.test_command {
            request = request.allow_command(argv.iter().cloned());
        }
        request
    }

    /// What the attempts came to: the fix committed, left pending for
    /// `--resume`, already made by an earlier fix, or failed with its
    /// reason.
    async fn settle(
        &self,
        outcome: MilestoneOutcome,
        state: StepState,
        checkpoint: &Checkpoint,
    ) -> Option<Committed> {
        let (shared, progress, id) = (self.shared, self.progress, &self.id);
        if state.halted {
            leave_pending(shared, progress, id);
            return None;
        }
        if state.already_applied {
            self.forget_in_flight();
            finish_already_applied(shared, progress, id);
            return None;
        }
        let result = match (outcome, &state.write_set) {
            (MilestoneOutcome::Passed { .. }, Some(write_set)) => commit_fix(
                shared,
                self.tree,
                progress,
                self.finding,
                write_set,
                checkpoint,
            )
            .await
            .map(|commit| Committed {
                commit,
                digest: state.digest.clone(),
                attempts: state.attempt,
            }),
            (MilestoneOutcome::Passed { .. }, None) => {
                Err("the retry executor passed without a verified fix".to_owned())
            }
            (_, _) => Err(state
                .last_error
                .clone()
                .unwrap_or_else(|| "the fix did not pass".to_owned())),
        };
        self.forget_in_flight();
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
            Err(_) if shared.halted().is_some() => {
                // The run stopped for the user (their work is in the way of the
                // landing, or a rollback failed): the finding waits for
                // --resume, which makes the fix again.
                leave_pending(shared, progress, id);
                None
            }
            Err(message) => {
                self.finish_unpassed(&state, message);
                None
            }
        }
    }

    /// Records a fix that did not pass: declined by the agent, deferred to
    /// a re-lint pass (it overlaps an earlier fix), or failed.
    fn finish_unpassed(&self, state: &StepState, message: String) {
        let (shared, progress, id) = (self.shared, self.progress, &self.id);
        if let Some(AgentError::Unsupported { reason }) = &state.stop {
            // Declined by the agent: not a failed fix, and not retried.
            finish_unfixed(shared, progress, id, reason.clone(), FixResult::NotFixable);
            return;
        }
        if let Some(AgentError::Conflict { reason }) = &state.stop {
            // Overlaps an earlier fix of this session: a re-lint pass
            // reports it at its new place and tries it there.
            finish_unfixed(shared, progress, id, reason.clone(), FixResult::Deferred);
            return;
        }
        let attempts = state.attempt.min(shared.config.max_iterations.max(1));
        let message = if attempts >= shared.config.max_iterations.max(1) {
            format!("max iterations reached ({attempts}): {message}")
        } else {
            message
        };
        finish_failed(shared, progress, id, message);
    }
}

/// A finding whose fix an earlier fix of the session already made (several
/// findings carrying the same edit): fixed, with no commit of its own, as
/// rustfix, ruff and ESLint count it.
fn finish_already_applied(shared: &Shared, progress: &Progress, id: &str) {
    progress.finding(id, |f| {
        f.status = ProgressStatus::Completed;
        f.result = Some(FixResult::Fixed);
        f.test_passed = None;
        f.commit_hash = None;
        f.completed_at = Some(now());
        f.error_message = None;
    });
    progress.update(|p| {
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: id.to_owned(),
        status: JobStatus::Completed,
        detail: Some("already fixed: an earlier fix made the same edit".to_owned()),
    });
}
