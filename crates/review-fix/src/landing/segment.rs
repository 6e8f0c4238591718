//! One segment of a stage's verification: a verifier over the queue, its
//! decided fixes landed in order, its flaky runs recorded, and its next trial
//! built and tested, until the queue changes (a drop, a fix removed) or every
//! fix is decided.

use std::ops::ControlFlow;

use orchestrator_core::verify::{Trial, VerifyReport};

use super::*;

/// How a segment ended.
pub(super) enum SegmentEnd {
    /// The queue changed (a drop, a fix removed): a new segment verifies
    /// the rest.
    Restart,
    /// Every fix is landed or failed, or the verification cannot go on:
    /// the stage closes.
    Done,
    /// The user's uncommitted work is in the way of landing: the decided
    /// fixes wait in the verification state for `--resume`.
    Halted,
}

/// A stage's verification in flight: its queue and record, the trial tree,
/// the engine's commits on the branch and what the stage did so far.
pub(super) struct StageRun<'a> {
    pub(super) shared: &'a Shared,
    pub(super) progress: &'a HashMap<String, Progress>,
    pub(super) state: VerifyState,
    pub(super) count: StageCount,
    /// The engine's commits on the branch, by message.
    pub(super) on_branch: HashMap<String, CommitId>,
    pub(super) trial: Option<TrialTree>,
    /// One-line descriptions of this process's failing runs, by run id.
    pub(super) short_failures: HashMap<u32, String>,
}

/// A segment's verifier and where it started, so the stage's figures count
/// only this process's runs.
pub(super) struct Segment {
    pub(super) verifier: Verifier<String>,
    /// The verifier's each-equivalent runs (in `each` mode: its runs) when
    /// this process took it over.
    pub(super) each_start: u32,
    /// Its re-runs when this process took it over.
    pub(super) reruns_start: u32,
    /// Flaky runs already recorded.
    flaky_seen: usize,
    /// Landed positions of this segment already on the branch.
    synced: usize,
}

impl Segment {
    /// Takes over a verifier (new or replayed from the record).
    fn start(shared: &Shared, verifier: Verifier<String>) -> Self {
        let start = verifier.report();
        // In `each` mode (a parallel stage's combination checked at landing)
        // one by one is what ran: count the landing's own runs.
        let each_start = if crate::effective_mode(&shared.config) == VerifyMode::Each {
            start.runs
        } else {
            start.each_runs
        };
        Segment {
            verifier,
            each_start,
            reruns_start: start.reruns,
            flaky_seen: start.flaky.len(),
            synced: 0,
        }
    }
}

