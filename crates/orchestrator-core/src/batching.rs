//! Placeholder: filled in by the batching work.
