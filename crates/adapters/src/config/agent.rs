//! `[agent]`: the agent kinds, one settings table per kind (the CLI
//! presets, the OpenAI-compatible endpoint, any command), and the `--agent`
//! value ([`AgentSpec`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::{CommandLine, CommandValue, join_command, split_command};
use super::{ConfigError, is_false};

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
