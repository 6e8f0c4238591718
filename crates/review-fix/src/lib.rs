//! orchestrator review-fix (placeholder, see the issue tracker).
