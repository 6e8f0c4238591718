//! The `codex exec --json` dialect: one JSON event per stdout line.
//!
//! Events read: `thread.started` (`thread_id`), `turn.completed` (`usage`
//! with `input_tokens`, `output_tokens`; one per turn), `turn.failed`
//! (`error.message`), `error` (`message`), and `item.completed` whose `item`
//! is an `agent_message` (`text`: the last one is the answer), a
//! `file_change` (`changes[].path`: the files changed, unless its `status`
//! is `failed`) or a
//! `command_execution` (`command`, `exit_code`: logged). A failure whose
//! message is an HTTP 401 or 403 from the endpoint is an authentication
//! error ([`AgentError::Unavailable`], not retried). Other events, other
//! item types and unknown fields are ignored; lines that are not JSON are
//! skipped, but output with no event at all is garbage.
//!
//! `codex exec --output-schema FILE` sends the schema to the model in strict
//! mode, and the Responses API rejects (HTTP 400) a strict schema with an
//! object that is not closed or does not list every property in `required`.
//! [`strict_schema`] rewrites a request's schema into that form — optional
//! properties become required but nullable — and [`drop_optional_nulls`]
//! undoes it on the answer, so that the answer is validated against the
//! request's own schema.

use std::path::Path;

use orchestrator_core::agent::{AgentError, AgentResponse, Usage, extract_json, snippet};
use serde_json::Value;

use super::raw::{RawOutput, authentication_error};

/// What to set when the endpoint refuses codex's credentials.
const AUTH_HINT: &str = "set the API key variable of the configured model provider \
     (OPENAI_API_KEY, or the provider's `env_key`) or run `codex login`";

/// Whether codex's failure message is the endpoint refusing its credentials
/// (`unexpected status 401 Unauthorized: …`, or 403).
fn is_auth_failure(message: &str) -> bool {
    message.contains("401 Unauthorized") || message.contains("403 Forbidden")
}

/// The strict form of `schema` that `--output-schema` needs: every object
/// schema (one with `type: "object"` or `properties`) gets
/// `additionalProperties: false` and lists all its properties in `required`;
/// a property that was optional becomes nullable (`null` added to its `type`
/// list and to its `enum`, or `anyOf: [original, {"type": "null"}]` when it
/// has no `type`). Subschemas under `properties`, `items`, `anyOf`, `oneOf`,
/// `allOf`, `$defs` and `definitions` are rewritten too. An object that
/// allowed extra properties by a schema (a map) is closed: strict mode cannot
/// express maps.
pub fn strict_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    make_strict(&mut out);
    out
}

fn is_object_schema(schema: &serde_json::Map<String, Value>) -> bool {
    schema.contains_key("properties")
        || match schema.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
            _ => false,
        }
}

fn make_nullable(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        // `true` (anything) already accepts null; `false` stays false.
        return;
    };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            if t != "null" {
                let t = std::mem::take(t);
                map.insert("type".into(), Value::from(vec![t, "null".to_owned()]));
            }
        }
        Some(Value::Array(ts)) => {
            if !ts.iter().any(|t| t == "null") {
                ts.push("null".into());
            }
        }
        _ => {
            let original = Value::Object(std::mem::take(map));
            map.insert(
                "anyOf".into(),
                Value::from(vec![original, serde_json::json!({"type": "null"})]),
            );
            return;
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

fn make_strict(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(options)) = map.get_mut(key) {
            options.iter_mut().for_each(make_strict);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get_mut(key) {
            defs.values_mut().for_each(make_strict);
        }
    }
    if let Some(items) = map.get_mut("items") {
        make_strict(items);
    }
    if !is_object_schema(map) {
        return;
    }
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut properties = match map.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => serde_json::Map::new(),
    };
    for (name, property) in &mut properties {
        make_strict(property);
        if !required.contains(name) {
            make_nullable(property);
        }
    }
    let all: Vec<Value> = properties.keys().cloned().map(Value::from).collect();
    map.insert("properties".into(), Value::Object(properties));
    map.insert("required".into(), Value::from(all));
    map.insert("additionalProperties".into(), Value::Bool(false));
}

