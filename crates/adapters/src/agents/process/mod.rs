//! [`ProcessAgent`]: an [`Agent`] that runs a command per request.
//!
//! The instruction reaches the command on stdin or as an argument (the
//! `{instruction}` placeholder); the answer is read from stdout as text, as
//! JSON, or in the dialect of a known agent CLI ([`Dialect`]). The child runs
//! through [`crate::process::run`]: its own process group, bounded output,
//! and on timeout SIGTERM → grace → SIGKILL to the whole group, so an agent
//! CLI and every command it started are gone when `run` returns.

use std::ffi::OsString;
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{
    Agent, AgentError, AgentRequest, AgentResponse, Role, extract_json, snippet,
};

mod args;

pub use super::raw::{RawOutput, authentication_error};
pub use args::gemini_policy;

use super::{claude, codex, gemini};
use crate::process::{self, ProcessOutput, ProcessSpec};

/// The placeholder replaced by the rendered instruction in argument mode.
pub const INSTRUCTION_PLACEHOLDER: &str = "{instruction}";

/// How the instruction reaches the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstructionInput {
    /// Written to stdin, which is then closed.
    Stdin,
    /// Substituted for `{instruction}` in the arguments; appended as the last
    /// argument when no argument holds the placeholder. An instruction that
    /// starts with `-` gets a leading space so it is never read as an option.
    Argument,
}

/// How the command's output is read, and which CLI conventions apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// stdout is the answer text.
    Text,
    /// stdout is one JSON value: the structured answer (its text is stdout).
    Json,
    /// `claude -p --output-format json` (see [`super::claude`]).
    Claude,
    /// `codex exec --json` JSONL events (see [`super::codex`]).
    Codex,
    /// `gemini -p … -o json` (see [`super::gemini`]).
    Gemini,
}

impl Dialect {
    /// Whether the CLI takes the schema natively (so the prompt need not
    /// carry it).
    fn native_schema(self) -> bool {
        matches!(self, Dialect::Claude | Dialect::Codex)
    }
}

/// A command agent; see the [module docs](self). Presets:
/// [`ProcessAgent::claude`], [`ProcessAgent::codex`], [`ProcessAgent::gemini`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessAgent {
    name: String,
    program: OsString,
    args: Vec<String>,
    input: InstructionInput,
    dialect: Dialect,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    time_limit: Option<Duration>,
    grace: Duration,
    output_limit: usize,
    role_permissions: bool,
}

/// Default bytes of stdout/stderr kept per stream for an agent (16 MiB: a
/// long JSONL event stream must survive whole for its final events).
pub const DEFAULT_AGENT_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

