//! One attempt of the tool agent: the conversation, the tool calls, the
//! guards, the final answer and its transcript.

use std::collections::BTreeMap;
use std::time::Instant;

use orchestrator_core::agent::{
    AgentError, AgentRequest, AgentResponse, Usage, extract_json, snippet,
};
use orchestrator_core::schema::Validator;
use serde::Serialize;
use serde_json::{Value, json};

use super::negotiate::{
    Reply, TextReply, ToolMode, names_tools, parse_reply, parse_text_reply, text_protocol_prompt,
};
use super::tools::Toolbox;
use super::{ToolAgent, changes_files};
use crate::openai::{SendError, names_response_format, user_message};
use crate::wrappers::JsonlWriter;

/// The same failing call (same tool, arguments and error) this many times
/// in a row stops the attempt.
pub const REPEAT_LIMIT: u32 = 3;

/// What one attempt did, for the transcript, the logs and measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AttemptStats {
    /// The request's id.
    pub request_id: String,
    /// Model requests sent.
    pub turns: u32,
    /// Prompt tokens, as the server reported them.
    pub input_tokens: u64,
    /// Completion tokens, as the server reported them.
    pub output_tokens: u64,
    /// Tool calls by tool name.
    pub tool_calls: BTreeMap<String, u32>,
    /// Tool calls that failed (refusals included).
    pub tool_errors: u32,
    /// Tool calls refused by confinement or the command allow-list.
    pub refusals: u32,
    /// Wall time of the attempt in milliseconds.
    pub wall_ms: u64,
    /// `ok`, or the error's kind.
    pub outcome: String,
    /// The transcript file, when one was written.
    pub transcript: Option<String>,
}

/// The state of one attempt.
pub(super) struct Attempt<'a> {
    pub agent: &'a ToolAgent,
    pub request: &'a AgentRequest,
    pub toolbox: Option<Toolbox>,
    pub transcript: Option<JsonlWriter>,
    pub stats: AttemptStats,
    pub started: Instant,
    /// When the configured wall time runs out (a budget, not the request's
    /// own time limit).
    pub wall_deadline: Option<Instant>,
    /// The request's own deadline, for the HTTP retries.
    pub deadline: Option<Instant>,
    messages: Vec<Value>,
    last_failure: Option<(String, u32)>,
    /// Messages already written to the transcript: each request line
    /// carries only the messages after these.
    logged_messages: usize,
}

impl<'a> Attempt<'a> {
    pub(super) fn new(
        agent: &'a ToolAgent,
        request: &'a AgentRequest,
        toolbox: Option<Toolbox>,
        transcript: Option<JsonlWriter>,
    ) -> Self {
        let started = Instant::now();
        Self {
            agent,
            request,
            toolbox,
            stats: AttemptStats {
                request_id: request.id.clone(),
                transcript: transcript.as_ref().map(|t| t.path().display().to_string()),
                ..AttemptStats::default()
            },
            transcript,
            started,
            wall_deadline: agent.config.max_wall.map(|w| started + w),
            deadline: request.time_limit.map(|l| started + l),
            messages: Vec::new(),
            last_failure: None,
            logged_messages: 0,
        }
    }

    /// Appends one transcript line (the API key redacted).
    pub(super) async fn log(&self, kind: &str, mut entry: Value) {
        let Some(writer) = &self.transcript else {
            return;
        };
        if let Some(map) = entry.as_object_mut() {
            map.insert("version".into(), json!(1));
            map.insert("kind".into(), json!(kind));
            map.insert(
                "elapsed_ms".into(),
                json!(self.started.elapsed().as_millis() as u64),
            );
        }
        let key = self.agent.http.api_key().map(|k| k.expose().to_owned());
        writer
            .write_redacted(&entry, |line| match &key {
                Some(key) if !key.is_empty() => line.replace(key.as_str(), "<redacted>"),
                _ => line,
            })
            .await;
    }

    fn system_prompt(&self) -> String {
        let config = self.agent.http.config();
        let mut text = config
            .system_prompt
            .as_deref()
            .unwrap_or(crate::openai::DEFAULT_SYSTEM_PROMPT)
            .trim_end()
            .to_owned();
        text.push_str(&format!(
            "\n\nYour role in this task: {}.",
            self.request.role.as_str()
        ));
        if let Some(toolbox) = &self.toolbox {
            text.push_str(
                "\nYou work in a repository: use the tools to read, search, edit and write its files \
                 and to run the allowed commands. Paths are relative to the repository root. \
                 .git/ and the engine's folders are off limits. Change only what the task needs. \
                 When the work is done, reply without calling a tool.",
            );
            if self.agent.negotiated.tools() == ToolMode::Text {
                text.push_str(&text_protocol_prompt(&toolbox.definitions()));
            }
        }
        if let Some(schema) = &self.request.schema {
            text.push_str(
                "\nYour final answer is a single JSON value and nothing else; it must satisfy this JSON schema:\n",
            );
            text.push_str(&schema.to_string());
        }
        text
    }

