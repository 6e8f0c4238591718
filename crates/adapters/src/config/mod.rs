//! `orchestrator.toml`: the configuration file shared by the CLI and
//! embedders, plus the `--agent` flag and the environment overrides.
//!
//! This module only parses and checks data; it starts no process and opens
//! no socket. Building agents and runners from it is the caller's job.
//!
//! ```toml
//! version = 1                      # required; this build reads version 1
//!
//! [agent]
//! kind = "openai"                  # builtin | claude | codex | gemini | openai | command
//!
//! [agent.openai]
//! base_url = "http://127.0.0.1:11434/v1"
//! model = "qwen2.5-coder"
//!
//! [tests]
//! command = ["cargo", "test", "--workspace"]
//! timeout_secs = 900
//! ```
//!
//! Every table rejects keys it does not know, with the key and its line in
//! the error, so a typo never silently falls back to a default.
//! `crates/adapters/orchestrator.example.toml` documents every key.
//!
//! ## Precedence
//! Lowest first: defaults < the user file
//! (`$XDG_CONFIG_HOME/orchestrator/config.toml`, see [`user_config_path`])
//! < the repository's `orchestrator.toml`, or the file `--config` names
//! instead < environment (`ORCHESTRATOR_AGENT`, `OPENAI_BASE_URL`,
//! `OPENAI_MODEL`) < command line (the parsed `--agent`).
//! [`EffectiveConfig`] merges the layers and remembers where each value came
//! from; [`Config::load`] / [`Config::discover`] read one file alone.
//!
//! ## Command lines
//! A command is either an argv array (run directly) or a string. A string is
//! split into words by [`split_command`] — POSIX-shell-like quoting (single
//! quotes, double quotes, backslash escapes), but no expansion, globbing,
//! pipes or redirections; unquoted shell operators and `$` / backquote are
//! refused rather than passed on literally. With `shell = true` a string is
//! kept whole and meant for `sh -c` ([`CommandLine::Shell`]).

use std::path::PathBuf;

mod agent;
mod budget;
mod cache;
mod command;
mod file;
mod flows;
mod layers;
mod runner;
mod worktree;

pub use agent::{
    AgentKind, AgentSection, AgentSpec, CliAgentSection, CommandAgentSection, InstructionInput,
    OpenAiSection, OutputFormat, ToolCallMode,
};
pub use budget::{BudgetSection, Price, Prices, check_prices};
pub use cache::{ByteCount, CacheSection, DEFAULT_CACHE_MAX_SIZE, ENV_CACHE_MAX_SIZE};
pub use command::{CommandLine, CommandValue, SplitError, join_command, split_command};
pub use file::Config;
pub use flows::{CiAutofixSection, PlanexSection, ReviewFixSection, Schedule, TestsSection};
pub use layers::{
    EffectiveConfig, FileRole, MainFile, Origin, user_config_path, user_config_path_from,
};
pub use runner::{RunnerKind, RunnerSection};
pub use worktree::{LinkMode, WorktreeSection};

/// The file [`Config::discover`] looks for in a repository root.
pub const CONFIG_FILE_NAME: &str = "orchestrator.toml";

/// The configuration format version this build reads and writes.
pub const CONFIG_VERSION: u32 = 1;

/// Environment variable that selects the agent (same syntax as `--agent`).
pub const ENV_AGENT: &str = "ORCHESTRATOR_AGENT";
/// Environment variable that overrides `[agent.openai] base_url`.
pub const ENV_OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
/// Environment variable that overrides `[agent.openai] model`.
pub const ENV_OPENAI_MODEL: &str = "OPENAI_MODEL";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("failed to read config file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not match the schema (unknown key,
    /// wrong type, unknown agent kind, unsupported version…).
    #[error("failed to parse config file {}{}: {message}", .path.display(), location(.line, .column))]
    Parse {
        /// The file (`<string>` for text parsed directly).
        path: PathBuf,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// 1-based column of the problem, when known.
        column: Option<usize>,
        /// What is wrong (names the key or value).
        message: String,
    },
    /// A command line could not be split or is empty.
    #[error("invalid command in {field}: {message}")]
    Command {
        /// Where the command came from (`[tests] command`, `--agent`, …).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An `--agent` value (or `ORCHESTRATOR_AGENT`) is not understood.
    #[error("invalid agent {spec:?}: {message}")]
    AgentSpec {
        /// The value as given.
        spec: String,
        /// What is wrong, with the valid forms.
        message: String,
    },
    /// An environment override is invalid.
    #[error("invalid environment variable {var}: {source}")]
    Env {
        /// The variable.
        var: String,
        /// The underlying problem.
        #[source]
        source: Box<ConfigError>,
    },
    /// The settings are inconsistent (e.g. kind `command` with no command).
    #[error("invalid config{}: {message}", origin(.path))]
    Invalid {
        /// The file, when the settings came from one.
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
    },
}

fn location(line: &Option<usize>, column: &Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

fn origin(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" in {}", p.display()))
        .unwrap_or_default()
}

/// `skip_serializing_if` for flags that default to false.
fn is_false(b: &bool) -> bool {
    !*b
}