impl ProcessAgent {
    /// A generic agent running `program args…`, instruction on stdin, text on
    /// stdout.
    pub fn new<I, S>(name: impl Into<String>, program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: name.into(),
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            input: InstructionInput::Stdin,
            dialect: Dialect::Text,
            env: Vec::new(),
            env_remove: Vec::new(),
            time_limit: None,
            grace: process::DEFAULT_GRACE,
            output_limit: DEFAULT_AGENT_OUTPUT_LIMIT,
            role_permissions: true,
        }
    }

    /// The `claude` preset: `claude -p --output-format json`, instruction on
    /// stdin, `--json-schema` when the request has a schema, and
    /// `--permission-mode acceptEdits` for roles that change files, with
    /// `--allowedTools "Bash(<command>:*)"` for each of the request's
    /// [`allowed_commands`](AgentRequest::allowed_commands) (headless claude
    /// denies every other shell command; widen it with `[agent.claude] args`,
    /// e.g. `["--allowedTools", "Bash(make:*)"]`). The `CLAUDECODE` variable is removed from its environment, so that an
    /// engine itself started from a Claude Code session can still run it.
    ///
    /// Unless `CLAUDE_CODE_MAX_RETRIES` is already set in our environment,
    /// it is set to 0 for the child: claude otherwise retries API errors —
    /// a 401 too — silently until our time limit kills it, and the error
    /// would say only "timed out". With it, an API error ends the run with
    /// its status in the result, which is classified (401/403 not retried)
    /// and retried, when transient, by our retry wrapper.
    pub fn claude() -> Self {
        let agent = Self::new("claude", "claude", Vec::<String>::new())
            .dialect(Dialect::Claude)
            .env_remove("CLAUDECODE");
        if std::env::var_os("CLAUDE_CODE_MAX_RETRIES").is_some() {
            agent
        } else {
            agent.env("CLAUDE_CODE_MAX_RETRIES", "0")
        }
    }

    /// The `codex` preset: `codex exec --json -`, instruction on stdin,
    /// `--output-schema <file>` when the request has a schema (in the strict
    /// form of [`codex::strict_schema`]; the answer's `null`s for optional
    /// properties are dropped before it is validated), and
    /// `--sandbox workspace-write` for roles that change files. Codex has no
    /// per-command grant: under that sandbox `codex exec` runs any command,
    /// confined to writing the working tree, so the request's
    /// [`allowed_commands`](AgentRequest::allowed_commands) need no flag.
    pub fn codex() -> Self {
        Self::new("codex", "codex", Vec::<String>::new()).dialect(Dialect::Codex)
    }

    /// The `gemini` preset: `gemini --skip-trust -o json`, instruction on
    /// stdin (a CI log in a prompt can exceed the argument size limit), the
    /// schema (if any) described in the prompt, and `--approval-mode
    /// auto_edit` for roles that change files, with a `--policy` file that
    /// allows each of the request's
    /// [`allowed_commands`](AgentRequest::allowed_commands) as a shell
    /// command prefix ([`gemini_policy`]; headless gemini denies every other
    /// shell command; widen it with your own policy files under
    /// `~/.gemini/policies/`, which gemini still loads). `--skip-trust` because the
    /// folders we run in (worktrees, fresh clones, CI checkouts) are not
    /// marked trusted, and there headless gemini exits 55 and resets the
    /// approval mode.
    pub fn gemini() -> Self {
        Self::new("gemini", "gemini", Vec::<String>::new()).dialect(Dialect::Gemini)
    }

    /// Builder: the executable (a path, or a name looked up on `PATH`).
    pub fn program(mut self, program: impl Into<OsString>) -> Self {
        self.program = program.into();
        self
    }

    /// Builder: the name reported by [`Agent::name`].
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Builder: append an argument (after the preset's own, before the
    /// instruction).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Builder: how the instruction is passed.
    pub fn instruction_input(mut self, input: InstructionInput) -> Self {
        self.input = input;
        self
    }

    /// Builder: how the output is read.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Builder: set an environment variable for the command.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Builder: remove an inherited environment variable for the command.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// Builder: the time limit used when a request carries none.
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Builder: the grace period between SIGTERM and SIGKILL.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Builder: bytes of stdout and of stderr kept.
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// Builder: whether presets add their write-permission flags for the
    /// `execute` and `fix` roles (on by default). Off, the CLI runs with its
    /// own configured permissions.
    pub fn role_permissions(mut self, on: bool) -> Self {
        self.role_permissions = on;
        self
    }

    /// The configured dialect.
    pub fn output_dialect(&self) -> Dialect {
        self.dialect
    }

    /// The prompt sent for `request`: the instruction, then the context as
    /// JSON when there is one, then the required answer format when the
    /// request has a schema the CLI cannot take natively.
    pub fn render_instruction(&self, request: &AgentRequest) -> String {
        let mut prompt = request.instruction.clone();
        if !request.context.is_null() {
            let context = serde_json::to_string_pretty(&request.context)
                .unwrap_or_else(|_| request.context.to_string());
            prompt.push_str("\n\n## Context\n```json\n");
            prompt.push_str(&context);
            prompt.push_str("\n```");
        }
        if let Some(schema) = &request.schema
            && !self.dialect.native_schema()
        {
            let schema =
                serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
            prompt.push_str(
                "\n\n## Answer format\nAnswer with a single JSON value that satisfies this JSON schema, and nothing else:\n```json\n",
            );
            prompt.push_str(&schema);
            prompt.push_str("\n```");
        }
        prompt
    }

    /// Maps the finished child's output to the agent's answer.
    pub fn parse_output(
        &self,
        request: &AgentRequest,
        raw: &RawOutput,
    ) -> Result<AgentResponse, AgentError> {
        let tool = self.program.to_string_lossy();
        match self.dialect {
            Dialect::Text => {
                if raw.code != Some(0) {
                    return Err(raw.failed(&tool));
                }
                let mut response = AgentResponse::text(raw.stdout.trim_end());
                if request.schema.is_some() {
                    response.structured = extract_json(&response.text);
                }
                Ok(response)
            }
            Dialect::Json => {
                if raw.code != Some(0) {
                    return Err(raw.failed(&tool));
                }
                let value: serde_json::Value =
                    serde_json::from_str(raw.stdout.trim()).map_err(|err| AgentError::Garbage {
                        message: format!("`{tool}` did not print one JSON value on stdout: {err}"),
                        snippet: snippet(raw.stdout.trim()),
                    })?;
                Ok(AgentResponse {
                    text: raw.stdout.trim().to_owned(),
                    structured: Some(value),
                    ..AgentResponse::default()
                })
            }
            Dialect::Claude => claude::parse(raw)
                .map(|p| p.response)
                .map_err(|e| claude::call_limit(e, &request.spend_limits)),
            Dialect::Codex => {
                let mut response =
                    codex::parse(raw, &request.workdir, request.schema.is_some())?.response;
                if let (Some(schema), Some(value)) = (&request.schema, &mut response.structured) {
                    codex::drop_optional_nulls(schema, value);
                }
                Ok(response)
            }
            Dialect::Gemini => gemini::parse(raw, request.schema.is_some()).map(|p| p.response),
        }
    }
}

