//! The findings ledger (`.review/ledger.json`, ours, versioned): what
//! became of each finding across runs of one repository.
//!
//! Every finding is keyed by a stable fingerprint ([`key::ledger_key`]:
//! the producer's SARIF `partialFingerprints` when it gave them, else
//! category, path and the normalised source lines at the finding, so a
//! finding moved by lines inserted above it keeps its key). Each entry keeps
//! its history — seen by a session, fixed in a commit, failed (why),
//! declined by the user (why), not fixable by an agent, reopened — and its
//! status is the last of those that is not a sighting.
//!
//! A run screens its findings against the ledger before planning and
//! records that it saw them (`run::screen`): fixed ones whose fix commit is still an ancestor of
//! HEAD, declined ones and those the same agent could not fix are skipped,
//! failed ones too unless `--retry-failed`; it records each finding's
//! outcome when it completes (`run::record`). `orchestrator findings`
//! reads and edits the ledger through [`FindingsLedger`].
//!
//! With `--sarif-out FILE` the completion also writes the run's results as
//! SARIF 2.1.0 ([`sarif`]), each with its `baselineState` against the
//! ledger before the run and the fixes as SARIF `fixes`.
//!
//! The file is rewritten whole and atomically; a file of another version or
//! one that does not parse is an error naming it (never overwritten).

pub mod key;
pub(crate) mod run;
pub mod sarif;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use orchestrator_core::finding::Finding;
use orchestrator_core::state::{read_json, read_json_if_exists, write_json_atomic};
use serde::{Deserialize, Serialize};

use crate::error::ReviewFixError;

/// `ledger.json`, in the repository's `.review/` folder.
pub const LEDGER_FILE: &str = "ledger.json";
/// Version of `ledger.json`.
pub const LEDGER_VERSION: u32 = 1;

/// The ledger of a repository: `{repo}/.review/ledger.json`.
pub fn ledger_path(repo: &Path) -> PathBuf {
    repo.join(".review").join(LEDGER_FILE)
}

/// `ledger.json`: every finding ever seen, by key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingsLedger {
    /// Format version ([`LEDGER_VERSION`]).
    pub version: u32,
    /// The entries, by ledger key.
    pub entries: BTreeMap<String, LedgerEntry>,
}

impl Default for FindingsLedger {
    fn default() -> Self {
        Self {
            version: LEDGER_VERSION,
            entries: BTreeMap::new(),
        }
    }
}

/// One finding across runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The finding's id when last seen (ids move with lines; the key does
    /// not).
    pub finding_id: String,
    /// Its title when last seen.
    pub title: String,
    /// Its category or rule, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Its file when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The reports it was seen under ([`key::report_identity`]): the same
    /// report read again (a findings file fed to a second run, after a fix
    /// changed its lines) is the same entry even though its key, read from
    /// the changed file, is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reports: Vec<String>,
    /// What happened to it, oldest first.
    pub history: Vec<HistoryEvent>,
}

/// One event of an entry's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// What.
    #[serde(flatten)]
    pub event: Event,
}

/// What happened to a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A run's session had it among its findings.
    Seen {
        /// The session.
        session: String,
    },
    /// A verified fix landed.
    Fixed {
        /// The fix commit.
        commit: String,
    },
    /// Every attempt failed.
    Failed {
        /// Why.
        reason: String,
    },
    /// The user declined it.
    Declined {
        /// The user's reason.
        reason: String,
    },
    /// The agent found it not fixable (or escalated it).
    NotFixable {
        /// The agent that said so.
        agent: String,
        /// Why.
        reason: String,
    },
    /// The user reopened it: the next run tries it again.
    Reopened,
}

/// Where an entry stands: its last event that is not a sighting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Never resolved, or reopened.
    Open,
    /// Fixed in a commit.
    Fixed {
        /// The fix commit.
        commit: String,
    },
    /// Failed.
    Failed {
        /// Why.
        reason: String,
    },
    /// Declined by the user.
    Declined {
        /// Why.
        reason: String,
    },
    /// Not fixable by an agent.
    NotFixable {
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
}

impl Status {
    /// The status's name in listings (`open`, `fixed`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Fixed { .. } => "fixed",
            Status::Failed { .. } => "failed",
            Status::Declined { .. } => "declined",
            Status::NotFixable { .. } => "not_fixable",
        }
    }
}

impl LedgerEntry {
    /// The entry's status ([`Status`]).
    pub fn status(&self) -> Status {
        let last = self
            .history
            .iter()
            .rev()
            .find(|e| !matches!(e.event, Event::Seen { .. }));
        match last.map(|e| &e.event) {
            Some(Event::Fixed { commit }) => Status::Fixed {
                commit: commit.clone(),
            },
            Some(Event::Failed { reason }) => Status::Failed {
                reason: reason.clone(),
            },
            Some(Event::Declined { reason }) => Status::Declined {
                reason: reason.clone(),
            },
            Some(Event::NotFixable { agent, reason }) => Status::NotFixable {
                agent: agent.clone(),
                reason: reason.clone(),
            },
            Some(Event::Seen { .. } | Event::Reopened) | None => Status::Open,
        }
    }

