//! The [`Agent`] trait: anything that takes an instruction and does work.
//!
//! An agent may be an LLM behind a CLI or an HTTP API, a builtin rule-based
//! fixer, or a test fake. Flows only see this trait. A request says what role
//! the agent plays, what to do, where, in what time, and optionally the JSON
//! schema its structured answer must satisfy; [`AgentExt::run_validated`]
//! checks the answer against that schema so that every backend gets the same
//! validation.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::schema;

mod extract;
mod forward;
mod session;
mod spend;

pub use extract::extract_json;
pub use session::SessionCarry;
pub use spend::{AgentSpend, ItemLimits};

/// What an agent is asked to do in a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Explore a codebase from one angle (planex phase 2).
    Explore,
    /// Plan work: exploration angles, tasks, fix groups.
    Plan,
    /// Execute a task (planex phase 4).
    Execute,
    /// Fix one finding or one CI failure.
    Fix,
    /// Diagnose a failure without changing anything.
    Diagnose,
}

impl Role {
    /// The snake_case name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Explore => "explore",
            Role::Plan => "plan",
            Role::Execute => "execute",
            Role::Fix => "fix",
            Role::Diagnose => "diagnose",
        }
    }
}

/// A unit of work for an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRequest {
    /// Identifier of the request (a task id, finding id, batch id…); fakes
    /// script their answers by it.
    pub id: String,
    /// The role the agent plays.
    pub role: Role,
    /// The instruction, in natural language.
    pub instruction: String,
    /// Directory the agent works in.
    pub workdir: PathBuf,
    /// JSON schema the structured answer must satisfy, if one is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// Time limit for the whole request.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_ms"
    )]
    pub time_limit: Option<Duration>,
    /// Machine-readable context for builtin agents (a finding, a failing log,
    /// a task row); LLM agents receive it rendered into the instruction.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub context: serde_json::Value,
    /// The commands the flow needs the agent to be able to run (its test
    /// command, the task's directives, the failing checks), each as an argv
    /// prefix: `["cargo", "test"]` allows `cargo test` with any further
    /// arguments. Adapters grant exactly these to an agent that asks for
    /// permission per command (claude's `--allowedTools`, gemini's policy
    /// rules) and nothing broader; empty grants none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_commands: Vec<Vec<String>>,
    /// The session of an earlier call to continue ([`AgentResponse::session`]
    /// of that call): a flow that asks again about the same finding or task
    /// sets it so the agent keeps what it read and tried (`claude --resume`,
    /// `codex exec resume`, `gemini --resume`). Backends without sessions
    /// ignore it; one whose session is gone starts a fresh one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_session: Option<String>,
    /// The flow's session folder, where an agent that records its calls
    /// (the tool agent's transcripts) keeps those records beside the
    /// progress files and reports that refer to them. `None`: wherever the
    /// agent's own configuration says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts_dir: Option<PathBuf>,
    /// What this one call may spend (dollars, tokens; `max_calls` does not
    /// apply to a single call). An adapter whose agent can stop itself
    /// mid-call passes it on (claude `--max-budget-usd`, the tool agent's
    /// loop) and answers [`AgentError::CallLimit`] when the agent stopped
    /// there; a flow that sets it checks the answer's usage afterwards
    /// with [`ItemLimits::overrun`] for the agents that cannot stop
    /// themselves. Unset (the default): no limit of its own.
    #[serde(default, skip_serializing_if = "ItemLimits::is_unlimited")]
    pub spend_limits: ItemLimits,
    /// Environment for the agent's process and the commands it runs, on
    /// top of the engine's own: what the worktree it works in needs (a
    /// virtualenv's `bin/` first on `PATH`, `[worktree] env`, a build
    /// cache). Empty in the user's own tree.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
}

