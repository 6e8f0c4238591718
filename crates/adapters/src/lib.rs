//! orchestrator adapters (placeholder, see the issue tracker).
