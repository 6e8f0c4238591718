//! `review-fix --sarif-out FILE`: the run's results as a SARIF 2.1.0 log,
//! ready for a code-scanning upload.
//!
//! One result per finding of the run — planned or skipped by the ledger —
//! and one per ledger entry the run no longer saw, each with:
//! - `baselineState` against the ledger as it stood before the run: `new`
//!   (no entry), `unchanged` (an entry last seen at the same place),
//!   `updated` (an entry last seen elsewhere: the finding moved), `absent`
//!   (an entry this run's findings do not have);
//! - `partialFingerprints` carrying the ledger key
//!   ([`LEDGER_FINGERPRINT`]; the ledger takes it back as the key when the
//!   log is fed to a run);
//! - `fixes` for a finding fixed by this run: its fix commit's diff against
//!   its parent, one `artifactChange` per file and one replacement per
//!   hunk (whole lines: `deletedRegion` from the hunk's first old line to
//!   the start of the line after it, `insertedContent` the hunk's new
//!   lines);
//! - `suppressions` (`external`, with the reason) for a declined one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use orchestrator_core::finding::{Finding, Severity};
use orchestrator_core::state::write_json_atomic;
use orchestrator_core::vcs::{CommitId, CommitInfo, Vcs};
use serde_json::{Value, json};

use super::{FindingsLedger, LedgerEntry, Status, ledger_path};
use crate::error::ReviewFixError;
use crate::files::{FindingsFile, FixProgress, FixResult};
use crate::forge::hunks::{self, FileHunks, Hunk};

/// The `partialFingerprints` name of the ledger key.
pub const LEDGER_FINGERPRINT: &str = "orchestratorLedgerKey/v1";

/// What the log is made of.
pub(crate) struct SarifInput<'a> {
    /// The repository (its ledger).
    pub(crate) repo: &'a Path,
    /// The session's findings, keys and baseline states.
    pub(crate) findings_file: &'a FindingsFile,
    /// Every group's progress (the fix commits).
    pub(crate) progress: &'a [FixProgress],
    /// The run's commits, newest first (each one's parent is the next).
    pub(crate) commits: &'a [CommitInfo],
    /// The commit the session started from.
    pub(crate) base: &'a str,
}

/// Writes the run's SARIF log to `path` (atomically).
pub(crate) async fn write(
    path: &Path,
    input: &SarifInput<'_>,
    vcs: &dyn Vcs,
) -> Result<(), ReviewFixError> {
    let ledger = FindingsLedger::read(&ledger_path(input.repo))?;
    let fixes = fix_diffs(input, vcs).await?;
    write_json_atomic(path, &render(&ledger, input, &fixes))?;
    Ok(())
}

/// Each fixed finding's id and its fix commit's hunks.
async fn fix_diffs(
    input: &SarifInput<'_>,
    vcs: &dyn Vcs,
) -> Result<HashMap<String, FileHunks>, ReviewFixError> {
    let parents: HashMap<&str, &str> = input
        .commits
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let parent = input
                .commits
                .get(i + 1)
                .map_or(input.base, |p| p.id.as_str());
            (c.id.as_str(), parent)
        })
        .collect();
    let mut out = HashMap::new();
    for f in input.progress.iter().flat_map(|p| p.findings.iter()) {
        let (Some(FixResult::Fixed), Some(commit)) = (f.result, f.commit_hash.as_deref()) else {
            continue;
        };
        let Some(parent) = parents.get(commit) else {
            continue;
        };
        let diff = vcs
            .diff(
                &CommitId((*parent).to_owned()),
                &CommitId(commit.to_owned()),
            )
            .await
            .map_err(|e| ReviewFixError::vcs(format!("reading the diff of {commit}"), e))?;
        out.insert(f.finding_id.clone(), hunks::parse(&diff));
    }
    Ok(out)
}

