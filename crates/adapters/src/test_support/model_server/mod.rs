//! Support for the real-CLI tests: where the pinned agent CLIs are, and a
//! scripted model server on 127.0.0.1 that speaks the wire protocol each CLI
//! uses (OpenAI Responses with SSE for codex, the Anthropic Messages API for
//! claude, the Gemini API for gemini), and OpenAI chat completions for the
//! builtin tool agent.
//!
//! A test scripts the model's turns ([`Turn`]); the server answers each main
//! request with the next turn, rendered in the protocol's format, and records
//! every request (path and JSON body) for assertions. Auxiliary calls a CLI
//! makes besides its main conversation (gemini's routing call to a flash-lite
//! model, claude's non-streaming side calls) get a fixed answer and do not
//! consume a turn, but are recorded too. When the script runs out, the server
//! answers HTTP 500 "script exhausted", which the CLI reports as a failure.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

mod exchange;

pub use exchange::Exchange;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The wire protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI Responses API, `POST /v1/responses`, SSE (codex).
    OpenAiResponses,
    /// Anthropic Messages API, `POST /v1/messages`, SSE when `stream` (claude).
    Anthropic,
    /// Gemini API, `:generateContent` and `:streamGenerateContent?alt=sse`.
    Gemini,
    /// OpenAI chat completions, `POST /v1/chat/completions`, non-streaming
    /// JSON: a tool call is an assistant message with `tool_calls`, a text
    /// is its `content` (the builtin tool agent, any OpenAI-compatible
    /// client).
    OpenAiChat,
}

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// The model calls a tool with these arguments.
    ToolCall {
        /// The tool's name as the CLI offers it (`exec_command`, `Bash`,
        /// `write_file`, …).
        name: String,
        /// The tool's arguments.
        args: Value,
    },
    /// The model answers with this text and ends its turn.
    Text(String),
    /// The endpoint answers with this HTTP status and the protocol's error
    /// body carrying `message`.
    Status(u16, String),
    /// The endpoint sends nothing for this long (a hung model).
    Hang(std::time::Duration),
    /// The endpoint answers 429 with `Retry-After: <seconds>` and the
    /// protocol's rate-limit error body.
    RateLimited(u64),
}

impl Turn {
    /// A tool call.
    pub fn tool(name: &str, args: Value) -> Self {
        Turn::ToolCall {
            name: name.to_owned(),
            args,
        }
    }

    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Turn::Text(text.into())
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The path with its query (`/v1/messages?beta=true`).
    pub path: String,
    /// The body as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
    /// Whether it was answered from the script (not an auxiliary call).
    pub main: bool,
    /// When it arrived.
    pub at: std::time::Instant,
}

/// A function choosing the model's turn for each main request.
type Script = Box<dyn FnMut(&Exchange) -> Turn + Send>;

struct State {
    protocol: Protocol,
    turns: VecDeque<Turn>,
    /// Answer every main request with this once the script is exhausted.
    repeat: Option<Turn>,
    /// Answers main requests when set (turns and repeat are then unused).
    script: Option<Script>,
    recorded: Vec<Recorded>,
    counter: u64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("protocol", &self.protocol)
            .field("turns", &self.turns)
            .field("scripted", &self.script.is_some())
            .field("recorded", &self.recorded.len())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
struct Responder(Arc<Mutex<State>>);

/// A scripted model endpoint on 127.0.0.1; see the [module docs](self).
#[derive(Debug)]
pub struct ModelServer {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl ModelServer {
    /// Starts a server that answers main requests with `turns`, in order.
    pub async fn start(protocol: Protocol, turns: Vec<Turn>) -> Self {
        Self::start_with(protocol, turns, None).await
    }

    /// Starts a server that answers every main request with `turn`.
    pub async fn always(protocol: Protocol, turn: Turn) -> Self {
        Self::start_with(protocol, Vec::new(), Some(turn)).await
    }

    /// Starts a server that answers each main request with what `script`
    /// returns for it: a flow test picks the turn by the prompt
    /// ([`Exchange::user_text`]) and the step ([`Exchange::tool_results`]),
    /// whatever order the flow's calls come in.
    pub async fn scripted(
        protocol: Protocol,
        script: impl FnMut(&Exchange) -> Turn + Send + 'static,
    ) -> Self {
        Self::start_state(State {
            protocol,
            turns: VecDeque::new(),
            repeat: None,
            script: Some(Box::new(script)),
            recorded: Vec::new(),
            counter: 0,
        })
        .await
    }

