//! orchestrator adapters (placeholder, see the issue tracker).

pub mod config;
pub mod openai;