/// Where `schema` is not in the strict form (see [`strict_schema`]): one
/// entry per object schema that is not closed or leaves a property out of
/// `required`, naming its path in the schema. Empty when strict.
pub fn strict_violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    find_strict_violations(schema, "$", &mut out);
    out
}

fn find_strict_violations(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(options)) = map.get(key) {
            for (i, option) in options.iter().enumerate() {
                find_strict_violations(option, &format!("{path}.{key}[{i}]"), out);
            }
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get(key) {
            for (name, def) in defs {
                find_strict_violations(def, &format!("{path}.{key}.{name}"), out);
            }
        }
    }
    if let Some(items) = map.get("items") {
        find_strict_violations(items, &format!("{path}.items"), out);
    }
    if !is_object_schema(map) {
        return;
    }
    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
        out.push(format!(
            "{path}: object without \"additionalProperties\": false"
        ));
    }
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, property) in properties {
            if !required.contains(&name.as_str()) {
                out.push(format!("{path}: property `{name}` is not in `required`"));
            }
            find_strict_violations(property, &format!("{path}.properties.{name}"), out);
        }
    }
}

/// Undoes [`strict_schema`] on an answer: removes every `null` property that
/// `original` does not list in its object's `required` (the strict form made
/// it nullable so the model could leave it out), through `properties` and
/// `items`. The answer can then be validated against `original`.
pub fn drop_optional_nulls(original: &Value, value: &mut Value) {
    let Some(schema) = original.as_object() else {
        return;
    };
    match value {
        Value::Object(fields) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let properties = schema.get("properties").and_then(Value::as_object);
            fields.retain(|name, field| {
                !(field.is_null()
                    && !required.contains(&name.as_str())
                    && properties.is_some_and(|p| p.contains_key(name)))
            });
            if let Some(properties) = properties {
                for (name, field) in fields.iter_mut() {
                    if let Some(property) = properties.get(name) {
                        drop_optional_nulls(property, field);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    drop_optional_nulls(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The answer and what else Codex reported.
#[derive(Debug, Clone, PartialEq)]
pub struct CodexOutput {
    /// The mapped answer.
    pub response: AgentResponse,
    /// The thread id, to resume (`codex exec resume <id>`).
    pub thread_id: Option<String>,
    /// Commands the agent ran, with their exit codes when known.
    pub commands: Vec<(String, Option<i64>)>,
}

/// Makes an absolute path relative to `workdir` when it lies inside it.
fn relative_to(path: &str, workdir: &Path) -> String {
    Path::new(path)
        .strip_prefix(workdir)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_owned())
}

fn message_of(v: &Value) -> String {
    v.get("message")
        .and_then(Value::as_str)
        .map_or_else(|| v.to_string(), str::to_owned)
}

/// Maps Codex's event stream. `structured`: parse the final message as JSON
/// (the request had a schema).
pub fn parse(raw: &RawOutput, workdir: &Path, structured: bool) -> Result<CodexOutput, AgentError> {
    let mut stream = Stream::default();
    for line in raw.stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        stream.event(&event, workdir);
    }
    stream.finish(raw, structured)
}

/// What `codex exec --json`'s events said so far.
#[derive(Default)]
struct Stream {
    events: usize,
    thread_id: Option<String>,
    usage: Usage,
    completed_turns: u32,
    text: Option<String>,
    files: Vec<String>,
    commands: Vec<(String, Option<i64>)>,
    /// The last failure not followed by a completed turn.
    failure: Option<String>,
}

impl Stream {
    /// One JSONL event; a line without a `type` is not one.
    fn event(&mut self, event: &Value, workdir: &Path) {
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            return;
        };
        self.events += 1;
        match kind {
            "thread.started" => {
                self.thread_id = event
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "turn.completed" => {
                self.completed_turns += 1;
                self.failure = None;
                if let Some(u) = event.get("usage") {
                    let get = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    self.usage.input_tokens += get("input_tokens");
                    self.usage.output_tokens += get("output_tokens");
                }
            }
            "turn.failed" => {
                self.failure = Some(
                    event
                        .get("error")
                        .map_or_else(|| "turn failed".to_owned(), message_of),
                );
            }
            "error" => self.failure = Some(message_of(event)),
            "item.completed" => {
                if let Some(item) = event.get("item") {
                    self.item(item, workdir);
                }
            }
            _ => {}
        }
    }

    /// A completed item: the agent's message, a file change, a command.
    fn item(&mut self, item: &Value, workdir: &Path) {
        match item.get("type").and_then(Value::as_str) {
            Some("agent_message") => {
                if let Some(t) = item.get("text").and_then(Value::as_str) {
                    self.text = Some(t.to_owned());
                }
            }
            Some("file_change") if item.get("status").and_then(Value::as_str) == Some("failed") => {
                // A patch that did not apply changed nothing.
                tracing::debug!(?item, "codex reported a failed file change");
            }
            Some("file_change") => {
                let changes = item.get("changes").and_then(Value::as_array);
                for change in changes.into_iter().flatten() {
                    if let Some(path) = change.get("path").and_then(Value::as_str) {
                        let path = relative_to(path, workdir);
                        if !self.files.contains(&path) {
                            self.files.push(path);
                        }
                    }
                }
            }
            Some("command_execution") => {
                let command = item
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let exit = item.get("exit_code").and_then(Value::as_i64);
                tracing::debug!(%command, ?exit, "codex ran a command");
                self.commands.push((command, exit));
            }
            _ => {}
        }
    }

    /// The run's outcome once every event is read: a failure (an
    /// authentication one named as such), a process that failed or printed
    /// no event, or the answer.
    fn finish(self, raw: &RawOutput, structured: bool) -> Result<CodexOutput, AgentError> {
        let Self {
            events,
            thread_id,
            mut usage,
            completed_turns,
            text,
            files,
            commands,
            failure,
        } = self;
        if let Some(message) = failure {
            if is_auth_failure(&message) {
                return Err(authentication_error("codex", &message, AUTH_HINT));
            }
            return Err(AgentError::Failed {
                message: format!("codex failed: {message}"),
                exit_code: raw.code,
            });
        }
        if events == 0 {
            if raw.code != Some(0) {
                return Err(raw.failed("codex"));
            }
            return Err(AgentError::Garbage {
                message: "expected JSONL events from `codex exec --json`".into(),
                snippet: snippet(raw.stdout.trim()),
            });
        }
        if raw.code != Some(0) {
            return Err(raw.failed("codex"));
        }
        if text.is_none() && completed_turns == 0 {
            return Err(AgentError::Garbage {
                message: "codex ended without a turn.completed event or an agent message".into(),
                snippet: snippet(raw.stdout.trim()),
            });
        }
        usage.turns = completed_turns;
        let text = text.unwrap_or_default();
        let structured_value = if structured {
            extract_json(&text)
        } else {
            None
        };
        tracing::debug!(?thread_id, "codex finished");
        Ok(CodexOutput {
            response: AgentResponse {
                text,
                structured: structured_value,
                files_changed: files,
                usage: Some(usage),
                session: thread_id.clone(),
            },
            thread_id,
            commands,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_schema() -> Value {
        json!({
            "type": "object",
            "required": ["summary", "tasks"],
            "properties": {
                "summary": {"type": "string"},
                "risk": {"type": "string", "enum": ["low", "high"]},
                "notes": {},
                "tasks": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                        "id": {"type": "string"},
                        "depends_on": {"type": "array", "items": {"type": "string"}}
                    }
                }}
            }
        })
    }

    #[test]
    fn strict_schema_closes_objects_and_makes_optional_properties_nullable() {
        let strict = strict_schema(&plan_schema());
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "required": ["notes", "risk", "summary", "tasks"],
                "additionalProperties": false,
                "properties": {
                    "summary": {"type": "string"},
                    "risk": {"type": ["string", "null"], "enum": ["low", "high", null]},
                    "notes": {"anyOf": [{}, {"type": "null"}]},
                    "tasks": {"type": "array", "items": {
                        "type": "object",
                        "required": ["depends_on", "id"],
                        "additionalProperties": false,
                        "properties": {
                            "id": {"type": "string"},
                            "depends_on": {"type": ["array", "null"], "items": {"type": "string"}}
                        }
                    }}
                }
            })
        );
        assert_eq!(strict_violations(&strict), Vec::<String>::new());
        assert_eq!(
            strict_violations(&plan_schema()),
            [
                "$: object without \"additionalProperties\": false",
                "$: property `notes` is not in `required`",
                "$: property `risk` is not in `required`",
                "$.properties.tasks.items: object without \"additionalProperties\": false",
                "$.properties.tasks.items: property `depends_on` is not in `required`",
            ]
        );
    }

    #[test]
    fn optional_nulls_are_dropped_and_the_answer_fits_the_original_schema() {
        let mut answer = json!({
            "summary": "s", "risk": null, "notes": null,
            "tasks": [{"id": "T1", "depends_on": null}, {"id": "T2", "depends_on": ["T1"]}]
        });
        let schema = plan_schema();
        assert!(orchestrator_core::schema::validate(&schema, &answer).is_err());
        drop_optional_nulls(&schema, &mut answer);
        assert_eq!(
            answer,
            json!({"summary": "s", "tasks": [{"id": "T1"}, {"id": "T2", "depends_on": ["T1"]}]})
        );
        assert_eq!(
            orchestrator_core::schema::validate(&schema, &answer),
            Ok(())
        );
    }

    fn raw(stdout: &str, code: i32) -> RawOutput {
        RawOutput {
            code: Some(code),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn an_error_followed_by_a_completed_turn_is_a_success() {
        let stdout = concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t1\"}\n",
            "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"done\"}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":2}}\n",
        );
        let out = parse(&raw(stdout, 0), Path::new("/w"), false).unwrap();
        assert_eq!(out.response.text, "done");
        assert_eq!(out.thread_id.as_deref(), Some("t1"));
        assert_eq!(
            out.response.usage.map(|u| (u.input_tokens, u.turns)),
            Some((5, 1))
        );
    }

    #[test]
    fn non_json_lines_and_unknown_events_are_skipped() {
        let stdout = concat!(
            "Reading prompt from stdin...\n",
            "{\"type\":\"some.future.event\",\"payload\":1}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"todo_list\",\"items\":[]}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"c\",\"type\":\"command_execution\",\"command\":\"ls\",\"exit_code\":0}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"f\",\"type\":\"file_change\",\"changes\":[{\"path\":\"/w/a.rs\",\"kind\":\"update\"},{\"path\":\"/elsewhere/b.rs\",\"kind\":\"add\"},{\"path\":\"/w/a.rs\",\"kind\":\"update\"}]}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n",
        );
        let out = parse(&raw(stdout, 0), Path::new("/w"), false).unwrap();
        assert_eq!(out.response.text, "");
        assert_eq!(out.response.files_changed, ["a.rs", "/elsewhere/b.rs"]);
        assert_eq!(out.commands, [("ls".to_owned(), Some(0))]);
    }

    #[test]
    fn a_failed_file_change_changed_no_file() {
        let stdout = concat!(
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"f\",\"type\":\"file_change\",\"status\":\"failed\",\"changes\":[{\"path\":\"/w/a.rs\",\"kind\":\"update\"}]}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"g\",\"type\":\"file_change\",\"status\":\"completed\",\"changes\":[{\"path\":\"/w/b.rs\",\"kind\":\"update\"}]}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n",
        );
        let out = parse(&raw(stdout, 0), Path::new("/w"), false).unwrap();
        assert_eq!(out.response.files_changed, ["b.rs"]);
    }

    #[test]
    fn events_without_a_turn_or_message_are_garbage() {
        let err = parse(
            &raw("{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n", 0),
            Path::new("/w"),
            false,
        )
        .unwrap_err();
        assert!(matches!(err, AgentError::Garbage { .. }), "{err:?}");
    }
}
