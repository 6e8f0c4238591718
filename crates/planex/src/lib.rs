//! orchestrator planex (placeholder, see the issue tracker).
