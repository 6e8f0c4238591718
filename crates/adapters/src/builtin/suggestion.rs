//! [`SuggestionAgent`]: applies a finding's machine-applicable suggestions.
//!
//! ## Request contract
//!
//! `AgentRequest::context` is `{"finding": <Finding as JSON>}` — the
//! serialised [`orchestrator_core::Finding`], as the readers in
//! `orchestrator-findings` produce it — and optionally
//! `"edit_history": {"<file>": <EditHistory> | null}`: per file, the edits
//! already applied to it since the findings were produced
//! ([`orchestrator_core::edit::EditHistory`], baseline byte offsets), or
//! `null` when the file changed in ways nobody recorded. Edit paths are
//! relative to `AgentRequest::workdir`. The instruction text is ignored.
//!
//! ## What it does
//!
//! A finding's suggestions are alternatives: the first one whose edits all
//! apply is used. All edits of a suggestion apply together or none does;
//! identical duplicates apply once; overlapping different edits are refused
//! (the semantics of rustfix, which `cargo fix` uses). Where each edit goes:
//!
//! - with a history for the file, exactly where the finding recorded it,
//!   mapped through the earlier edits
//!   ([`orchestrator_core::edit::apply_mapped`]); a replaced text must be
//!   found exactly there, and an edit identical to an earlier one is already
//!   applied;
//! - with `null` for the file, replacements are re-anchored by the text they
//!   replace ([`orchestrator_core::edit::locate`]) and pure insertions,
//!   which have no text to anchor by, are refused
//!   ([`orchestrator_core::edit::EditError::Unplaceable`]);
//! - without `edit_history` in the context the file is taken as the findings
//!   saw it: positions as recorded, replacements re-anchored by their text.
//!
//! Files are replaced atomically (a uniquely named temporary file in the
//! same folder, synced, renamed over the original; a symlink is written
//! through and stays a link) and only once every file of the suggestion has
//! been planned, so a refused suggestion changes nothing. The answer's
//! `structured` value is `{"applied_edits": {"<file>": [<AppliedEdit>...]},
//! "already_applied": bool}` for the files placed through a history, which
//! the caller records to extend it; `already_applied` says that every edit
//! of the suggestion is one an earlier fix applied (the finding is fixed,
//! with no change of its own).
//!
//! ## Errors
//!
//! A suggestion that overlaps an edit an earlier fix of the session applied
//! ([`EditError::Conflict`]) is [`AgentError::Conflict`]: not now, but a
//! re-lint reports it again at its new place, where it may apply (rustfix,
//! ruff and ESLint skip such a fix within a pass the same way). Every other
//! refusal is [`AgentError::Unsupported`] (retrying would not help): no
//! suggestion ("not fixable by this agent"), a stale suggestion (its text
//! is gone), overlapping edits, an unanchored edit, a path outside the working
//! directory, a malformed context. I/O failures are [`AgentError::Failed`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::edit::{
    AppliedEdit, EditError, EditHistory, already_present, apply_edits, apply_mapped,
};
use orchestrator_core::finding::{Finding, Suggestion, TextEdit};

use super::files::resolve_in_workdir;

/// Why a finding's suggestion was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuggestionError {
    /// The request context does not hold a finding.
    #[error(
        "the request context does not hold a finding (expected {{\"finding\": {{...}}}}): {message}"
    )]
    BadContext {
        /// What is wrong with it.
        message: String,
    },
    /// The finding carries no suggestion.
    #[error("finding {id} carries no machine-applicable suggestion: not fixable by this agent")]
    NoSuggestion {
        /// The finding's id.
        id: String,
    },
    /// An edit could not be placed or the edits collide.
    #[error("finding {id}: {source}")]
    Edit {
        /// The finding's id.
        id: String,
        /// What went wrong.
        source: EditError,
    },
    /// An edit names a path the agent must not touch.
    #[error("finding {id}: refusing to edit {path:?}: {reason}")]
    Path {
        /// The finding's id.
        id: String,
        /// The path as the edit spells it.
        path: String,
        /// Why.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("finding {id}: failed to {action} {path}: {message}")]
    Io {
        /// The finding's id.
        id: String,
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        message: String,
    },
    /// Several alternative suggestions, none of which applies.
    #[error("finding {id}: none of its {} suggestions applies: {}", reasons.len(), reasons.join("; "))]
    NoneApplies {
        /// The finding's id.
        id: String,
        /// Why each alternative failed, in order.
        reasons: Vec<String>,
        /// Whether one of them failed only for overlapping an earlier edit.
        conflict: bool,
    },
}

