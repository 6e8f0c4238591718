//! Each flow's files, read through the flow crate's public types, as the
//! page's items and the flow's own tables (planex's plan and verification,
//! review-fix's plan and groups, ci-autofix's iterations with their
//! evidence).

use std::path::Path;

use orchestrator_core::state::event_log::RunState;
use orchestrator_core::state::read_json_if_exists;
use orchestrator_planex::GatePoint;
use orchestrator_planex::rows::RowStatus;
use orchestrator_planex::session::{META_FILE, SessionMeta, SessionStatus, read_state};
use orchestrator_review_fix::session::{ACTIVE_FILE, HISTORY_FILE, PLAN_FILE};
use orchestrator_review_fix::{
    ActiveSession, FixHistory, FixPlan, FixProgress, FixResult, ProgressStatus, SessionPhase,
};
use serde_json::{Value, json};

use super::digest::Digest;
use super::model::{Flow, FlowView, Found, Item};

/// Reads what `found`'s flow files say, with its log's digest filling in
/// commits and spend the files do not hold.
pub fn read(found: &Found, digest: &Digest) -> FlowView {
    let mut view = match found.flow {
        Flow::Planex => planex(&found.dir),
        Flow::ReviewFix => review_fix(&found.dir),
        Flow::CiAutofix => ci_autofix(found),
    };
    if found.flow == Flow::CiAutofix {
        // A green run removes its state file: its landed iterations are
        // the log's commits.
        for (id, job) in &digest.jobs {
            if view.items.iter().any(|i| &i.id == id) {
                continue;
            }
            if let Some((sha, summary)) = job.commits.last() {
                view.items.push(Item {
                    id: id.clone(),
                    title: summary.clone(),
                    status: "done",
                    attempts: 1,
                    commits: vec![sha.clone()],
                    ..Item::default()
                });
            }
        }
    }
    for item in &mut view.items {
        if let Some(job) = digest.jobs.get(&item.id) {
            if item.commits.is_empty() {
                item.commits = job.commits.iter().map(|(sha, _)| sha.clone()).collect();
            }
            if job.calls > 0 {
                item.cost_usd = Some(job.cost_usd);
                item.tokens = Some(job.tokens);
            }
            if item.status == "pending" && job.started_ms.is_some() && job.status.is_none() {
                item.status = "running";
            }
            if item.attempts == 0 {
                item.attempts = u32::try_from(job.failures.len()).unwrap_or(u32::MAX)
                    + u32::from(job.status.is_some());
            }
        }
    }
    view
}

fn row_status(status: RowStatus) -> &'static str {
    match status {
        RowStatus::Completed => "done",
        RowStatus::Failed => "failed",
        RowStatus::Skipped => "skipped",
        _ => "pending",
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.trim().is_empty()).then(|| text.to_owned())
}

fn ms_of(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<jiff::Timestamp>()
        .map_or(0, |t| t.as_millisecond())
}

fn planex(dir: &Path) -> FlowView {
    let meta: Option<SessionMeta> = read_json_if_exists(dir.join(META_FILE)).ok().flatten();
    let (state, _) = read_state(dir).unwrap_or_default();
    let items = planex_items(&state);
    let Some(meta) = meta else {
        return FlowView {
            items,
            ..FlowView::default()
        };
    };
    let gate = if state.tasks.is_some() {
        Some(GatePoint::ExecutionPlan)
    } else if state.explore.is_some() {
        Some(GatePoint::ExplorePlan)
    } else {
        None
    };
    let open = !matches!(
        meta.status,
        SessionStatus::Finished | SessionStatus::Cancelled
    );
    let approvable = gate
        .filter(|g| open && meta.approvals.get(*g).is_none())
        .map(|g| g.plan_name().to_owned());
    let failed = items.iter().any(|i| i.status != "done");
    let file_state = planex_state(&meta, failed, approvable.is_some());
    FlowView {
        title: meta.requirement.clone(),
        started_ms: ms_of(&meta.created_at),
        state: Some((file_state, meta.stop_reason.clone())),
        items,
        test_runs: None,
        approvable,
    }
}

