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

use std::fmt;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

mod budget;
mod layers;

pub use budget::{BudgetSection, Price, Prices, check_prices};
pub use layers::{
    EffectiveConfig, FileRole, MainFile, Origin, user_config_path, user_config_path_from,
};

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

/// The whole `orchestrator.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Format version; must be [`CONFIG_VERSION`].
    #[serde(deserialize_with = "deserialize_version")]
    pub version: u32,
    /// Which agent to use and how each kind is set up.
    #[serde(default)]
    pub agent: AgentSection,
    /// The project's test command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestsSection>,
    /// Knobs of the review-fix flow.
    #[serde(default)]
    pub review_fix: ReviewFixSection,
    /// Knobs of the lite-planex flow.
    #[serde(default)]
    pub planex: PlanexSection,
    /// Knobs of the CI auto-fix flow.
    #[serde(default)]
    pub ci_autofix: CiAutofixSection,
    /// Limits on what a run's agent may spend.
    #[serde(default)]
    pub budget: BudgetSection,
    /// Token prices by model name (US dollars per million tokens).
    #[serde(default, skip_serializing_if = "Prices::is_empty")]
    pub prices: Prices,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            version: CONFIG_VERSION,
            agent: AgentSection::default(),
            tests: None,
            review_fix: ReviewFixSection::default(),
            planex: PlanexSection::default(),
            ci_autofix: CiAutofixSection::default(),
            budget: BudgetSection::default(),
            prices: Prices::new(),
        }
    }
}

fn deserialize_version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let version = u32::deserialize(d)?;
    if version == CONFIG_VERSION {
        Ok(version)
    } else {
        Err(de::Error::custom(format!(
            "unsupported config version {version}; this build reads version {CONFIG_VERSION}"
        )))
    }
}

impl Config {
    /// Reads and checks the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse_with_origin(&text, path)
    }

    /// Loads `orchestrator.toml` from the repository root `repo_dir`;
    /// `Ok(None)` when there is no such file.
    pub fn discover(repo_dir: impl AsRef<Path>) -> Result<Option<Self>, ConfigError> {
        let path = repo_dir.as_ref().join(CONFIG_FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse_with_origin(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// Parses and checks configuration text (errors name `<string>` as the
    /// file).
    pub fn parse_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with_origin(text, Path::new("<string>"))
    }

    fn parse_with_origin(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = match e.span() {
                Some(span) => {
                    let (l, c) = line_column(text, span.start);
                    (Some(l), Some(c))
                }
                None => (None, None),
            };
            ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        config.check().map_err(|e| match e {
            ConfigError::Invalid { message, .. } => ConfigError::Invalid {
                path: Some(path.to_owned()),
                message,
            },
            // Name the file here too: the bare error says only the field.
            command @ ConfigError::Command { .. } => ConfigError::Invalid {
                path: Some(path.to_owned()),
                message: command.to_string(),
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Checks what serde cannot: the commands split, and kind `command` has
    /// a command.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(tests) = &self.tests {
            tests.command_line()?;
        }
        if let Some(command) = &self.agent.command {
            command.command_line()?;
        }
        let invalid = |message| ConfigError::Invalid {
            path: None,
            message,
        };
        self.budget.check().map_err(invalid)?;
        check_prices(&self.prices).map_err(invalid)?;
        self.agent_spec().map(|_| ())
    }

    /// Applies the environment overrides from the process environment.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_env_from(|var| std::env::var(var).ok())
    }

    /// Applies the environment overrides read through `lookup` (tests pass a
    /// map): `ORCHESTRATOR_AGENT` (as `--agent`), `OPENAI_BASE_URL`,
    /// `OPENAI_MODEL`. Empty values are ignored.
    pub fn apply_env_from(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(spec) = get(ENV_AGENT) {
            let spec = AgentSpec::parse(&spec).map_err(|e| ConfigError::Env {
                var: ENV_AGENT.to_owned(),
                source: Box::new(e),
            })?;
            self.apply_agent_spec(&spec);
        }
        if let Some(url) = get(ENV_OPENAI_BASE_URL) {
            self.agent.openai.get_or_insert_default().base_url = Some(url.trim().to_owned());
        }
        if let Some(model) = get(ENV_OPENAI_MODEL) {
            self.agent.openai.get_or_insert_default().model = Some(model.trim().to_owned());
        }
        Ok(())
    }

    /// Selects the agent named by `spec` (from `--agent`); for
    /// `command:<cmd>` the command replaces `[agent.command]`'s, keeping its
    /// other settings.
    pub fn apply_agent_spec(&mut self, spec: &AgentSpec) {
        self.agent.kind = spec.kind();
        if let AgentSpec::OpenAiModel(model) = spec {
            self.agent.openai.get_or_insert_default().model = Some(model.clone());
        }
        if let AgentSpec::Command(line) = spec {
            let section = self.agent.command.get_or_insert_default();
            match line {
                CommandLine::Argv(argv) => {
                    section.argv = Some(CommandValue::Argv(argv.clone()));
                    section.shell = false;
                }
                CommandLine::Shell(script) => {
                    section.argv = Some(CommandValue::Text(script.clone()));
                    section.shell = true;
                }
            }
        }
    }

    /// The selected agent as an [`AgentSpec`] (for `command`, with its
    /// command line). The per-kind settings stay in [`Config::agent`].
    pub fn agent_spec(&self) -> Result<AgentSpec, ConfigError> {
        Ok(match self.agent.kind {
            AgentKind::Builtin => AgentSpec::Builtin,
            AgentKind::Claude => AgentSpec::Claude,
            AgentKind::Codex => AgentSpec::Codex,
            AgentKind::Gemini => AgentSpec::Gemini,
            AgentKind::Openai => AgentSpec::OpenAi,
            AgentKind::Command => match &self.agent.command {
                Some(section) => AgentSpec::Command(section.command_line()?),
                None => {
                    return Err(ConfigError::Invalid {
                        path: None,
                        message: "agent kind `command` needs an [agent.command] section with argv"
                            .into(),
                    });
                }
            },
        })
    }
}

/// Line and column (both 1-based, column in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[line_start..].chars().count() + 1)
}

/// The kinds of agent the engine knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// The builtin rule-based agents (suggestions, formatters, linter
    /// fixers); no LLM.
    #[default]
    Builtin,
    /// `claude -p --output-format json`.
    Claude,
    /// `codex exec --json`.
    Codex,
    /// `gemini -p … -o json`.
    Gemini,
    /// An OpenAI-compatible HTTP endpoint.
    Openai,
    /// Any command (`[agent.command]` or `--agent command:<cmd>`).
    Command,
}