    async fn start_with(protocol: Protocol, turns: Vec<Turn>, repeat: Option<Turn>) -> Self {
        Self::start_state(State {
            protocol,
            turns: turns.into(),
            repeat,
            script: None,
            recorded: Vec::new(),
            counter: 0,
        })
        .await
    }

    async fn start_state(state: State) -> Self {
        let state = Arc::new(Mutex::new(state));
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(Responder(Arc::clone(&state)))
            .mount(&server)
            .await;
        Self { server, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recorded
            .clone()
    }

    /// The requests answered from the script.
    pub fn main_requests(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.main).collect()
    }

    /// How many scripted turns are still unanswered.
    pub fn turns_left(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .turns
            .len()
    }
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = match request.url.query() {
            Some(q) => format!("{}?{q}", request.url.path()),
            None => request.url.path().to_owned(),
        };
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let main = is_main(state.protocol, &path, &body);
        state.recorded.push(Recorded {
            path: path.clone(),
            body: body.clone(),
            main,
            at: std::time::Instant::now(),
        });
        if !main {
            return auxiliary(state.protocol, &path, &body);
        }
        let protocol = state.protocol;
        let turn = if let Some(script) = state.script.as_mut() {
            script(&Exchange {
                protocol,
                path: path.clone(),
                body: body.clone(),
            })
        } else {
            match state.turns.pop_front() {
                Some(turn) => turn,
                None => match &state.repeat {
                    Some(turn) => turn.clone(),
                    None => Turn::Status(500, "script exhausted".to_owned()),
                },
            }
        };
        state.counter += 1;
        let n = state.counter;
        render(
            state.protocol,
            &turn,
            n,
            body.get("stream") == Some(&Value::Bool(true)),
        )
    }
}

fn is_main(protocol: Protocol, path: &str, body: &Value) -> bool {
    match protocol {
        Protocol::OpenAiResponses => path.starts_with("/v1/responses"),
        Protocol::Anthropic => {
            path.starts_with("/v1/messages")
                && !path.contains("count_tokens")
                && body.get("stream") == Some(&Value::Bool(true))
        }
        Protocol::Gemini => path.contains(":streamGenerateContent"),
        Protocol::OpenAiChat => path.starts_with("/v1/chat/completions"),
    }
}

fn auxiliary(protocol: Protocol, path: &str, body: &Value) -> ResponseTemplate {
    match protocol {
        Protocol::Gemini if path.contains(":generateContent") => {
            // The routing call (and other side calls) expect JSON text.
            let text =
                json!({"complexity_reasoning": "a scripted test task", "complexity_score": 1})
                    .to_string();
            ResponseTemplate::new(200).set_body_json(gemini_chunk(json!([{"text": text}]), "STOP"))
        }
        Protocol::Anthropic if path.contains("count_tokens") => {
            ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 10}))
        }
        Protocol::Anthropic if path.starts_with("/v1/messages") => {
            let model = body.get("model").cloned().unwrap_or(json!("claude-test"));
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "msg_aux", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}
            }))
        }
        _ => ResponseTemplate::new(404).set_body_string("not scripted"),
    }
}