/// A planex session's items: its tasks, or before there are tasks, its
/// exploration angles.
fn planex_items(state: &orchestrator_planex::session::SessionState) -> Vec<Item> {
    let tasks = state.task_rows();
    let mut items: Vec<Item> = tasks
        .iter()
        .map(|t| Item {
            id: t.id.clone(),
            title: t.title.clone(),
            group: t.wave.map(|w| format!("wave {w}")),
            status: row_status(t.status),
            error: non_empty(&t.error),
            commits: state
                .verified
                .get(&t.id)
                .and_then(|v| v.commit.clone())
                .into_iter()
                .collect(),
            attempts: state.verified.get(&t.id).map_or(0, |v| v.attempts),
            ..Item::default()
        })
        .collect();
    if items.is_empty() {
        items = state
            .explore_rows()
            .iter()
            .map(|e| Item {
                id: e.id.clone(),
                title: e.angle.clone(),
                group: e.wave.map(|w| format!("wave {w}")),
                status: row_status(e.status),
                error: non_empty(&e.error),
                ..Item::default()
            })
            .collect();
    }
    items
}

/// How a planex session's files say it stands: `failed` when an item is
/// not done, `approvable` when a plan waits for approval.
fn planex_state(meta: &SessionMeta, failed: bool, approvable: bool) -> RunState {
    match meta.status {
        SessionStatus::Finished if failed => RunState::Failed,
        SessionStatus::Finished => RunState::Done,
        SessionStatus::Cancelled => RunState::Failed,
        SessionStatus::Stopped
            if meta
                .stop_reason
                .as_deref()
                .is_some_and(|r| r.contains("limit")) =>
        {
            RunState::Limit
        }
        SessionStatus::Stopped => RunState::Waiting,
        _ if approvable => RunState::Waiting,
        _ => RunState::Interrupted,
    }
}

/// The `fix-progress-N.json` files of a review-fix session, in order.
pub fn progress_files(dir: &Path) -> Vec<FixProgress> {
    let mut numbered: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name
                .strip_prefix("fix-progress-")?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    numbered.sort();
    numbered
        .into_iter()
        .filter_map(|(_, path)| read_json_if_exists::<FixProgress>(path).ok().flatten())
        .collect()
}

fn review_fix(dir: &Path) -> FlowView {
    let items = review_fix_items(dir);
    let active: Option<ActiveSession> = read_json_if_exists(dir.join(ACTIVE_FILE)).ok().flatten();
    let history: Option<FixHistory> = read_json_if_exists(dir.join(HISTORY_FILE)).ok().flatten();
    let last = history.as_ref().and_then(|h| h.entries.last());
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let started_ms = id
        .strip_prefix("fix-")
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0);
    let state = match (&active, last) {
        (Some(a), _) if a.phase == SessionPhase::AwaitingApproval => Some((
            RunState::Waiting,
            Some("the plan waits for approval".to_owned()),
        )),
        (Some(_), _) => Some((RunState::Interrupted, None)),
        (None, Some(entry)) => Some(match entry.outcome.as_str() {
            "all_fixed" | "dry_run" => (RunState::Done, None),
            "some_failed" => (RunState::Failed, None),
            other => (RunState::Waiting, Some(other.replace('_', " "))),
        }),
        (None, None) => None,
    };
    let title = active
        .as_ref()
        .map(|a| {
            a.inputs
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| format!("{} findings", items.len()));
    FlowView {
        title,
        started_ms,
        state,
        test_runs: history
            .as_ref()
            .map(|h| h.entries.iter().map(|e| u64::from(e.test_runs)).sum()),
        items,
        approvable: None,
    }
}