impl StageRun<'_> {
    /// Runs one segment: lands what the verifier decided, records the flaky
    /// runs, sends a dropped fix back to the retry loop (a new segment), and
    /// otherwise tests the verifier's next trial.
    pub(super) async fn segment(&mut self) -> SegmentEnd {
        self.short_failures.clear();
        save_state(self.shared, &self.state);
        let Some(verifier) = self.open_verifier() else {
            return SegmentEnd::Done;
        };
        let mut seg = Segment::start(self.shared, verifier);
        loop {
            let report = seg.verifier.report();
            if let ControlFlow::Break(end) = self.land_decided(&mut seg, report.landed.len()).await
            {
                return end;
            }
            self.record_new_flaky(&mut seg, &report);
            if let Some(dropped) = report.dropped.first() {
                account(self.shared, &seg, &mut self.count);
                self.count.dropped += 1;
                let item = drop_fix(
                    self.shared,
                    &self.state,
                    dropped.position,
                    &dropped.log_ref,
                    self.progress,
                );
                close_trial(self.shared, &mut self.trial).await;
                restart(
                    self.shared,
                    &mut self.state,
                    dropped.position,
                    Some(item),
                    &mut self.trial,
                );
                return SegmentEnd::Restart;
            }
            let Step::Test(spec) = seg.verifier.next_step() else {
                account(self.shared, &seg, &mut self.count);
                return SegmentEnd::Done;
            };
            if let ControlFlow::Break(end) = self.test(&mut seg, spec).await {
                return end;
            }
        }
    }

    /// The segment's verifier: the recorded outcomes replayed, or a new one
    /// over the queue when they cannot be. `None` (the queue failed) when
    /// not even that is possible.
    fn open_verifier(&mut self) -> Option<Verifier<String>> {
        let ids: Vec<String> = self
            .state
            .queue
            .iter()
            .map(|q| q.finding_id.clone())
            .collect();
        let replayed = Verifier::resume(
            ids.clone(),
            self.state.config.clone(),
            self.state.outcomes.iter().cloned(),
        );
        match replayed {
            Ok(v) => return Some(v),
            Err(e) => self.shared.warn(format!(
                "the recorded verification cannot be replayed ({e}); it starts over"
            )),
        }
        self.state.outcomes.clear();
        self.state.config = segment_config(self.shared);
        match Verifier::new(ids, self.state.config.clone()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.shared
                    .warn(format!("cannot verify the stage's fixes: {e}"));
                fail_queue(self.shared, &mut self.state, self.progress, &e.to_string());
                None
            }
        }
    }

    /// Lands the first `decided` positions of the queue that are not on the
    /// branch yet, in order: with one fast-forward where the branch is still
    /// the trial's base, else one cherry-pick each.
    async fn land_decided(&mut self, seg: &mut Segment, decided: usize) -> ControlFlow<SegmentEnd> {
        if seg.synced < decided {
            let landed = land_fast_forward(
                self.shared,
                &mut self.trial,
                self.state.queue.get(seg.synced..).unwrap_or_default(),
                decided - seg.synced,
                self.progress,
                &mut self.on_branch,
            )
            .await;
            self.count.landed += landed as u32;
            seg.synced += landed;
        }
        while seg.synced < decided {
            self.land_next(seg, decided).await?;
        }
        ControlFlow::Continue(())
    }

    /// Lands the next decided position by cherry-pick from the trial tree
    /// (built first if it holds nothing), or only records it when the
    /// interrupted run landed it already.
    async fn land_next(&mut self, seg: &mut Segment, decided: usize) -> ControlFlow<SegmentEnd> {
        let Some(fid) = self
            .state
            .queue
            .get(seg.synced)
            .map(|q| q.finding_id.clone())
        else {
            return ControlFlow::Break(SegmentEnd::Done);
        };
        let landed_before = self
            .shared
            .findings
            .get(&fid)
            .is_some_and(|f| self.on_branch.contains_key(&commit_message(f)));
        if landed_before {
            // Landed by the interrupted run: the tip already holds it.
            if let Some(t) = self.trial.as_mut()
                && !t.built.is_empty()
            {
                t.built.remove(0);
                t.base = None;
            }
            let none = CommitId(String::new());
            land(self.shared, &fid, &none, self.progress, &mut self.on_branch).await;
        } else {
            if self.trial.as_ref().is_none_or(|t| t.built.is_empty()) {
                self.build_trial(seg, decided).await?;
            }
            let Some(t) = self.trial.as_mut() else {
                return ControlFlow::Break(SegmentEnd::Done);
            };
            let (fid, commit) = t.built.remove(0);
            t.base = None;
            if !land(
                self.shared,
                &fid,
                &commit,
                self.progress,
                &mut self.on_branch,
            )
            .await
            {
                return ControlFlow::Break(SegmentEnd::Halted);
            }
        }
        self.count.landed += 1;
        seg.synced += 1;
        ControlFlow::Continue(())
    }

    /// Records the flaky runs the verifier confirmed since the last look.
    fn record_new_flaky(&self, seg: &mut Segment, report: &VerifyReport<String>) {
        for flaky in report.flaky.iter().skip(seg.flaky_seen) {
            let Some(p) = group_progress(self.shared, &self.state, &flaky.fix, self.progress)
            else {
                continue;
            };
            let failure = self
                .short_failures
                .get(&flaky.failed_run.0)
                .cloned()
                .unwrap_or_else(|| first_line(&flaky.log_ref));
            record_flaky(
                self.shared,
                p,
                &flaky.fix,
                &FlakyFailure {
                    failure,
                    failed_runs: 1,
                },
            );
        }
        seg.flaky_seen = report.flaky.len();
    }

    /// Makes the trial tree hold the undecided positions up to `to`. A fix
    /// that could not be made again starts a new segment; no trial tree at
    /// all fails the queue.
    async fn build_trial(&mut self, seg: &Segment, to: usize) -> ControlFlow<SegmentEnd> {
        let built = ensure_built(
            self.shared,
            &mut self.trial,
            &mut self.state,
            seg.synced,
            to,
            self.progress,
        )
        .await;
        match built {
            Ok(()) => ControlFlow::Continue(()),
            Err(BuildError::Removed) => {
                account(self.shared, seg, &mut self.count);
                restart(
                    self.shared,
                    &mut self.state,
                    seg.synced,
                    None,
                    &mut self.trial,
                );
                ControlFlow::Break(SegmentEnd::Restart)
            }
            Err(BuildError::NoTree(e)) => {
                fail_queue(self.shared, &mut self.state, self.progress, &e);
                ControlFlow::Break(SegmentEnd::Done)
            }
        }
    }

    /// Runs the tests on the trial the verifier asked for and records the
    /// outcome (in the verifier and, first, in the verification state).
    async fn test(&mut self, seg: &mut Segment, spec: Trial) -> ControlFlow<SegmentEnd> {
        let end = spec.candidates.end.min(self.state.queue.len());
        self.build_trial(seg, end).await?;
        let Some(t) = self.trial.as_ref() else {
            return ControlFlow::Break(SegmentEnd::Done);
        };
        let label = self
            .state
            .queue
            .get(seg.synced.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(|q| q.finding_id.as_str())
            .collect::<Vec<_>>()
            .join("+");
        let result = run_tests(self.shared, &t.env, Some(label), None).await;
        if result.is_err() && self.shared.halted().is_some() {
            // The run was halted (the base, tested only now, cannot be
            // judged against): no fix is blamed, the queue waits in the
            // verification state for `--resume`.
            return ControlFlow::Break(SegmentEnd::Halted);
        }
        let outcome = match result {
            Ok(r) if r.is_pass() => RunOutcome::Pass,
            Ok(r) => {
                self.short_failures.insert(spec.run.0, short_failure(&r));
                RunOutcome::fail(describe_failure_as(
                    &r,
                    "the tests failed with the fix on top of the fixes landed before it",
                    "the fix was dropped at landing",
                ))
            }
            Err(message) => RunOutcome::fail(message),
        };
        if let Err(e) = seg.verifier.record(spec.run, outcome.clone()) {
            self.shared
                .warn(format!("the verifier refused a test result: {e}"));
            return ControlFlow::Break(SegmentEnd::Done);
        }
        self.state.outcomes.push(outcome);
        save_state(self.shared, &self.state);
        ControlFlow::Continue(())
    }
}
