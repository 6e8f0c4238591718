//! One iteration of the fix loop, as its steps: read the failures (the
//! logs that can be fixed, the PR diff, a re-run before the first fix),
//! decide by the cadence matrix, then re-run, escalate, or make, confirm
//! and land a patch.

use std::ops::ControlFlow;

use orchestrator_core::cadence::Decision;

use crate::fix_tree::StagedPatch;
use crate::state::RerunRecord;

use super::land::*;
use super::*;

/// What stays the same across the iterations of a run.
pub(super) struct Run<'a> {
    /// The user's context: its gate, sink, agent, provider and config.
    pub(super) ctx: &'a AutofixContext,
    /// Where the patches land and are recorded.
    pub(super) place: Place<'a>,
    pub(super) cadence: Cadence,
}

/// What the iterations of a run carry forward.
#[derive(Default)]
struct Progress {
    /// The fix commits landed so far.
    commits: Vec<String>,
    /// Every instruction carries the earlier iterations' patches and the
    /// checks after them, so the agent does not try the same fix again.
    earlier: Vec<Earlier>,
    /// The last warning about the PR diff (said once per run on the
    /// terminal).
    last_diff_warning: Option<String>,
    /// Whether the failures were re-run before the first fix.
    reran_first: bool,
}

/// What an iteration knows about the failures when it decides.
struct Seen {
    iteration: u32,
    failures: Vec<FailedCheck>,
    /// Their logs that can be fixed.
    logs: Vec<CheckLog>,
    /// The PR diff (empty when it could not be fetched).
    pr_diff: String,
    report: ClassificationReport,
    /// Each check with its own classification.
    per_check: Vec<(String, String)>,
    /// For the iteration's audit entry.
    warnings: Vec<String>,
    /// The re-run before the first fix, when there was one.
    rerun: Option<RerunRecord>,
    /// The agent's count when the iteration started: what the agent spent
    /// in the iteration is the difference (agents that keep no count
    /// report nothing).
    spent_before: Option<AgentSpent>,
}