/// A review-fix session's items: each finding of each group's progress
/// file, with its status, attempts and last error.
fn review_fix_items(dir: &Path) -> Vec<Item> {
    let mut items = Vec::new();
    for group in progress_files(dir) {
        let last_error = |id: &str| {
            group
                .errors
                .iter()
                .rev()
                .find(|e| e.finding_id.as_deref() == Some(id))
                .map(|e| format!("{}: {}", e.error_type, e.message))
        };
        for f in &group.findings {
            let status = match (f.status, f.result) {
                (_, Some(FixResult::Fixed)) => "done",
                (_, Some(FixResult::Failed)) => "failed",
                (_, Some(FixResult::NotFixable)) => "not_fixable",
                (ProgressStatus::InProgress, None) => "running",
                (ProgressStatus::Failed, None) => "failed",
                _ => "pending",
            };
            items.push(Item {
                id: f.finding_id.clone(),
                title: f.finding_title.clone(),
                group: Some(group.group_id.clone()),
                status,
                attempts: f.attempts,
                error: f
                    .error_message
                    .clone()
                    .or_else(|| last_error(&f.finding_id)),
                commits: f.commit_hash.clone().into_iter().collect(),
                location: Some(match f.line {
                    Some(line) => format!("{}:{line}", f.file),
                    None => f.file.clone(),
                }),
                cost_usd: f.spend.as_ref().map(|s| s.cost_usd),
                tokens: f.spend.as_ref().map(|s| s.tokens()),
            });
        }
    }
    items
}

fn ci_autofix(found: &Found) -> FlowView {
    let key = found.id.trim_start_matches("ci-autofix-");
    let state_file = found
        .repo_dir
        .join(".moai")
        .join("state")
        .join(format!("ci-autofix-{key}.json"));
    let state: Option<orchestrator_ci_autofix::state::AutofixState> =
        read_json_if_exists(&state_file).ok().flatten();
    let Some(state) = state else {
        return FlowView {
            title: target_title(key),
            state: Some((RunState::Done, None)),
            ..FlowView::default()
        };
    };
    let mut items: Vec<Item> = state.history.iter().map(iteration_item).collect();
    // A patch waiting at its confirmation gate: the page answers it.
    let waiting = state.gate.as_ref().filter(|g| g.answer.is_none());
    if let Some(gate) = &state.gate {
        items.push(gate_item(gate));
    }
    let file_state = match waiting {
        Some(gate) => (
            RunState::Waiting,
            Some(format!(
                "iteration {}'s patch waits for confirmation",
                gate.iteration
            )),
        ),
        None if state.last_action.starts_with("escalate") => (RunState::Waiting, None),
        None => (RunState::Interrupted, None),
    };
    FlowView {
        title: match state.pr_number {
            Some(number) => state.forge.request_label(number),
            None => target_title(key),
        },
        started_ms: ms_of(&state.started_at),
        state: Some(file_state),
        items,
        test_runs: None,
        approvable: waiting.map(|g| format!("the patch of iteration {}", g.iteration)),
    }
}

/// A finished ci-autofix iteration as an item: done when its patch landed
/// without an escalation.
fn iteration_item(h: &orchestrator_ci_autofix::state::HistoryEntry) -> Item {
    Item {
        id: format!("iter-{}", h.iteration),
        title: format!("{}/{}: {}", h.classification, h.sub_class, h.action),
        group: Some(h.checks.join(", ")),
        status: if h.patch_sha.is_some() && h.escalation_reason.is_none() {
            "done"
        } else {
            "failed"
        },
        attempts: 1,
        error: h.escalation_reason.clone(),
        commits: h.patch_sha.clone().into_iter().collect(),
        cost_usd: h.agent_spend.as_ref().map(|s| s.cost_usd),
        tokens: h.agent_spend.as_ref().map(|s| s.tokens()),
        ..Item::default()
    }
}

