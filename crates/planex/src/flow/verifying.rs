//! Verified execution's part of the flow (see [`crate::verify`]): the
//! builder, the clean-tree check, the base commit a crashed run's commits
//! are found from, and one task at a time.

use std::path::Path;
use std::sync::Arc;

use orchestrator_core::event::Event;
use orchestrator_core::scheduler::SchedulerConfig;
use orchestrator_core::vcs::CommitId;
use orchestrator_core::worktree::{
    FileJournal, WorktreePool, delete_worktree_dir, removal_reason, remove_leftovers,
};

use super::Planex;
use crate::error::PlanexError;
use crate::exec::{VerifyEnv, scheduler_config};
use crate::session::{Session, SessionSource};
use crate::verify::{IN_FLIGHT_PREFIX, InFlight, Verification, landed_commit, landed_commits};

/// The file in a session folder holding the HEAD its first verified run
/// started from.
const BASE_FILE: &str = "verify-base.txt";

/// The file in a session folder that marks its tasks as run unverified
/// (written when its first unverified execution starts).
const UNVERIFIED_FILE: &str = "unverified.txt";

/// The file in a session folder listing the worktrees of the run's pool
/// (see [`FileJournal`]): a crashed run's are removed on `--continue`.
const POOL_JOURNAL: &str = "worktrees.json";

/// The folder of a session's worktree pool, outside the repository.
fn pool_dir(verification: &Verification, session: &Session) -> std::path::PathBuf {
    orchestrator_core::state::worktree_root(verification.vcs.root())
        .join(format!("planex-{}", session.id()))
}

/// How a session's tasks run, as recorded by its first execution:
/// `Some(true)` verified, `Some(false)` unverified (`--no-commit`), `None`
/// when none of its tasks has run yet. `id` picks the session as
/// `--continue` does (the newest resumable one without it).
pub fn session_verified(repo: &Path, id: Option<&str>) -> Result<Option<bool>, PlanexError> {
    Ok(recorded_mode(&crate::session::find_session(repo, id)?.dir))
}

/// The mode a session folder records (see [`session_verified`]).
fn recorded_mode(dir: &Path) -> Option<bool> {
    if dir.join(BASE_FILE).exists() {
        Some(true)
    } else if dir.join(UNVERIFIED_FILE).exists() {
        Some(false)
    } else {
        None
    }
}

impl Planex {
    /// Builder: verify each task instead of trusting its agent — its change
    /// measured, held to its scope, checked by the engine's own run of its
    /// directives (or the test command), and landed as its own commit; see
    /// [`crate::verify`]. The working tree must be clean; with a
    /// concurrency above 1 each task runs in a worktree of its own.
    pub fn with_verification(mut self, verification: Verification) -> Self {
        self.verification = Some(Arc::new(verification));
        self
    }

    /// The scheduler settings of phase 4.
    pub(super) fn task_scheduler_config(&self) -> SchedulerConfig {
        scheduler_config(&self.options)
    }

    /// Refuses a dirty working tree before anything is paid for, when
    /// verified (`run_file`: the `planex run` CSV, which may be dirty).
    pub(super) async fn check_clean(&self, run_file: Option<&str>) -> Result<(), PlanexError> {
        let Some(verification) = &self.verification else {
            return Ok(());
        };
        if verification.allow_dirty {
            return Ok(());
        }
        let root = verification.vcs.root().to_path_buf();
        let allowed = run_file.and_then(|f| relative_to(&root, Path::new(f)));
        let dirty: Vec<String> = verification
            .vcs
            .status()
            .await?
            .dirty_paths()
            .into_iter()
            .filter(|p| Some(p) != allowed.as_ref() && !p.starts_with(".workflow/"))
            .collect();
        if dirty.is_empty() {
            Ok(())
        } else {
            Err(PlanexError::DirtyTree { paths: dirty })
        }
    }

