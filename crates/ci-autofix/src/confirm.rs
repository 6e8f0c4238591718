//! Confirmation gates outside a run: which targets wait at one
//! ([`waiting`]), answering one ([`answer`], what `orchestrator ci-autofix
//! approve|decline` and the dashboard call), and the engine branch that
//! keeps a waiting patch's commit.
//!
//! A run that must ask "apply this patch?" and cannot (no terminal, or
//! told to stop there) keeps its verified commit on an engine branch
//! (`ci-autofix-gate-<key>`, checked out in an engine worktree outside the
//! repository, so git never collects it and the user's tree never sees it)
//! and records the gate in its state file ([`ConfirmGate`]). An approval
//! is only recorded here — the next run of the target lands and pushes the
//! kept commit exactly as a run confirmed on the spot does. A decline is
//! final at once: the kept commit is dropped and the iteration escalates.
//! Both take the target's lock, so a running engine is never raced.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use orchestrator_core::vcs::{CommitId, Vcs};

use crate::context::AutofixError;
use crate::report::{append_audit, audit_header, audit_log_path, audit_section};
use crate::state::{
    AnsweredBy, AutofixState, ConfirmGate, GateAnswer, GateDecision, HistoryEntry, MOAI_DIR,
    StateFile, Target,
};

/// A target whose run waits at its confirmation gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// The target's key (`785`, `local-main`).
    pub key: String,
    /// The gate.
    pub gate: ConfirmGate,
}

/// What [`answer`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The target's key.
    pub key: String,
    /// The decision recorded.
    pub decision: GateDecision,
    /// The iteration whose patch it was.
    pub iteration: u32,
    /// The kept commit.
    pub commit: String,
    /// The same answer was recorded before (nothing was written).
    pub already: bool,
    /// The command that goes on from the gate (the run's own arguments);
    /// empty when the run gave none.
    pub resume: Vec<String>,
}

impl Answered {
    /// What to tell the person: what was recorded and what comes next.
    pub fn message(&self) -> String {
        let short = &self.commit[..self.commit.len().min(7)];
        match self.decision {
            GateDecision::Approve => format!(
                "The patch of iteration {} ({short}) of ci-autofix-{} {}.\n\
                 Land it: orchestrator ci-autofix --continue {}",
                self.iteration,
                self.key,
                if self.already {
                    "was already approved"
                } else {
                    "is approved"
                },
                self.key
            ),
            GateDecision::Decline => format!(
                "The patch of iteration {} ({short}) of ci-autofix-{} is declined: \
                 its commit was dropped and the failure is escalated (fix it by hand).",
                self.iteration, self.key
            ),
        }
    }
}

/// The key of a session or target name: `785`, `local-main`, or the
/// session folder's `ci-autofix-785`.
pub fn key_of(name: &str) -> &str {
    name.strip_prefix("ci-autofix-").unwrap_or(name)
}

/// Every target of the repository at `root` whose run waits at a gate
/// (answered or not), by key; read without locks.
pub fn waiting(root: &Path) -> Vec<Waiting> {
    let dir = root.join(MOAI_DIR).join("state");
    let mut found: Vec<Waiting> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let key = name.strip_prefix("ci-autofix-")?.strip_suffix(".json")?;
            let state: AutofixState =
                orchestrator_core::state::read_json_if_exists(e.path()).ok()??;
            Some(Waiting {
                key: key.to_owned(),
                gate: state.gate?,
            })
        })
        .collect();
    found.sort_by(|a, b| a.key.cmp(&b.key));
    found
}

/// Records `decision` on the gate the target `name` waits at (`None`: the
/// only waiting one of the repository). A decline also drops the kept
/// commit and finishes the iteration as escalated (history, audit log).
/// An answer given before is reported ([`Answered::already`]); the other
/// answer than the one given is refused.
pub async fn answer(
    vcs: &dyn Vcs,
    name: Option<&str>,
    decision: GateDecision,
    by: AnsweredBy,
    origin: &str,
    now: Timestamp,
) -> Result<Answered, AutofixError> {
    let root = vcs.root().to_path_buf();
    let key = match name {
        Some(n) => key_of(n).to_owned(),
        None => only_waiting(&root)?,
    };
    let lock = StateFile::lock_key(&root, &key, &format!("ci-autofix-{key}"))?;
    let (file, mut state) = match lock.existing(&root, &key)? {
        Some((file, state)) if state.gate.is_some() => (file, state),
        _ => return Err(no_gate(&root, &key)),
    };
    let Some(mut gate) = state.gate.take() else {
        return Err(no_gate(&root, &key));
    };
    let mut answered = Answered {
        key: key.clone(),
        decision,
        iteration: gate.iteration,
        commit: gate.commit.clone(),
        already: false,
        resume: gate.resume.clone(),
    };
    if let Some(given) = &gate.answer {
        if given.decision != decision {
            return Err(AutofixError::Confirm {
                reason: format!(
                    "the patch of ci-autofix-{key} was already answered `{}` at {} ({}); \
                     an answer is final",
                    given.decision.as_str(),
                    given.at,
                    given.origin
                ),
            });
        }
        answered.already = true;
        state.gate = Some(gate);
        return Ok(answered);
    }
    gate.answer = Some(GateAnswer {
        decision,
        at: now.to_string(),
        by,
        origin: origin.to_owned(),
    });
    match decision {
        GateDecision::Approve => {
            state.gate = Some(gate);
            file.save(&state)?;
        }
        GateDecision::Decline => decline(vcs, &file, state, gate, now).await?,
    }
    Ok(answered)
}