impl AgentKind {
    /// Every kind, in documentation order.
    pub const ALL: [AgentKind; 6] = [
        AgentKind::Builtin,
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Openai,
        AgentKind::Command,
    ];

    /// The name used in the file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Builtin => "builtin",
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Openai => "openai",
            AgentKind::Command => "command",
        }
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[agent]`: the selected kind and one optional table per kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentSection {
    /// The agent to use (default `builtin`).
    #[serde(default)]
    pub kind: AgentKind,
    /// `[agent.claude]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude: Option<CliAgentSection>,
    /// `[agent.codex]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codex: Option<CliAgentSection>,
    /// `[agent.gemini]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemini: Option<CliAgentSection>,
    /// `[agent.openai]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openai: Option<OpenAiSection>,
    /// `[agent.command]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandAgentSection>,
}

/// `[agent.claude]`, `[agent.codex]`, `[agent.gemini]`: an agent CLI preset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CliAgentSection {
    /// The executable (name on `PATH` or a path); the preset's name when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// Extra arguments appended to the preset's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Model to ask for (`--model`); the CLI's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Time limit per call in seconds; the flow's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl CliAgentSection {
    /// [`CliAgentSection::timeout_secs`] as a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_secs.map(Duration::from_secs)
    }
}

/// `[agent.openai]`: an OpenAI-compatible chat-completions endpoint. The API
/// key never goes in the file: name the variable that holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OpenAiSection {
    /// Base URL up to the version path (`http://127.0.0.1:11434/v1`);
    /// `https://api.openai.com/v1` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Model name (required to build the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Environment variable holding the API key (default `OPENAI_API_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Time limit of one HTTP attempt in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Retries on 429, 5xx and connection errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Maximum completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// System prompt replacing the default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// A reasoning model (gpt-5, o-series): `max_completion_tokens` instead
    /// of `max_tokens`, and no `temperature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_model: Option<bool>,
    /// Tool calls for the roles that change files: `"native"` (function
    /// calling, falling back to the text protocol when the server refuses
    /// it) or `"text"` (the text protocol from the start). Native when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<ToolCallMode>,
    /// Model turns allowed per attempt of a tool-using role (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Wall time allowed per attempt of a tool-using role, in seconds
    /// (default: the flow's time limit only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_secs: Option<u64>,
    /// Folder for all of the tool agent's transcripts (one JSONL file per
    /// attempt); when absent, `transcripts/` in the flow's session folder
    /// (else `<cache>/transcripts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_dir: Option<PathBuf>,
    /// Paths (relative to the working directory; a folder covers what is
    /// under it) the tool agent must never write, besides `.git/` and the
    /// engine's folders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_paths: Vec<String>,
}

