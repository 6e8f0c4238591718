//! Conformance suites: one per core trait, run against the fakes here and
//! against every real adapter in `orchestrator-adapters`.
//!
//! | suite | for |
//! |---|---|
//! | [`agent`] | agents that answer free text: LLM backends, agent CLIs, wrappers, fakes — the harness scripts what they say |
//! | [`agent_contract`] | agents that act on a working directory and cannot be scripted to say anything (the builtin formatter, linter-fixer, suggestion and CI agents): the contract only — success with the changed files, typed and explained failures, time limits, concurrent calls on distinct directories |
//! | [`test_runner`] | [`TestRunner`](crate::test_runner::TestRunner) |
//! | [`vcs`] | [`Vcs`](crate::vcs::Vcs), file-based, for git and the fake alike |
//! | [`gate`] | [`Gate`](crate::gate::Gate), automatic or interactive |
//! | [`forge`] | [`Forge`](crate::forge::Forge): GitHub, GitLab and the fake, each against a far side holding the standard requests |
//! | [`command`] | [`CommandRunner`](crate::command::CommandRunner) over real processes |
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
pub mod agent_contract;
pub mod command;
pub mod forge;
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
