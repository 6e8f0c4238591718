//! Opening a session: a new one from the inputs, or the unfinished one to
//! resume.

use crate::*;

/// `config` with the isolation and group parallelism the session was
/// planned with (the plan's stages depend on both), and a note when the
/// flags asked for something else.
pub(crate) fn keep_session_layout(
    mut config: ReviewFixConfig,
    options: &SessionOptions,
    notes: &mut Vec<String>,
) -> ReviewFixConfig {
    let isolation = match options.isolation.as_str() {
        "serial" => Isolation::Serial,
        "worktree" => Isolation::Worktree,
        _ => config.isolation,
    };
    if isolation != config.isolation || options.max_parallel_groups != config.max_parallel_groups {
        notes.push(format!(
            "resumed with the session's isolation {} and {} parallel groups (asked: {} and {})",
            isolation.as_str(),
            options.max_parallel_groups,
            config.isolation.as_str(),
            config.max_parallel_groups
        ));
    }
    config.isolation = isolation;
    config.max_parallel_groups = options.max_parallel_groups.max(1);
    config
}

/// Resets what a resumed run must redo: in-flight findings and findings
/// fixed in a worktree whose commit never landed go back to pending; a
/// finding whose commit is on the branch is fixed.
pub(crate) fn prepare_for_run(
    p: &mut FixProgress,
    findings: &HashMap<String, Finding>,
    landed: &HashMap<String, CommitId>,
) {
    for f in &mut p.findings {
        let landed_commit = findings
            .get(&f.finding_id)
            .and_then(|x| landed.get(&commit_message(x)));
        match (f.result, landed_commit) {
            (_, Some(c)) => {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(c.to_string());
                f.test_passed = Some(true);
            }
            (Some(FixResult::Failed | FixResult::NotFixable | FixResult::Deferred), None) => {}
            (_, None) => {
                f.status = ProgressStatus::Pending;
                f.result = None;
                f.commit_hash = None;
                f.test_passed = None;
                f.completed_at = None;
            }
        }
    }
    if p.findings
        .iter()
        .any(|f| f.status != ProgressStatus::Completed)
    {
        p.status = ProgressStatus::Pending;
    }
    p.current_finding = None;
    p.flow_control = FlowControl::default();
    p.recount();
}

