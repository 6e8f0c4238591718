//! Closing a run: the summary, the history entry, the report.

use crate::*;

/// A report for a run that stopped before execution (the session stays).
pub(crate) fn stopped_report(
    paths: &session::SessionPaths,
    outcome: Outcome,
    plan: Option<FixPlan>,
    notes: Vec<String>,
) -> RunReport {
    RunReport {
        fix_session_id: paths.id(),
        session_dir: paths.dir.clone(),
        outcome,
        plan,
        findings: Vec::new(),
        commits: Vec::new(),
        test_runs: 0,
        verification: VerificationStats::default(),
        notes,
    }
}

/// The picture of this run's schedule, under `fix-summary.md`.
const TIMELINE_FILE: &str = "timeline.svg";

/// What `fix-summary.md` says about the picture.
const TIMELINE_SECTION: &str = "\n## Timeline\n\nThis run's schedule, one row per worker slot and a bar per finding (hover for its times and cost): [timeline.svg](timeline.svg)\n\n![Timeline of this run](timeline.svg)\n";

/// Writes `timeline.svg` of the findings this run started, with what the
/// agent spent on each; `false` when none started (nothing to picture).
fn write_timeline(
    paths: &session::SessionPaths,
    progress: &[FixProgress],
    spans: Vec<orchestrator_core::timeline::Span>,
) -> Result<bool, ReviewFixError> {
    let findings: HashMap<&str, Option<f64>> = progress
        .iter()
        .flat_map(|p| p.findings.iter())
        .map(|f| (f.finding_id.as_str(), f.spend.map(|s| s.cost_usd)))
        .collect();
    let spans: Vec<_> = spans
        .into_iter()
        .filter_map(|mut s| {
            let cost = *findings.get(s.id.as_str())?;
            s.cost_usd = cost;
            Some(s)
        })
        .collect();
    if spans.is_empty() {
        return Ok(false);
    }
    let svg = orchestrator_core::timeline::render_svg(
        &format!("review-fix {}: findings over time", paths.id()),
        &spans,
    );
    write_atomic(paths.dir.join(TIMELINE_FILE), svg.as_bytes())?;
    Ok(true)
}

/// How a run ended, for [`complete`].
pub(crate) struct Completion {
    /// The run's agent (its findings ledger entries name it).
    pub(crate) agent: String,
    /// Where to write the run's SARIF log, if anywhere.
    pub(crate) sarif_out: Option<PathBuf>,
    /// How the run ended.
    pub(crate) outcome: Outcome,
    /// When the run started.
    pub(crate) run_started: String,
    /// Notes for the report.
    pub(crate) notes: Vec<String>,
    /// The run's jobs as timed by its event stream (findings and groups).
    pub(crate) spans: Vec<orchestrator_core::timeline::Span>,
    /// What the run's worktrees cost, when it made any.
    pub(crate) worktrees: Option<orchestrator_core::worktree::PoolStats>,
}

/// Writes `fix-summary.md`, with the section of the timeline picture when
/// one was drawn (`timeline.svg`).
fn write_summary(
    paths: &session::SessionPaths,
    input: &summary::SummaryInput<'_>,
    spans: Vec<orchestrator_core::timeline::Span>,
    trash: &str,
) -> Result<(), ReviewFixError> {
    let mut summary = summary::render_summary(input);
    if write_timeline(paths, input.progress, spans)? {
        summary.push_str(TIMELINE_SECTION);
    }
    summary.push_str(trash);
    write_atomic(paths.summary(), summary.as_bytes())?;
    Ok(())
}

