//! Placeholder: filled in by the scheduler work.
