//! `planex_status`: a planex session's rows and statuses, read from its
//! folder without taking its lock, so a host can watch a session another
//! call (or a terminal) is running.
//!
//! The rows are those of the session's last checkpoint (`tasks.csv`, or
//! `explore.csv` before tasks were planned); a running session rewrites
//! them as its rows finish.

use std::collections::BTreeMap;
use std::path::Path;

use orchestrator_planex::rows::{RowStatus, read_explore_csv, read_tasks_csv};
use orchestrator_planex::session::{EXPLORE_CSV, TASKS_CSV, sessions_dir};
use orchestrator_planex::{SessionInfo, list_sessions};
use serde_json::{Value, json};

/// The status of session `id` (the newest when `None`) in `repo`, as JSON:
/// the session (`id`, `requirement`, `status`, `stop_reason`,
/// `resume_phase`, `dir`), its rows (`phase` `tasks` or `explore`) and the
/// count of rows per status.
pub(super) fn planex_status(repo: &Path, id: Option<&str>) -> Result<Value, String> {
    let sessions = list_sessions(repo).map_err(|e| e.to_string())?;
    let info = pick(repo, &sessions, id)?;
    let (phase, rows): (&str, Vec<Value>) = if info.dir.join(TASKS_CSV).is_file() {
        let rows = read_tasks_csv(info.dir.join(TASKS_CSV)).map_err(|e| e.to_string())?;
        let rows = rows
            .iter()
            .map(|t| {
                json!({
                    "id": t.id,
                    "title": t.title,
                    "wave": t.wave,
                    "deps": t.deps,
                    "status": t.status.as_str(),
                    "files_modified": t.files_modified,
                    "tests_passed": t.tests_passed,
                    "error": non_empty(&t.error),
                })
            })
            .collect();
        ("tasks", rows)
    } else if info.dir.join(EXPLORE_CSV).is_file() {
        let rows = read_explore_csv(info.dir.join(EXPLORE_CSV)).map_err(|e| e.to_string())?;
        let rows = rows
            .iter()
            .map(|e| {
                json!({
                    "id": e.id,
                    "angle": e.angle,
                    "wave": e.wave,
                    "deps": e.deps,
                    "status": e.status.as_str(),
                    "key_files": e.key_files,
                })
            })
            .collect();
        ("explore", rows)
    } else {
        ("none", Vec::new())
    };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for row in &rows {
        let status = row["status"]
            .as_str()
            .unwrap_or(RowStatus::Pending.as_str());
        *counts.entry(status_name(status)).or_default() += 1;
    }
    Ok(json!({
        "event": "planex_status",
        "session": {
            "id": info.id,
            "requirement": info.meta.requirement,
            "status": info.meta.status,
            "stop_reason": info.meta.stop_reason,
            "resume_phase": info.resume_phase,
            "dir": info.dir,
        },
        "phase": phase,
        "rows": rows,
        "counts": counts,
    }))
}

/// The session named, or the newest; an error lists what there is.
fn pick<'a>(
    repo: &Path,
    sessions: &'a [SessionInfo],
    id: Option<&str>,
) -> Result<&'a SessionInfo, String> {
    let found = match id {
        Some(id) => sessions.iter().find(|s| s.id == id),
        None => sessions.last(),
    };
    found.ok_or_else(|| {
        let dir = sessions_dir(repo);
        let known: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let what = match id {
            Some(id) => format!("planex session `{id}` not found in {}", dir.display()),
            None => format!("no planex session in {}", dir.display()),
        };
        if known.is_empty() {
            what
        } else {
            format!("{what}; sessions there: {}", known.join(", "))
        }
    })
}

/// A status name with a static lifetime, for the counts.
fn status_name(status: &str) -> &'static str {
    RowStatus::ALL
        .into_iter()
        .map(RowStatus::as_str)
        .find(|s| *s == status)
        .unwrap_or("other")
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}
