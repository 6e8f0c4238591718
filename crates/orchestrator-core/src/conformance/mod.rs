//! Conformance suites: one per core trait, run against the fakes here and
//! against every real adapter in `orchestrator-adapters`.
//!
//! Each suite takes a *harness* that knows how to build the implementation
//! under test in a few prescribed situations, then checks the trait's
//! contract. The suites panic with a message naming the broken rule, so call
//! them from a `#[tokio::test]`:
//!
//! ```text
//! #[tokio::test]
//! async fn git_vcs_conforms() {
//!     orchestrator_core::conformance::vcs::run_suite(&GitHarness).await;
//! }
//! ```

pub mod agent;
pub mod command;
pub mod gate;
pub mod test_runner;
pub mod vcs;

use std::fmt::Debug;

/// Unwraps `result`, panicking with `what` and the error: suites report which
/// step of the contract broke.
#[track_caller]
pub(crate) fn must<T, E: Debug>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("conformance: {what}: {e:?}"),
    }
}
