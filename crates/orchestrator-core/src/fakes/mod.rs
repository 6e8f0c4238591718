//! In-memory fakes (placeholder).
