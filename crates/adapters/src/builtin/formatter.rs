//! [`FormatterAgent`]: fixes mechanical-trivial failures (formatting) by
//! running the project's formatter.
//!
//! ## Request contract
//!
//! `AgentRequest::context` may be `{"log": "<the failing check's output>"}`;
//! the log only helps choose the formatter. The formatter runs in
//! `AgentRequest::workdir` within `AgentRequest::time_limit` (default 10
//! minutes per tool). The answer lists the files whose content changed
//! (compared by digest before and after, so no VCS is needed).
//!
//! ## Choosing the formatter ([`choose_formatters`])
//!
//! Each ecosystem is recognised by its marker file: `Cargo.toml` (Rust),
//! `go.mod` (Go), `pyproject.toml`/`setup.cfg`/`setup.py` (Python),
//! `package.json` (JavaScript/TypeScript). Formatters the log names
//! (`rustfmt`, `Diff in …`, `gofmt`, `goimports`, `black`, `isort`,
//! `ruff format`, `prettier`, …) are preferred when their ecosystem is
//! present; otherwise every present ecosystem gets its default: cargo fmt,
//! gofmt, the Python formatter its configuration names (`[tool.black]`,
//! `[tool.ruff]`, `[tool.isort]` / `[isort]`; black when none does), and
//! prettier.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::command::CommandRunner;

use super::run::{ToolRun, run_tools_for};
use crate::process::ProcessRunner;

/// A formatter the agent knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Formatter {
    /// `cargo fmt --all`.
    CargoFmt,
    /// `gofmt -w .`.
    Gofmt,
    /// `goimports -w .`.
    Goimports,
    /// `black .`.
    Black,
    /// `isort .`.
    Isort,
    /// `ruff format .`.
    RuffFormat,
    /// `prettier --write .`.
    Prettier,
}

impl Formatter {
    /// The invocation.
    pub(crate) fn tool(self) -> ToolRun {
        let (name, program, args): (&'static str, &'static str, &'static [&'static str]) =
            match self {
                Formatter::CargoFmt => ("cargo fmt", "cargo", &["fmt", "--all"]),
                Formatter::Gofmt => ("gofmt", "gofmt", &["-w", "."]),
                Formatter::Goimports => ("goimports", "goimports", &["-w", "."]),
                Formatter::Black => ("black", "black", &["."]),
                Formatter::Isort => ("isort", "isort", &["."]),
                Formatter::RuffFormat => ("ruff format", "ruff", &["format", "."]),
                Formatter::Prettier => ("prettier", "prettier", &["--write", "."]),
            };
        ToolRun {
            name,
            program,
            args,
        }
    }

    /// A short name (`cargo fmt`, `black`, …).
    pub fn name(self) -> &'static str {
        self.tool().name
    }
}

/// Which ecosystems a working directory holds, with the Python and JS
/// configuration text used for hints.
struct Markers {
    rust: bool,
    go: bool,
    python: bool,
    js: bool,
    python_config: String,
}

impl Markers {
    fn read(workdir: &Path) -> Markers {
        let has = |name: &str| workdir.join(name).is_file();
        let read = |name: &str| std::fs::read_to_string(workdir.join(name)).unwrap_or_default();
        Markers {
            rust: has("Cargo.toml"),
            go: has("go.mod"),
            python: has("pyproject.toml") || has("setup.cfg") || has("setup.py"),
            js: has("package.json"),
            python_config: format!("{}\n{}", read("pyproject.toml"), read("setup.cfg")),
        }
    }

    fn present(&self, f: Formatter) -> bool {
        match f {
            Formatter::CargoFmt => self.rust,
            Formatter::Gofmt | Formatter::Goimports => self.go,
            Formatter::Black | Formatter::Isort | Formatter::RuffFormat => self.python,
            Formatter::Prettier => self.js,
        }
    }
}

/// The formatters to run in `workdir` for a failure whose output is `log`
/// (see the module docs). Empty when the directory holds no known project.
pub fn choose_formatters(workdir: &Path, log: &str) -> Vec<Formatter> {
    let markers = Markers::read(workdir);
    let log = log.to_ascii_lowercase();
    let mut hinted = Vec::new();
    let mut hint = |f: Formatter, words: &[&str]| {
        if words.iter().any(|w| log.contains(w)) && markers.present(f) && !hinted.contains(&f) {
            hinted.push(f);
        }
    };
    hint(Formatter::CargoFmt, &["cargo fmt", "rustfmt", "diff in "]);
    hint(Formatter::Goimports, &["goimports"]);
    hint(Formatter::Gofmt, &["gofmt"]);
    hint(
        Formatter::Isort,
        &["isort", "imports are incorrectly sorted"],
    );
    hint(Formatter::RuffFormat, &["ruff format"]);
    if !log.contains("ruff") {
        hint(Formatter::Black, &["black", "would reformat"]);
    } else {
        hint(Formatter::RuffFormat, &["would reformat"]);
    }
    hint(
        Formatter::Prettier,
        &["prettier", "code style issues found"],
    );
    if !hinted.is_empty() {
        return hinted;
    }
    let mut chosen = Vec::new();
    if markers.rust {
        chosen.push(Formatter::CargoFmt);
    }
    if markers.go {
        chosen.push(Formatter::Gofmt);
    }
    if markers.python {
        let config = markers.python_config.to_ascii_lowercase();
        let before = chosen.len();
        if config.contains("[tool.isort]") || config.contains("[isort]") {
            chosen.push(Formatter::Isort);
        }
        if config.contains("[tool.ruff") {
            chosen.push(Formatter::RuffFormat);
        } else if config.contains("[tool.black]") || chosen.len() == before {
            chosen.push(Formatter::Black);
        }
    }
    if markers.js {
        chosen.push(Formatter::Prettier);
    }
    chosen
}

/// Runs the project's formatter. See the module docs for the contract.
#[derive(Debug, Clone)]
pub struct FormatterAgent {
    runner: Arc<dyn CommandRunner>,
    env: BTreeMap<String, String>,
}

impl Default for FormatterAgent {
    fn default() -> Self {
        Self::new(Arc::new(ProcessRunner::default()))
    }
}

impl FormatterAgent {
    /// An agent that runs formatters through `runner`.
    pub fn new(runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            runner,
            env: BTreeMap::new(),
        }
    }

    /// Builder: an environment variable for the formatter processes.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
}

/// The `log` of a request context, or empty.
pub(crate) fn log_from_context(context: &serde_json::Value) -> String {
    context
        .get("log")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[async_trait]
impl Agent for FormatterAgent {
    fn name(&self) -> &str {
        "builtin-formatter"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let log = log_from_context(&request.context);
        let formatters = choose_formatters(&request.workdir, &log);
        if formatters.is_empty() {
            return Err(AgentError::Unsupported {
                reason: format!(
                    "no formatter applies to {}: it has no Cargo.toml, go.mod, pyproject.toml, setup.cfg, setup.py or package.json",
                    request.workdir.display()
                ),
            });
        }
        let tools: Vec<ToolRun> = formatters.iter().map(|f| f.tool()).collect();
        run_tools_for(self.runner.as_ref(), &request, &tools, &self.env, false).await
    }
}