impl AgentRequest {
    /// A request with no schema, no time limit and no context.
    pub fn new(
        id: impl Into<String>,
        role: Role,
        instruction: impl Into<String>,
        workdir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            id: id.into(),
            role,
            instruction: instruction.into(),
            workdir: workdir.into(),
            schema: None,
            time_limit: None,
            context: serde_json::Value::Null,
            allowed_commands: Vec::new(),
            resume_session: None,
            artifacts_dir: None,
            spend_limits: ItemLimits::default(),
            env: std::collections::BTreeMap::new(),
        }
    }

    /// Builder: require a structured answer matching `schema`.
    ///
    /// The schema is checked when the request runs through
    /// [`AgentExt::run_validated`], which refuses a schema the validator
    /// would not fully check ([`AgentError::InvalidSchema`]) before calling
    /// the agent; [`AgentRequest::try_with_schema`] checks it now.
    pub fn with_schema(mut self, schema: serde_json::Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Builder: like [`AgentRequest::with_schema`], but refuses at once a
    /// schema that [`schema::check_schema`] refuses (an unsupported keyword, a
    /// non-local `$ref`, a pattern that does not compile), naming the keyword
    /// and its path in the schema.
    pub fn try_with_schema(self, schema: serde_json::Value) -> Result<Self, schema::SchemaError> {
        schema::check_schema(&schema)?;
        Ok(self.with_schema(schema))
    }

    /// Builder: set the time limit.
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Builder: attach machine-readable context.
    pub fn with_context(mut self, context: serde_json::Value) -> Self {
        self.context = context;
        self
    }

    /// Builder: allow the agent to run `argv` (a prefix; see
    /// [`AgentRequest::allowed_commands`]). An empty argv or one already
    /// allowed is not added twice.
    pub fn allow_command<S: Into<String>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        let argv: Vec<String> = argv.into_iter().map(Into::into).collect();
        if !argv.is_empty() && !self.allowed_commands.contains(&argv) {
            self.allowed_commands.push(argv);
        }
        self
    }

    /// Builder: continue the agent session `session` (see
    /// [`AgentRequest::resume_session`]).
    pub fn resuming(mut self, session: impl Into<String>) -> Self {
        self.resume_session = Some(session.into());
        self
    }

    /// Builder: keep the agent's records of this call under `dir` (see
    /// [`AgentRequest::artifacts_dir`]).
    pub fn with_artifacts_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.artifacts_dir = Some(dir.into());
        self
    }

    /// Builder: hold this one call to `limits` (see
    /// [`AgentRequest::spend_limits`]).
    pub fn with_spend_limits(mut self, limits: ItemLimits) -> Self {
        self.spend_limits = limits;
        self
    }

    /// Builder: the environment of the tree the agent works in (see
    /// [`AgentRequest::env`]); added to what is there.
    pub fn with_env(mut self, env: std::collections::BTreeMap<String, String>) -> Self {
        self.env.extend(env);
        self
    }

    /// Builder: allow a command given as one command line (a CI check, a
    /// task directive), split at whitespace into its argv prefix. A line
    /// that chains commands (`a && b`, `a; b`, `a | b`) allows each part.
    pub fn allow_command_line(self, line: &str) -> Self {
        split_command_line(line)
            .into_iter()
            .fold(self, |request, argv| request.allow_command(argv))
    }
}

/// The commands a command line runs, each split at whitespace: chained
/// commands (`&&`, `||`, `;`, `|`, new lines) are split apart, and empty
/// parts dropped. Quoting is not interpreted; a grant is a prefix, so a
/// quoted argument only makes the prefix longer, never broader.
pub fn split_command_line(line: &str) -> Vec<Vec<String>> {
    line.replace("&&", "\n")
        .replace("||", "\n")
        .split(['\n', ';', '|'])
        .map(|part| {
            part.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|argv| !argv.is_empty())
        .collect()
}

/// Resource usage of one agent call, when the backend reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt / input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion / output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in US dollars.
    #[serde(default)]
    pub cost_usd: f64,
    /// Agent turns taken.
    #[serde(default)]
    pub turns: u32,
}

impl Usage {
    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
        self.turns += other.turns;
    }
}