pub(crate) fn absolute(repo: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

pub(crate) struct Opened {
    /// The session's paths.
    pub(crate) paths: session::SessionPaths,
    /// The session lock, held for the run.
    pub(crate) lock: orchestrator_core::state::SessionLock,
    /// `active-fix-session.json`.
    pub(crate) active: ActiveSession,
    /// `findings.json`.
    pub(crate) findings_file: FindingsFile,
    /// Notes for the report.
    pub(crate) notes: Vec<String>,
}

pub(crate) fn options_of(config: &ReviewFixConfig) -> SessionOptions {
    SessionOptions {
        max_iterations: config.max_iterations,
        batch_size: config.batch_size,
        max_parallel: config.max_parallel,
        max_parallel_groups: config.max_parallel_groups,
        isolation: config.isolation.as_str().to_owned(),
        allow_dirty: config.allow_dirty,
        test_command: config.test_command.clone(),
    }
}

/// Opens a new session under `root`: refuses a dirty tree unless allowed,
/// loads and sorts the findings, writes `findings.json`, starts the edit
/// ledger and writes the session record.
pub(crate) async fn open_new(
    config: &ReviewFixConfig,
    services: &Services,
    root: &Path,
) -> Result<Opened, ReviewFixError> {
    let vcs = &services.vcs;
    let repo = vcs.root().to_path_buf();
    let status = vcs
        .status()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the working tree status", e))?;
    let dirty = status.dirty_paths();
    if !dirty.is_empty() && !config.allow_dirty {
        return Err(ReviewFixError::DirtyTree { paths: dirty });
    }
    let inputs: Vec<PathBuf> = config.inputs.iter().map(|p| absolute(&repo, p)).collect();
    let loaded = input::load_inputs(&repo, &inputs)?;
    warn_of_unfinished(root, services.sink.as_ref());
    let abandoned = session::remove_abandoned_sessions(root, session::ABANDONED_AFTER);
    let dir = session::new_session_dir(root);
    let lock = session::lock_session(&dir)?;
    let paths = session::SessionPaths::for_repo(&dir, &repo);
    let (findings, rejected, skipped) = sort_findings(
        loaded.findings,
        loaded.rejected,
        &loaded.rejected_keys,
        config.skip.clone(),
        &dirty,
    );
    let screened = findings_ledger::run::screen(
        findings,
        &findings_ledger::run::ScreenOptions {
            repo: &repo,
            vcs: vcs.as_ref(),
            agent: services.agent.name(),
            retry_failed: config.retry_failed,
            session: &paths.id(),
            inputs_digest: &findings_ledger::key::inputs_digest(&inputs),
        },
    )
    .await?;
    for r in &rejected {
        services.sink.emit(&Event::Warning {
            message: format!("finding {} rejected: {}", r.finding_id, r.reason),
        });
    }
    let mut notes = opening_notes(loaded.notes, &abandoned, skipped, loaded.duplicates.len());
    if !screened.skipped.is_empty() {
        notes.push(format!(
            "skipped by the findings ledger (fixed, declined, not fixable or failed before; `orchestrator findings list`): {}",
            screened.skipped.len()
        ));
    }
    let rejected_keys = rejected
        .iter()
        .filter_map(|r| loaded.rejected_keys.get(&r.finding_id).cloned())
        .collect();
    let findings_file = FindingsFile {
        version: FINDINGS_VERSION,
        findings: screened.findings,
        rejected,
        rejected_keys,
        ledger_keys: screened.keys,
        skipped: screened.skipped,
        baseline: screened.baseline,
        absent: screened.absent,
    };
    write_json_atomic(paths.findings(), &findings_file)?;
    // The files as the findings saw them: the baseline of every fix's edits.
    let edit_files: BTreeSet<String> = findings_file
        .findings
        .iter()
        .flat_map(|f| f.suggestions.iter())
        .flat_map(|s| s.edits.iter().map(|e| e.file.clone()))
        .collect();
    ledger::Ledger::start(&paths.dir, &repo, &edit_files)?;
    let active = new_active(config, vcs.as_ref(), &paths, inputs, dirty).await?;
    session::write_active(&paths, &active)?;
    Ok(Opened {
        paths,
        lock,
        active,
        findings_file,
        notes,
    })
}

/// The session record of a new run: where it started (HEAD, branch, the
/// files dirty before it) and with which options.
async fn new_active(
    config: &ReviewFixConfig,
    vcs: &dyn Vcs,
    paths: &session::SessionPaths,
    inputs: Vec<PathBuf>,
    dirty: Vec<String>,
) -> Result<ActiveSession, ReviewFixError> {
    let head = vcs
        .head()
        .await
        .map_err(|e| ReviewFixError::vcs("reading HEAD", e))?;
    let branch = vcs
        .current_branch()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the current branch", e))?;
    let ts = now();
    let active = ActiveSession {
        version: ACTIVE_SESSION_VERSION,
        fix_session_id: paths.id(),
        session_dir: paths.dir.clone(),
        repo: vcs.root().to_path_buf(),
        inputs,
        pid: std::process::id(),
        run: 1,
        started_at: ts.clone(),
        last_update: ts,
        phase: SessionPhase::Discovery,
        base_head: head.to_string(),
        branch,
        dirty_before: dirty,
        options: options_of(config),
        in_flight: Vec::new(),
        worktrees: Vec::new(),
        stages_completed: Vec::new(),
    };
    Ok(active)
}

/// A live session elsewhere under the same root is another engine at work:
/// each is named with how to resume it.
fn warn_of_unfinished(root: &Path, sink: &dyn EventSink) {
    for other in session::unfinished_sessions(root) {
        if let Some(holder) = orchestrator_core::state::SessionLock::holder_of(&other) {
            sink.emit(&Event::Warning {
                message: format!(
                    "fix session {} is unfinished (held by pid {}); resume it with --resume",
                    other.display(),
                    holder.pid
                ),
            });
        } else {
            sink.emit(&Event::Warning {
                message: format!(
                    "fix session {} is unfinished; resume it with --resume",
                    other.display()
                ),
            });
        }
    }
}

/// Splits the loaded findings into those to plan and those rejected: an
/// earlier pass's findings (`skip`, by re-lint key) are left out and
/// counted, and a finding on a file with uncommitted changes is rejected.
/// Returns (to plan, rejected, left out).
fn sort_findings(
    loaded: Vec<Finding>,
    loaded_rejected: Vec<RejectedFinding>,
    rejected_keys: &HashMap<String, String>,
    mut skip_left: relint::KeyCounts,
    dirty: &[String],
) -> (Vec<Finding>, Vec<RejectedFinding>, usize) {
    let dirty_set: BTreeSet<&String> = dirty.iter().collect();
    let mut findings = Vec::new();
    let mut skipped = 0usize;
    // What an earlier pass rejected is left out like what it tried.
    let mut rejected = Vec::with_capacity(loaded_rejected.len());
    for r in loaded_rejected {
        if let Some(key) = rejected_keys.get(&r.finding_id)
            && let Some(n) = skip_left.get_mut(key)
            && *n > 0
        {
            *n -= 1;
            skipped += 1;
            continue;
        }
        rejected.push(r);
    }
    for f in loaded {
        if !skip_left.is_empty()
            && let Some(n) = skip_left.get_mut(&relint::relint_key(&f))
            && *n > 0
        {
            *n -= 1;
            skipped += 1;
            continue;
        }
        let touches_dirty = plan::finding_files(&f)
            .iter()
            .find(|p| dirty_set.contains(p))
            .cloned();
        match touches_dirty {
            Some(p) => rejected.push(RejectedFinding {
                finding_id: f.id.to_string(),
                file: f.file.clone(),
                reason: format!("{p} has uncommitted changes; it is never touched"),
            }),
            None => findings.push(f),
        }
    }
    (findings, rejected, skipped)
}

/// The notes a new session starts with: the readers', then what was
/// cleaned up, left out or merged.
fn opening_notes(
    mut notes: Vec<String>,
    abandoned: &[PathBuf],
    skipped: usize,
    duplicates: usize,
) -> Vec<String> {
    if !abandoned.is_empty() {
        notes.push(format!(
            "removed session folders of runs killed before their session was recorded: {}",
            abandoned
                .iter()
                .filter_map(|d| d.file_name().and_then(|n| n.to_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if skipped > 0 {
        notes.push(format!(
            "findings already tried in an earlier pass, left out: {skipped}"
        ));
    }
    // The same diagnostic reported for several targets (`--lib --tests`) is
    // one finding: merged, counted once, said once.
    match duplicates {
        0 => {}
        1 => notes.push("1 duplicate merged".to_owned()),
        n => notes.push(format!("{n} duplicates merged")),
    }
    notes
}

pub(crate) async fn open_for_resume(
    config: &ReviewFixConfig,
    services: &Services,
    root: &Path,
) -> Result<Opened, ReviewFixError> {
    let Some(dir) = session::unfinished_sessions(root).into_iter().next() else {
        return Err(ReviewFixError::NothingToResume {
            dir: root.to_path_buf(),
        });
    };
    let lock = session::lock_session(&dir)?;
    // What interrupted atomic writes left (every file is rewritten whole).
    orchestrator_core::state::remove_stale_temp_files_in(&dir)?;
    let paths = session::SessionPaths::for_repo(&dir, services.vcs.root());
    let Some(mut active) = session::read_active(&paths)? else {
        return Err(ReviewFixError::NothingToResume {
            dir: root.to_path_buf(),
        });
    };
    let findings_file: FindingsFile = read_json(paths.findings())?;
    if findings_file.version != FINDINGS_VERSION {
        return Err(ReviewFixError::Version {
            path: paths.findings(),
            found: findings_file.version,
            expected: FINDINGS_VERSION,
        });
    }
    // An in-flight fix was in a worktree (removed by the run's recovery);
    // one an older version made in the working tree itself is never rolled
    // back: its change cannot be told from the user's edits since, and the
    // tree check below names what is uncommitted.
    let repo = services.vcs.root().to_path_buf();
    for f in active.in_flight.iter().filter(|f| f.tree == repo) {
        services.sink.emit(&Event::Warning {
            message: format!(
                "the fix of {} was interrupted in the working tree; nothing was rolled back: review `git status`",
                f.finding_id
            ),
        });
    }
    active.in_flight.retain(|f| f.tree != repo);
    let status = services
        .vcs
        .status()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the working tree status", e))?;
    let before: BTreeSet<&String> = active.dirty_before.iter().collect();
    let new_dirty: Vec<String> = status
        .dirty_paths()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    if !(new_dirty.is_empty() || config.allow_dirty || active.options.allow_dirty) {
        return Err(ReviewFixError::DirtyTree { paths: new_dirty });
    }
    active.dirty_before.extend(new_dirty);
    // A test command given to the resume replaces the recorded one.
    if config.test_command.is_some() {
        active.options.test_command.clone_from(&config.test_command);
    }
    active.run += 1;
    active.pid = std::process::id();
    active.last_update = now();
    session::write_active(&paths, &active)?;
    Ok(Opened {
        paths,
        lock,
        active,
        findings_file,
        notes: Vec::new(),
    })
}
