//! [`LinterFixAgent`]: fixes mechanical non-trivial failures (lint) with
//! the linter's own fixer, and says so when there is none.
//!
//! ## Request contract
//!
//! Like [`super::FormatterAgent`]: `AgentRequest::context` may be
//! `{"log": "<the failing check's output>"}`, the fixer runs in
//! `AgentRequest::workdir`, and the answer lists the changed files.
//!
//! ## Choosing the fixer ([`choose_linter_fix`])
//!
//! - `Cargo.toml` → `cargo clippy --fix --allow-dirty --allow-staged --allow-no-vcs`;
//! - a Python project using ruff (the log names `ruff`, or `ruff.toml`,
//!   `.ruff.toml` or `[tool.ruff` in `pyproject.toml`) → `ruff check --fix .`;
//! - a JavaScript project using ESLint (the log names `eslint`, an
//!   `.eslintrc*`/`eslint.config.*` file exists, or `package.json` mentions
//!   it) → `eslint --fix .`.
//!
//! When the log names one of these linters, only that one runs. Anything
//! else (flake8, pylint, golangci-lint, go vet, …) has no fixer here: the
//! agent answers [`AgentError::Unsupported`] so the flow escalates. A fixer
//! that fixes part of the problems and exits non-zero for the rest counts as
//! a success when it changed files (the flow's re-run of the check decides).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::command::CommandRunner;

use super::formatter::log_from_context;
use super::run::{ToolRun, run_tools_for};
use crate::process::ProcessRunner;

/// A linter fixer the agent knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinterFix {
    /// `cargo clippy --fix`.
    ClippyFix,
    /// `ruff check --fix`.
    RuffFix,
    /// `eslint --fix`.
    EslintFix,
}

impl LinterFix {
    pub(crate) fn tool(self) -> ToolRun {
        let (name, program, args): (&'static str, &'static str, &'static [&'static str]) =
            match self {
                LinterFix::ClippyFix => (
                    "cargo clippy --fix",
                    "cargo",
                    &[
                        "clippy",
                        "--fix",
                        "--allow-dirty",
                        "--allow-staged",
                        "--allow-no-vcs",
                    ],
                ),
                LinterFix::RuffFix => ("ruff check --fix", "ruff", &["check", "--fix", "."]),
                LinterFix::EslintFix => ("eslint --fix", "eslint", &["--fix", "."]),
            };
        ToolRun {
            name,
            program,
            args,
        }
    }

    /// A short name (`cargo clippy --fix`, …).
    pub fn name(self) -> &'static str {
        self.tool().name
    }
}

/// The fixers to run in `workdir` for a failure whose output is `log` (see
/// the module docs). Empty when no fixer applies.
pub fn choose_linter_fix(workdir: &Path, log: &str) -> Vec<LinterFix> {
    let has = |name: &str| workdir.join(name).is_file();
    let read = |name: &str| std::fs::read_to_string(workdir.join(name)).unwrap_or_default();
    let log = log.to_ascii_lowercase();
    let rust = has("Cargo.toml");
    let python = has("pyproject.toml") || has("setup.cfg") || has("setup.py") || has("ruff.toml");
    let js = has("package.json");
    let uses_ruff =
        has("ruff.toml") || has(".ruff.toml") || read("pyproject.toml").contains("[tool.ruff");
    let uses_eslint = [
        ".eslintrc",
        ".eslintrc.js",
        ".eslintrc.cjs",
        ".eslintrc.json",
        ".eslintrc.yml",
        ".eslintrc.yaml",
        "eslint.config.js",
        "eslint.config.mjs",
        "eslint.config.cjs",
        "eslint.config.ts",
    ]
    .iter()
    .any(|f| has(f))
        || read("package.json").contains("eslint");

    let mut named = Vec::new();
    if rust && log.contains("clippy") {
        named.push(LinterFix::ClippyFix);
    }
    if python && log.contains("ruff") {
        named.push(LinterFix::RuffFix);
    }
    if js && log.contains("eslint") {
        named.push(LinterFix::EslintFix);
    }
    if !named.is_empty() {
        return named;
    }
    let mut chosen = Vec::new();
    if rust {
        chosen.push(LinterFix::ClippyFix);
    }
    if python && uses_ruff {
        chosen.push(LinterFix::RuffFix);
    }
    if js && uses_eslint {
        chosen.push(LinterFix::EslintFix);
    }
    chosen
}

/// Runs the linter's own fixer. See the module docs for the contract.
#[derive(Debug, Clone)]
pub struct LinterFixAgent {
    runner: Arc<dyn CommandRunner>,
    env: BTreeMap<String, String>,
}

impl Default for LinterFixAgent {
    fn default() -> Self {
        Self::new(Arc::new(ProcessRunner::default()))
    }
}

impl LinterFixAgent {
    /// An agent that runs fixers through `runner`.
    pub fn new(runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            runner,
            env: BTreeMap::new(),
        }
    }

    /// Builder: an environment variable for the fixer processes (for
    /// example `CARGO_TARGET_DIR`).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
}

#[async_trait]
impl Agent for LinterFixAgent {
    fn name(&self) -> &str {
        "builtin-linter-fix"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let log = log_from_context(&request.context);
        let fixers = choose_linter_fix(&request.workdir, &log);
        if fixers.is_empty() {
            return Err(AgentError::Unsupported {
                reason: format!(
                    "no linter with its own fixer applies to {} (supported: cargo clippy --fix, ruff check --fix, eslint --fix); escalate",
                    request.workdir.display()
                ),
            });
        }
        let tools: Vec<ToolRun> = fixers.iter().map(|f| f.tool()).collect();
        run_tools_for(self.runner.as_ref(), &request, &tools, &self.env, true).await
    }
}