/// What an agent that keeps count (a budget) has spent so far: the calls
/// it started and their summed usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSpent {
    /// Calls started (refused calls excluded).
    pub calls: u32,
    /// Their usage, summed.
    pub usage: Usage,
}

/// What an agent answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentResponse {
    /// The final text of the answer.
    pub text: String,
    /// The structured answer, when the request carried a schema (validated
    /// against it by [`AgentExt::run_validated`]) or the backend produced one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<serde_json::Value>,
    /// Files the agent changed, relative to the working directory, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
    /// Usage, when the backend reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The backend's id of the conversation this answer ends (claude's
    /// `session_id`, codex's `thread_id`, gemini's `session_id`), to be
    /// passed as [`AgentRequest::resume_session`] to continue it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl AgentResponse {
    /// A plain-text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A structured answer; the text is the compact JSON.
    pub fn structured(value: serde_json::Value) -> Self {
        Self {
            text: value.to_string(),
            structured: Some(value),
            ..Self::default()
        }
    }

    /// Builder: record changed files.
    pub fn with_files_changed(mut self, files: Vec<String>) -> Self {
        self.files_changed = files;
        self
    }
}

/// Why an agent call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentError {
    /// The call did not finish within its time limit.
    #[error("agent timed out after {seconds:.1}s")]
    Timeout {
        /// The limit that was exceeded, in seconds.
        seconds: f64,
    },
    /// The agent could not be started (missing executable, bad config).
    #[error("failed to start agent: {message}")]
    Unavailable {
        /// What went wrong.
        message: String,
    },
    /// The agent ran but reported an error (non-zero exit, API error, `is_error`).
    #[error("agent failed: {message}")]
    Failed {
        /// What the agent or its backend said.
        message: String,
        /// Exit status of a process agent, when there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    /// The agent's output could not be understood.
    #[error("agent output could not be parsed ({message}); output began: {snippet:?}")]
    Garbage {
        /// What the parser expected.
        message: String,
        /// The start of the output, for the user.
        snippet: String,
    },
    /// The structured answer does not satisfy the request's schema.
    #[error("agent answer does not match the schema: {}", violations.join("; "))]
    SchemaViolation {
        /// One entry per violation, each naming the JSON path.
        violations: Vec<String>,
    },
    /// The request's schema is refused before the agent is called: it uses
    /// something the validator does not check (see [`schema::check_schema`]).
    /// The schema is wrong, not the agent; retrying cannot help.
    #[error("the request's JSON schema is refused (fix the schema, not the agent): {message}")]
    InvalidSchema {
        /// JSON path, in the schema, of what is wrong.
        path: String,
        /// The whole explanation, path included.
        message: String,
    },
    /// The agent declined: it cannot handle this request (a builtin agent
    /// asked to fix a finding it has no suggestion for, say). Flows treat
    /// this as "not fixable by this agent", never as a silent skip.
    #[error("agent cannot handle this request: {reason}")]
    Unsupported {
        /// Why.
        reason: String,
    },
    /// The agent cannot do this now because what it would change overlaps
    /// a change made earlier in the same run (a builtin agent's
    /// machine-applicable edit that overlaps an edit applied before it, the
    /// way `cargo fix`, ruff and ESLint skip such a fix within a pass). The
    /// same request will be refused again; a fresh one made against the
    /// changed tree (a re-lint reports the finding at its new place) may
    /// succeed. Flows report it as deferred, not as "not fixable".
    #[error("agent cannot handle this request yet: {reason}")]
    Conflict {
        /// What it overlaps.
        reason: String,
    },
    /// A budget (turns, tokens, cost) was exhausted.
    #[error("agent budget exhausted: {message}")]
    Budget {
        /// Which budget.
        message: String,
    },
    /// The same failure repeated too often; the call was stopped.
    #[error("agent stopped: the same error repeated {count} times: {signature}")]
    LoopDetected {
        /// The repeated error signature.
        signature: String,
        /// How many times it was seen.
        count: u32,
    },
    /// The call was cancelled (Ctrl-C, shutdown).
    #[error("agent call cancelled")]
    Cancelled,
    /// The call reached its own spending limit
    /// ([`AgentRequest::spend_limits`]): the agent stopped there, or spent
    /// past it. Unlike [`AgentError::Budget`] (the run's limits), only this
    /// request is over: the flow fails the item and goes on.
    #[error("the call's own limit was reached: {message}")]
    CallLimit {
        /// Which limit, and what was spent.
        message: String,
    },
}

