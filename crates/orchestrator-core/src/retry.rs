//! Placeholder: filled in by the retry work.
