//! The tool agent's tools: what each one offers the model and what it does.
//!
//! Every path goes through [`Confinement`]; every write replaces its file
//! atomically (a temporary file in the same folder, renamed over the old
//! one, keeping its permissions), so a failure never leaves a half-written
//! file. `run` executes an argv — never a shell line built from model text —
//! and only when it starts with one of the request's `allowed_commands`,
//! through the [`CommandRunner`] (own process group, time limit, bounded
//! output), inside bubblewrap when [`Sandbox::Bwrap`] is chosen.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::command::{CommandRunner, CommandSpec};
use serde_json::{Value, json};

use super::confine::{Confinement, FORBIDDEN_DIRS, Refusal, slash_path};

/// Largest slice of a file `read_file` returns, in bytes.
pub const READ_CAP: usize = 64 * 1024;
/// Files larger than this are not read at all.
const READ_FILE_LIMIT: u64 = 16 << 20;
/// Most entries `list_files` returns.
pub const LIST_CAP: usize = 500;
/// Most matching lines `search` returns.
pub const SEARCH_CAP: usize = 200;
/// Files larger than this are not searched.
const SEARCH_FILE_CAP: u64 = 1 << 20;
/// Bytes of a command's output handed back to the model (the tail).
pub const RUN_OUTPUT_CAP: usize = 16 * 1024;

/// The tools' names, in the order they are offered.
pub const TOOL_NAMES: &[&str] = &[
    "read_file",
    "list_files",
    "search",
    "edit",
    "write_file",
    "run",
];

/// Where `run` executes its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Directly, through the command runner.
    None,
    /// Inside `bwrap` (at this path): the whole file system read-only but
    /// the working directory, a private `/tmp`, no network.
    Bwrap(PathBuf),
}

/// The outcome of one tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// What the tool returns (its output, or the error).
    pub text: String,
    /// Whether the call failed (a refusal, a bad argument, a failed command).
    pub failed: bool,
    /// Whether the failure is a confinement or permission refusal.
    pub refused: bool,
}

impl ToolResult {
    fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            failed: false,
            refused: false,
        }
    }

    fn error(text: impl Into<String>) -> Self {
        Self {
            text: format!("error: {}", text.into()),
            failed: true,
            refused: false,
        }
    }

    fn refused(text: impl std::fmt::Display) -> Self {
        Self {
            text: format!("error: {text}"),
            failed: true,
            refused: true,
        }
    }
}

impl From<Refusal> for ToolResult {
    fn from(r: Refusal) -> Self {
        ToolResult::refused(r)
    }
}

/// The tools of one attempt: a confined working directory, the commands it
/// may run, and how.
#[derive(Debug, Clone)]
pub struct Toolbox {
    /// Path confinement.
    pub confinement: Confinement,
    /// Argv prefixes `run` accepts.
    pub allowed: Vec<Vec<String>>,
    /// The command runner.
    pub runner: Arc<dyn CommandRunner>,
    /// Where commands run.
    pub sandbox: Sandbox,
    /// Time limit of one command.
    pub run_limit: Duration,
    /// Environment variables emptied for commands (the variable holding
    /// the agent's API key: a test command has no use for it, and its
    /// output goes back to the model).
    pub hidden_env: Vec<String>,
    /// Environment the request's tree needs (a worktree's virtualenv
    /// `PATH`, `[worktree] env`), given to every command.
    pub env: std::collections::BTreeMap<String, String>,
}