impl From<schema::SchemaError> for AgentError {
    fn from(e: schema::SchemaError) -> Self {
        AgentError::InvalidSchema {
            path: e.path().to_owned(),
            message: e.to_string(),
        }
    }
}

impl AgentError {
    /// Whether retrying the same request may succeed (timeouts, transient
    /// backend failures) as opposed to errors that will repeat.
    pub fn is_transient(&self) -> bool {
        matches!(self, AgentError::Timeout { .. } | AgentError::Failed { .. })
    }

    /// Whether asking again — even with a different prompt — cannot help:
    /// the agent cannot be started or is not authorized
    /// ([`AgentError::Unavailable`]), the schema is wrong
    /// ([`AgentError::InvalidSchema`]), the agent declined
    /// ([`AgentError::Unsupported`]) or cannot do it on this tree
    /// ([`AgentError::Conflict`]), a budget is spent
    /// ([`AgentError::Budget`], [`AgentError::CallLimit`]) or a loop was
    /// stopped ([`AgentError::LoopDetected`]). A garbled or off-schema answer is
    /// not final: the next attempt may answer well.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            AgentError::Unavailable { .. }
                | AgentError::InvalidSchema { .. }
                | AgentError::Unsupported { .. }
                | AgentError::Conflict { .. }
                | AgentError::Budget { .. }
                | AgentError::CallLimit { .. }
                | AgentError::LoopDetected { .. }
        )
    }
}

/// Something that performs agent work. Object-safe: flows hold `Arc<dyn Agent>`.
///
/// Contract (checked by the conformance suite):
/// - `run` returns within the request's time limit (plus a small grace) or
///   returns [`AgentError::Timeout`];
/// - a failure is an `Err`, never an `Ok` with an error message in the text;
/// - an agent must be usable from several tasks at once.
#[async_trait]
pub trait Agent: Send + Sync + fmt::Debug {
    /// A short name for logs and reports (`claude`, `builtin-suggestion`, …).
    fn name(&self) -> &str;

    /// Performs the request.
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError>;

    /// Whether this agent can change files in the request's working
    /// directory. An agent that only answers (a plain chat completion)
    /// says `false`, and a flow whose role must change files (a review-fix
    /// fix, a planex task) refuses it before its first call, instead of
    /// paying for calls whose every outcome is "the agent changed no file".
    /// Wrappers pass the wrapped agent's answer through. Default: `true`.
    fn changes_files(&self) -> bool {
        true
    }

    /// Whether the files a response lists as changed are exactly the files
    /// the call changed, and nothing else ran in the working directory: an
    /// agent that writes its edits itself, in process, and starts no
    /// program (the builtin suggestion agent). A flow may then take the
    /// list as the call's change instead of reading the tree for it.
    /// Wrappers pass the wrapped agent's answer through. Default: `false`
    /// (the change is measured).
    fn reports_exact_changes(&self) -> bool {
        false
    }

    /// What this agent has spent so far, when it keeps count: the budget
    /// wrapper the CLI puts around every agent does, so a run can report
    /// its whole spend (planning included). Wrappers pass the wrapped
    /// agent's answer through. Default: `None`.
    fn spent(&self) -> Option<AgentSpent> {
        None
    }

