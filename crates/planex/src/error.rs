//! The one error type of this crate.

use std::path::PathBuf;

use orchestrator_core::agent::AgentError;
use orchestrator_core::state::StateError;

/// Why a planex run could not go on.
///
/// Every variant is "bad input or a broken environment": the CLI maps all of
/// them to exit code 2 ([`PlanexError::EXIT_CODE`]). Outcomes that are not
/// errors — failed tasks, a stop at a gate — are an
/// [`Outcome`](crate::Outcome), not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanexError {
    /// A state file (CSV, journal, session metadata, lock) could not be read
    /// or written; the message names the file, and the line and column where
    /// there is one.
    #[error(transparent)]
    State(#[from] StateError),

    /// `--continue` found nothing to continue.
    #[error(
        "no planex session to continue in {}{}",
        dir.display(),
        describe_unresumable(found)
    )]
    NoSession {
        /// The sessions directory that was searched.
        dir: PathBuf,
        /// The sessions found there (none of them resumable, or not the one named).
        found: Vec<String>,
    },

    /// A named session does not exist.
    #[error(
        "planex session `{id}` not found in {}{}",
        dir.display(),
        describe_found(found)
    )]
    SessionNotFound {
        /// The id asked for.
        id: String,
        /// The sessions directory that was searched.
        dir: PathBuf,
        /// The sessions that do exist.
        found: Vec<String>,
    },

    /// Verified execution ([`crate::verify`]) found uncommitted changes:
    /// each task lands as its own commit, so the tree must be clean first
    /// (the session folder and the `planex run` file aside).
    #[error(
        "the working tree has uncommitted changes ({}): verified tasks land as their own commits, so commit or stash them first, or pass --allow-dirty (they are then never touched)",
        paths.join(", ")
    )]
    DirtyTree {
        /// The dirty paths.
        paths: Vec<String>,
    },

    /// Verified execution could not read or checkpoint the repository.
    #[error("verified execution: {0}")]
    Vcs(#[from] orchestrator_core::vcs::VcsError),

    /// A session id that cannot name a directory (a `/`, `..`, empty).
    #[error("invalid session id {id:?}: expected a directory name such as wpp-20260228-auth")]
    InvalidSessionId {
        /// The id given.
        id: String,
    },

    /// A session folder holds neither `explore.csv` nor `tasks.csv`: it
    /// stopped before its first plan was written.
    #[error(
        "session {} has no explore.csv or tasks.csv to resume from; start a new session",
        dir.display()
    )]
    NothingToResume {
        /// The session folder.
        dir: PathBuf,
    },

    /// The tasks (from the planner or a tasks.csv) do not form a valid plan:
    /// duplicate or unknown ids, a cycle, too few or too many tasks.
    #[error("invalid task plan in {}: {}", source_name, problems.join("; "))]
    InvalidPlan {
        /// Where the tasks came from (`tasks.csv` path or `planner answer`).
        source_name: String,
        /// Every problem found, each naming the row and id.
        problems: Vec<String>,
    },

    /// The exploration plan is unusable (no angles, duplicate ids).
    #[error("invalid exploration plan in {}: {}", source_name, problems.join("; "))]
    InvalidExplorePlan {
        /// Where the angles came from.
        source_name: String,
        /// Every problem found.
        problems: Vec<String>,
    },

    /// The planner agent failed, or kept answering something unusable.
    #[error("planner agent failed while {step}: {source}")]
    Planner {
        /// What the planner was asked ("selecting exploration angles", "planning tasks").
        step: &'static str,
        /// The last error.
        #[source]
        source: AgentError,
    },

    /// The options make no sense (a concurrency of 0, …).
    #[error("invalid planex option: {0}")]
    InvalidOption(String),

    /// The executing agent only answers (a plain completion, see
    /// [`Agent::changes_files`](orchestrator_core::agent::Agent::changes_files)),
    /// and implementation tasks must change files; refused before any call.
    #[error(
        "the agent `{agent}` cannot change files (it only answers), and executing tasks must: give an agent that edits (claude, codex, gemini, the shell builtin, or the tool agent for an OpenAI-compatible endpoint: --agent openai)"
    )]
    AgentCannotChangeFiles {
        /// The executing agent's name.
        agent: String,
    },

    /// Creating a directory or copying an input file failed.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl PlanexError {
    /// The process exit code for every error: 2 (bad input).
    pub const EXIT_CODE: u8 = 2;

    /// The exit code the CLI should use: always [`Self::EXIT_CODE`].
    pub fn exit_code(&self) -> u8 {
        Self::EXIT_CODE
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        PlanexError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

fn describe_found(found: &[String]) -> String {
    if found.is_empty() {
        "; no sessions found".to_owned()
    } else {
        format!("; sessions found: {}", found.join(", "))
    }
}

/// [`PlanexError::NoSession`]'s account of the sessions it passed over.
fn describe_unresumable(found: &[String]) -> String {
    if found.is_empty() {
        "; no sessions found".to_owned()
    } else {
        format!(
            "; none of the sessions found can be continued (cancelled, or stopped before its \
             first plan was written: start a new one): {}",
            found.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_session_lists_what_was_found() {
        let e = PlanexError::NoSession {
            dir: PathBuf::from("/r/.workflow/.lite-plan"),
            found: vec![],
        };
        assert_eq!(
            e.to_string(),
            "no planex session to continue in /r/.workflow/.lite-plan; no sessions found"
        );
        let e = PlanexError::NoSession {
            dir: PathBuf::from("/r/s"),
            found: vec!["wpp-a".into()],
        };
        assert_eq!(
            e.to_string(),
            "no planex session to continue in /r/s; none of the sessions found can be continued \
             (cancelled, or stopped before its first plan was written: start a new one): wpp-a"
        );
        let e = PlanexError::SessionNotFound {
            id: "wpp-x".into(),
            dir: PathBuf::from("/r/s"),
            found: vec!["wpp-a".into(), "wpp-b".into()],
        };
        assert_eq!(
            e.to_string(),
            "planex session `wpp-x` not found in /r/s; sessions found: wpp-a, wpp-b"
        );
        assert_eq!(e.exit_code(), 2);
    }
}