/// The iteration a ci-autofix run stopped at its confirmation gate, as an
/// item: waiting for an answer, or answered and not landed yet.
fn gate_item(gate: &orchestrator_ci_autofix::state::ConfirmGate) -> Item {
    Item {
        id: format!("iter-{}", gate.iteration),
        title: format!(
            "{}/{}: {}",
            gate.classification,
            gate.sub_class,
            match &gate.answer {
                None => "waiting for confirmation (patch kept, not applied)".to_owned(),
                Some(a) => format!("{}d, not landed yet", a.decision.as_str()),
            }
        ),
        group: Some(gate.checks.join(", ")),
        status: if gate.answer.is_none() {
            "waiting"
        } else {
            "pending"
        },
        attempts: 1,
        commits: vec![gate.commit.clone()],
        cost_usd: gate.agent_spend.as_ref().map(|s| s.cost_usd),
        tokens: gate.agent_spend.as_ref().map(|s| s.tokens()),
        ..Item::default()
    }
}

fn target_title(key: &str) -> String {
    match key.strip_prefix("local-") {
        Some(branch) => format!("branch {branch} (local checks)"),
        None => format!("PR #{key}"),
    }
}

/// The flow's own tables for the session page: planex's plan (waves and
/// dependencies) and verification, review-fix's plan stages, ci-autofix's
/// audit log (classification evidence per iteration).
pub fn extras(found: &Found) -> Value {
    match found.flow {
        Flow::Planex => {
            let (state, warning) = read_state(&found.dir).unwrap_or_default();
            let plan: Vec<Value> = state
                .task_rows()
                .iter()
                .map(|t| {
                    json!({"id": t.id, "title": t.title, "wave": t.wave, "deps": t.deps,
                           "scope": t.scope, "tests_passed": t.tests_passed,
                           "files_modified": t.files_modified, "acceptance_met": t.acceptance_met,
                           "check": t.execution_directives})
                })
                .collect();
            json!({"plan": plan, "verified": state.verified, "journal_warning": warning})
        }
        Flow::ReviewFix => {
            let plan: Option<FixPlan> = read_json_if_exists(found.dir.join(PLAN_FILE))
                .ok()
                .flatten();
            let stages: Vec<Value> = plan
                .iter()
                .flat_map(|p| p.timeline.iter())
                .map(|s| json!({"stage": s.stage, "groups": s.groups, "depends_on": s.depends_on}))
                .collect();
            json!({"stages": stages})
        }
        Flow::CiAutofix => json!({"audit": ci_audit(found), "gate": ci_gate(found)}),
    }
}

/// The confirmation gate a ci-autofix session waits at: the kept patch's
/// diff, its classification and evidence, the answer once given.
fn ci_gate(found: &Found) -> Value {
    let key = orchestrator_ci_autofix::confirm::key_of(&found.id);
    let path = orchestrator_ci_autofix::state::StateFile::path_for_key(&found.repo_dir, key);
    let state: Option<orchestrator_ci_autofix::state::AutofixState> =
        read_json_if_exists(&path).ok().flatten();
    match state.and_then(|s| s.gate) {
        Some(g) => json!({
            "iteration": g.iteration, "prompt": g.prompt, "classification": g.classification,
            "sub_class": g.sub_class, "reason": g.reason, "checks": g.checks,
            "evidence": g.evidence, "files": g.write_set, "commit": g.commit,
            "branch": g.keep_branch, "diff": g.diff, "asked_at": g.asked_at, "answer": g.answer,
        }),
        None => Value::Null,
    }
}

/// The ci-autofix audit logs of the target (`.moai/reports/ci-autofix/`):
/// each iteration's classification, action and evidence lines.
fn ci_audit(found: &Found) -> Vec<Value> {
    let key = found.id.trim_start_matches("ci-autofix-");
    let prefix = match key.strip_prefix("local-") {
        Some(_) => format!("{key}-"),
        None => format!("PR-{key}-"),
    };
    let folder = found
        .repo_dir
        .join(".moai")
        .join("reports")
        .join("ci-autofix");
    let mut logs: Vec<(String, String)> = std::fs::read_dir(&folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ok = name.starts_with(&prefix) && name.ends_with(".md");
            ok.then(|| Some((name, std::fs::read_to_string(e.path()).ok()?)))
                .flatten()
        })
        .collect();
    logs.sort();
    logs.into_iter()
        .map(|(name, text)| json!({"file": name, "text": text}))
        .collect()
}
