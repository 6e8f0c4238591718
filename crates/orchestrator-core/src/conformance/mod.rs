//! Conformance suites (placeholder).