#[async_trait]
impl Agent for ProcessAgent {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        match self.call(&request).await {
            Ok(response) => Ok(response),
            Err(Call::Failed(err)) => Err(err),
            Err(Call::SessionGone(err)) => {
                // The CLI keeps its sessions per user (and, for claude and
                // gemini, per folder): one cleaned up, or made under another
                // home, cannot be resumed. Asking afresh loses only context.
                tracing::warn!(agent = %self.name, id = %request.id, session = ?request.resume_session, error = %err, "the agent's session could not be resumed; starting a new one");
                let fresh = AgentRequest {
                    resume_session: None,
                    ..request
                };
                self.call(&fresh).await.map_err(Call::into_error)
            }
        }
    }
}

/// Why one run of the agent CLI gave no answer.
enum Call {
    /// The agent failed.
    Failed(AgentError),
    /// The CLI could not resume the request's session.
    SessionGone(AgentError),
}

impl Call {
    fn into_error(self) -> AgentError {
        match self {
            Call::Failed(err) | Call::SessionGone(err) => err,
        }
    }
}

impl From<AgentError> for Call {
    fn from(err: AgentError) -> Self {
        Call::Failed(err)
    }
}

/// Whether the CLI's output says the session it was asked to resume does
/// not exist (claude: "No conversation found with session ID", codex: "no
/// rollout found for thread id", gemini: "Error resuming session").
fn session_gone(dialect: Dialect, raw: &RawOutput) -> bool {
    let said = |phrase: &str| raw.stdout.contains(phrase) || raw.stderr.contains(phrase);
    match dialect {
        Dialect::Claude => said("No conversation found with session ID"),
        Dialect::Codex => said("no rollout found for thread id"),
        Dialect::Gemini => said("Error resuming session"),
        Dialect::Text | Dialect::Json => false,
    }
}