/// Finishes a declined gate's iteration as escalated and drops its commit.
async fn decline(
    vcs: &dyn Vcs,
    file: &StateFile,
    mut state: AutofixState,
    gate: ConfirmGate,
    now: Timestamp,
) -> Result<(), AutofixError> {
    let origin = gate.answer.as_ref().map_or("", |a| a.origin.as_str());
    let reason = format!("the patch was declined ({origin})");
    let entry = HistoryEntry {
        iteration: gate.iteration,
        classification: gate.classification.clone(),
        sub_class: gate.sub_class.clone(),
        action: "escalated".into(),
        patch_sha: None,
        escalation_reason: Some(reason),
        checks: gate.checks.clone(),
        warnings: gate.warnings.clone(),
        finished_at: now.to_string(),
        agent_spend: gate.agent_spend,
        rerun: None,
    };
    let target = match state.pr_number {
        Some(number) => Target::Pr {
            number,
            branch: state.branch.clone(),
            forge: state.forge,
        },
        None => Target::Local {
            branch: state.branch.clone(),
        },
    };
    let root = vcs.root();
    append_audit(
        &audit_log_path(root, &target, now),
        &audit_header(&target, now),
        &audit_section(&entry, None),
    )?;
    state.history.push(entry);
    state.last_action = orchestrator_core::cadence::Action::EscalateNoPatch
        .as_str()
        .into();
    state.gate = None;
    file.save(&state)?;
    drop_kept(vcs, &gate).await?;
    Ok(())
}

fn only_waiting(root: &Path) -> Result<String, AutofixError> {
    // The unanswered gates; else the answered ones still waiting for their
    // run (answering one again reports what was recorded).
    let all = waiting(root);
    let unanswered: Vec<Waiting> = all
        .iter()
        .filter(|w| w.gate.answer.is_none())
        .cloned()
        .collect();
    let open = if unanswered.is_empty() {
        all
    } else {
        unanswered
    };
    match open.as_slice() {
        [one] => Ok(one.key.clone()),
        [] => Err(AutofixError::Confirm {
            reason: format!(
                "no ci-autofix run waits for confirmation in {}",
                root.display()
            ),
        }),
        many => Err(AutofixError::Confirm {
            reason: format!(
                "{} ci-autofix runs wait for confirmation in {}; name one: {}",
                many.len(),
                root.display(),
                many.iter()
                    .map(|w| w.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

fn no_gate(root: &Path, key: &str) -> AutofixError {
    AutofixError::Confirm {
        reason: format!(
            "ci-autofix-{key} does not wait for confirmation (no gate in {})",
            StateFile::path_for_key(root, key).display()
        ),
    }
}

/// Where the gate of target `key` keeps its commit: the engine worktree
/// and its branch.
pub(crate) fn keep_place(root: &Path, key: &str) -> (PathBuf, String) {
    let branch = format!("ci-autofix-gate-{key}");
    (
        orchestrator_core::state::worktree_root(root).join(&branch),
        branch,
    )
}

/// Keeps `commit` on the gate's engine branch (in its engine worktree),
/// replacing what a crash may have left there.
pub(crate) async fn keep(
    vcs: &dyn Vcs,
    key: &str,
    commit: &CommitId,
) -> Result<(PathBuf, String), AutofixError> {
    let (path, branch) = keep_place(vcs.root(), key);
    // A leftover of a run killed between keeping and recording: its gate
    // was never recorded, so nothing refers to it.
    let _ = vcs.worktree_remove(&path, &branch).await;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| AutofixError::Io {
            what: "create".into(),
            path: parent.to_path_buf(),
            source,
        })?;
    }
    vcs.worktree_add(&path, &branch, commit).await?;
    Ok((path, branch))
}

/// Removes the gate's engine worktree and branch (the commit has landed or
/// was declined).
pub(crate) async fn drop_kept(vcs: &dyn Vcs, gate: &ConfirmGate) -> Result<(), AutofixError> {
    vcs.worktree_remove(&gate.keep_path, &gate.keep_branch)
        .await?;
    Ok(())
}