    /// Why this agent would decline to fix `finding` whatever the tree
    /// holds, known from the finding alone — the builtin agent, which only
    /// applies machine-applicable suggestions, declines a finding without
    /// one. A flow settles such a finding as not fixable with these words
    /// and spends no worktree, checkpoint or call on it. The answer must be
    /// what [`Agent::run`] would say ([`AgentError::Unsupported`]'s
    /// reason). Wrappers pass the wrapped agent's answer through. Default:
    /// `None` (the agent has to be asked).
    fn declines(&self, finding: &crate::finding::Finding) -> Option<String> {
        let _ = finding;
        None
    }
}

/// Helpers every agent gets for free.
#[async_trait]
pub trait AgentExt: Agent {
    /// Runs the request and, when it carries a schema, makes sure the answer
    /// has a structured value that satisfies it. A text-only answer is parsed
    /// as JSON (the whole text, or the first fenced or braced JSON object in
    /// it) before validation.
    ///
    /// The schema is checked first: one the validator would not fully check
    /// fails with [`AgentError::InvalidSchema`] and the agent is not called.
    async fn run_validated(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let validator = request
            .schema
            .as_ref()
            .map(schema::Validator::new)
            .transpose()?;
        let mut response = self.run(request).await?;
        if let Some(validator) = validator {
            let value = match response.structured.take() {
                Some(v) => v,
                None => extract_json(&response.text).ok_or_else(|| AgentError::Garbage {
                    message: "expected a JSON answer".into(),
                    snippet: snippet(&response.text),
                })?,
            };
            validator
                .validate(&value)
                .map_err(|violations| AgentError::SchemaViolation {
                    violations: violations.iter().map(ToString::to_string).collect(),
                })?;
            response.structured = Some(value);
        }
        Ok(response)
    }
}

impl<A: Agent + ?Sized> AgentExt for A {}

