//! Workload generators, reference implementations and figure collectors shared
//! by the criterion benches (`benches/*.rs`) and the `perf-report` binary.
//!
//! Every generator is seeded and its parameters are written next to it, so that
//! runs are comparable across machines and commits.

pub mod clustering;
pub mod dag;
pub mod dashboard;
pub mod planex;
pub mod ray;
pub mod review_fix;
pub mod rng;
pub mod verify;
