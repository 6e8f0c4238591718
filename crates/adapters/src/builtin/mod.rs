//! Builtin agents: fixers that need no LLM.
//!
//! - [`SuggestionAgent`] applies the machine-applicable suggestions a
//!   [`orchestrator_core::Finding`] carries (from rustc/clippy JSON, SARIF
//!   `fixes`, reviewdog `suggestions`), re-anchoring every edit by the text it
//!   replaces.
//! - [`FormatterAgent`] fixes mechanical-trivial failures by running the
//!   project's formatter (cargo fmt, gofmt/goimports, black, isort, ruff
//!   format, prettier), chosen from the repository files and the failing log.
//! - [`LinterFixAgent`] fixes mechanical non-trivial failures with the
//!   linter's own fixer (`cargo clippy --fix`, `ruff check --fix`,
//!   `eslint --fix`) and says it cannot otherwise, so the flow escalates.
//!
//! All three play [`orchestrator_core::Role::Fix`] and read their input from
//! [`orchestrator_core::AgentRequest::context`]; the instruction text is not
//! used. Declining is an [`orchestrator_core::AgentError::Unsupported`]
//! ("not fixable by this agent"), never a silent success.
//!
//! The formatter and linter agents run tools through a
//! [`orchestrator_core::command::CommandRunner`]; by default the adapters'
//! [`crate::process::ProcessRunner`] (own process group, time limit with
//! SIGTERM → grace → SIGKILL, bounded capture).

mod ci;
mod files;
mod formatter;
mod linter;
mod run;
mod suggestion;

pub use ci::{CiFixAgent, NO_DIAGNOSIS};
pub use files::{WorkdirSnapshot, resolve_in_workdir};
pub use formatter::{Formatter, FormatterAgent, choose_formatters};
pub use linter::{LinterFix, LinterFixAgent, choose_linter_fix};
pub use suggestion::{
    Applied, EditHistories, SuggestionAgent, SuggestionError, apply_finding, finding_from_context,
    histories_from_context,
};