impl SuggestionError {
    /// Whether the suggestion was refused only because it overlaps an edit
    /// applied earlier in the session ([`EditError::Conflict`]; for several
    /// alternatives, when one of them was): a re-lint reports the finding
    /// again against the fixed text, where it may apply.
    pub fn is_conflict(&self) -> bool {
        match self {
            SuggestionError::Edit {
                source: EditError::Conflict { .. },
                ..
            } => true,
            SuggestionError::NoneApplies { conflict, .. } => *conflict,
            _ => false,
        }
    }
}

impl From<SuggestionError> for AgentError {
    fn from(e: SuggestionError) -> Self {
        match e {
            SuggestionError::Io { .. } => AgentError::Failed {
                message: e.to_string(),
                exit_code: None,
            },
            _ if e.is_conflict() => AgentError::Conflict {
                reason: e.to_string(),
            },
            _ => AgentError::Unsupported {
                reason: e.to_string(),
            },
        }
    }
}

/// Reads the finding out of a request context (`{"finding": {...}}`).
pub fn finding_from_context(context: &serde_json::Value) -> Result<Finding, SuggestionError> {
    let value = context
        .get("finding")
        .ok_or_else(|| SuggestionError::BadContext {
            message: "it has no `finding` key".to_owned(),
        })?;
    serde_json::from_value(value.clone()).map_err(|e| SuggestionError::BadContext {
        message: e.to_string(),
    })
}

/// Per file, the edits applied since the findings were produced (`None`:
/// unrecorded changes); see the module docs.
pub type EditHistories = HashMap<String, Option<EditHistory>>;

/// Reads `edit_history` out of a request context: `None` when the context
/// has none.
pub fn histories_from_context(
    context: &serde_json::Value,
) -> Result<Option<EditHistories>, SuggestionError> {
    match context.get("edit_history") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| SuggestionError::BadContext {
                message: format!("`edit_history`: {e}"),
            }),
    }
}

/// What [`apply_finding`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The files whose content changed (relative, sorted).
    pub changed: Vec<String>,
    /// Per file placed through a history, the edits newly applied
    /// (baseline coordinates).
    pub edits: BTreeMap<String, Vec<AppliedEdit>>,
    /// Every edit of the suggestion is one an earlier fix of the session
    /// already applied (several findings often carry the same edit: each
    /// name of `import os, sys` deletes the whole statement), so the finding
    /// is fixed without a change of its own, as rustfix, ruff and ESLint
    /// count it.
    pub already_applied: bool,
}

/// Applies `finding`'s first applicable suggestion to the files under
/// `workdir`, placing edits through `histories` when given (see the module
/// docs).
///
/// Blocking file I/O; [`SuggestionAgent`] runs it on the blocking pool.
pub fn apply_finding(
    workdir: &Path,
    finding: &Finding,
    histories: Option<&EditHistories>,
) -> Result<Applied, SuggestionError> {
    let id = finding.id.to_string();
    if finding.suggestions.is_empty() {
        return Err(SuggestionError::NoSuggestion { id });
    }
    let mut reasons = Vec::new();
    let mut conflict = false;
    let mut first_error = None;
    for suggestion in &finding.suggestions {
        match plan(workdir, &id, suggestion, histories) {
            Ok(writes) => return commit(&id, writes),
            Err(e) => {
                reasons.push(e.to_string());
                conflict |= e.is_conflict();
                first_error.get_or_insert(e);
            }
        }
    }
    match (finding.suggestions.len(), first_error) {
        (1, Some(e)) => Err(e),
        _ => Err(SuggestionError::NoneApplies {
            id,
            reasons,
            conflict,
        }),
    }
}

/// A planned write: the relative name, the real path and the new content.
struct Write {
    name: String,
    path: PathBuf,
    old: String,
    new: String,
    /// The edits applied through the file's history, when it had one, under
    /// the file's name as the edits spell it.
    mapped: Option<(String, Vec<AppliedEdit>)>,
    /// The file changed in ways nobody recorded and already shows every
    /// edit ([`already_present`]).
    present: bool,
}

