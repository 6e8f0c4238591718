//! # orchestrator-adapters
//!
//! The real adapters that make the engine act on the world: they implement
//! the core traits (`Agent`, `TestRunner`, `Vcs`) over child processes, the
//! `git` CLI and HTTP.
//!
//! ## Processes
//! Every child process goes through [`process::run`]: its own process group,
//! stdout and stderr captured with a bound that keeps the tail, a time limit
//! enforced with SIGTERM → grace → SIGKILL to the whole group, and a guard
//! that kills the group when the call is dropped. On top of it:
//! - [`test_runner::CommandTestRunner`] runs any test command and reads the
//!   outcome from its exit status, a JUnit XML report, or the summary lines
//!   of cargo test, cargo nextest, pytest, go test and node --test;
//! - [`agents::ProcessAgent`] runs an agent CLI, with presets for
//!   `claude -p`, `codex exec` and `gemini -o json`.
//!
//! ## HTTP and configuration
//! - [`openai::OpenAiAgent`] talks to any OpenAI-compatible chat-completions
//!   endpoint (OpenAI, Ollama, vLLM, llama.cpp server), with retries that
//!   honour `Retry-After` inside the request's time limit.
//! - [`tool_agent::ToolAgent`] is a coding agent over the same endpoints:
//!   a chat-completions tool loop (read, list, search, edit, write, run the
//!   allowed commands) confined to the working directory, with native
//!   function calling or a text protocol and structured-answer formats
//!   negotiated with the server, turn and wall-time budgets, a repeat guard
//!   and per-attempt JSONL transcripts. `--agent openai` builds it.
//! - [`config`] reads `orchestrator.toml` (versioned, unknown keys rejected
//!   with their line) and parses the CLI's `--agent` flag.
//!
//! ## Ray
//! [`ray::RayRunner`] runs commands and test runs as jobs on a Ray cluster
//! through its Jobs REST API: the tree is uploaded as a content-addressed
//! zip, the job polled, its output and exit status read back from a marked
//! block in its log and mapped as the local runner maps them.
//!
//! ## Git
//! [`git::GitVcs`] implements `Vcs` over the `git` CLI. Every git process is
//! started by one function that passes an explicit argv (no shell), fixes the
//! environment and refuses force, forced refspecs and amend in any spelling;
//! output is read from `-z` / porcelain formats only.
//!
//! ## Worktree environments
//! [`worktree_env::EnvProvisioner`] gives each worktree a flow makes what
//! the project needs (`[worktree]`, or the ignored `node_modules/` and
//! virtualenvs it detects): copy-on-write clones or hard links to the
//! engine's own snapshot — never to the user's files — and setup commands.
//!
//! ## Forges
//! [`forge::GitlabForge`] is the core `Forge` over GitLab's REST API v4
//! (merge requests, pipelines, jobs and traces, discussions), at the
//! instance and project read from the git remote ([`forge::GitlabLocation`]);
//! [`forge::GithubForge`] is the same trait through the real `gh`
//! (`gh api` REST and GraphQL, the user's `gh auth`), at the host and
//! repository of the remote ([`forge::GithubLocation`]).
//!
//! ## Builtin agents
//! [`builtin`] holds the agents that need no LLM: `SuggestionAgent` applies
//! a finding's machine-applicable suggestions (re-anchored by the text they
//! replace), `FormatterAgent` runs the project's formatter and
//! `LinterFixAgent` the linter's own fixer, both through a core
//! `CommandRunner` ([`process::ProcessRunner`] by default), and `CiFixAgent`
//! dispatches a classified CI failure to one of those two.
//!
//! ## Wrappers
//! [`wrappers`] adds cross-cutting behaviour to any `Agent`: time limits,
//! retry with backoff, budgets, loop detection, and JSONL recording/replay.
//!
//! ## Conformance
//! Every adapter passes its core conformance suite
//! (`orchestrator_core::conformance`, feature `test-support`) in this
//! crate's integration tests, with real processes, git and files:
//!
//! | adapter | suite | test |
//! |---|---|---|
//! | `GitVcs` | `vcs` | `git_conformance.rs` |
//! | `CommandTestRunner` | `test_runner` | `procs_conformance.rs` |
//! | `ProcessRunner` | `command` | `procs_conformance.rs` |
//! | `ProcessAgent` (generic, claude, codex, gemini) | `agent` | `procs_conformance.rs` |
//! | `OpenAiAgent`, `ToolAgent` | `agent` | `openai_conformance.rs` |
//! | every wrapper, alone and stacked | `agent` | `wrappers_conformance.rs` |
//! | the builtin agents (`CiFixAgent` with both tools) | `agent_contract` | `builtin_conformance.rs` |
//! | `TerminalGate` | `gate` | `terminal_gate_conformance.rs` |
//!
//! `Replay` runs no suite of its own: it answers from a transcript, and
//! `wrappers_conformance.rs` checks that a recorded suite run replays
//! identically.
//!
//! ## Test support
//! With the feature `test-support`, the `test_support` module finds the
//! pinned real agent CLIs and serves a scripted model on 127.0.0.1 in each
//! CLI's wire protocol, so tests here, in the CLI and in embedders drive the
//! real programs with only the model's answers scripted; its `git` helper is
//! the one every crate's real-git tests run git through.
//!
//! ## Platforms
//! Linux and macOS. The process runner relies on Unix process groups and
//! signals (`nix`: `setpgid`, `killpg`, SIGTERM then SIGKILL) to stop an
//! agent or a test command together with everything it started; Windows has
//! no equivalent with the same guarantee, so a non-Unix build stops here
//! with a message rather than running without it.

#[cfg(not(unix))]
compile_error!(
    "orchestrator-adapters supports Linux and macOS only: it stops child processes through Unix \
     process groups and signals (SIGTERM, then SIGKILL to the whole group), which Windows lacks"
);

pub mod agents;
pub mod builtin;
pub mod config;
pub mod factory;
pub mod forge;
pub mod git;
pub mod openai;
pub mod process;
pub mod ray;
pub mod terminal_gate;
pub mod test_runner;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod tool_agent;
pub mod worktree_env;
pub mod wrappers;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
