//! The sessions of the served repositories, read from their folders
//! without taking their locks (a run may be writing: every state file is
//! replaced atomically and the logs are only appended to), as the list and
//! the session page show them.
//!
//! A session is found by its folder: planex's under
//! `.workflow/.lite-plan/`, review-fix's `fix-*` under `.review/fixes/`,
//! ci-autofix's target folders under `.moai/state/.locks/`. Its state is
//! `running` while the process named in its lock file is alive, else what
//! its log's last `run_finished` says, else what its flow's files say.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use orchestrator_core::state::SessionLock;
use orchestrator_core::state::event_log::{EVENTS_FILE, RunState};
use serde::Serialize;

use super::digest::Digest;
use super::flows;
pub use super::model::{Flow, FlowView, Found, Item};

/// Every session folder of `repos`.
pub fn discover(repos: &[PathBuf]) -> Vec<Found> {
    let mut found = Vec::new();
    for (index, repo) in repos.iter().enumerate() {
        let roots = [
            (
                Flow::Planex,
                repo.join(orchestrator_planex::session::SESSIONS_DIR),
                "",
            ),
            (Flow::ReviewFix, repo.join(".review").join("fixes"), "fix-"),
            (
                Flow::CiAutofix,
                repo.join(".moai").join("state").join(".locks"),
                "ci-autofix-",
            ),
        ];
        for (flow, root, prefix) in roots {
            let Ok(entries) = std::fs::read_dir(&root) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with(prefix) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                found.push(Found {
                    repo: index,
                    repo_dir: repo.clone(),
                    flow,
                    id: name,
                    dir: entry.path(),
                });
            }
        }
    }
    found
}

/// Counts of a session's items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Finished well.
    pub done: usize,
    /// Failed, skipped or not fixable.
    pub failed: usize,
    /// Not finished (running ones included).
    pub pending: usize,
}

/// A session as the list shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `<repo>/<flow>/<id>`.
    pub key: String,
    /// The repository.
    pub repo: PathBuf,
    /// The flow.
    pub flow: Flow,
    /// The session id.
    pub id: String,
    /// What it is about (requirement, findings, target).
    pub title: String,
    /// `running`, `waiting`, `limit`, `interrupted`, `done`, `failed`, `error`.
    pub state: &'static str,
    /// Why it stopped, when it did.
    pub reason: Option<String>,
    /// When it started (Unix ms; 0 when unknown).
    pub started_ms: i64,
    /// Its items by outcome.
    pub counts: Counts,
    /// Test runs (from its log, else its files).
    pub test_runs: Option<u64>,
    /// What its agents spent, US dollars.
    pub cost_usd: Option<f64>,
    /// The running process, when one is.
    pub pid: Option<u32>,
    /// A plan gate the page can answer (planex).
    pub approvable: Option<String>,
}

/// The digests of the logs read so far, by file.
#[derive(Debug, Default)]
pub struct Digests(Mutex<HashMap<PathBuf, Digest>>);

impl Digests {
    /// The digest of `dir`'s log, brought up to date.
    pub fn of(&self, dir: &Path) -> Digest {
        let path = dir.join(EVENTS_FILE);
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let digest = all.entry(path.clone()).or_default();
        digest.update(&path);
        digest.clone()
    }
}

/// The pid holding `dir`'s lock, when that process is alive.
pub fn live_holder(dir: &Path) -> Option<u32> {
    let holder = SessionLock::holder_of(dir)?;
    let pid = i32::try_from(holder.pid).ok()?;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => Some(holder.pid),
        Err(_) => None,
    }
}

/// The summary of `found` (and its flow view, for the session page).
pub fn summarize(found: &Found, digests: &Digests) -> (Summary, FlowView, Digest) {
    let digest = digests.of(&found.dir);
    let view = flows::read(found, &digest);
    let pid = live_holder(&found.dir);
    let (state, reason) = match (pid, &digest.run_end) {
        (Some(_), _) if !digest.open_gates.is_empty() => {
            ("waiting", digest.open_gates.values().next().cloned())
        }
        (Some(_), _) => ("running", None),
        (None, Some(end)) => (end.state.as_str(), end.reason.clone()),
        (None, None) => match &view.state {
            Some((state, reason)) => (state.as_str(), reason.clone()),
            None => (RunState::Interrupted.as_str(), None),
        },
    };
    let mut counts = Counts::default();
    for item in &view.items {
        match item.status {
            "done" => counts.done += 1,
            "failed" | "skipped" | "not_fixable" => counts.failed += 1,
            _ => counts.pending += 1,
        }
    }
    let logged = digest.offset > 0;
    let cost = if digest.cost_usd > 0.0 || digest.tokens > 0 {
        Some(digest.cost_usd)
    } else {
        let sum: f64 = view.items.iter().filter_map(|i| i.cost_usd).sum();
        (sum > 0.0).then_some(sum)
    };
    let summary = Summary {
        key: found.key(),
        repo: found.repo_dir.clone(),
        flow: found.flow,
        id: found.id.clone(),
        title: view.title.clone(),
        state,
        reason,
        started_ms: if view.started_ms > 0 {
            view.started_ms
        } else {
            digest.first_ms.unwrap_or(0)
        },
        counts,
        test_runs: if logged {
            Some(digest.test_runs)
        } else {
            view.test_runs
        },
        cost_usd: cost,
        pid,
        approvable: if pid.is_none() {
            view.approvable.clone()
        } else {
            None
        },
    };
    (summary, view, digest)
}

/// Every session of `repos`, newest first.
pub fn list(repos: &[PathBuf], digests: &Digests) -> Vec<Summary> {
    let mut all: Vec<Summary> = discover(repos)
        .iter()
        .map(|f| summarize(f, digests).0)
        .collect();
    all.sort_by(|a, b| {
        b.started_ms
            .cmp(&a.started_ms)
            .then_with(|| a.key.cmp(&b.key))
    });
    all
}

/// The session `key` names, when it is one of `repos`' sessions (a key is
/// never turned into a path: it must match a folder found on disk).
pub fn find(repos: &[PathBuf], key: &str) -> Option<Found> {
    discover(repos).into_iter().find(|f| f.key() == key)
}