/// Computes the new content of every file a suggestion touches, without
/// writing anything.
fn plan(
    workdir: &Path,
    id: &str,
    suggestion: &Suggestion,
    histories: Option<&EditHistories>,
) -> Result<Vec<Write>, SuggestionError> {
    let mut by_file: BTreeMap<&str, Vec<&TextEdit>> = BTreeMap::new();
    for edit in &suggestion.edits {
        by_file.entry(edit.file.as_str()).or_default().push(edit);
    }
    let mut writes = Vec::with_capacity(by_file.len());
    for (file, edits) in by_file {
        let path = resolve_in_workdir(workdir, file).map_err(|reason| SuggestionError::Path {
            id: id.to_owned(),
            path: file.to_owned(),
            reason,
        })?;
        let old = std::fs::read_to_string(&path).map_err(|e| SuggestionError::Io {
            id: id.to_owned(),
            action: "read",
            path: file.to_owned(),
            message: e.to_string(),
        })?;
        let edit_error = |source| SuggestionError::Edit {
            id: id.to_owned(),
            source,
        };
        let mut present = false;
        let (new, mapped) = match histories.map(|h| h.get(file).cloned().flatten()) {
            // No history was passed: positions as the findings recorded them.
            None => (apply_edits(&old, &edits).map_err(edit_error)?, None),
            Some(Some(history)) => {
                let out = apply_mapped(&old, &history, &edits).map_err(edit_error)?;
                (out.text, Some((file.to_owned(), out.applied)))
            }
            // Unrecorded changes: re-anchor by text; insertions cannot be.
            Some(None) => {
                if let Some(ins) = edits
                    .iter()
                    .find(|e| e.original.is_empty() && !orchestrator_core::edit::is_unanchored(e))
                {
                    return Err(edit_error(EditError::Unplaceable {
                        file: ins.file.clone(),
                        line: ins.start_line,
                    }));
                }
                match apply_edits(&old, &edits) {
                    Ok(new) => (new, None),
                    // An earlier fix made the same edit, as the history
                    // would have said.
                    Err(EditError::Stale { .. }) if already_present(&old, &edits) => {
                        present = true;
                        (old.clone(), None)
                    }
                    Err(e) => return Err(edit_error(e)),
                }
            }
        };
        writes.push(Write {
            name: file.trim_start_matches("./").to_owned(),
            path,
            old,
            new,
            mapped,
            present,
        });
    }
    Ok(writes)
}

/// Writes the planned files (each atomically) and returns the names of those
/// whose content changed.
fn commit(id: &str, writes: Vec<Write>) -> Result<Applied, SuggestionError> {
    let mut changed = Vec::new();
    let mut edits = BTreeMap::new();
    let already_applied = !writes.is_empty()
        && writes.iter().all(|w| {
            w.old == w.new && (w.present || w.mapped.as_ref().is_some_and(|(_, m)| m.is_empty()))
        });
    for w in writes {
        if let Some((key, mapped)) = w.mapped {
            edits.insert(key, mapped);
        }
        if w.old == w.new {
            continue;
        }
        write_atomically(&w.path, w.new.as_bytes()).map_err(|e| SuggestionError::Io {
            id: id.to_owned(),
            action: "write",
            path: w.name.clone(),
            message: e.to_string(),
        })?;
        changed.push(w.name);
    }
    changed.sort();
    Ok(Applied {
        changed,
        edits,
        already_applied,
    })
}

/// Replaces `path` (a regular file: `resolve_in_workdir` resolved any
/// symlink, so a link is written through and stays a link) with `bytes`:
/// a sibling temporary file of a name no other writer can hold, its
/// permissions the original's, synced to disk, renamed over the original,
/// and the folder synced, so a crash leaves the old content or the new,
/// never a mix.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let permissions = std::fs::metadata(path)?.permissions();
    let mut tmp = tempfile::Builder::new()
        .prefix(".orchestrator-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().set_permissions(permissions)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Applies the machine-applicable suggestions a finding carries. See the
/// module docs for the request contract.
#[derive(Debug, Clone, Copy, Default)]
pub struct SuggestionAgent;

impl SuggestionAgent {
    /// The agent.
    pub fn new() -> Self {
        SuggestionAgent
    }
}

#[async_trait]
impl Agent for SuggestionAgent {
    fn name(&self) -> &str {
        "builtin-suggestion"
    }

    /// It writes each edit itself (atomically, in process) and runs no
    /// program: the files it lists are exactly those it changed.
    fn reports_exact_changes(&self) -> bool {
        true
    }

    fn declines(&self, finding: &Finding) -> Option<String> {
        finding.suggestions.is_empty().then(|| {
            SuggestionError::NoSuggestion {
                id: finding.id.to_string(),
            }
            .to_string()
        })
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let finding = finding_from_context(&request.context)?;
        let histories = histories_from_context(&request.context)?;
        let workdir = request.workdir.clone();
        let id = finding.id.to_string();
        let applied = tokio::task::spawn_blocking(move || {
            apply_finding(&workdir, &finding, histories.as_ref())
        })
        .await
        .map_err(|e| AgentError::Failed {
            message: format!("the suggestion worker for finding {id} stopped: {e}"),
            exit_code: None,
        })??;
        let changed = applied.changed;
        let text = if changed.is_empty() {
            format!("finding {id}: the suggestion was already applied; no file changed")
        } else {
            format!(
                "finding {id}: applied the machine-applicable suggestion to {}",
                changed.join(", ")
            )
        };
        let mut response = AgentResponse::text(text).with_files_changed(changed);
        if !applied.edits.is_empty() || applied.already_applied {
            response.structured = Some(serde_json::json!({
                "applied_edits": applied.edits,
                "already_applied": applied.already_applied,
            }));
        }
        Ok(response)
    }
}
