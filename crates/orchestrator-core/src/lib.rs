//! # orchestrator-core
//!
//! The pure core of **orchestrator**, an engine that runs AI coding agents the
//! way a careful senior engineer would. This crate holds the domain types, the
//! traits through which the engine touches the world, and the algorithms that
//! decide what to do — and nothing that spawns a process or opens a socket.
//!
//! ## Data flow
//!
//! ```text
//!  inputs (findings, task CSVs, CI logs)          ── parsed by the feature crates
//!     │
//!     ▼
//!  domain types: Finding, TextEdit, Suggestion    ── finding, edit
//!     │
//!     ▼
//!  algorithms: batching · waves · scheduler ·     ── pure functions from data to data
//!              cadence matrix · retry/escalation ·
//!              edit (suggestions placed exactly
//!              through earlier fixes)
//!     │                      ▲
//!     ▼                      │ results
//!  traits: Agent · TestRunner · Vcs · Gate  ─────── implemented by orchestrator-adapters
//!     │                                             (git, test commands, agent CLIs, HTTP)
//!     ▼                                             and by the fakes in `fakes`
//!  events (Event → EventSink) and state files     ── event, state
//! ```
//!
//! Feature crates (`orchestrator-planex`, `orchestrator-review-fix`,
//! `orchestrator-ci-autofix`) compose these pieces into flows; the `orchestrator`
//! binary only parses arguments and picks adapters.
//!
//! ## Public API
//!
//! - Domain types: [`finding`] ([`Finding`], [`TextEdit`], [`Suggestion`])
//!   and the edit layer [`edit`].
//! - Traits, each with a blanket `…Ext` or helpers and a conformance suite:
//!   [`agent`], [`vcs`], [`test_runner`], [`gate`], [`command`], [`event`],
//!   [`forge`] (pull/merge requests, their pipelines and review threads).
//! - Algorithms, pure: [`batching`], [`waves`], [`scheduler`] (with
//!   [`scheduler::sim`]), [`cadence`], [`retry`], [`verify`], [`schema`].
//! - Asking an agent for JSON: `ask` (feature `runtime`).
//! - Reports: [`timeline`] (an event sink that times jobs, and the SVG
//!   picture of a run's schedule).
//! - Worktrees: [`worktree`] (a pool of worktrees per run, provisioned
//!   once per slot with what the project needs).
//! - The safety net under every revert: [`trash`] (a session's `trash/`
//!   folder, given to the [`vcs::Vcs`] with [`vcs::Vcs::set_trash`]).
//! - State files: [`state`] (atomic JSON/CSV, NDJSON boards, locks,
//!   worktree folders, a session's `events.ndjson`), [`limits`], [`text`].
//! - Behind `test-support`: `fakes` and `conformance`.
//!
//! ## Invariants
//! - No process, no socket: I/O reaches the algorithms only through traits.
//!   The only I/O here is the state helpers' file writes (atomic, fsynced).
//! - Every trait is object-safe, `Send + Sync + Debug`, forwards through
//!   `Arc`/`Box`, and has a conformance suite (`conformance`, behind the
//!   `test-support` feature) that fakes and real adapters both pass.
//! - The [`vcs::Vcs`] API has no way to force-push, amend or reset.
//!
//! ## Features
//!
//! - `runtime` (default): what needs tokio — the scheduler's driver
//!   (`scheduler::run`, `CancelHandle`), the agent ask helper (`ask`) with its
//!   time limit, and an `EventSink` for tokio channels. With
//!   `default-features = false` the crate is the types, traits and pure
//!   algorithms, and `cargo tree -e normal` shows no tokio.
//! - `test-support`: the fakes (`fakes`) and conformance suites
//!   (`conformance`); implies `runtime`.
//!
//! ## Embedding
//!
//! ```
//! use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
//!
//! /// An agent of your own: here it just echoes the instruction.
//! #[derive(Debug)]
//! struct Echo;
//!
//! #[async_trait::async_trait]
//! impl Agent for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     async fn run(&self, req: AgentRequest) -> Result<AgentResponse, AgentError> {
//!         Ok(AgentResponse::text(req.instruction))
//!     }
//! }
//! ```

pub mod agent;
#[cfg(feature = "runtime")]
pub mod ask;
pub mod batching;
pub mod cadence;
pub mod command;
pub mod edit;
pub mod event;
pub mod finding;
pub mod forge;
pub mod gate;
pub mod limits;
pub mod retry;
pub mod scheduler;
pub mod schema;
pub mod state;
pub mod test_runner;
pub mod text;
pub mod timeline;
pub mod trash;
pub mod vcs;
pub mod verify;
pub mod waves;
pub mod worktree;

#[cfg(feature = "test-support")]
pub mod conformance;
// The unit tests use the fakes too, so a plain `cargo test` of the
// published crate (which has no self dev-dependency turning the feature on)
// compiles.
#[cfg(any(test, feature = "test-support"))]
pub mod fakes;

pub use agent::{
    Agent, AgentError, AgentExt, AgentRequest, AgentResponse, AgentSpent, Role, Usage,
};
pub use event::{Event, EventSink, JobStatus};
pub use finding::{Finding, FindingId, Fingerprint, Severity, Suggestion, TextEdit};
pub use gate::{Answer, Gate, GateOption, Question};
pub use test_runner::{Baseline, TestOutcome, TestReport, TestRequest, TestRunner};
pub use vcs::{Checkpoint, CommitId, Vcs, VcsError};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