/// How the tool agent offers its tools to the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallMode {
    /// Native function calling (`tools`, `tool_choice`), negotiated down to
    /// the text protocol when the server refuses it.
    #[default]
    Native,
    /// The text protocol: one fenced action per reply.
    Text,
}

/// How a command agent receives the instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstructionInput {
    /// Written to standard input.
    Stdin,
    /// Appended as the last argument.
    Arg,
}

/// What a command agent prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Plain text: the whole of stdout is the answer.
    Text,
    /// A JSON value on stdout.
    Json,
}

/// `[agent.command]`: any command as an agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CommandAgentSection {
    /// The command: an argv array, or a string (split into words, or run by
    /// `sh -c` when `shell = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<CommandValue>,
    /// Run `argv` (a string) through `sh -c`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shell: bool,
    /// How the instruction is passed (the agent's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InstructionInput>,
    /// What the command prints (the agent's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFormat>,
    /// Time limit per call in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl CommandAgentSection {
    /// The command to run.
    pub fn command_line(&self) -> Result<CommandLine, ConfigError> {
        match &self.argv {
            Some(value) => value.resolve(self.shell, "[agent.command] argv"),
            None => Err(ConfigError::Command {
                field: "[agent.command] argv".into(),
                message: "missing; set argv to an array or a string".into(),
            }),
        }
    }

    /// [`CommandAgentSection::timeout_secs`] as a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_secs.map(Duration::from_secs)
    }
}

/// `[tests]`: how to run the project's tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TestsSection {
    /// The test command: an argv array, or a string (split into words, or run
    /// by `sh -c` when `shell = true`).
    pub command: CommandValue,
    /// Run `command` (a string) through `sh -c`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shell: bool,
    /// Time limit of one test run in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// JUnit XML report the command writes, relative to the repository, for
    /// counts and failing test names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit_report: Option<PathBuf>,
}

impl TestsSection {
    /// A section running `argv` directly.
    pub fn argv(argv: Vec<String>) -> Self {
        Self {
            command: CommandValue::Argv(argv),
            shell: false,
            timeout_secs: None,
            junit_report: None,
        }
    }

    /// The command to run.
    pub fn command_line(&self) -> Result<CommandLine, ConfigError> {
        self.command.resolve(self.shell, "[tests] command")
    }

    /// [`TestsSection::timeout_secs`] as a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_secs.map(Duration::from_secs)
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `[review_fix]`: knobs of the review-fix flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ReviewFixSection {
    /// Findings per planning batch (seed default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<NonZeroUsize>,
    /// Planning agents at once (seed default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<NonZeroUsize>,
    /// Fix attempts per finding (seed default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<NonZeroU32>,
    /// The findings command re-run after each pass (an argv array, or a
    /// string split into words; write `sh -c '…'` for a pipeline): its
    /// output feeds the next pass (see `--relint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relint: Option<CommandValue>,
    /// Passes in all when `relint` is set (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relint_passes: Option<NonZeroU32>,
}

impl ReviewFixSection {
    /// The re-lint command, when one is set.
    pub fn relint_command(&self) -> Option<Result<CommandLine, ConfigError>> {
        self.relint
            .as_ref()
            .map(|v| v.resolve(false, "[review_fix] relint"))
    }
}

/// `[planex]`: knobs of the lite-planex flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PlanexSection {
    /// Agents at once (seed default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<NonZeroUsize>,
    /// Scheduling mode (default `waves`, the seed's behaviour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
}