impl Toolbox {
    /// The JSON schemas of the tools, in the chat-completions `tools` shape.
    pub fn definitions(&self) -> Vec<Value> {
        let allowed = self
            .allowed
            .iter()
            .map(|a| a.join(" "))
            .collect::<Vec<_>>()
            .join("`, `");
        let run_doc = if self.allowed.is_empty() {
            "Run a command. No command is allowed in this task.".to_owned()
        } else {
            format!(
                "Run a command, given as an argv array (no shell). Only commands starting with one of these are allowed: `{allowed}`."
            )
        };
        let function = |name: &str, description: &str, properties: Value, required: &[&str]| {
            json!({"type": "function", "function": {
                "name": name, "description": description,
                "parameters": {"type": "object", "properties": properties,
                    "required": required, "additionalProperties": false}}})
        };
        vec![
            function(
                "read_file",
                "Read a text file of the working directory, optionally a range of lines (1-based, inclusive).",
                json!({"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}}),
                &["path"],
            ),
            function(
                "list_files",
                "List the files under a folder of the working directory (respecting .gitignore).",
                json!({"path": {"type": "string", "description": "folder; the working directory when absent"}}),
                &[],
            ),
            function(
                "search",
                "Search the files for a regular expression; answers path:line: text.",
                json!({"pattern": {"type": "string"}, "path": {"type": "string"}}),
                &["pattern"],
            ),
            function(
                "edit",
                "Replace one exact occurrence of old_text by new_text in a file. old_text must occur exactly once.",
                json!({"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}}),
                &["path", "old_text", "new_text"],
            ),
            function(
                "write_file",
                "Create or replace a file with the given content.",
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
                &["path", "content"],
            ),
            function(
                "run",
                &run_doc,
                json!({"argv": {"type": "array", "items": {"type": "string"}}}),
                &["argv"],
            ),
        ]
    }

    /// Runs the tool `name` with `args`.
    pub async fn call(&self, name: &str, args: &Value) -> ToolResult {
        let Some(args) = args.as_object() else {
            return ToolResult::error(format!("the arguments of {name} must be a JSON object"));
        };
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let line = |key: &str| args.get(key).and_then(Value::as_u64).map(|n| n as usize);
        match name {
            "read_file" => match text("path") {
                Some(path) => self.read_file(path, line("start_line"), line("end_line")),
                None => missing(name, "path"),
            },
            "list_files" => self.list_files(text("path").unwrap_or(".")),
            "search" => match text("pattern") {
                Some(pattern) => self.search(pattern, text("path").unwrap_or(".")),
                None => missing(name, "pattern"),
            },
            "edit" => match (text("path"), text("old_text"), text("new_text")) {
                (Some(path), Some(old), Some(new)) => self.edit(path, old, new),
                _ => missing(name, "path, old_text and new_text"),
            },
            "write_file" => match (text("path"), text("content")) {
                (Some(path), Some(content)) => self.write_file(path, content),
                _ => missing(name, "path and content"),
            },
            "run" => {
                let argv: Option<Vec<String>> =
                    args.get("argv").and_then(Value::as_array).map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    });
                match argv {
                    Some(argv) if !argv.is_empty() => self.run(argv).await,
                    _ => missing(name, "argv (a non-empty array of strings)"),
                }
            }
            other => ToolResult::error(format!(
                "there is no tool {other:?}; the tools are {}",
                TOOL_NAMES.join(", ")
            )),
        }
    }

    fn read_file(&self, path: &str, start: Option<usize>, end: Option<usize>) -> ToolResult {
        let resolved = match self.confinement.readable(path) {
            Ok(r) => r,
            Err(r) => return r.into(),
        };
        if resolved.path.is_dir() {
            return ToolResult::error(format!("{path} is a directory; use list_files"));
        }
        if std::fs::metadata(&resolved.path).is_ok_and(|m| m.len() > READ_FILE_LIMIT) {
            return ToolResult::error(format!(
                "{path} is larger than {} MiB; use search to find what you need in it",
                READ_FILE_LIMIT >> 20
            ));
        }
        let bytes = match std::fs::read(&resolved.path) {
            Ok(b) => b,
            Err(e) => return ToolResult::error(format!("cannot read {path}: {e}")),
        };
        let Ok(content) = String::from_utf8(bytes) else {
            return ToolResult::error(format!("{path} is not a UTF-8 text file"));
        };
        let lines: Vec<&str> = content.split_inclusive('\n').collect();
        let first = start.unwrap_or(1).max(1);
        let last = end.unwrap_or(lines.len()).min(lines.len());
        if first > lines.len().max(1) {
            return ToolResult::error(format!(
                "{path} has {} lines; there is no line {first}",
                lines.len()
            ));
        }
        let mut out = String::new();
        for (index, line) in lines.iter().enumerate().take(last).skip(first - 1) {
            if out.len() + line.len() > READ_CAP {
                out.push_str(&format!(
                    "\n[truncated at {READ_CAP} bytes: read from line {} on]",
                    index + 1
                ));
                break;
            }
            out.push_str(line);
        }
        ToolResult::ok(out)
    }

    fn walker(&self, dir: &Path) -> ignore::Walk {
        ignore::WalkBuilder::new(dir)
            .hidden(false)
            .require_git(false)
            .sort_by_file_name(std::cmp::Ord::cmp)
            .filter_entry(|entry| {
                !FORBIDDEN_DIRS
                    .iter()
                    .any(|d| entry.file_name() == std::ffi::OsStr::new(d))
            })
            .build()
    }

    fn files_under(&self, path: &str) -> Result<Vec<(PathBuf, String)>, ToolResult> {
        let resolved = self.confinement.readable(path).map_err(ToolResult::from)?;
        let root = self.confinement.root();
        let mut files = Vec::new();
        for entry in self.walker(&resolved.path).flatten() {
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Ok(rel) = entry.path().strip_prefix(root)
            {
                files.push((entry.path().to_path_buf(), slash_path(rel)));
            }
        }
        Ok(files)
    }

    fn list_files(&self, path: &str) -> ToolResult {
        let files = match self.files_under(path) {
            Ok(f) => f,
            Err(e) => return e,
        };
        let total = files.len();
        let mut out: Vec<String> = files.into_iter().take(LIST_CAP).map(|f| f.1).collect();
        if total > LIST_CAP {
            out.push(format!("[{} more not shown]", total - LIST_CAP));
        }
        if out.is_empty() {
            return ToolResult::ok("(no files)");
        }
        ToolResult::ok(out.join("\n"))
    }

    fn search(&self, pattern: &str, path: &str) -> ToolResult {
        let regex = match regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("invalid regular expression: {e}")),
        };
        let files = match self.files_under(path) {
            Ok(f) => f,
            Err(e) => return e,
        };
        let mut hits = Vec::new();
        'files: for (file, rel) in files {
            if std::fs::metadata(&file).map_or(true, |m| m.len() > SEARCH_FILE_CAP) {
                continue;
            }
            let Ok(content) = std::fs::read_to_string(&file) else {
                continue;
            };
            for (n, line) in content.lines().enumerate() {
                if regex.is_match(line) {
                    if hits.len() == SEARCH_CAP {
                        hits.push(format!("[stopped at {SEARCH_CAP} matches]"));
                        break 'files;
                    }
                    hits.push(format!("{rel}:{}: {line}", n + 1));
                }
            }
        }
        if hits.is_empty() {
            return ToolResult::ok("(no match)");
        }
        ToolResult::ok(hits.join("\n"))
    }

    fn edit(&self, path: &str, old: &str, new: &str) -> ToolResult {
        let resolved = match self.confinement.writable(path) {
            Ok(r) => r,
            Err(r) => return r.into(),
        };
        let content = match std::fs::read_to_string(&resolved.path) {
            Ok(c) => c,
            Err(e) => return ToolResult::error(format!("cannot read {path}: {e}")),
        };
        if old.is_empty() {
            return ToolResult::error("old_text is empty; use write_file to create a file");
        }
        match content.matches(old).count() {
            0 => ToolResult::error(format!(
                "old_text does not occur in {path}; read the file and copy the text exactly"
            )),
            1 => {
                let updated = content.replacen(old, new, 1);
                match write_atomic(&resolved.path, updated.as_bytes()) {
                    Ok(()) => ToolResult::ok(format!("edited {}", resolved.relative)),
                    Err(e) => ToolResult::error(format!("cannot write {path}: {e}")),
                }
            }
            n => ToolResult::error(format!(
                "old_text occurs {n} times in {path}; include more surrounding text so it occurs once"
            )),
        }
    }

    fn write_file(&self, path: &str, content: &str) -> ToolResult {
        let resolved = match self.confinement.writable(path) {
            Ok(r) => r,
            Err(r) => return r.into(),
        };
        if let Some(parent) = resolved.path.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            return ToolResult::error(format!("cannot create the folder of {path}: {e}"));
        }
        match write_atomic(&resolved.path, content.as_bytes()) {
            Ok(()) => ToolResult::ok(format!(
                "wrote {} ({} bytes)",
                resolved.relative,
                content.len()
            )),
            Err(e) => ToolResult::error(format!("cannot write {path}: {e}")),
        }
    }

    async fn run(&self, argv: Vec<String>) -> ToolResult {
        if !self.allowed.iter().any(|prefix| argv.starts_with(prefix)) {
            let allowed = if self.allowed.is_empty() {
                "none is allowed in this task".to_owned()
            } else {
                format!(
                    "allowed: {}",
                    self.allowed
                        .iter()
                        .map(|a| format!("`{}`", a.join(" ")))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return ToolResult::refused(format!(
                "command `{}` is not allowed ({allowed})",
                argv.join(" ")
            ));
        }
        let root = self.confinement.root().to_path_buf();
        let (program, args) = match &self.sandbox {
            Sandbox::None => (argv[0].clone(), argv[1..].to_vec()),
            Sandbox::Bwrap(bwrap) => (bwrap.display().to_string(), bwrap_args(&root, &argv)),
        };
        let mut spec = CommandSpec::new(program, args, &root).with_time_limit(self.run_limit);
        spec.env
            .extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        for var in &self.hidden_env {
            spec = spec.with_env(var.clone(), "");
        }
        let spec = CommandSpec {
            output_limit: RUN_OUTPUT_CAP,
            ..spec
        };
        match self.runner.run(spec).await {
            Ok(output) => {
                let mut text = match (output.timed_out, output.exit_code) {
                    (true, _) => format!("timed out after {:.0}s\n", self.run_limit.as_secs_f64()),
                    (false, Some(code)) => format!("exit code {code}\n"),
                    (false, None) => "killed by a signal\n".to_owned(),
                };
                if output.truncated {
                    text.push_str("[output truncated: its end follows]\n");
                }
                text.push_str(&output.combined());
                ToolResult {
                    failed: !output.success(),
                    refused: false,
                    text,
                }
            }
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}

/// The bubblewrap argv around `argv`: everything read-only, the working
/// directory writable, a private `/tmp`, `/dev` and `/proc`, every namespace
/// unshared (no network), killed with its parent.
pub fn bwrap_args(root: &Path, argv: &[String]) -> Vec<String> {
    let root = root.display().to_string();
    let mut args: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--bind",
        &root,
        &root,
        "--unshare-all",
        "--die-with-parent",
        "--chdir",
        &root,
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(argv.iter().cloned());
    args
}

fn missing(tool: &str, what: &str) -> ToolResult {
    ToolResult::error(format!("{tool} needs {what}"))
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same
/// folder, the old file's permissions, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.flush()?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(file.path(), meta.permissions())?;
    }
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::process::ProcessRunner;
    use std::os::unix::fs::PermissionsExt;

    fn toolbox(root: &Path) -> Toolbox {
        Toolbox {
            confinement: Confinement::new(root, &[]).unwrap(),
            allowed: vec![vec!["cargo".into(), "test".into()]],
            runner: Arc::new(ProcessRunner::default()),
            sandbox: Sandbox::None,
            run_limit: Duration::from_secs(10),
            hidden_env: Vec::new(),
            env: std::collections::BTreeMap::new(),
        }
    }

    /// `(tool, args, expected text, failed)`, run in order on one tree.
    async fn check(root: &Path, cases: &[(&str, Value, &str, bool)]) {
        let tools = toolbox(root);
        for (name, args, expected, failed) in cases {
            let result = tools.call(name, args).await;
            assert_eq!(
                (result.text.as_str(), result.failed),
                (*expected, *failed),
                "{name} {args}"
            );
        }
    }

    #[tokio::test]
    async fn tools_read_search_and_edit_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "one\ntwo\ntwo\nthree\n").unwrap();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/out.txt"), "two\n").unwrap();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        check(
            root,
            &[
                ("read_file", json!({"path": "a.txt", "start_line": 2, "end_line": 3}), "two\ntwo\n", false),
                ("read_file", json!({"path": "a.txt", "start_line": 9}), "error: a.txt has 4 lines; there is no line 9", true),
                ("search", json!({"pattern": "^tw"}), "a.txt:2: two\na.txt:3: two", false),
                ("search", json!({"pattern": "("}), "error: invalid regular expression: regex parse error:\n    (\n    ^\nerror: unclosed group", true),
                ("list_files", json!({}), ".gitignore\na.txt\nrun.sh", false),
                ("edit", json!({"path": "a.txt", "old_text": "two", "new_text": "2"}), "error: old_text occurs 2 times in a.txt; include more surrounding text so it occurs once", true),
                ("edit", json!({"path": "a.txt", "old_text": "one\ntwo", "new_text": "1\n2"}), "edited a.txt", false),
                ("edit", json!({"path": "run.sh", "old_text": "#!/bin/sh", "new_text": "#!/bin/sh -e"}), "edited run.sh", false),
                ("write_file", json!({"path": "new/b.txt", "content": "b"}), "wrote new/b.txt (1 bytes)", false),
                ("edit", json!({"path": "a.txt"}), "error: edit needs path, old_text and new_text", true),
                ("bash", json!({"command": "ls"}), "error: there is no tool \"bash\"; the tools are read_file, list_files, search, edit, write_file, run", true),
                ("run", json!({"argv": ["cargo", "build"]}), "error: command `cargo build` is not allowed (allowed: `cargo test`)", true),
            ],
        )
        .await;
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "1\n2\ntwo\nthree\n"
        );
        // An edit keeps the file's permissions.
        let mode = std::fs::metadata(root.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn the_text_protocol_prompt_lists_the_tools() {
        let dir = tempfile::tempdir().unwrap();
        let prompt =
            super::super::negotiate::text_protocol_prompt(&toolbox(dir.path()).definitions());
        insta::assert_snapshot!(prompt);
    }
}