    /// Refuses to run a session's tasks in the other mode than its first
    /// execution did: once a verified run started (its base is recorded),
    /// every run of it must verify, or tasks would land half as commits and
    /// half as loose changes, and an interrupted task's record would be
    /// ignored; once an unverified run started, its tasks' changes sit
    /// uncommitted in the tree, which verification would refuse as dirty.
    /// The first execution records its mode ([`Planex::verify_env`]).
    pub(super) fn check_verified_session(&self, session: &Session) -> Result<(), PlanexError> {
        match (recorded_mode(session.dir()), self.verification.is_some()) {
            (Some(true), false) => Err(PlanexError::InvalidOption(format!(
                "session {} runs verified tasks (one commit per task): continue it without --no-commit",
                session.id()
            ))),
            (Some(false), true) => Err(PlanexError::InvalidOption(format!(
                "session {} runs its tasks unverified (it was started with --no-commit): continue it with --no-commit",
                session.id()
            ))),
            _ => Ok(()),
        }
    }

    /// What phase 4's verified tasks need: the tree checked clean, the
    /// session's base commit (written by its first verified run, which so
    /// records the session's mode). Unverified, `None`, once the session's
    /// mode is recorded as such.
    pub(crate) async fn verify_env(
        &self,
        session: &Session,
    ) -> Result<Option<VerifyEnv>, PlanexError> {
        let Some(verification) = &self.verification else {
            let marker = session.dir().join(UNVERIFIED_FILE);
            if !marker.exists() {
                orchestrator_core::state::write_atomic(
                    &marker,
                    b"this session's tasks run unverified (--no-commit)\n",
                )?;
            }
            return Ok(None);
        };
        // Every rollback and worktree removal of the run saves what it
        // would lose into the session's trash first.
        verification.vcs.set_trash(Some(Arc::new(
            orchestrator_core::trash::Trash::for_session(session.dir()),
        )));
        let run_file = match &session.meta().source {
            SessionSource::Run { tasks_csv } => Some(tasks_csv.as_str()),
            _ => None,
        };
        let path = session.dir().join(BASE_FILE);
        let base = match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => Some(CommitId(text.trim().to_owned())),
            _ => None,
        };
        let base = match base {
            Some(base) => {
                self.recover_in_flight(verification, session, &base).await?;
                self.say_what_went_to_trash(verification);
                self.check_clean(run_file).await?;
                base
            }
            None => {
                let head = verification.vcs.head().await.map_err(|e| {
                    PlanexError::InvalidOption(format!(
                        "verified tasks land as commits on the current branch, and {} has no commit to start from ({e}): commit the project first, or pass --no-commit",
                        verification.vcs.root().display()
                    ))
                })?;
                self.check_clean(run_file).await?;
                orchestrator_core::state::write_atomic(&path, head.as_str().as_bytes())?;
                head
            }
        };
        // Every task runs in a worktree of the run's pool, outside the
        // repository (where tools that read configuration from parent
        // folders never see the user's files), never in the user's tree,
        // where the user may be working; so does every task of a dirty
        // tree.
        let pool = Arc::new(
            WorktreePool::new(
                Arc::clone(&verification.vcs),
                pool_dir(verification, session),
                format!("planex/{}/", session.id()),
            )
            .with_provisioner(verification.provisioner.clone())
            .with_sink(Arc::clone(&self.sink))
            .with_journal(Arc::new(
                FileJournal::open(session.dir().join(POOL_JOURNAL))
                    .with_sink(Arc::clone(&self.sink)),
            )),
        );
        // One read of the history for the whole run: which tasks landed
        // before an interruption (none when the run starts the session).
        let landed = landed_commits(verification.vcs.as_ref(), &base).await?;
        Ok(Some(VerifyEnv {
            verification: Arc::clone(verification),
            landed,
            dir: session.dir().to_path_buf(),
            pool,
            lock: Arc::default(),
        }))
    }
}

