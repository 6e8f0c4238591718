//! Agents that run a command per request: [`ProcessAgent`] and the dialects
//! of the agent CLIs it has presets for (`claude`, `codex`, `gemini`).
//!
//! Each dialect module maps one CLI's machine-readable output to an
//! [`orchestrator_core::AgentResponse`] or a typed
//! [`orchestrator_core::AgentError`]; the parsers are public so that callers
//! can reuse them on captured output, and they return what the response type
//! cannot carry (session ids, raw statistics) alongside it.

pub mod claude;
pub mod codex;
pub mod gemini;
pub mod process;
mod raw;

pub use process::{Dialect, InstructionInput, ProcessAgent, RawOutput};
