//! The ledger in a review-fix run: screening a new session's findings
//! before planning, recording their outcomes when the run completes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use orchestrator_core::finding::Finding;
use orchestrator_core::vcs::{CommitId, Vcs};

use super::{Event, FindingsLedger, Status, key, ledger_path};
use crate::error::ReviewFixError;
use crate::files::{FindingsFile, FixProgress, FixResult, ProgressFinding, RejectedFinding, now};

/// A new session's findings after the ledger.
#[derive(Debug, Default)]
pub(crate) struct Screened {
    /// The findings to plan.
    pub(crate) findings: Vec<Finding>,
    /// Those the ledger leaves out, with why.
    pub(crate) skipped: Vec<RejectedFinding>,
    /// Every finding's ledger key, by finding id.
    pub(crate) keys: BTreeMap<String, String>,
    /// Every finding's baseline state, by finding id.
    pub(crate) baseline: BTreeMap<String, String>,
    /// The keys of the ledger's entries the findings do not have.
    pub(crate) absent: Vec<String>,
}

/// What screening needs besides the findings.
pub(crate) struct ScreenOptions<'a> {
    /// The repository (its ledger, the files the findings point at).
    pub(crate) repo: &'a Path,
    /// The run's version control (is a fix commit still on the branch?).
    pub(crate) vcs: &'a dyn Vcs,
    /// The agent of the run (`not fixable` is per agent).
    pub(crate) agent: &'a str,
    /// `--retry-failed`.
    pub(crate) retry_failed: bool,
    /// The new session's id.
    pub(crate) session: &'a str,
    /// The run's inputs ([`key::inputs_digest`]).
    pub(crate) inputs_digest: &'a str,
}

/// Keys `findings` (the files as they are now: before any fix; a report
/// the ledger knows keeps the key it had) and leaves
/// out those the ledger says are done with: fixed by a commit still in
/// HEAD's history, declined, not fixable by this agent, failed (unless
/// retried).
pub(crate) async fn screen(
    findings: Vec<Finding>,
    options: &ScreenOptions<'_>,
) -> Result<Screened, ReviewFixError> {
    let path = ledger_path(options.repo);
    let mut ledger = FindingsLedger::read(&path)?;
    let mut keys = keys_of(options.repo, &findings);
    let report = |f: &Finding| key::report_identity(options.inputs_digest, f.id.as_str());
    for f in &findings {
        if let Some(key) = keys.get_mut(f.id.as_str())
            && let Some(known) = ledger.key_of(key, &report(f))
        {
            *key = known;
        }
    }
    let present = fixes_present(&ledger, keys.values(), options.vcs).await;
    let mut screened = Screened {
        baseline: baseline_states(&ledger, &findings, &keys),
        absent: absent_keys(&ledger, &keys),
        ..Screened::default()
    };
    for f in findings {
        let id = f.id.to_string();
        let reason = keys
            .get(&id)
            .and_then(|k| ledger.entries.get(k))
            .and_then(|e| {
                e.skip_reason(options.agent, options.retry_failed, |c| present.contains(c))
            });
        match reason {
            Some(reason) => screened.skipped.push(RejectedFinding {
                finding_id: id,
                file: f.file.clone(),
                reason,
            }),
            None => screened.findings.push(f),
        }
    }
    // What the session saw, before any agent call: recorded whether the
    // run gets to its end or not.
    let at = now();
    for f in screened.findings.iter() {
        if let Some(key) = keys.get(f.id.as_str()) {
            ledger.observe(key, f, &report(f), options.session, &at);
        }
    }
    if !screened.findings.is_empty() {
        ledger.write(&path)?;
    }
    screened.keys = keys;
    Ok(screened)
}

/// Each finding's SARIF `baselineState`: `new` without an entry,
/// `unchanged` at the place the entry was last seen, else `updated`.
fn baseline_states(
    ledger: &FindingsLedger,
    findings: &[Finding],
    keys: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    findings
        .iter()
        .filter_map(|f| {
            let key = keys.get(f.id.as_str())?;
            let state = match ledger.entries.get(key) {
                None => "new",
                Some(e) if e.file == f.file && e.line == f.line => "unchanged",
                Some(_) => "updated",
            };
            Some((f.id.to_string(), state.to_owned()))
        })
        .collect()
}