impl Planex {
    /// After a crash: each task that was in flight had a worktree, which
    /// goes whatever it holds (the task landed — its commit is found by
    /// its trailer when it starts — or runs again); a record of a commit
    /// kept for landing stays for its task; the user's tree is never
    /// rolled back. The records are then removed.
    async fn recover_in_flight(
        &self,
        verification: &Verification,
        session: &Session,
        base: &CommitId,
    ) -> Result<(), PlanexError> {
        for path in in_flight_records(session) {
            let Some(record) = orchestrator_core::state::read_json_if_exists::<InFlight>(&path)?
            else {
                continue;
            };
            if let Some(worktree) = &record.worktree {
                remove_crashed_worktree(verification, &path, &record.id, worktree).await?;
                session.remove_file(&path)?;
                continue;
            }
            if record.landing.is_some() {
                // A verified commit the user's work blocked: its task
                // lands it when it runs (see `exec/verified.rs`).
                continue;
            }
            if record.checkpoint.is_some()
                && landed_commit(verification.vcs.as_ref(), base, &record.id)
                    .await?
                    .is_none()
            {
                // A task an older version ran in the working tree itself:
                // its half-done change cannot be told from edits the user
                // made since, so nothing is rolled back; the tree check
                // that follows names what is uncommitted.
                self.sink.emit(&Event::Warning {
                    message: format!(
                        "task {} was interrupted in the working tree before it landed; nothing was rolled back (your edits since cannot be told from its change): review `git status`, then run again",
                        record.id
                    ),
                });
            }
            session.remove_file(&path)?;
        }
        self.remove_pool_leftovers(verification, session).await
    }

    /// The worktrees a crashed run's pool left (listed in its journal),
    /// removed whatever they hold: a task's work in one was not landed and
    /// is redone.
    async fn remove_pool_leftovers(
        &self,
        verification: &Verification,
        session: &Session,
    ) -> Result<(), PlanexError> {
        let journal = session.dir().join(POOL_JOURNAL);
        let slots = FileJournal::leftovers(&journal);
        if slots.is_empty() {
            return Ok(());
        }
        let problems = remove_leftovers(
            verification.vcs.as_ref(),
            &slots,
            &pool_dir(verification, session),
        )
        .await;
        if let Some(problem) = problems.first() {
            return Err(PlanexError::Vcs(orchestrator_core::vcs::VcsError::Other(
                format!("an interrupted run's worktree is left: {problem}"),
            )));
        }
        session.remove_file(&journal)?;
        Ok(())
    }
}

impl Planex {
    /// `context.md`'s `## Verification` section ([`verification_section`])
    /// followed by what the run saved to the session's trash, if anything.
    pub(super) fn verification_sections(
        &self,
        rows: &[crate::rows::TaskRow],
        verified: &std::collections::BTreeMap<String, crate::verify::Verified>,
    ) -> Option<String> {
        let trash = (self.verification.as_ref())
            .and_then(|v| v.vcs.trash())
            .map(|t| format!("\n{}", t.report_markdown()))
            .filter(|r| r.len() > 1);
        match (verification_section(rows, verified), trash) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default() + &b.unwrap_or_default()),
        }
    }

    /// After a `--continue` removed what a crash left: says on stderr what
    /// went to the session's trash, with the command to bring it back.
    fn say_what_went_to_trash(&self, verification: &Verification) {
        let saved = verification
            .vcs
            .trash()
            .map(|t| t.report())
            .unwrap_or_default();
        if !saved.is_empty() {
            self.sink.emit(&Event::Warning {
                message: format!(
                    "the continued run removed worktrees an interrupted run left, and saved their uncommitted files first.\n{}",
                    saved.trim_end()
                ),
            });
        }
    }
}

/// `file` relative to `root` (both made absolute), with `/` separators.
fn relative_to(root: &Path, file: &Path) -> Option<String> {
    let root = std::fs::canonicalize(root).ok()?;
    let file = std::fs::canonicalize(file).ok()?;
    let rel = file.strip_prefix(&root).ok()?;
    Some(rel.to_string_lossy().replace('\\', "/"))
}

/// The columns `results.csv` gains after the seed's (and the spend
/// columns) in a verified session: a task's commit, the files its agent
/// claimed when they differ from the measured `files_modified`, and the
/// engine's verification command.
pub(super) const VERIFY_COLUMNS: [&str; 3] = ["commit", "claimed_files_modified", "verification"];

