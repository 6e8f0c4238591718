//! orchestrator adapters (placeholder, see the issue tracker).

pub mod git;
pub mod wrappers;
