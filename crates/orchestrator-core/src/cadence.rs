//! Placeholder: filled in by the cadence work.