/// `rows` with [`VERIFY_COLUMNS`] appended when any task was verified.
pub(super) fn with_verified(
    mut rows: Vec<crate::rows::TaskRow>,
    verified: &std::collections::BTreeMap<String, crate::verify::Verified>,
) -> Vec<crate::rows::TaskRow> {
    if verified.is_empty() {
        return rows;
    }
    for row in &mut rows {
        let v = verified.get(&row.id).cloned().unwrap_or_default();
        row.extra
            .retain(|(name, _)| !VERIFY_COLUMNS.contains(&name.as_str()));
        row.extra.extend([
            (VERIFY_COLUMNS[0].to_owned(), v.commit.unwrap_or_default()),
            (VERIFY_COLUMNS[1].to_owned(), v.claimed_files.join(";")),
            (VERIFY_COLUMNS[2].to_owned(), v.check.unwrap_or_default()),
        ]);
    }
    rows
}

/// The `## Verification` section of `context.md`: per task the measured
/// files, the engine's check and its result, the commit, and what the agent
/// claimed when it differs. `None` when nothing was verified.
pub(super) fn verification_section(
    rows: &[crate::rows::TaskRow],
    verified: &std::collections::BTreeMap<String, crate::verify::Verified>,
) -> Option<String> {
    if verified.is_empty() {
        return None;
    }
    let cell = |s: &str| {
        if s.is_empty() {
            "—".to_owned()
        } else {
            s.replace('|', "\\|").replace('\n', "<br>")
        }
    };
    let mut out = String::from(
        "\n\n---\n\n## Verification\n\n\
         Each task's change is what the working tree shows, its tests are the engine's own run, \
         and a task that passed landed as its own commit.\n\n\
         | Task | Status | Attempts | Measured files | Check | Tests passed | Commit | Agent claimed |\n\
         |------|--------|----------|----------------|-------|--------------|--------|---------------|\n",
    );
    for row in rows {
        let Some(v) = verified.get(&row.id) else {
            continue;
        };
        let tests = row.tests_passed.map(|t| t.to_string()).unwrap_or_default();
        let commit = v
            .commit
            .as_deref()
            .map(|c| &c[..c.len().min(12)])
            .unwrap_or("");
        let mut claimed = v.claimed_files.join(", ");
        if !v.outside_scope.is_empty() {
            claimed.push_str(&format!(" (outside scope: {})", v.outside_scope.join(", ")));
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.id,
            row.status,
            v.attempts,
            cell(&row.files_modified.join(", ")),
            cell(v.check.as_deref().unwrap_or("")),
            cell(&tests),
            cell(commit),
            cell(claimed.trim()),
        ));
    }
    Some(out)
}

/// The session's in-flight records, in name order.
fn in_flight_records(session: &Session) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(session.dir()) else {
        return Vec::new();
    };
    let mut records: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(IN_FLIGHT_PREFIX) && n.ends_with(".json")
            })
        })
        .collect();
    records.sort();
    records
}

/// Removes the worktree an interrupted task (`id`, recorded in `record`)
/// left, whatever it holds (into the session's trash first): nothing of it
/// is in the working tree, and the task starts afresh or is found landed.
/// A worktree outside the engine's folder is refused, never removed.
async fn remove_crashed_worktree(
    verification: &Verification,
    record: &std::path::Path,
    id: &str,
    worktree: &crate::verify::TaskWorktree,
) -> Result<(), PlanexError> {
    let ours = orchestrator_core::state::worktree_root(verification.vcs.root());
    if !worktree.path.starts_with(&ours) {
        return Err(PlanexError::Vcs(orchestrator_core::vcs::VcsError::Other(
            format!(
                "{} names the worktree {}, which is not under {}: refusing to remove it",
                record.display(),
                worktree.path.display(),
                ours.display()
            ),
        )));
    }
    let reason = removal_reason(&worktree.path, " left by a crash");
    if let Err(e) = delete_worktree_dir(verification.vcs.as_ref(), &worktree.path, &reason).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(PlanexError::Vcs(orchestrator_core::vcs::VcsError::Other(
            format!(
                "the worktree {} of interrupted task {id} cannot be removed: {e}",
                worktree.path.display(),
            ),
        )));
    }
    verification
        .vcs
        .worktree_remove(&worktree.path, &worktree.branch)
        .await?;
    Ok(())
}
