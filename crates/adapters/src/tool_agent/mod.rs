//! [`ToolAgent`]: a coding agent for any OpenAI-compatible chat-completions
//! endpoint (OpenAI, Ollama, vLLM, the llama.cpp server, a gateway), with
//! tools confined to the request's working directory.
//!
//! ## Roles
//! The roles that must change files ([`Role::Fix`], [`Role::Execute`]) get
//! the tool loop; the roles that only answer ([`Role::Plan`],
//! [`Role::Explore`], [`Role::Diagnose`]) get a plain completion (one
//! request, no tools). `--agent openai[:MODEL]` and `[agent.openai]` build
//! this agent (see [`crate::factory`]).
//!
//! ## The loop
//! A system prompt (the role, the rules, the schema when there is one), the
//! instruction, then turns: the model calls tools (natively through `tools`
//! / `tool_choice`, or through the text protocol of [`negotiate`]); each
//! result goes back to it; a reply without a tool call ends the work. When
//! the request carries a schema, that reply is the answer if it satisfies
//! the schema; otherwise the answer is asked for once with the negotiated
//! `response_format`, and once more with the validation errors.
//!
//! Tools ([`tools`]): `read_file` (line ranges, 64 KiB cap), `list_files`
//! and `search` (`.gitignore` respected, through the `ignore` walker and a
//! `regex`), `edit` (one exact occurrence, else refused), `write_file`,
//! `run` (an argv starting with one of the request's `allowed_commands`,
//! through the [`CommandRunner`]). Paths are confined by [`confine`]:
//! outside the working directory, through a symlink, into `.git/` or the
//! engine's folders, or into a protected path is refused — every refusal is
//! a tool error the model reads, and counted. Writes are atomic per file.
//!
//! ## Sandbox
//! When `bwrap` (bubblewrap) is on `PATH` and works (it is probed once, with
//! `bwrap … true`), `run` executes inside it: the file system read-only but
//! the working directory, a private `/tmp`, every namespace unshared — no
//! network. Without it (not installed, or user namespaces disabled, as in
//! some containers) commands run directly through the command runner, still
//! limited to the allowed argv prefixes, in their own process group with a
//! time limit; a warning says so once.
//!
//! ## Limits
//! Per attempt: [`ToolAgentConfig::max_turns`] model requests and
//! [`ToolAgentConfig::max_wall`] of wall time ([`AgentError::Budget`] when
//! spent), the request's own time limit ([`AgentError::Timeout`]), and the
//! same failing call three times in a row ([`AgentError::LoopDetected`]).
//! Both are final: the engine does not retry them. A request's own token
//! limit ([`AgentRequest::spend_limits`](orchestrator_core::AgentRequest))
//! stops the loop before the model request that would start past it
//! ([`AgentError::CallLimit`]). The run's token and cost budgets are the
//! [`crate::wrappers::Budget`] wrapper's.
//!
//! ## Transcripts
//! Each attempt writes `<dir>/<request id>-<ms>-<n>.jsonl`, where `<dir>`
//! is [`ToolAgentConfig::transcript_dir`] when the user set one, else
//! `transcripts/` in the flow's session folder
//! ([`AgentRequest::artifacts_dir`]: review-fix's session folder under
//! `.review/`, planex's under `.workflow/.lite-plan/`, ci-autofix's report
//! folder under `.moai/reports/`), else
//! [`ToolAgentConfig::fallback_transcript_dir`]: one
//! line per model request and response, tool call and result, negotiation
//! step, and a last `end` line with the outcome and [`AttemptStats`]
//! (turns, tokens, tool calls by kind, refusals, wall time). The API key is
//! never in a request body, and any occurrence of it is replaced by
//! `<redacted>` before a line is written. An error's message names its
//! transcript, so a failure in a summary leads to it.
//!
//! [`Role::Fix`]: orchestrator_core::Role::Fix
//! [`Role::Execute`]: orchestrator_core::Role::Execute
//! [`Role::Plan`]: orchestrator_core::Role::Plan
//! [`Role::Explore`]: orchestrator_core::Role::Explore
//! [`Role::Diagnose`]: orchestrator_core::Role::Diagnose