/// How a DAG of tasks is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// Wave by wave, with a barrier after each.
    Waves,
    /// A task starts as soon as its dependencies are done (critical path
    /// first).
    Eager,
}

/// `[ci_autofix]`: knobs of the CI auto-fix flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CiAutofixSection {
    /// Fix iterations per pull request before escalating (seed default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<NonZeroU32>,
}

/// A command as written in the file: a string or an argv array (the TOML
/// type tells which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandValue {
    /// `command = "cargo test --workspace"`.
    Text(String),
    /// `command = ["cargo", "test", "--workspace"]`.
    Argv(Vec<String>),
}

impl CommandValue {
    /// The command to run: an array as is, a string split by
    /// [`split_command`], or kept whole for `sh -c` when `shell`. `field`
    /// names the source in errors.
    pub fn resolve(&self, shell: bool, field: &str) -> Result<CommandLine, ConfigError> {
        let error = |message: String| ConfigError::Command {
            field: field.to_owned(),
            message,
        };
        match (self, shell) {
            (CommandValue::Argv(argv), false) => {
                if argv.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(error(
                        "the argv array is empty or its program is blank".into(),
                    ));
                }
                Ok(CommandLine::Argv(argv.clone()))
            }
            (CommandValue::Argv(_), true) => Err(error(
                "shell = true needs a string command, not an argv array".into(),
            )),
            (CommandValue::Text(text), true) => {
                if text.trim().is_empty() {
                    return Err(error("the shell command is empty".into()));
                }
                Ok(CommandLine::Shell(text.clone()))
            }
            (CommandValue::Text(text), false) => split_command(text)
                .map(CommandLine::Argv)
                .map_err(|e| error(e.to_string())),
        }
    }
}

impl Serialize for CommandValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CommandValue::Text(text) => s.serialize_str(text),
            CommandValue::Argv(argv) => argv.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CommandValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CommandVisitor;

        impl<'de> Visitor<'de> for CommandVisitor {
            type Value = CommandValue;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command string or an array of strings")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<CommandValue, E> {
                Ok(CommandValue::Text(v.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CommandValue, A::Error> {
                let mut argv = Vec::new();
                while let Some(word) = seq.next_element::<String>()? {
                    argv.push(word);
                }
                Ok(CommandValue::Argv(argv))
            }
        }

        d.deserialize_any(CommandVisitor)
    }
}

/// A command ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "command", rename_all = "snake_case")]
pub enum CommandLine {
    /// Program and arguments, run directly (no shell).
    Argv(Vec<String>),
    /// A script for `sh -c`.
    Shell(String),
}

impl fmt::Display for CommandLine {
    /// An argv is shown quoted so that [`split_command`] gives it back; a
    /// shell script is shown as is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandLine::Argv(argv) => f.write_str(&join_command(argv)),
            CommandLine::Shell(script) => f.write_str(script),
        }
    }
}

/// The agent chosen on the command line (`--agent`) or in
/// `ORCHESTRATOR_AGENT`: `builtin`, `claude`, `codex`, `gemini`, `openai`,
/// `openai:<model>`, or `command:<cmd>`.
///
/// `<cmd>` is split into argv by [`split_command`] (quotes and backslashes
/// as in a POSIX shell, no expansion, shell operators refused). For a real
/// shell, say so: `command:sh -c 'my-agent | tee log'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// The builtin rule-based agents.
    Builtin,
    /// The `claude` CLI.
    Claude,
    /// The `codex` CLI.
    Codex,
    /// The `gemini` CLI.
    Gemini,
    /// An OpenAI-compatible endpoint.
    OpenAi,
    /// An OpenAI-compatible endpoint with this model (`openai:MODEL`),
    /// which replaces `[agent.openai] model`.
    OpenAiModel(String),
    /// Any command.
    Command(CommandLine),
}

/// The forms `--agent` accepts, for error messages.
const AGENT_FORMS: &str = "builtin, claude, codex, gemini, openai, openai:<model>, command:<cmd>";