/// The ledger's keys that none of `keys` is.
fn absent_keys(ledger: &FindingsLedger, keys: &BTreeMap<String, String>) -> Vec<String> {
    let seen: BTreeSet<&String> = keys.values().collect();
    ledger
        .entries
        .keys()
        .filter(|k| !seen.contains(k))
        .cloned()
        .collect()
}

/// Every finding's ledger key, each file read once; findings of one rule
/// on one line are told apart by their order ([`key::nth`]).
pub(crate) fn keys_of(repo: &Path, findings: &[Finding]) -> BTreeMap<String, String> {
    let mut sources: HashMap<&str, Option<String>> = HashMap::new();
    let mut keys = BTreeMap::new();
    let mut repeats: HashMap<String, usize> = HashMap::new();
    for f in findings {
        let source = match f.file.as_deref() {
            Some(file) => sources
                .entry(file)
                .or_insert_with(|| std::fs::read_to_string(repo.join(file)).ok())
                .as_deref(),
            None => None,
        };
        let base = key::ledger_key(f, source);
        let n = repeats.entry(base.clone()).or_insert(0);
        keys.insert(f.id.to_string(), key::nth(&base, *n));
        *n += 1;
    }
    keys
}

/// The fix commits of the entries of `keys` that are still ancestors of
/// HEAD (a commit the version control cannot place counts as gone: its
/// finding is tried again).
async fn fixes_present<'k>(
    ledger: &FindingsLedger,
    keys: impl Iterator<Item = &'k String>,
    vcs: &dyn Vcs,
) -> BTreeSet<String> {
    let commits: BTreeSet<String> = keys
        .filter_map(|k| match ledger.entries.get(k)?.status() {
            Status::Fixed { commit } => Some(commit),
            _ => None,
        })
        .collect();
    let mut present = BTreeSet::new();
    if commits.is_empty() {
        return present;
    }
    let Ok(head) = vcs.head().await else {
        return present;
    };
    for commit in commits {
        if matches!(
            vcs.is_ancestor(&CommitId(commit.clone()), &head).await,
            Ok(true)
        ) {
            present.insert(commit);
        }
    }
    present
}

/// The ledger event a finding's progress ends with, `None` when it ended
/// with none (deferred, not finished).
fn outcome_event(p: &ProgressFinding, agent: &str) -> Option<Event> {
    let reason = || {
        p.error_message
            .clone()
            .unwrap_or_else(|| "no reason given".to_owned())
    };
    match p.result? {
        FixResult::Fixed => p.commit_hash.clone().map(|commit| Event::Fixed { commit }),
        FixResult::Failed => Some(Event::Failed { reason: reason() }),
        FixResult::NotFixable => Some(Event::NotFixable {
            agent: agent.to_owned(),
            reason: reason(),
        }),
        FixResult::Deferred => None,
    }
}

/// What a completed run records.
pub(crate) struct RunRecord<'a> {
    /// The repository.
    pub(crate) repo: &'a Path,
    /// The session's findings (with their keys).
    pub(crate) findings_file: &'a FindingsFile,
    /// Every group's progress.
    pub(crate) progress: &'a [FixProgress],
    /// The run's agent.
    pub(crate) agent: &'a str,
}

/// Records how each of the session's findings ended. Recording the same
/// run again (a resumed session) adds nothing twice.
pub(crate) fn record(run: &RunRecord<'_>) -> Result<(), ReviewFixError> {
    let keys = &run.findings_file.ledger_keys;
    if keys.is_empty() {
        return Ok(());
    }
    let path = ledger_path(run.repo);
    let mut ledger = FindingsLedger::read(&path)?;
    let at = now();
    let results: HashMap<&str, &ProgressFinding> = run
        .progress
        .iter()
        .flat_map(|p| p.findings.iter())
        .map(|f| (f.finding_id.as_str(), f))
        .collect();
    for f in &run.findings_file.findings {
        let id = f.id.as_str();
        if let Some(key) = keys.get(id)
            && let Some(event) = results.get(id).and_then(|p| outcome_event(p, run.agent))
        {
            ledger.record(key, event, &at);
        }
    }
    ledger.write(&path)
}