impl ProcessAgent {
    /// One request: the CLI run (again after a rate limit), its output
    /// mapped to the answer.
    async fn call(&self, request: &AgentRequest) -> Result<AgentResponse, Call> {
        let prompt = self.render_instruction(request);
        let schema_file = self.schema_file(request)?;
        let writes = self.role_permissions && matches!(request.role, Role::Execute | Role::Fix);
        let policy_file = match self.dialect {
            Dialect::Gemini if writes && !request.allowed_commands.is_empty() => Some(
                write_temp_file("policy", ".toml", &gemini_policy(&request.allowed_commands))?,
            ),
            _ => None,
        };
        let args = self.args_for(
            request,
            &prompt,
            schema_file.as_ref().map(|f| f.path()),
            policy_file.as_ref().map(|f| f.path()),
        );
        let limit = request.time_limit.or(self.time_limit);
        let spec = self.spec_for(request, prompt, args, limit);
        let started = std::time::Instant::now();
        let mut rate_limited = 0;
        loop {
            tracing::debug!(agent = %self.name, id = %request.id, command = %spec.display(), "starting agent");
            let spec = match limit {
                // A rerun after a rate limit gets what is left of the limit.
                Some(limit) => spec
                    .clone()
                    .time_limit(Some(limit.saturating_sub(started.elapsed()))),
                None => spec.clone(),
            };
            let output = self.run_once(&spec, limit).await?;
            let raw = RawOutput::from_process(&output);
            let result = self.parse_output(request, &raw);
            if request.resume_session.is_some() && session_gone(self.dialect, &raw) {
                return Err(Call::SessionGone(
                    result.err().unwrap_or_else(|| raw.failed(&self.name)),
                ));
            }
            // claude does not retry a 429 itself with CLAUDE_CODE_MAX_RETRIES=0
            // and does not report the endpoint's Retry-After: back off here.
            let wait = RATE_LIMIT_BACKOFF.get(rate_limited).copied();
            match (self.dialect, &result, wait) {
                (Dialect::Claude, Err(_), Some(wait))
                    if claude::rate_limited(&raw)
                        && limit.is_none_or(|l| started.elapsed() + wait < l) =>
                {
                    rate_limited += 1;
                    tracing::warn!(agent = %self.name, id = %request.id, wait_secs = wait.as_secs(), "rate limited (429); retrying after a back-off");
                    tokio::time::sleep(wait).await;
                }
                _ => {
                    drop(schema_file);
                    drop(policy_file);
                    return result.map_err(Call::Failed);
                }
            }
        }
    }
}

impl ProcessAgent {
    /// The request's answer schema in a file, for codex (which takes it
    /// only in the strict form: closed, every property required); `None`
    /// for the other CLIs or without a schema.
    fn schema_file(
        &self,
        request: &AgentRequest,
    ) -> Result<Option<tempfile::NamedTempFile>, AgentError> {
        let (Some(schema), Dialect::Codex) = (&request.schema, self.dialect) else {
            return Ok(None);
        };
        // Codex sends the schema in strict mode, which the API only
        // accepts in the closed, all-required form.
        let strict = codex::strict_schema(schema);
        let violations = codex::strict_violations(&strict);
        if !violations.is_empty() {
            return Err(AgentError::Unavailable {
                message: format!(
                    "codex: the request's schema could not be made strict: {}",
                    violations.join("; ")
                ),
            });
        }
        Ok(Some(write_temp_file(
            "schema",
            ".json",
            &strict.to_string(),
        )?))
    }

    /// The CLI's process: its arguments, run in the request's tree with the
    /// limits, the prompt on stdin when the CLI reads it there, and the
    /// agent's and the tree's environment.
    fn spec_for(
        &self,
        request: &AgentRequest,
        prompt: String,
        args: Vec<std::ffi::OsString>,
        limit: Option<Duration>,
    ) -> ProcessSpec {
        let mut spec = ProcessSpec::new(&self.program)
            .args(args)
            .cwd(&request.workdir)
            .time_limit(limit)
            .grace(self.grace)
            .output_limit(self.output_limit);
        if self.input == InstructionInput::Stdin {
            spec = spec.stdin(prompt.into_bytes());
        }
        for k in &self.env_remove {
            spec = spec.env_remove(k);
        }
        for (k, v) in &self.env {
            spec = spec.env(k, v);
        }
        // What the tree the agent works in needs (a worktree's virtualenv
        // on PATH, `[worktree] env`): its commands run there.
        for (k, v) in &request.env {
            spec = spec.env(k, v);
        }
        spec
    }
}

/// The waits before each rerun of a claude call the endpoint rate-limited
/// (claude reports the 429 but not its `Retry-After`).
const RATE_LIMIT_BACKOFF: [Duration; 3] = [
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
];

