//! The input schemas of `orchestrator mcp`'s tools (one struct per tool,
//! its doc comments the schema's descriptions).

use schemars::JsonSchema;
use serde::Deserialize;

/// `{"path": …}`: a tasks.csv for `waves`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WavesInput {
    /// A lite-planex tasks.csv, relative to the repository or absolute inside it.
    pub path: String,
    /// Ignore unknown dependency ids with a warning instead of failing.
    #[serde(default)]
    pub lenient: bool,
}

/// A findings file for `batch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BatchInput {
    /// A findings file (review-cycle export, SARIF, rdjson, cargo/clippy JSON, ruff or ESLint JSON),
    /// relative to the repository or absolute inside it.
    pub path: String,
    /// Findings per batch.
    pub batch_size: Option<u32>,
}

/// `planex_plan`: a requirement to explore and plan, not execute.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanexPlanInput {
    /// What to build, in words.
    pub requirement: String,
    /// The planning agent (default: the repository's orchestrator.toml).
    pub agent: Option<String>,
    /// How many explorations run at once.
    pub concurrency: Option<u32>,
}

/// `planex_status`: which session.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanexStatusInput {
    /// The session id (a folder under `.workflow/.lite-plan/`); the newest
    /// session when absent.
    pub session: Option<String>,
}

/// A failed check's log for `ci_autofix_classify`: `log` or `path`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClassifyInput {
    /// The log text.
    pub log: Option<String>,
    /// A log file, relative to the repository or absolute inside it.
    pub path: Option<String>,
}

/// `review_fix`: fix the findings of a file, one verified commit per fix.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReviewFixInput {
    /// The findings file, relative to the repository or absolute inside it.
    pub path: String,
    /// The agent: builtin, claude, codex, gemini, openai[:MODEL] or
    /// `command:<cmd>` (default: the repository's orchestrator.toml).
    pub agent: Option<String>,
    /// The test command that verifies each fix (default: orchestrator.toml
    /// or inferred from the project).
    pub test_cmd: Option<String>,
    /// `each`, `batch` or `auto` (default).
    pub verify: Option<String>,
    /// Plan only: change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Approve the run (not needed with `dry_run`); without it the user is
    /// asked (elicitation), or the call is refused where the client cannot
    /// ask — the server never approves on the host's behalf.
    #[serde(default)]
    pub yes: bool,
}

/// `planex_run`: execute a tasks.csv in dependency order.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanexRunInput {
    /// The tasks.csv, relative to the repository or absolute inside it.
    pub path: String,
    /// How many tasks run at once.
    pub concurrency: Option<u32>,
    /// `eager` (default) or `waves`.
    pub schedule: Option<String>,
    /// The agent (default for `run`: the shell agent running each task's
    /// directives).
    pub agent: Option<String>,
    /// Leave the changes uncommitted and unverified (`--no-commit`); by
    /// default each task's change is measured and held to its scope, its
    /// directives run by the engine, and it lands as one commit.
    #[serde(default)]
    pub no_commit: bool,
    /// Approve the run and its gates; without it the user is asked
    /// (elicitation), or the call is refused where the client cannot ask.
    #[serde(default)]
    pub yes: bool,
}

/// `ci_autofix_local`: run checks, fix what fails under the cadence matrix.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CiAutofixLocalInput {
    /// The check commands, each run with `sh -c` in the repository.
    pub checks: Vec<String>,
    /// The agent (default: the repository's orchestrator.toml, else builtin).
    pub agent: Option<String>,
    /// Iterations before the mandatory escalation.
    pub max_iterations: Option<u32>,
    /// Approve the fixes; without it the user is asked (elicitation), or
    /// the call is refused where the client cannot ask.
    #[serde(default)]
    pub yes: bool,
}
