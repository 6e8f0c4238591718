//! Placeholder: filled in by the waves work.
