//! orchestrator ci-autofix (placeholder, see the issue tracker).