fn sse(events: &[(&str, Value)], named: bool) -> ResponseTemplate {
    let mut body = String::new();
    for (name, data) in events {
        if named {
            body.push_str(&format!("event: {name}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn gemini_chunk(parts: Value, finish: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 200, "candidatesTokenCount": 40, "totalTokenCount": 240}
    })
}

fn render(protocol: Protocol, turn: &Turn, n: u64, stream: bool) -> ResponseTemplate {
    if let Turn::Hang(delay) = turn {
        return ResponseTemplate::new(500)
            .set_body_string("hung")
            .set_delay(*delay);
    }
    if let Turn::RateLimited(seconds) = turn {
        return render(
            protocol,
            &Turn::Status(429, "rate limited: slow down".to_owned()),
            n,
            stream,
        )
        .insert_header("retry-after", seconds.to_string().as_str());
    }
    if let Turn::Status(status, message) = turn {
        return error_response(protocol, *status, message);
    }
    match protocol {
        Protocol::OpenAiChat => openai_chat(turn, n),
        Protocol::OpenAiResponses => openai_responses(turn, n),
        Protocol::Gemini => gemini(turn),
        Protocol::Anthropic => anthropic(turn, n, stream),
    }
}

/// An error answer with `status`, in the protocol's error shape.
fn error_response(protocol: Protocol, status: u16, message: &str) -> ResponseTemplate {
    let body = match protocol {
        Protocol::OpenAiResponses | Protocol::OpenAiChat => json!({"error": {
            "message": message, "type": "invalid_request_error", "code": status_code_name(status)}}),
        Protocol::Anthropic => json!({"type": "error", "error": {
            "type": anthropic_error_type(status), "message": message}}),
        Protocol::Gemini => json!({"error": {
            "code": status, "message": message, "status": gemini_status(status)}}),
    };
    ResponseTemplate::new(status).set_body_json(body)
}

/// A chat-completions answer (not streamed).
fn openai_chat(turn: &Turn, n: u64) -> ResponseTemplate {
    let (message, finish) = match turn {
        Turn::ToolCall { name, args } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Status(..) | Turn::Hang(_) | Turn::RateLimited(_) => unreachable!(),
    };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240}
    }))
}

/// A Responses API answer, as server-sent events.
fn openai_responses(turn: &Turn, n: u64) -> ResponseTemplate {
    let id = format!("resp_{n}");
    let item = match turn {
        Turn::ToolCall { name, args } => json!({
            "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
            "name": name, "arguments": args.to_string()}),
        Turn::Text(text) => json!({
            "type": "message", "id": format!("msg_{n}"), "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        Turn::Status(..) | Turn::Hang(_) | Turn::RateLimited(_) => unreachable!(),
    };
    sse(
        &[
            (
                "response.created",
                json!({"type": "response.created", "response": {"id": id}}),
            ),
            (
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ),
            (
                "response.completed",
                json!({"type": "response.completed", "response": {
                "id": id,
                "usage": {"input_tokens": 200, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 240}}}),
            ),
        ],
        true,
    )
}

/// A Gemini `streamGenerateContent` answer, as server-sent events.
fn gemini(turn: &Turn) -> ResponseTemplate {
    let parts = match turn {
        Turn::ToolCall { name, args } => {
            json!([{"functionCall": {"name": name, "args": args}}])
        }
        Turn::Text(text) => json!([{"text": text}]),
        Turn::Status(..) | Turn::Hang(_) | Turn::RateLimited(_) => unreachable!(),
    };
    sse(&[("", gemini_chunk(parts, "STOP"))], false)
}

/// An Anthropic Messages answer: streamed as events, or one JSON message.
fn anthropic(turn: &Turn, n: u64, stream: bool) -> ResponseTemplate {
    let (block, delta, stop) = match turn {
        Turn::ToolCall { name, args } => (
            json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": args.to_string()}),
            "tool_use",
        ),
        Turn::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
            "end_turn",
        ),
        Turn::Status(..) | Turn::Hang(_) | Turn::RateLimited(_) => unreachable!(),
    };
    let message = json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 200, "output_tokens": 1}});
    if !stream {
        let mut block = block.clone();
        match turn {
            Turn::ToolCall { args, .. } => block["input"] = args.clone(),
            Turn::Text(text) => block["text"] = json!(text),
            Turn::Status(..) | Turn::Hang(_) | Turn::RateLimited(_) => unreachable!(),
        }
        let mut message = message;
        message["content"] = json!([block]);
        message["stop_reason"] = json!(stop);
        message["usage"] = json!({"input_tokens": 200, "output_tokens": 40});
        return ResponseTemplate::new(200).set_body_json(message);
    }
    sse(
        &[
            (
                "message_start",
                json!({"type": "message_start", "message": message}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": block}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 40}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ],
        true,
    )
}

fn status_code_name(status: u16) -> &'static str {
    match status {
        401 => "invalid_api_key",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    }
}

fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        400 => "invalid_request_error",
        _ => "api_error",
    }
}

fn gemini_status(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        429 => "RESOURCE_EXHAUSTED",
        400 => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    }
}
