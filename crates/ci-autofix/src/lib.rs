//! # orchestrator-ci-autofix
//!
//! The ci-autofix flow: a required CI check failed; read its log, classify
//! the failure, and follow the cadence matrix — confirm and apply a
//! mechanical patch, apply a trivial one silently from the second iteration,
//! escalate semantic and unknown failures with a diagnosis and no patch, and
//! stop for a human after the last iteration.
pub mod classify;
pub mod handoff;
pub mod provider;
pub mod report;
pub mod state;
