//! orchestrator adapters (placeholder, see the issue tracker).

pub mod builtin;