impl AgentSpec {
    /// Parses an `--agent` value.
    pub fn parse(spec: &str) -> Result<Self, ConfigError> {
        let error = |message: String| ConfigError::AgentSpec {
            spec: spec.to_owned(),
            message,
        };
        let trimmed = spec.trim();
        if let Some(command) = trimmed.strip_prefix("command:") {
            if command.trim().is_empty() {
                return Err(error(
                    "`command:` needs a command after the colon, e.g. command:my-agent --json"
                        .into(),
                ));
            }
            return split_command(command)
                .map(|argv| AgentSpec::Command(CommandLine::Argv(argv)))
                .map_err(|e| error(e.to_string()));
        }
        if let Some(model) = trimmed.strip_prefix("openai:") {
            let model = model.trim();
            if model.is_empty() {
                return Err(error(
                    "`openai:` needs a model after the colon, e.g. openai:qwen2.5-coder".into(),
                ));
            }
            return Ok(AgentSpec::OpenAiModel(model.to_owned()));
        }
        Ok(match trimmed {
            "builtin" => AgentSpec::Builtin,
            "claude" => AgentSpec::Claude,
            "codex" => AgentSpec::Codex,
            "gemini" => AgentSpec::Gemini,
            "openai" => AgentSpec::OpenAi,
            "command" => {
                return Err(error(
                    "`command` needs a command: command:<cmd>, e.g. command:my-agent --json".into(),
                ));
            }
            "" => return Err(error(format!("empty; expected one of {AGENT_FORMS}"))),
            other => {
                return Err(error(format!(
                    "unknown agent `{other}`; expected one of {AGENT_FORMS}"
                )));
            }
        })
    }

    /// The kind of agent.
    pub fn kind(&self) -> AgentKind {
        match self {
            AgentSpec::Builtin => AgentKind::Builtin,
            AgentSpec::Claude => AgentKind::Claude,
            AgentSpec::Codex => AgentKind::Codex,
            AgentSpec::Gemini => AgentKind::Gemini,
            AgentSpec::OpenAi | AgentSpec::OpenAiModel(_) => AgentKind::Openai,
            AgentSpec::Command(_) => AgentKind::Command,
        }
    }
}

impl FromStr for AgentSpec {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for AgentSpec {
    /// The `--agent` form; [`AgentSpec::parse`] reads it back (a shell
    /// command is shown as `command:sh -c '<script>'`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentSpec::Command(CommandLine::Argv(argv)) => {
                write!(f, "command:{}", join_command(argv))
            }
            AgentSpec::Command(CommandLine::Shell(script)) => {
                write!(
                    f,
                    "command:{}",
                    join_command(&["sh".into(), "-c".into(), script.clone()])
                )
            }
            AgentSpec::OpenAiModel(model) => write!(f, "openai:{model}"),
            other => f.write_str(other.kind().as_str()),
        }
    }
}

/// Why [`split_command`] refused a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// Nothing but whitespace.
    #[error("the command is empty")]
    Empty,
    /// A quote was opened and never closed.
    #[error("unterminated {quote} quote starting at character {position}")]
    UnterminatedQuote {
        /// `single` or `double`.
        quote: &'static str,
        /// 1-based character position of the opening quote.
        position: usize,
    },
    /// The line ends with a lone backslash.
    #[error("the command ends with a lone backslash")]
    TrailingBackslash,
    /// An unquoted character a shell would interpret.
    #[error(
        "unquoted {character:?} at character {position} needs a shell; quote it, \
         or run the command through sh -c '...' (shell = true in the config file)"
    )]
    ShellSyntax {
        /// The character.
        character: char,
        /// 1-based character position.
        position: usize,
    },
}