impl ProcessAgent {
    /// Runs the CLI once; a timeout or a process that cannot start is an
    /// error, any exit status is an output.
    async fn run_once(
        &self,
        spec: &ProcessSpec,
        limit: Option<Duration>,
    ) -> Result<ProcessOutput, AgentError> {
        let output = process::run(spec).await.map_err(|err| {
            if err.is_not_found() {
                AgentError::Unavailable {
                    message: format!(
                        "executable `{}` not found (looked up on PATH)",
                        self.program.to_string_lossy()
                    ),
                }
            } else {
                AgentError::Unavailable {
                    message: err.to_string(),
                }
            }
        })?;
        if output.timed_out {
            return Err(AgentError::Timeout {
                seconds: limit.map_or(output.duration.as_secs_f64(), |l| l.as_secs_f64()),
            });
        }
        if output.stdout_dropped > 0 {
            tracing::warn!(agent = %self.name, dropped = output.stdout_dropped, "agent stdout exceeded the output bound; its start was dropped");
        }
        Ok(output)
    }
}

fn write_temp_file(
    what: &str,
    suffix: &str,
    content: &str,
) -> Result<tempfile::NamedTempFile, AgentError> {
    use std::io::Write;
    let unavailable = |err: std::io::Error| AgentError::Unavailable {
        message: format!("failed to write the {what} to a temporary file: {err}"),
    };
    let mut file = tempfile::Builder::new()
        .prefix(&format!("orchestrator-{what}-"))
        .suffix(suffix)
        .tempfile()
        .map_err(unavailable)?;
    file.write_all(content.as_bytes())
        .and_then(|()| file.flush())
        .map_err(unavailable)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn preset_arguments_follow_role_and_schema() {
        let req = AgentRequest::new("T1", Role::Fix, "fix it", "/w")
            .with_schema(json!({"type": "object"}));
        assert_eq!(
            strings(ProcessAgent::claude().args_for(&req, "p", None, None)),
            [
                "-p",
                "--output-format",
                "json",
                "--json-schema",
                r#"{"type":"object"}"#,
                "--permission-mode",
                "acceptEdits"
            ]
        );
        assert_eq!(
            strings(ProcessAgent::codex().arg("--skip-git-repo-check").args_for(
                &req,
                "p",
                Some(Path::new("/tmp/s.json")),
                None
            )),
            [
                "exec",
                "--json",
                "--output-schema",
                "/tmp/s.json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "-"
            ]
        );
        let explore = AgentRequest::new("E1", Role::Explore, "look", "/w");
        assert_eq!(
            strings(ProcessAgent::gemini().args_for(&explore, "look", None, None)),
            ["--skip-trust", "-o", "json"]
        );
        assert_eq!(
            strings(ProcessAgent::claude().role_permissions(false).args_for(
                &AgentRequest::new("x", Role::Execute, "i", "/w"),
                "i",
                None,
                None
            )),
            ["-p", "--output-format", "json"]
        );
        let capped = AgentRequest::new("iter-1", Role::Fix, "fix it", "/w").with_spend_limits(
            orchestrator_core::agent::ItemLimits::new(Some(0.25), Some(1000), None),
        );
        assert_eq!(
            strings(ProcessAgent::claude().args_for(&capped, "p", None, None)),
            [
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
                "--max-budget-usd",
                "0.25"
            ]
        );
    }

    #[test]
    fn granted_commands_reach_claude_and_gemini_for_writing_roles_only() {
        let req = AgentRequest::new("T1", Role::Fix, "fix it", "/w")
            .allow_command(["cargo", "test"])
            .allow_command(["cargo", "fmt"]);
        assert_eq!(
            strings(ProcessAgent::claude().args_for(&req, "p", None, None)),
            [
                "-p",
                "--output-format",
                "json",
                "--allowedTools",
                "Bash(cargo test:*)",
                "Bash(cargo fmt:*)",
                "--permission-mode",
                "acceptEdits"
            ]
        );
        assert_eq!(
            strings(ProcessAgent::gemini().args_for(
                &req,
                "p",
                None,
                Some(Path::new("/tmp/p.toml"))
            )),
            [
                "--skip-trust",
                "-o",
                "json",
                "--approval-mode",
                "auto_edit",
                "--policy",
                "/tmp/p.toml"
            ]
        );
        let mut plan = req.clone();
        plan.role = Role::Plan;
        assert_eq!(
            strings(ProcessAgent::claude().args_for(&plan, "p", None, None)),
            ["-p", "--output-format", "json"]
        );
        let policy = gemini_policy(&req.allowed_commands);
        let parsed: toml::Value = toml::from_str(&policy).unwrap();
        let rules = parsed["rule"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["commandPrefix"].as_str(), Some("cargo test"));
        assert_eq!(rules[1]["toolName"].as_str(), Some("run_shell_command"));
        assert_eq!(rules[1]["decision"].as_str(), Some("allow"));
        let quoted = gemini_policy(&[vec!["say".into(), "\"hi\"\\".into()]]);
        let parsed: toml::Value = toml::from_str(&quoted).unwrap();
        assert_eq!(
            parsed["rule"][0]["commandPrefix"].as_str(),
            Some("say \"hi\"\\")
        );
    }

    #[test]
    fn a_resumed_session_is_named_in_each_clis_own_way() {
        let req = AgentRequest::new("T1", Role::Plan, "again", "/w").resuming("s-1");
        assert_eq!(
            strings(ProcessAgent::claude().args_for(&req, "p", None, None)),
            ["-p", "--output-format", "json", "--resume", "s-1"]
        );
        // codex: `resume` is a subcommand of `exec`, after all of exec's
        // options (the user's too), which apply to the resumed thread.
        assert_eq!(
            strings(
                ProcessAgent::codex()
                    .arg("-m")
                    .arg("gpt-5")
                    .args_for(&req, "p", None, None)
            ),
            ["exec", "--json", "-m", "gpt-5", "resume", "s-1", "-"]
        );
        assert_eq!(
            strings(ProcessAgent::gemini().args_for(&req, "p", None, None)),
            ["--skip-trust", "-o", "json", "--resume", "s-1"]
        );
        let text = ProcessAgent::new("mine", "my-agent", ["run"]);
        assert_eq!(strings(text.args_for(&req, "p", None, None)), ["run"]);
    }

    #[test]
    fn a_missing_session_is_recognised_only_in_the_clis_own_words() {
        let raw = |stdout: &str, stderr: &str| RawOutput {
            code: Some(1),
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        };
        assert!(session_gone(
            Dialect::Claude,
            &raw("No conversation found with session ID: s-1", "")
        ));
        assert!(session_gone(
            Dialect::Codex,
            &raw(
                "",
                "Error: thread/resume: thread/resume failed: no rollout found for thread id s-1"
            )
        ));
        assert!(session_gone(
            Dialect::Gemini,
            &raw(
                "",
                "Error resuming session: No previous sessions found for this project."
            )
        ));
        assert!(!session_gone(Dialect::Claude, &raw("", "rate limited")));
        assert!(!session_gone(
            Dialect::Text,
            &raw("No conversation found with session ID", "")
        ));
    }

    #[test]
    fn generic_placeholder_or_appended_instruction() {
        let req = AgentRequest::new("T1", Role::Plan, "plan", "/w");
        let agent = ProcessAgent::new("mine", "my-agent", ["--ask={instruction}", "-v"])
            .instruction_input(InstructionInput::Argument);
        assert_eq!(
            strings(agent.args_for(&req, "plan", None, None)),
            ["--ask=plan", "-v"]
        );
        let agent = ProcessAgent::new("mine", "my-agent", ["run"])
            .instruction_input(InstructionInput::Argument);
        assert_eq!(
            strings(agent.args_for(&req, "plan", None, None)),
            ["run", "plan"]
        );
    }

    #[test]
    fn prompt_carries_context_and_schema_when_not_native() {
        let req = AgentRequest::new("T1", Role::Plan, "Plan the work.", "/w")
            .with_context(json!({"task": "T1"}))
            .with_schema(json!({"type": "object"}));
        let gemini = ProcessAgent::gemini().render_instruction(&req);
        insta::assert_snapshot!(gemini);
        let claude = ProcessAgent::claude().render_instruction(&req);
        assert!(!claude.contains("## Answer format"));
        assert!(claude.contains("\"task\": \"T1\""));
    }
}
