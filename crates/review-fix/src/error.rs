//! The crate's error type.

use orchestrator_core::text::counted;
use std::path::PathBuf;

use orchestrator_core::state::StateError;
use orchestrator_core::vcs::VcsError;

/// Why a review-fix session could not run (as opposed to findings that
/// failed, which are a successful run with an [`crate::Outcome`] of
/// `SomeFailed`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewFixError {
    /// An input file could not be read.
    #[error("failed to read findings input {}: {message}", path.display())]
    InputRead {
        /// The input.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// An input file could not be parsed.
    ///
    /// The message is the reader's, which names the file and the place
    /// (`failed to read sarif findings from F: invalid JSON at line 3,
    /// column 7: …`); it is shown as is, so the file is named once.
    #[error("{message}")]
    InputParse {
        /// The input.
        path: PathBuf,
        /// What the reader said, naming the file.
        message: String,
    },
    /// The options make no sense.
    #[error("invalid review-fix usage: {0}")]
    Usage(String),
    /// The agent only answers (a plain completion, see
    /// [`Agent::changes_files`](orchestrator_core::agent::Agent::changes_files)),
    /// and fixing findings must change files; refused before any call.
    #[error(
        "the agent `{agent}` cannot change files (it only answers), and fixing findings must: give an agent that edits (claude, codex, gemini, or the tool agent for an OpenAI-compatible endpoint: --agent openai), or plan only with --dry-run"
    )]
    AgentCannotChangeFiles {
        /// The agent's name.
        agent: String,
    },
    /// Tests fail before any fix and `require_green_base` is on.
    #[error(
        "the tests fail before any fix ({}: {}); fix them first, or run without --require-green-base to judge each fix by no new failure",
        counted(tests.len() as u64, "test", "tests"),
        tests.join(", ")
    )]
    RedBase {
        /// The failing tests.
        tests: Vec<String>,
    },
    /// The tests at the base cannot be judged against (they do not build,
    /// time out, or name no failing test); no fix was tried.
    #[error("{message}; no fix was tried")]
    Base {
        /// What the base's run said.
        message: String,
    },
    /// The working tree has uncommitted changes and `allow_dirty` is off.
    #[error(
        "refusing to run on a dirty working tree ({} dirty or untracked: {}); commit or stash them, or pass --allow-dirty (those files are then never touched)",
        paths.len(),
        paths.join(", ")
    )]
    DirtyTree {
        /// The dirty and untracked paths.
        paths: Vec<String>,
    },
    /// Another engine holds the session.
    #[error("fix session {} is in use: {source}", dir.display())]
    Locked {
        /// The session directory.
        dir: PathBuf,
        /// The lock error.
        #[source]
        source: Box<StateError>,
    },
    /// Another review-fix run holds the repository: runs share its
    /// checked-out branch, whatever folder their session files live in.
    #[error(
        "another review-fix run is in progress on {} ({source}); wait for it to finish, or stop it and continue with --resume",
        repo.display()
    )]
    RepoBusy {
        /// The repository root.
        repo: PathBuf,
        /// The lock error (naming the holder's pid when known).
        #[source]
        source: Box<StateError>,
    },
    /// `--resume` found nothing to resume.
    #[error("no unfinished fix session to resume under {}", dir.display())]
    NothingToResume {
        /// Where sessions were looked for.
        dir: PathBuf,
    },
    /// A state file could not be read or written.
    #[error(transparent)]
    State(Box<StateError>),
    /// A version-control operation failed outside a single fix.
    #[error("version control failed while {action}: {source}")]
    Vcs {
        /// What was being done.
        action: String,
        /// The VCS error.
        #[source]
        source: VcsError,
    },
    /// A state file has a version this build does not read.
    #[error("{} has format version {found}, this build reads version {expected}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// The supported one.
        expected: u32,
    },
    /// A pull/merge request cannot be fixed as asked (a fork we may not
    /// push to, a head that moved); refused before any agent call.
    #[error("{reason}")]
    Request {
        /// Why, naming the request.
        reason: String,
    },
    /// A forge call failed (reading a request, replying, posting a review).
    #[error("the forge failed while {action}: {message}")]
    Forge {
        /// What was being done.
        action: String,
        /// The forge's error.
        message: String,
    },
    /// Any other I/O failure on the session directory.
    #[error("failed to {action} {}: {message}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

impl From<StateError> for ReviewFixError {
    fn from(e: StateError) -> Self {
        ReviewFixError::State(Box::new(e))
    }
}

impl ReviewFixError {
    /// The process exit code the CLI uses for this error: 2 for unreadable
    /// inputs and wrong usage (including a dirty tree, a red base refused
    /// by `require_green_base`, a locked session,
    /// nothing to resume, and a session file that does not parse), 1 for
    /// everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReviewFixError::InputRead { .. }
            | ReviewFixError::InputParse { .. }
            | ReviewFixError::Usage(_)
            | ReviewFixError::AgentCannotChangeFiles { .. }
            | ReviewFixError::DirtyTree { .. }
            | ReviewFixError::RedBase { .. }
            | ReviewFixError::Locked { .. }
            | ReviewFixError::RepoBusy { .. }
            | ReviewFixError::NothingToResume { .. }
            | ReviewFixError::Version { .. }
            | ReviewFixError::Request { .. } => 2,
            ReviewFixError::State(e) if matches!(**e, StateError::Json { .. }) => 2,
            _ => 1,
        }
    }

    pub(crate) fn vcs(action: impl Into<String>, source: VcsError) -> Self {
        ReviewFixError::Vcs {
            action: action.into(),
            source,
        }
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, e: std::io::Error) -> Self {
        ReviewFixError::Io {
            action,
            path: path.into(),
            message: e.to_string(),
        }
    }
}