pub mod confine;
pub mod negotiate;
mod run_loop;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::command::{CommandRunner, CommandSpec};
use serde_json::json;

pub use run_loop::{AttemptStats, REPEAT_LIMIT};

use crate::builtin::WorkdirSnapshot;
use crate::config::{OpenAiSection, ToolCallMode};
use crate::openai::{OpenAiAgent, OpenAiConfig, OpenAiError};
use crate::wrappers::JsonlWriter;
use confine::Confinement;
use negotiate::Negotiated;
use run_loop::Attempt;
use tools::{Sandbox, Toolbox};

/// How long after the request's time limit the bookkeeping of a timed-out
/// attempt may take before the call is cut off regardless.
const BOOKKEEPING_GRACE: Duration = Duration::from_millis(500);

/// Whether `role` must change files (and so gets the tools).
pub fn changes_files(role: Role) -> bool {
    matches!(role, Role::Fix | Role::Execute)
}

/// Whether `run` may use bubblewrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxChoice {
    /// Bubblewrap when it is on `PATH` and works, else none.
    #[default]
    Auto,
    /// Never.
    Off,
}

/// Settings of a [`ToolAgent`] beyond its HTTP settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolAgentConfig {
    /// Model requests per attempt (default 40).
    pub max_turns: u32,
    /// Wall time per attempt; none but the request's time limit when `None`.
    pub max_wall: Option<Duration>,
    /// Folder for transcripts chosen by the user: when set, every
    /// transcript goes there.
    pub transcript_dir: Option<PathBuf>,
    /// Folder for transcripts of requests that name no session folder
    /// ([`AgentRequest::artifacts_dir`]) when `transcript_dir` is unset;
    /// with neither, such requests get no transcript.
    pub fallback_transcript_dir: Option<PathBuf>,
    /// Native tool calls (negotiated) or the text protocol from the start.
    pub tool_calls: ToolCallMode,
    /// Paths relative to the working directory that no tool may write.
    pub protected_paths: Vec<String>,
    /// Whether `run` may use bubblewrap.
    pub sandbox: SandboxChoice,
    /// Time limit of one `run` (also bounded by what is left of the
    /// request's time limit); default 600 s.
    pub run_limit: Duration,
}

impl Default for ToolAgentConfig {
    fn default() -> Self {
        Self {
            max_turns: 40,
            max_wall: None,
            transcript_dir: None,
            fallback_transcript_dir: None,
            tool_calls: ToolCallMode::Native,
            protected_paths: Vec::new(),
            sandbox: SandboxChoice::Auto,
            run_limit: Duration::from_secs(600),
        }
    }
}

impl ToolAgentConfig {
    /// Settings from `[agent.openai]`; transcripts go to the section's
    /// `transcript_dir`, else to the flow's session folder, else to
    /// `default_transcripts`.
    pub fn from_section(section: &OpenAiSection, default_transcripts: Option<PathBuf>) -> Self {
        let mut config = Self::default();
        if let Some(turns) = section.max_turns {
            config.max_turns = turns;
        }
        config.max_wall = section.max_wall_secs.map(Duration::from_secs);
        config.transcript_dir = section.transcript_dir.clone();
        config.fallback_transcript_dir = default_transcripts;
        config.tool_calls = section.tool_calls.unwrap_or_default();
        config.protected_paths = section.protected_paths.clone();
        config
    }
}

/// The tool agent; see the [module docs](self).
#[derive(Debug)]
pub struct ToolAgent {
    http: OpenAiAgent,
    config: ToolAgentConfig,
    runner: Arc<dyn CommandRunner>,
    negotiated: Negotiated,
    sandbox: tokio::sync::OnceCell<Sandbox>,
    stats: std::sync::Mutex<Vec<AttemptStats>>,
    seq: AtomicU64,
}

impl ToolAgent {
    /// A tool agent over the endpoint `http` describes, running commands
    /// through `runner`.
    pub fn new(
        http: OpenAiConfig,
        config: ToolAgentConfig,
        runner: Arc<dyn CommandRunner>,
    ) -> Result<Self, OpenAiError> {
        Ok(Self {
            http: OpenAiAgent::new(http)?,
            negotiated: Negotiated::new(config.tool_calls),
            config,
            runner,
            sandbox: tokio::sync::OnceCell::new(),
            stats: std::sync::Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
        })
    }