    /// Why a run with `agent` skips this entry, `None` to fix it.
    /// `fix_present` says whether the fix commit is still an ancestor of
    /// HEAD (a fix that is gone from the branch no longer counts).
    pub fn skip_reason(
        &self,
        agent: &str,
        retry_failed: bool,
        fix_present: impl Fn(&str) -> bool,
    ) -> Option<String> {
        match self.status() {
            Status::Open => None,
            Status::Fixed { commit } => fix_present(&commit).then(|| {
                let short: String = commit.chars().take(12).collect();
                format!("fixed in {short}")
            }),
            Status::Declined { reason } => Some(format!("declined: {reason}")),
            Status::NotFixable { agent: by, reason } if by == agent => {
                Some(format!("not fixable by {by}: {reason}"))
            }
            Status::NotFixable { .. } => None,
            Status::Failed { reason } if !retry_failed => Some(format!(
                "failed before ({}); --retry-failed tries it again",
                reason.lines().next().unwrap_or_default().trim()
            )),
            Status::Failed { .. } => None,
        }
    }
}

/// Why a ledger id names no single entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownId {
    /// The id asked for.
    pub id: String,
    /// The closest ids the ledger has (at most three).
    pub closest: Vec<String>,
    /// How many entries the id is a prefix of (more than one: ambiguous).
    pub matches: usize,
}

impl FindingsLedger {
    /// Reads the ledger at `path`; a missing file is an empty ledger. A
    /// file of another version, or one that does not parse (line and column
    /// named), is an error.
    pub fn read(path: &Path) -> Result<Self, ReviewFixError> {
        let Some(value) = read_json_if_exists::<serde_json::Value>(path)? else {
            return Ok(Self::default());
        };
        let found = value.get("version").and_then(serde_json::Value::as_u64);
        if found != Some(u64::from(LEDGER_VERSION)) {
            return Err(ReviewFixError::Version {
                path: path.to_path_buf(),
                found: found.map_or(0, |v| u32::try_from(v).unwrap_or(u32::MAX)),
                expected: LEDGER_VERSION,
            });
        }
        Ok(read_json(path)?)
    }

    /// Writes the ledger to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<(), ReviewFixError> {
        write_json_atomic(path, self)?;
        Ok(())
    }

    /// Records that `session` saw `finding` under `key` in `report` (the
    /// entry is made or brought up to date with its id, title and place; a
    /// session and a report are recorded once).
    pub fn observe(&mut self, key: &str, finding: &Finding, report: &str, session: &str, at: &str) {
        let entry = self
            .entries
            .entry(key.to_owned())
            .or_insert_with(|| LedgerEntry {
                finding_id: String::new(),
                title: String::new(),
                category: None,
                file: None,
                line: None,
                reports: Vec::new(),
                history: Vec::new(),
            });
        entry.finding_id = finding.id.to_string();
        entry.title.clone_from(&finding.title);
        entry.category.clone_from(&finding.category);
        entry.file.clone_from(&finding.file);
        entry.line = finding.line;
        if !entry.reports.iter().any(|r| r == report) {
            entry.reports.push(report.to_owned());
        }
        let seen = Event::Seen {
            session: session.to_owned(),
        };
        if !entry.history.iter().any(|e| e.event == seen) {
            entry.history.push(HistoryEvent {
                at: at.to_owned(),
                event: seen,
            });
        }
    }

    /// Appends `event` to the entry of `key`; nothing when there is no such
    /// entry or its last event (sightings aside) is already `event`.
    pub fn record(&mut self, key: &str, event: Event, at: &str) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        let last = entry
            .history
            .iter()
            .rev()
            .find(|e| !matches!(e.event, Event::Seen { .. }));
        if last.is_some_and(|e| e.event == event) {
            return;
        }
        entry.history.push(HistoryEvent {
            at: at.to_owned(),
            event,
        });
    }

    /// The key of a finding's entry: `key` when the ledger has it, else
    /// the entry its `report` ([`key::report_identity`]) was seen under;
    /// `None` for a new finding.
    pub fn key_of(&self, key: &str, report: &str) -> Option<String> {
        if self.entries.contains_key(key) {
            return Some(key.to_owned());
        }
        self.entries
            .iter()
            .find(|(_, e)| e.reports.iter().any(|r| r == report))
            .map(|(k, _)| k.clone())
    }

    /// The key `id` names: a key, or a prefix of exactly one key, or the
    /// finding id an entry was last seen under.
    pub fn resolve(&self, id: &str) -> Result<String, UnknownId> {
        if self.entries.contains_key(id) {
            return Ok(id.to_owned());
        }
        let by_prefix: Vec<&String> = self
            .entries
            .keys()
            .filter(|k| !id.is_empty() && k.starts_with(id))
            .collect();
        if let [only] = by_prefix.as_slice() {
            return Ok((*only).clone());
        }
        let by_finding: Vec<&String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.finding_id == id)
            .map(|(k, _)| k)
            .collect();
        if let ([], [only]) = (by_prefix.as_slice(), by_finding.as_slice()) {
            return Ok((*only).clone());
        }
        Err(UnknownId {
            id: id.to_owned(),
            closest: self.closest(id),
            matches: by_prefix.len().max(by_finding.len()),
        })
    }

    /// The (at most three) keys or finding ids closest to `id`.
    fn closest(&self, id: &str) -> Vec<String> {
        let mut scored: Vec<(usize, String)> = self
            .entries
            .iter()
            .map(|(k, e)| {
                let key_distance = strsim::levenshtein(id, k);
                let id_distance = strsim::levenshtein(id, &e.finding_id);
                (key_distance.min(id_distance), k.clone())
            })
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, k)| k).collect()
    }
}

#[cfg(test)]
mod tests;