    /// Runs the attempt to its answer.
    pub(super) async fn run(&mut self) -> Result<AgentResponse, AgentError> {
        self.messages = vec![
            json!({"role": "system", "content": self.system_prompt()}),
            json!({"role": "user", "content": user_message(self.request)}),
        ];
        let final_text = if self.toolbox.is_some() {
            self.work().await?
        } else {
            String::new()
        };
        let Some(schema) = self.request.schema.clone() else {
            let text = if self.toolbox.is_some() {
                final_text
            } else {
                self.answer(None, None).await?
            };
            return Ok(AgentResponse {
                text,
                usage: Some(self.usage()),
                ..AgentResponse::default()
            });
        };
        self.structured_answer(final_text, &schema).await
    }

    /// What the attempt used so far.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.stats.input_tokens,
            output_tokens: self.stats.output_tokens,
            cost_usd: 0.0,
            turns: self.stats.turns,
        }
    }

    /// The answer as a JSON value that satisfies `schema`: the work phase's
    /// last reply (`final_text`) when it is one, else asked for, and once
    /// more with what was wrong with it.
    async fn structured_answer(
        &mut self,
        final_text: String,
        schema: &Value,
    ) -> Result<AgentResponse, AgentError> {
        let validator = Validator::new(schema)?;
        let check = |text: &str| -> Result<Value, Vec<String>> {
            let value = extract_json(text)
                .ok_or_else(|| vec!["the answer holds no JSON value".to_owned()])?;
            validator
                .validate(&value)
                .map_err(|v| v.iter().map(ToString::to_string).collect::<Vec<_>>())?;
            Ok(value)
        };
        // The work phase's last reply may already be the answer.
        let mut problems = if self.toolbox.is_some() {
            match check(&final_text) {
                Ok(value) => {
                    return Ok(AgentResponse {
                        text: final_text,
                        structured: Some(value),
                        usage: Some(self.usage()),
                        ..AgentResponse::default()
                    });
                }
                Err(problems) if extract_json(&final_text).is_some() => Some(problems),
                Err(_) => None,
            }
        } else {
            None
        };
        // Ask for the answer, and once more with what was wrong with it.
        for round in 0..2 {
            let prompt = match (&problems, self.toolbox.is_some() || round > 0) {
                (Some(p), _) => Some(format!(
                    "Your answer does not satisfy the schema: {}. Answer again with a single JSON value that satisfies it.",
                    p.join("; ")
                )),
                (None, true) => Some(
                    "Now give your final answer: a single JSON value that satisfies the schema, and nothing else."
                        .to_owned(),
                ),
                (None, false) => None,
            };
            let text = self.answer(prompt, Some(schema)).await?;
            match check(&text) {
                Ok(value) => {
                    return Ok(AgentResponse {
                        text,
                        structured: Some(value),
                        usage: Some(self.usage()),
                        ..AgentResponse::default()
                    });
                }
                Err(p) => problems = Some(p),
            }
        }
        Err(AgentError::SchemaViolation {
            violations: problems.unwrap_or_default(),
        })
    }

    /// The tool loop: until the model answers without a tool call.
    async fn work(&mut self) -> Result<String, AgentError> {
        loop {
            self.check_limits()?;
            let mode = self.agent.negotiated.tools();
            let Some(toolbox) = self.toolbox.clone() else {
                return Ok(String::new());
            };
            let mut body = self.base_body();
            if mode == ToolMode::Native {
                body["tools"] = json!(toolbox.definitions());
                body["tool_choice"] = json!("auto");
            }
            let never = |_: reqwest::StatusCode, _: &str| false;
            let refused: &(dyn Fn(reqwest::StatusCode, &str) -> bool + Sync) = match mode {
                ToolMode::Native => &names_tools,
                ToolMode::Text => &never,
            };
            let reply = match self.exchange(&body, refused).await? {
                Ok(reply) => reply,
                Err((status, message)) => {
                    self.log(
                        "negotiation",
                        json!({"what": "tools", "from": "native", "to": "text", "status": status, "message": message}),
                    )
                    .await;
                    self.agent
                        .negotiated
                        .use_text_protocol(&format!("HTTP {status}: {message}"));
                    self.new_system_prompt();
                    continue;
                }
            };
            if mode == ToolMode::Native && !reply.calls.is_empty() {
                self.native_calls(&toolbox, &reply).await?;
                continue;
            }
            if let Some(answer) = self.text_turn(&toolbox, mode, reply.content).await? {
                return Ok(answer);
            }
        }
    }

    /// Stops the loop before the next model request once a limit is
    /// reached: the turns, the request's token limit, the wall time.
    fn check_limits(&self) -> Result<(), AgentError> {
        if self.stats.turns >= self.agent.config.max_turns {
            return Err(AgentError::Budget {
                message: format!(
                    "the tool agent used its {} turns without finishing",
                    self.agent.config.max_turns
                ),
            });
        }
        let tokens = self.stats.input_tokens + self.stats.output_tokens;
        if let Some(max) = self.request.spend_limits.max_tokens
            && tokens >= max
        {
            // The request's own limit (a ci-autofix iteration's): the
            // loop stops before the next model request.
            return Err(AgentError::CallLimit {
                message: format!(
                    "the tool agent used {tokens} tokens in {} turns, reaching the call's limit of {max}",
                    self.stats.turns
                ),
            });
        }
        if let Some(deadline) = self.wall_deadline
            && Instant::now() >= deadline
        {
            return Err(AgentError::Budget {
                message: format!(
                    "the tool agent used its {:.0}s of wall time without finishing",
                    self.agent.config.max_wall.unwrap_or_default().as_secs_f64()
                ),
            });
        }
        Ok(())
    }

    /// Runs a native reply's tool calls and gives the model their results.
    async fn native_calls(&mut self, toolbox: &Toolbox, reply: &Reply) -> Result<(), AgentError> {
        self.messages.push(reply.message.clone());
        for call in &reply.calls {
            let result = match &call.args {
                Ok(args) => self.call_tool(toolbox, &call.name, args).await?,
                Err(e) => {
                    self.failure(&call.name, &Value::Null, e)?;
                    format!("error: {e}")
                }
            };
            self.messages
                .push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
        }
        Ok(())
    }

    /// A reply in text: the final answer (`Some`), or an action run and its
    /// result (or the protocol error) given back to the model. A text action
    /// in answer to a native request switches the run to the text protocol.
    async fn text_turn(
        &mut self,
        toolbox: &Toolbox,
        mode: ToolMode,
        content: String,
    ) -> Result<Option<String>, AgentError> {
        let parsed = parse_text_reply(&content);
        if mode == ToolMode::Native {
            if !matches!(parsed, TextReply::Action { .. }) {
                return Ok(Some(content));
            }
            // The model speaks the text protocol: keep to it.
            self.agent
                .negotiated
                .use_text_protocol("the model answered a native request with a text action");
            self.log(
                "negotiation",
                json!({"what": "tools", "from": "native", "to": "text",
                "message": "the model answered with a text action"}),
            )
            .await;
            self.new_system_prompt();
        }
        self.messages
            .push(json!({"role": "assistant", "content": content}));
        match parsed {
            TextReply::Final(text) => return Ok(Some(text)),
            TextReply::Action { tool, args } => {
                let result = self.call_tool(toolbox, &tool, &args).await?;
                self.messages.push(json!({"role": "user",
                    "content": format!("Result of {tool}:\n```\n{result}\n```")}));
            }
            TextReply::Malformed(problem) => {
                self.failure("protocol", &Value::Null, &problem)?;
                self.messages.push(json!({"role": "user", "content": format!(
                    "Protocol error: {problem}. Reply with exactly one ```action block, or with your final answer and no action block.")}));
            }
        }
        Ok(None)
    }

    /// Runs one tool call, records it and applies the repeat guard; returns
    /// the text for the model.
    async fn call_tool(
        &mut self,
        toolbox: &Toolbox,
        name: &str,
        args: &Value,
    ) -> Result<String, AgentError> {
        *self.stats.tool_calls.entry(name.to_owned()).or_default() += 1;
        let result = toolbox.call(name, args).await;
        if result.refused {
            self.stats.refusals += 1;
            tracing::warn!(tool = name, %args, error = %result.text, "tool call refused");
        }
        self.log(
            "tool",
            json!({"name": name, "args": args, "failed": result.failed,
                "refused": result.refused, "result": result.text}),
        )
        .await;
        if result.failed {
            self.failure(name, args, &result.text)?;
        } else {
            self.last_failure = None;
        }
        Ok(result.text)
    }

    /// Counts a failed call; the same one [`REPEAT_LIMIT`] times in a row
    /// stops the attempt.
    fn failure(&mut self, name: &str, args: &Value, error: &str) -> Result<(), AgentError> {
        self.stats.tool_errors += 1;
        let signature = format!("{name} {args} -> {}", snippet(error.trim()));
        let count = match &self.last_failure {
            Some((last, n)) if *last == signature => n + 1,
            _ => 1,
        };
        self.last_failure = Some((signature.clone(), count));
        if count >= REPEAT_LIMIT {
            return Err(AgentError::LoopDetected { signature, count });
        }
        Ok(())
    }

    /// Rewrites the system prompt after a negotiation step; the next
    /// transcript line carries the whole conversation again.
    fn new_system_prompt(&mut self) {
        self.messages[0] = json!({"role": "system", "content": self.system_prompt()});
        self.logged_messages = 0;
    }

    fn base_body(&self) -> Value {
        let config = self.agent.http.config();
        let (temperature, max_tokens, max_completion_tokens) = config.sampling();
        let mut body = json!({"model": config.model, "messages": self.messages, "stream": false});
        if let Some(t) = temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = max_tokens {
            body["max_tokens"] = json!(m);
        }
        if let Some(m) = max_completion_tokens {
            body["max_completion_tokens"] = json!(m);
        }
        body
    }

    /// Asks for the answer: `prompt` appended as a user message (when
    /// given), no tools, the negotiated `response_format` for `schema`.
    async fn answer(
        &mut self,
        prompt: Option<String>,
        schema: Option<&Value>,
    ) -> Result<String, AgentError> {
        if let Some(prompt) = prompt {
            self.messages
                .push(json!({"role": "user", "content": prompt}));
        }
        loop {
            let level = self.agent.negotiated.format();
            let mut body = self.base_body();
            if let Some(format) = schema.and_then(|s| level.response_format(s)) {
                body["response_format"] = format;
            }
            let sent_format = body.get("response_format").is_some();
            let refused = |status, text: &str| sent_format && names_response_format(status, text);
            match self.exchange(&body, &refused).await? {
                Ok(reply) => {
                    self.messages
                        .push(json!({"role": "assistant", "content": reply.content}));
                    return Ok(reply.content);
                }
                Err((status, message)) => {
                    let next = self.agent.negotiated.refuse_format(level);
                    self.log(
                        "negotiation",
                        json!({"what": "response_format", "from": level,
                        "to": next, "status": status, "message": message}),
                    )
                    .await;
                    if next.is_none() {
                        return Err(AgentError::Failed {
                            message: format!(
                                "the server refused every response format: HTTP {status}: {message}"
                            ),
                            exit_code: None,
                        });
                    }
                }
            }
        }
    }

    /// Sends one request: `Ok(Ok(reply))`, `Ok(Err((status, message)))`
    /// when `refused` recognised the error answer, `Err` otherwise.
    async fn exchange(
        &mut self,
        body: &Value,
        refused: &(dyn Fn(reqwest::StatusCode, &str) -> bool + Sync),
    ) -> Result<Result<Reply, (u16, String)>, AgentError> {
        self.stats.turns += 1;
        let turn = self.stats.turns;
        self.log("request", json!({"turn": turn, "body": body}))
            .await;
        let sent = self.agent.http.send(body, self.deadline, refused).await;
        match sent {
            Ok(text) => {
                let reply = parse_reply(&text);
                let logged: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
                self.log("response", json!({"turn": turn, "body": logged}))
                    .await;
                let reply = reply?;
                if let Some(usage) = &reply.usage {
                    self.stats.input_tokens += usage.input_tokens;
                    self.stats.output_tokens += usage.output_tokens;
                }
                Ok(Ok(reply))
            }
            Err(SendError::Refused { status, message }) => {
                self.log(
                    "response",
                    json!({"turn": turn, "status": status, "error": message}),
                )
                .await;
                Ok(Err((status, message)))
            }
            Err(SendError::Agent(error)) => {
                self.log("response", json!({"turn": turn, "error": error}))
                    .await;
                Err(error)
            }
        }
    }
}

/// Whether `request` gets tools.
pub(super) fn wants_tools(request: &AgentRequest) -> bool {
    changes_files(request.role)
}