    /// The settings.
    pub fn config(&self) -> &ToolAgentConfig {
        &self.config
    }

    /// What every attempt so far did, in the order they finished.
    pub fn stats(&self) -> Vec<AttemptStats> {
        self.stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The negotiated structured-answer format and tool mode.
    pub fn negotiated(&self) -> (negotiate::FormatLevel, negotiate::ToolMode) {
        (self.negotiated.format(), self.negotiated.tools())
    }

    /// The sandbox `run` uses, probed once.
    pub async fn sandbox(&self) -> Sandbox {
        self.sandbox
            .get_or_init(|| probe_sandbox(self.config.sandbox, Arc::clone(&self.runner)))
            .await
            .clone()
    }

    async fn open_transcript(&self, request: &AgentRequest) -> Option<JsonlWriter> {
        // The user's folder when set; else the flow's session folder, so the
        // transcript sits beside the progress files and summaries whose
        // failures name it; else the fallback.
        let session = request
            .artifacts_dir
            .as_ref()
            .map(|d| d.join("transcripts"));
        let dir = self
            .config
            .transcript_dir
            .as_ref()
            .or(session.as_ref())
            .or(self.config.fallback_transcript_dir.as_ref())?;
        if let Err(e) = tokio::fs::create_dir_all(dir).await {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create the transcript folder; no transcript");
            return None;
        }
        let id: String = request
            .id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{id}-{ms}-{n}.jsonl"));
        match JsonlWriter::open(&path, false).await {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "no transcript");
                None
            }
        }
    }

    /// The tools of a request that wants them: confined to its working
    /// directory, its allowed commands, the sandbox, a run limit within the
    /// request's time limit. `None` for a request without tools.
    async fn toolbox_for(&self, request: &AgentRequest) -> Result<Option<Toolbox>, AgentError> {
        if !run_loop::wants_tools(request) {
            return Ok(None);
        }
        let confinement = Confinement::new(&request.workdir, &self.config.protected_paths)
            .map_err(|e| AgentError::Unavailable {
                message: format!(
                    "cannot resolve the working directory {}: {e}",
                    request.workdir.display()
                ),
            })?;
        let run_limit = request
            .time_limit
            .map_or(self.config.run_limit, |l| l.min(self.config.run_limit));
        Ok(Some(Toolbox {
            confinement,
            allowed: request.allowed_commands.clone(),
            runner: Arc::clone(&self.runner),
            sandbox: self.sandbox().await,
            run_limit,
            hidden_env: self.http.config().api_key_env.iter().cloned().collect(),
            env: request.env.clone(),
        }))
    }

    /// One attempt at a request: the tool loop (with the tools it wants),
    /// bounded by its time limit, logged to its transcript from `start` to
    /// `end`, with the files it changed and its numbers recorded.
    async fn attempt(&self, request: &AgentRequest) -> Result<AgentResponse, AgentError> {
        let toolbox = self.toolbox_for(request).await?;
        let before = match &toolbox {
            Some(t) => Some(snapshot(t.confinement.root()).await),
            None => None,
        };
        let transcript = self.open_transcript(request).await;
        let mut attempt = Attempt::new(self, request, toolbox, transcript);
        attempt
            .log(
                "start",
                json!({"agent": "openai", "model": self.http.config().model, "request": request,
                "tools": self.negotiated.tools(), "format": self.negotiated.format()}),
            )
            .await;
        // The request's time limit, enforced here so that a timed-out
        // attempt still gets its `end` line and its numbers.
        let mut result = match request.time_limit {
            Some(limit) => {
                let left = limit.saturating_sub(attempt.started.elapsed());
                tokio::time::timeout(left, attempt.run())
                    .await
                    .unwrap_or(Err(AgentError::Timeout {
                        seconds: limit.as_secs_f64(),
                    }))
            }
            None => attempt.run().await,
        };
        if let (Ok(response), Some(before), Some(toolbox)) =
            (&mut result, &before, &attempt.toolbox)
        {
            let after = snapshot(toolbox.confinement.root()).await;
            response.files_changed = before.changed_since(&after);
        }
        attempt.stats.wall_ms = attempt.started.elapsed().as_millis() as u64;
        attempt.stats.outcome = match &result {
            Ok(_) => "ok".to_owned(),
            Err(e) => error_kind(e),
        };
        let outcome = match &result {
            Ok(response) => json!({"response": response}),
            Err(error) => json!({"error": error}),
        };
        attempt
            .log("end", json!({"outcome": outcome, "stats": attempt.stats}))
            .await;
        tracing::info!(
            request = %request.id,
            outcome = %attempt.stats.outcome,
            turns = attempt.stats.turns,
            tool_calls = ?attempt.stats.tool_calls,
            refusals = attempt.stats.refusals,
            transcript = attempt.stats.transcript.as_deref().unwrap_or("-"),
            "tool agent attempt finished"
        );
        let transcript = attempt.stats.transcript.clone();
        self.stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(attempt.stats);
        result.map_err(|e| name_transcript(e, transcript.as_deref()))
    }
}