impl Run<'_> {
    /// Iterates from `failures` (or from the gate the state recorded)
    /// until the run ends.
    pub(super) async fn fix_loop(
        &self,
        mut state: AutofixState,
        mut failures: Vec<FailedCheck>,
    ) -> Result<AutofixOutcome, AutofixError> {
        let mut progress = Progress::default();
        loop {
            let next = match state.gate.clone() {
                Some(gate) => {
                    resume_gate(
                        self.ctx,
                        self.place,
                        &mut state,
                        gate,
                        &mut progress.commits,
                    )
                    .await?
                }
                None => self.iteration(&mut state, &mut progress, failures).await?,
            };
            failures = match next {
                Next::Stop(outcome) => return Ok(outcome),
                Next::Again { failures, earlier } => {
                    progress.earlier.push(earlier);
                    failures
                }
                Next::Reran { failures } => failures,
            };
        }
    }

    /// One iteration on `failures`: read them, decide, and act on the
    /// decision.
    async fn iteration(
        &self,
        state: &mut AutofixState,
        progress: &mut Progress,
        failures: Vec<FailedCheck>,
    ) -> Result<Next, AutofixError> {
        let seen = match self.read_failures(state, progress, failures).await? {
            ControlFlow::Continue(seen) => seen,
            ControlFlow::Break(outcome) => return Ok(Next::Stop(outcome)),
        };
        let (decision, entry) = self.decide(state, &seen)?;
        if decision.action == Action::RerunOnce {
            return self.rerun_infrastructure(state, entry, &seen).await;
        }
        if !decision.action.applies_patch() {
            let outcome = self
                .escalate_unpatched(state, entry, &seen, &decision, &progress.earlier)
                .await?;
            return Ok(Next::Stop(outcome));
        }
        self.patch(state, progress, &seen, &decision, entry).await
    }

    /// Reads the failures: the logs that can be fixed (none: the run ends),
    /// the PR diff, their classification, and — before the first fix of a
    /// test failure — a re-run at the same commit.
    async fn read_failures(
        &self,
        state: &mut AutofixState,
        progress: &mut Progress,
        mut failures: Vec<FailedCheck>,
    ) -> Result<ControlFlow<AutofixOutcome, Seen>, AutofixError> {
        let ctx = self.ctx;
        let iteration = state.iteration;
        let spent_before = ctx.agent.spent();
        let mut warnings = Vec::new();
        let (logs, foreign) = fixable_logs(ctx, &failures, &mut warnings).await?;
        if logs.is_empty() {
            return Ok(ControlFlow::Break(AutofixOutcome::StillFailing {
                reason: foreign.join("; "),
            }));
        }
        failures.retain(|f| logs.iter().any(|l| l.name == f.name));
        let pr_diff = self
            .pr_diff(&mut progress.last_diff_warning, &mut warnings)
            .await;
        let report = classify_many(logs.iter().map(|l| l.log.as_str()));
        let mut seen = Seen {
            iteration,
            failures,
            logs,
            pr_diff,
            report,
            per_check: Vec::new(),
            warnings,
            rerun: None,
            spent_before,
        };
        let class = seen.report.classification;
        if rerun_first(&ctx.config, iteration, class, progress.reran_first) {
            progress.reran_first = true;
            if let ControlFlow::Break(outcome) = self.rerun_before_fix(state, &mut seen).await? {
                return Ok(ControlFlow::Break(outcome));
            }
        }
        seen.per_check = seen
            .logs
            .iter()
            .map(|l| (l.name.clone(), classify(&l.log).classification.to_string()))
            .collect();
        Ok(ControlFlow::Continue(seen))
    }

    /// The PR diff (in local mode the working change) for the instruction.
    /// A failure is only a warning — said once per run on the terminal,
    /// kept in every iteration's audit entry — and the diff is empty.
    async fn pr_diff(
        &self,
        last_warning: &mut Option<String>,
        warnings: &mut Vec<String>,
    ) -> String {
        let ctx = self.ctx;
        match ctx.provider.diff().await {
            Ok(d) => d,
            Err(e) => {
                let what = match ctx.config.target {
                    Target::Local { .. } => "the working change",
                    _ => "the PR diff",
                };
                let message = format!("could not fetch {what} (going on without it): {e}");
                if last_warning.as_ref() != Some(&message) {
                    ctx.sink.emit(&Event::Warning {
                        message: message.clone(),
                    });
                    *last_warning = Some(message.clone());
                }
                warnings.push(message);
                String::new()
            }
        }
    }

    /// Before the first fix of a test failure: the failed checks again at
    /// the same commit. All passed: the run ends (flaky). Failed again: the
    /// fix goes on, with the re-run's logs too.
    async fn rerun_before_fix(
        &self,
        state: &mut AutofixState,
        seen: &mut Seen,
    ) -> Result<ControlFlow<AutofixOutcome>, AutofixError> {
        let ctx = self.ctx;
        let reran = rerun_failed(ctx, &seen.failures).await?;
        let record = reran.record("flaky?", &seen.logs);
        if reran.all_passed() {
            let entry = history_entry(seen.iteration, &seen.failures, seen.warnings.clone());
            let outcome = passed_on_rerun(
                self.place.file,
                state,
                entry,
                Classification::Flaky,
                record,
                &seen.report,
                self.audit_now(),
            )?;
            return Ok(ControlFlow::Break(outcome));
        }
        let again = ctx.provider.failed_logs(&reran.failed).await?;
        seen.logs.extend(
            again
                .into_iter()
                .filter(|l| l.not_fixable.is_none())
                .map(|l| CheckLog {
                    name: format!("{} (re-run at the same commit)", l.name),
                    ..l
                }),
        );
        seen.failures = reran.failed;
        seen.report = classify_many(seen.logs.iter().map(|l| l.log.as_str()));
        seen.rerun = Some(record);
        Ok(ControlFlow::Continue(()))
    }

    /// The cadence matrix's decision on the classified failures, recorded
    /// in the state (the next iteration's previous class), and the
    /// iteration's history entry.
    fn decide(
        &self,
        state: &mut AutofixState,
        seen: &Seen,
    ) -> Result<(Decision, HistoryEntry), AutofixError> {
        let class = seen.report.classification;
        let previous = Classification::parse(&state.last_classification, &state.last_subclass).ok();
        let decision = self.cadence.decide(seen.iteration, class, previous);
        state.last_classification = class.as_str().into();
        state.last_subclass = class.sub_class_str().into();
        state.last_action = decision.action.as_str().into();
        self.place.file.save(state)?;
        let mut entry = history_entry(seen.iteration, &seen.failures, seen.warnings.clone());
        entry.classification = class.as_str().into();
        entry.sub_class = class.sub_class_str().into();
        entry.rerun = seen.rerun.clone();
        Ok((decision, entry))
    }

    /// Not the code's fault (`rerun-once`): never patched; the same commit
    /// again. Passed: the run ends. Failed again: recorded, and the next
    /// iteration sees `infrastructure` as the previous class — escalated
    /// with the evidence if it is infrastructure again.
    async fn rerun_infrastructure(
        &self,
        state: &mut AutofixState,
        mut entry: HistoryEntry,
        seen: &Seen,
    ) -> Result<Next, AutofixError> {
        let reran = rerun_failed(self.ctx, &seen.failures).await?;
        let record = reran.record("infrastructure", &seen.logs);
        let file = self.place.file;
        if reran.all_passed() {
            let class = seen.report.classification;
            let outcome = passed_on_rerun(
                file,
                state,
                entry,
                class,
                record,
                &seen.report,
                self.audit_now(),
            )?;
            return Ok(Next::Stop(outcome));
        }
        entry.action = "re-ran (infrastructure); failed again".into();
        entry.rerun = Some(record);
        let now = now_of(&self.ctx.config);
        finish(
            file,
            state,
            entry,
            Some(&seen.report),
            self.place.audit,
            now,
            None,
        )?;
        Ok(Next::Reran {
            failures: reran.failed,
        })
    }

    /// A decision that applies no patch: the run escalates — for
    /// `escalate-no-patch` with the agent's diagnosis.
    async fn escalate_unpatched(
        &self,
        state: &mut AutofixState,
        entry: HistoryEntry,
        seen: &Seen,
        decision: &Decision,
        earlier: &[Earlier],
    ) -> Result<AutofixOutcome, AutofixError> {
        let diagnosis = if decision.action == Action::EscalateNoPatch {
            self.diagnose(seen, earlier).await
        } else {
            None
        };
        let args = EscalateArgs {
            action: decision.action,
            reason: decision.reason.clone(),
            report: &seen.report,
            per_check: &seen.per_check,
            diagnosis: diagnosis.as_deref(),
            blocking: decision.blocking,
            audit: self.place.audit,
            now: now_of(&self.ctx.config),
            spent_before: seen.spent_before,
        };
        escalate(self.ctx, self.place.file, state, entry, args).await
    }

    /// The agent's diagnosis of failures no patch is made for; a failed
    /// diagnosis is only a warning.
    async fn diagnose(&self, seen: &Seen, earlier: &[Earlier]) -> Option<String> {
        let ctx = self.ctx;
        let req = AgentRequest::new(
            format!("ci-autofix.diagnose.iter-{}", seen.iteration),
            Role::Diagnose,
            instruction(
                &ctx.config.target,
                &seen.report,
                &seen.logs,
                &seen.pr_diff,
                earlier,
                false,
            ),
            self.place.tree.vcs.root().to_path_buf(),
        );
        match ctx.agent.run(self.with_artifacts(req)).await {
            Ok(r) => Some(r.text),
            Err(e) => {
                ctx.sink.emit(&Event::Warning {
                    message: format!("diagnosis failed: {e}"),
                });
                None
            }
        }
    }

    /// A decision that applies a patch: the agent makes it (see
    /// `fix_tree`), a person confirms it when the cadence asks, and it
    /// lands and is pushed.
    async fn patch(
        &self,
        state: &mut AutofixState,
        progress: &mut Progress,
        seen: &Seen,
        decision: &Decision,
        mut entry: HistoryEntry,
    ) -> Result<Next, AutofixError> {
        let (ctx, file, tree) = (self.ctx, self.place.file, self.place.tree);
        let now = || now_of(&ctx.config);
        let class = seen.report.classification;
        let it = Iter {
            tree,
            push_to: self.place.push_to,
            file,
            audit: self.place.audit,
            report: &seen.report,
            per_check: &seen.per_check,
            action: decision.action,
            class,
            spent_before: seen.spent_before,
            kept_spend: None,
        };
        let message = commit_message(class, seen.iteration);
        let req = self.fix_request(seen, &progress.earlier);
        let made = fix_tree::make_patch(tree, req, seen.iteration, &message, &mut entry.warnings);
        let staged = match made.await? {
            Made::Patch(staged) => staged,
            Made::Problem(reason) => {
                let args = it.no_patch(reason, now());
                return Ok(Next::Stop(escalate(ctx, file, state, entry, args).await?));
            }
            Made::Limit(reason) => {
                return Ok(Next::Stop(self.stop_at_limit(state, entry, seen, reason)?));
            }
        };
        if decision.action == Action::ConfirmAndApply {
            let asked = (&staged, decision.reason.as_str(), message.as_str());
            entry = match self.confirm(&it, state, entry, asked).await? {
                ControlFlow::Continue(entry) => entry,
                ControlFlow::Break(outcome) => return Ok(Next::Stop(outcome)),
            };
        }
        let parent = tree.vcs.head().await?;
        let commit = match staged.land(tree).await? {
            Ok(commit) => commit,
            Err(reason) => {
                let args = it.no_patch(reason, now());
                return Ok(Next::Stop(escalate(ctx, file, state, entry, args).await?));
            }
        };
        let landed = Landed {
            parent,
            commit,
            message: &message,
        };
        after_landing(ctx, &it, state, entry, landed, &mut progress.commits).await
    }

    /// The agent's request for a patch: the instruction (with the earlier
    /// iterations), the failures' context, the iteration's spend limits,
    /// and the check commands that will judge its patch — which it may
    /// run, and nothing else by default (see
    /// `AgentRequest::allowed_commands`).
    fn fix_request(&self, seen: &Seen, earlier: &[Earlier]) -> AgentRequest {
        let cfg = &self.ctx.config;
        let req = AgentRequest::new(
            format!("ci-autofix.fix.iter-{}", seen.iteration),
            Role::Fix,
            instruction(
                &cfg.target,
                &seen.report,
                &seen.logs,
                &seen.pr_diff,
                earlier,
                true,
            ),
            self.place.tree.vcs.root().to_path_buf(),
        )
        .with_context(fix_context(&seen.report, &seen.logs))
        .with_spend_limits(cfg.iteration_limits);
        self.ctx
            .provider
            .check_commands()
            .iter()
            .fold(self.with_artifacts(req), |req, line| {
                req.allow_command_line(line)
            })
    }

    /// The agent's call was refused at the run's limit: nothing to decide,
    /// the iteration did not happen. It is recorded, and the state keeps
    /// its number for the next run.
    fn stop_at_limit(
        &self,
        state: &mut AutofixState,
        mut entry: HistoryEntry,
        seen: &Seen,
        reason: String,
    ) -> Result<AutofixOutcome, AutofixError> {
        let ctx = self.ctx;
        ctx.sink.emit(&Event::Warning {
            message: format!(
                "the run's limit is reached ({reason}): no patch was made; \
                         run ci-autofix again (with a higher limit) to go on"
            ),
        });
        entry.action = "stopped at the run's limit".into();
        entry.escalation_reason = Some(format!("the run's limit is reached ({reason})"));
        finish(
            self.place.file,
            state,
            entry,
            Some(&seen.report),
            self.place.audit,
            now_of(&ctx.config),
            spend_since(ctx.agent.as_ref(), seen.spent_before),
        )?;
        Ok(AutofixOutcome::LimitReached { reason })
    }

    /// The confirmation the cadence asks for (`asked`: the patch, why, and
    /// its commit's subject). Approved: the patch goes on to land, with
    /// `entry` given back. Rejected: the run escalates (the patch was never
    /// written into the user's tree: nothing to undo). Nobody can answer
    /// now: the patch waits at the gate.
    async fn confirm(
        &self,
        it: &Iter<'_>,
        state: &mut AutofixState,
        entry: HistoryEntry,
        asked: (&StagedPatch, &str, &str),
    ) -> Result<ControlFlow<AutofixOutcome, HistoryEntry>, AutofixError> {
        let (staged, reason, message) = asked;
        let cfg = &self.ctx.config;
        let q = confirm_question(
            entry.iteration,
            it.class,
            &staged.write_set,
            &cfg.target,
            reason,
        );
        Ok(match ask(self.ctx, &q).await?.index() {
            None => {
                let asked = Asked {
                    staged,
                    question: &q,
                    reason,
                    message,
                };
                ControlFlow::Break(stop_at_gate(self.ctx, it, state, entry, asked).await?)
            }
            Some(0) => ControlFlow::Continue(entry),
            Some(_) => {
                let args = it.no_patch("the user rejected the patch".into(), now_of(cfg));
                let outcome = escalate(self.ctx, self.place.file, state, entry, args).await?;
                ControlFlow::Break(outcome)
            }
        })
    }

    /// `req` with the audit log's folder for the agent's records
    /// (transcripts), beside the audit log that names them.
    fn with_artifacts(&self, req: AgentRequest) -> AgentRequest {
        match self.place.audit.0.parent() {
            Some(dir) => req.with_artifacts_dir(dir),
            None => req,
        }
    }

    /// The audit log and the time, as a finished re-run records them.
    fn audit_now(&self) -> (&std::path::Path, &str, Timestamp) {
        let (path, header) = self.place.audit;
        (path, header, now_of(&self.ctx.config))
    }
}