/// The first 200 characters of `text`, for error messages.
pub fn snippet(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

mod opt_duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extract_json_finds_fenced_and_embedded_objects() {
        assert_eq!(extract_json(r#"{"a":1}"#), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Here you go:\n```json\n{\"a\": 2}\n```\nbye"),
            Some(json!({"a": 2}))
        );
        assert_eq!(
            extract_json(r#"text {not json} then {"b": "}"} end"#),
            Some(json!({"b": "}"}))
        );
        assert_eq!(extract_json("no json here"), None);
    }

    #[test]
    fn command_lines_grant_each_chained_command_as_a_prefix() {
        let strings = |v: &[&[&str]]| -> Vec<Vec<String>> {
            v.iter()
                .map(|a| a.iter().map(|s| (*s).to_owned()).collect())
                .collect()
        };
        assert_eq!(
            split_command_line("cargo fmt --check && cargo test 2>&1 | tail -5; make\n  \n"),
            strings(&[
                &["cargo", "fmt", "--check"],
                &["cargo", "test", "2>&1"],
                &["tail", "-5"],
                &["make"]
            ])
        );
        let request = AgentRequest::new("x", Role::Fix, "i", "/w")
            .allow_command(["cargo", "test"])
            .allow_command_line("cargo test || true")
            .allow_command(Vec::<String>::new());
        assert_eq!(
            request.allowed_commands,
            strings(&[&["cargo", "test"], &["true"]])
        );
        let back: AgentRequest =
            serde_json::from_value(serde_json::to_value(&request).unwrap()).unwrap();
        assert_eq!(back, request);
        let plain = serde_json::to_value(AgentRequest::new("x", Role::Fix, "i", "/w")).unwrap();
        assert!(plain.get("allowed_commands").is_none(), "{plain}");
    }

    #[test]
    fn snippet_cuts_on_char_boundary() {
        let long = "é".repeat(300);
        let s = snippet(&long);
        assert_eq!(s.chars().count(), 201);
    }

    /// An embedder's schema: a ticket id by pattern, and an action that is
    /// exactly one of two shapes.
    fn embedder_schema() -> serde_json::Value {
        json!({
            "type": "object",
            "required": ["ticket", "action"],
            "additionalProperties": false,
            "properties": {
                "ticket": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
                "action": {"oneOf": [
                    {
                        "type": "object",
                        "required": ["kind", "files"],
                        "additionalProperties": false,
                        "properties": {
                            "kind": {"const": "patch"},
                            "files": {"type": "array", "minItems": 1, "items": {"type": "string"}}
                        }
                    },
                    {
                        "type": "object",
                        "required": ["kind", "reason"],
                        "additionalProperties": false,
                        "properties": {
                            "kind": {"const": "skip"},
                            "reason": {"type": "string", "minLength": 1}
                        }
                    }
                ]}
            }
        })
    }

    #[tokio::test]
    async fn run_validated_enforces_an_embedder_schema_with_one_of_and_pattern() {
        use crate::fakes::{FakeAgent, Reply};
        let valid = json!({"ticket": "OPS-12", "action": {"kind": "skip", "reason": "done"}});
        let invalid = json!({"ticket": "ops-12", "action": {"kind": "patch", "reason": "x"}});
        let agent = FakeAgent::new("fake")
            .on("good", Reply::text(format!("Here:\n```json\n{valid}\n```")))
            .on("bad", Reply::json(invalid));
        let request = |id: &str| {
            AgentRequest::new(id, Role::Plan, "answer", "/tmp").with_schema(embedder_schema())
        };

        let answer = agent.run_validated(request("good")).await;
        assert_eq!(answer.map(|r| r.structured), Ok(Some(valid)));

        let Err(AgentError::SchemaViolation { violations }) =
            agent.run_validated(request("bad")).await
        else {
            panic!("the invalid answer must be a schema violation");
        };
        assert_eq!(
            violations,
            [
                "$.action: expected a value matching exactly one `oneOf` schema, none matched \
                 (oneOf[0]: $.action: missing required field `files`, $.action.reason: unexpected field; \
                 oneOf[1]: $.action.kind: expected \"skip\", found \"patch\")",
                "$.ticket: expected a string matching the pattern \"^[A-Z]+-[0-9]+$\", found \"ops-12\"",
            ]
        );
    }

    #[tokio::test]
    async fn run_validated_refuses_an_unsupported_schema_without_calling_the_agent() {
        use crate::fakes::{FakeAgent, Reply};
        let agent = FakeAgent::new("fake").otherwise(Reply::json(json!({"n": 1})));
        let schema = json!({"properties": {"n": {"type": "integer", "dependentRequired": {}}}});
        let request = AgentRequest::new("r", Role::Plan, "answer", "/tmp").with_schema(schema);
        let error = agent.run_validated(request).await;
        let Err(error @ AgentError::InvalidSchema { .. }) = error else {
            panic!("expected InvalidSchema, got {error:?}");
        };
        assert_eq!(
            error,
            AgentError::InvalidSchema {
                path: "$.properties.n.dependentRequired".into(),
                message: "schema keyword `dependentRequired` at $.properties.n.dependentRequired \
                          is not supported by the validator, which would ignore it; the schema is refused"
                    .into(),
            }
        );
        assert!(
            error.to_string().starts_with(
                "the request's JSON schema is refused (fix the schema, not the agent): "
            )
        );
        assert!(!error.is_transient());
        assert!(agent.calls().is_empty(), "the agent must not be called");
    }

    #[test]
    fn try_with_schema_refuses_at_set_time() {
        let request = || AgentRequest::new("r", Role::Plan, "answer", "/tmp");
        let accepted = request().try_with_schema(embedder_schema());
        assert_eq!(accepted.map(|r| r.schema), Ok(Some(embedder_schema())));
        let refused = request().try_with_schema(json!({"$ref": "other.json#/a"}));
        assert_eq!(
            refused.map(|r| r.schema).map_err(|e| e.path().to_owned()),
            Err("$.$ref".to_owned())
        );
    }

    #[test]
    fn request_round_trips_through_json() {
        let req = AgentRequest::new("T1", Role::Execute, "do it", "/tmp")
            .with_time_limit(Duration::from_millis(1500))
            .with_schema(json!({"type": "object"}));
        let text = serde_json::to_string(&req).unwrap();
        let back: AgentRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, req);
    }
}