#[async_trait]
impl Agent for ToolAgent {
    fn name(&self) -> &str {
        "openai"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        // The attempt enforces the time limit itself; this outer bound, a
        // little later, only guards its bookkeeping (snapshot, transcript).
        match request.time_limit {
            Some(limit) => tokio::time::timeout(limit + BOOKKEEPING_GRACE, self.attempt(&request))
                .await
                .unwrap_or(Err(AgentError::Timeout {
                    seconds: limit.as_secs_f64(),
                })),
            None => self.attempt(&request).await,
        }
    }
}

/// Appends the transcript's path to an error's message.
fn name_transcript(error: AgentError, transcript: Option<&str>) -> AgentError {
    let Some(path) = transcript else {
        return error;
    };
    match error {
        AgentError::Failed { message, exit_code } => AgentError::Failed {
            message: format!("{message} (transcript: {path})"),
            exit_code,
        },
        AgentError::Budget { message } => AgentError::Budget {
            message: format!("{message} (transcript: {path})"),
        },
        AgentError::CallLimit { message } => AgentError::CallLimit {
            message: format!("{message} (transcript: {path})"),
        },
        AgentError::LoopDetected { signature, count } => AgentError::LoopDetected {
            signature: format!("{signature} (transcript: {path})"),
            count,
        },
        AgentError::Garbage { message, snippet } => AgentError::Garbage {
            message: format!("{message} (transcript: {path})"),
            snippet,
        },
        other => other,
    }
}

fn error_kind(error: &AgentError) -> String {
    serde_json::to_value(error)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "error".to_owned())
}

async fn snapshot(root: &Path) -> WorkdirSnapshot {
    let root = root.to_path_buf();
    tokio::task::spawn_blocking(move || WorkdirSnapshot::take(&root))
        .await
        .unwrap_or_default()
}

/// Finds `bwrap` on `PATH` and checks that it can start a sandbox here.
async fn probe_sandbox(choice: SandboxChoice, runner: Arc<dyn CommandRunner>) -> Sandbox {
    if choice == SandboxChoice::Off {
        return Sandbox::None;
    }
    let Some(bwrap) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("bwrap"))
            .find(|p| p.is_file())
    }) else {
        tracing::warn!(
            "bwrap (bubblewrap) is not on PATH: the tool agent's commands run without a sandbox (allowed commands only, own process group, time limit)"
        );
        return Sandbox::None;
    };
    let probe = CommandSpec::new(
        bwrap.display().to_string(),
        tools::bwrap_args(Path::new("/"), &["true".to_owned()]),
        "/",
    )
    .with_time_limit(Duration::from_secs(10));
    match runner.run(probe).await {
        Ok(output) if output.success() => Sandbox::Bwrap(bwrap),
        Ok(output) => {
            tracing::warn!(output = %output.combined(), "bwrap cannot start a sandbox here: the tool agent's commands run without one");
            Sandbox::None
        }
        Err(e) => {
            tracing::warn!(error = %e, "bwrap cannot start: the tool agent's commands run without a sandbox");
            Sandbox::None
        }
    }
}
