//! Wrappers (in progress).