/// Splits a command line into words, shell-style but without a shell:
/// - blanks (space, tab, newline) separate words;
/// - `'…'` keeps everything literally;
/// - `"…"` keeps everything literally except `\"`, `\\`, `\$`, `` \` `` and
///   backslash-newline (removed);
/// - outside quotes a backslash makes the next character literal
///   (backslash-newline is removed);
/// - `""` and `''` give an empty word;
/// - no expansion of any kind: `~`, `*`, `?` are passed literally; unquoted
///   `| & ; < > ( )`, and unescaped `$` or backquote outside single quotes,
///   are refused ([`SplitError::ShellSyntax`]) because a reader would expect
///   a shell to act on them.
pub fn split_command(line: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().enumerate().map(|(i, c)| (i + 1, c)).peekable();
    while let Some((position, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, c)) => word.push(c),
                        None => {
                            return Err(SplitError::UnterminatedQuote {
                                quote: "single",
                                position,
                            });
                        }
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, '\n')) => {}
                            Some((_, c @ ('"' | '\\' | '$' | '`'))) => word.push(c),
                            Some((_, c)) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => {
                                return Err(SplitError::UnterminatedQuote {
                                    quote: "double",
                                    position,
                                });
                            }
                        },
                        Some((at, c @ ('$' | '`'))) => {
                            return Err(SplitError::ShellSyntax {
                                character: c,
                                position: at,
                            });
                        }
                        Some((_, c)) => word.push(c),
                        None => {
                            return Err(SplitError::UnterminatedQuote {
                                quote: "double",
                                position,
                            });
                        }
                    }
                }
            }
            '\\' => match chars.next() {
                Some((_, '\n')) => {}
                Some((_, c)) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err(SplitError::TrailingBackslash),
            },
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' => {
                return Err(SplitError::ShellSyntax {
                    character: c,
                    position,
                });
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err(SplitError::Empty);
    }
    Ok(words)
}

/// Joins words into a line [`split_command`] splits back into the same
/// words: plain words as is, others in single quotes (`'` written `'\''`).
pub fn join_command(words: &[String]) -> String {
    let mut line = String::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./:=,+@%^".contains(c));
        if plain {
            line.push_str(word);
        } else {
            line.push('\'');
            line.push_str(&word.replace('\'', r"'\''"));
            line.push('\'');
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn split_handles_quotes_and_escapes() {
        let check = |line: &str, expected: &[&str]| {
            assert_eq!(split_command(line), Ok(words(expected)), "{line:?}");
        };
        check("my-agent --json", &["my-agent", "--json"]);
        check("  a\t b\n c  ", &["a", "b", "c"]);
        check(r#"run "two words" 'it''s'"#, &["run", "two words", "its"]);
        check(r#"say 'it'\''s'"#, &["say", "it's"]);
        check(r#"x "a \"q\" \\ \$HOME \n""#, &["x", r#"a "q" \ $HOME \n"#]);
        check(r"a\ b c\\d", &["a b", r"c\d"]);
        check("a '' \"\"", &["a", "", ""]);
        check("line\\\ncontinued", &["linecontinued"]);
        check("'$HOME | `x`'", &["$HOME | `x`"]);
        check("glob *.rs ~/x", &["glob", "*.rs", "~/x"]);
        check(r"esc \| \$x", &["esc", "|", "$x"]);
    }

    #[test]
    fn split_refuses_what_needs_a_shell() {
        let check = |line: &str, expected: SplitError| {
            assert_eq!(split_command(line), Err(expected), "{line:?}");
        };
        check("", SplitError::Empty);
        check("   ", SplitError::Empty);
        check(
            "a 'b",
            SplitError::UnterminatedQuote {
                quote: "single",
                position: 3,
            },
        );
        check(
            "a \"b",
            SplitError::UnterminatedQuote {
                quote: "double",
                position: 3,
            },
        );
        check("a\\", SplitError::TrailingBackslash);
        check(
            "a | b",
            SplitError::ShellSyntax {
                character: '|',
                position: 3,
            },
        );
        check(
            "echo $HOME",
            SplitError::ShellSyntax {
                character: '$',
                position: 6,
            },
        );
        check(
            "echo \"$(id)\"",
            SplitError::ShellSyntax {
                character: '$',
                position: 7,
            },
        );
        check(
            "a>b",
            SplitError::ShellSyntax {
                character: '>',
                position: 2,
            },
        );
    }

    #[test]
    fn join_quotes_only_what_needs_it() {
        assert_eq!(
            join_command(&words(&["cargo", "test", "--", "--nocapture"])),
            "cargo test -- --nocapture"
        );
        assert_eq!(
            join_command(&words(&["say", "it's", "", "a b", "$x"])),
            r"say 'it'\''s' '' 'a b' '$x'"
        );
    }

    #[test]
    fn line_column_counts_characters() {
        let text = "ab\ncé\nx";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 6), (2, 3));
        assert_eq!(line_column(text, 7), (3, 1));
        assert_eq!(line_column(text, 100), (3, 2));
    }
}