/// The whole log.
fn render(
    ledger: &FindingsLedger,
    input: &SarifInput<'_>,
    fixes: &HashMap<String, FileHunks>,
) -> Value {
    let ff = input.findings_file;
    let findings: HashMap<&str, &Finding> =
        ff.findings.iter().map(|f| (f.id.as_str(), f)).collect();
    let mut results = Vec::new();
    let ids = ff
        .findings
        .iter()
        .map(|f| f.id.as_str())
        .chain(ff.skipped.iter().map(|s| s.finding_id.as_str()));
    for id in ids {
        let Some(key) = ff.ledger_keys.get(id) else {
            continue;
        };
        let state = ff.baseline.get(id).map_or("new", String::as_str);
        let mut result = result_of(
            key,
            ledger.entries.get(key),
            findings.get(id).copied(),
            state,
        );
        if let Some(files) = fixes.get(id) {
            result["fixes"] = fixes_of(files);
        }
        results.push(result);
    }
    let seen: BTreeSet<&String> = ff.ledger_keys.values().collect();
    for key in ff.absent.iter().filter(|k| !seen.contains(k)) {
        results.push(result_of(key, ledger.entries.get(key), None, "absent"));
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "orchestrator review-fix",
                "version": env!("CARGO_PKG_VERSION"),
            }},
            "results": results,
        }],
    })
}

fn level(severity: Option<Severity>) -> &'static str {
    match severity {
        Some(Severity::Critical | Severity::High) => "error",
        Some(Severity::Low) => "note",
        Some(Severity::Medium) | None => "warning",
    }
}

/// One result: the finding as this run read it (else as the ledger last
/// saw it).
fn result_of(
    key: &str,
    entry: Option<&LedgerEntry>,
    finding: Option<&Finding>,
    state: &str,
) -> Value {
    let title = finding
        .map(|f| f.title.as_str())
        .or(entry.map(|e| e.title.as_str()))
        .filter(|t| !t.trim().is_empty())
        .unwrap_or("finding");
    let category = finding
        .and_then(|f| f.category.as_deref())
        .or(entry.and_then(|e| e.category.as_deref()));
    let file = finding
        .and_then(|f| f.file.as_deref())
        .or(entry.and_then(|e| e.file.as_deref()));
    let line = finding.map_or(entry.and_then(|e| e.line), |f| f.line);
    let id = finding.map_or_else(
        || entry.map(|e| e.finding_id.clone()).unwrap_or_default(),
        |f| f.id.to_string(),
    );
    let status = entry.map_or(Status::Open, LedgerEntry::status);
    let mut result = json!({
        "ruleId": category.unwrap_or("review-fix"),
        "level": level(finding.map(|f| f.severity)),
        "message": {"text": title},
        "partialFingerprints": {LEDGER_FINGERPRINT: key},
        "baselineState": state,
        "properties": {"findingId": id, "ledgerStatus": status.name()},
    });
    if let Some(file) = file {
        let mut location = json!({"artifactLocation": {"uri": file}});
        if let Some(line) = line.filter(|l| *l >= 1) {
            location["region"] = json!({"startLine": line});
        }
        result["locations"] = json!([{"physicalLocation": location}]);
    }
    if let Status::Declined { reason } = &status {
        result["suppressions"] =
            json!([{"kind": "external", "status": "accepted", "justification": reason}]);
    }
    result
}

/// A fix commit's hunks as one SARIF fix.
fn fixes_of(files: &BTreeMap<String, Vec<Hunk>>) -> Value {
    let changes: Vec<Value> = files
        .iter()
        .filter(|(_, hunks)| !hunks.is_empty())
        .map(|(file, hunks)| {
            json!({
                "artifactLocation": {"uri": file},
                "replacements": hunks.iter().map(replacement).collect::<Vec<_>>(),
            })
        })
        .collect();
    if changes.is_empty() {
        return json!([]);
    }
    json!([{
        "description": {"text": "the verified fix commit"},
        "artifactChanges": changes,
    }])
}

/// One hunk as a whole-line replacement.
fn replacement(hunk: &Hunk) -> Value {
    // An empty old side names the line before; the deletion starts after it.
    let start = if hunk.old_len == 0 {
        hunk.old_start + 1
    } else {
        hunk.old_start.max(1)
    };
    let end = start + hunk.old_len;
    json!({
        "deletedRegion": {"startLine": start, "startColumn": 1, "endLine": end, "endColumn": 1},
        "insertedContent": {"text": hunk.new_text()},
    })
}
