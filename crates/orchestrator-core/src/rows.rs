//! Placeholder: filled in by the rows work.