/// Writes the summary and the history entry, removes the active marker.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn complete(
    paths: &session::SessionPaths,
    active: &ActiveSession,
    plan: &FixPlan,
    findings_file: &FindingsFile,
    completion: Completion,
    verification: VerificationStats,
    vcs: &Arc<dyn Vcs>,
    sink: &dyn EventSink,
) -> Result<RunReport, ReviewFixError> {
    let Completion {
        agent,
        sarif_out,
        outcome,
        run_started,
        notes,
        spans,
        worktrees,
    } = completion;
    let run_started = run_started.as_str();
    emit_phase(sink, "completion", true);
    let progress: Vec<FixProgress> = (1..=plan.groups.len())
        .filter_map(|n| read_json_if_exists(paths.progress(n)).ok().flatten())
        .collect();
    let commits = vcs
        .log_since(&CommitId(active.base_head.clone()))
        .await
        .map_err(|e| ReviewFixError::vcs("reading the branch log", e))?;
    let finished = now();
    let base = exec::kept_baseline(&paths.dir);
    let input = summary::SummaryInput {
        fix_session_id: &active.fix_session_id,
        run: active.run,
        started_at: &active.started_at,
        finished_at: &finished,
        plan: Some(plan),
        progress: &progress,
        rejected: &findings_file.rejected,
        skipped: &findings_file.skipped,
        verification,
        outcome: outcome.as_str(),
        worktrees: worktrees.as_ref(),
        base: base.as_ref(),
    };
    write_summary(paths, &input, spans, &crate::trash::summary_section(vcs))?;
    findings_ledger::run::record(&findings_ledger::run::RunRecord {
        repo: vcs.root(),
        findings_file,
        progress: &progress,
        agent: &agent,
    })?;
    if let Some(path) = &sarif_out {
        let input = findings_ledger::sarif::SarifInput {
            repo: vcs.root(),
            findings_file,
            progress: &progress,
            commits: &commits,
            base: &active.base_head,
        };
        findings_ledger::sarif::write(path, &input, vcs.as_ref()).await?;
    }
    let findings = finding_reports(&progress, findings_file);
    let counts = |result: &str| findings.iter().filter(|f| f.result == result).count();
    append_history(
        paths,
        HistoryEntry {
            fix_session_id: active.fix_session_id.clone(),
            run: active.run,
            resumed: active.run > 1,
            started_at: run_started.to_owned(),
            finished_at: finished,
            outcome: outcome.as_str().to_owned(),
            total_findings: findings.len(),
            fixed: counts("fixed"),
            failed: counts("failed"),
            not_fixable: counts("not_fixable"),
            deferred: counts("deferred"),
            rejected: findings_file.rejected.len(),
            commits: commits.iter().map(|c| c.id.to_string()).collect(),
            test_runs: verification.test_runs,
            verification: Some(verification),
        },
    )?;
    close_session(paths, &outcome)?;
    emit_phase(sink, "completion", false);
    Ok(RunReport {
        fix_session_id: active.fix_session_id.clone(),
        session_dir: paths.dir.clone(),
        outcome,
        plan: Some(plan.clone()),
        findings,
        commits,
        test_runs: verification.test_runs,
        verification,
        notes,
    })
}

/// Every finding of the run as the report gives it: the planned ones with
/// their result, then the rejected ones.
fn finding_reports(progress: &[FixProgress], findings_file: &FindingsFile) -> Vec<FindingReport> {
    let mut findings: Vec<FindingReport> = progress
        .iter()
        .flat_map(|p| p.findings.iter())
        .map(|f| FindingReport {
            id: f.finding_id.clone(),
            title: f.finding_title.clone(),
            result: match f.result {
                Some(FixResult::Fixed) => "fixed",
                Some(FixResult::Failed) => "failed",
                Some(FixResult::NotFixable) => "not_fixable",
                Some(FixResult::Deferred) => "deferred",
                None => "pending",
            }
            .to_owned(),
            attempts: f.attempts,
            commit: f.commit_hash.clone(),
            error: f.error_message.clone(),
            spend: f.spend,
        })
        .collect();
    let left_out = |result: &str, r: &RejectedFinding| FindingReport {
        id: r.finding_id.clone(),
        title: String::new(),
        result: result.to_owned(),
        attempts: 0,
        commit: None,
        error: Some(r.reason.clone()),
        spend: None,
    };
    findings.extend(
        findings_file
            .rejected
            .iter()
            .map(|r| left_out("rejected", r)),
    );
    findings.extend(findings_file.skipped.iter().map(|r| left_out("skipped", r)));
    findings
}

/// Appends the run's entry to `fix-history.json` (atomically; a history of
/// another version is refused).
fn append_history(
    paths: &session::SessionPaths,
    entry: HistoryEntry,
) -> Result<(), ReviewFixError> {
    let mut history: FixHistory = read_json_if_exists(paths.history())?.unwrap_or_default();
    if history.version != HISTORY_VERSION {
        return Err(ReviewFixError::Version {
            path: paths.history(),
            found: history.version,
            expected: HISTORY_VERSION,
        });
    }
    history.entries.push(entry);
    write_json_atomic(paths.history(), &history)?;
    Ok(())
}

/// Ends the session: its marker goes unless the run stays resumable, and
/// its empty worktree folders go.
fn close_session(paths: &session::SessionPaths, outcome: &Outcome) -> Result<(), ReviewFixError> {
    // A run stopped at its limit, or for the user (their work in the way
    // of a landing, a failed rollback), stays resumable: its marker stays.
    let resumable = matches!(
        outcome,
        Outcome::LimitReached { .. } | Outcome::NeedsHuman { .. }
    );
    if !resumable {
        match std::fs::remove_file(paths.active()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ReviewFixError::io("remove", paths.active(), e)),
        }
    }
    // The session's worktree folder outside the repository, and the
    // repository's, once empty (`remove_dir` leaves a folder with anything
    // in it alone).
    let worktrees = paths.worktrees();
    let _ = std::fs::remove_dir(&worktrees);
    if let Some(repo_folder) = worktrees.parent() {
        let _ = std::fs::remove_dir(repo_folder);
    }
    Ok(())
}
