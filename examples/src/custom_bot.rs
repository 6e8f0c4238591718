//! A custom bot embedded in the engine: the code behind
//! `cargo run -p orchestrator-examples --example custom_bot`.
//!
//! [`ReleaseNotesBot`] is a bot author's own [`Agent`]: a deterministic,
//! rule-based release-notes writer (a real bot would call its model here).
//! [`run_demo`] drives it through the core retry/escalation flow
//! ([`run_milestone`]): the bot's first draft forgets a criterion, the engine
//! feeds the failure back, and the second draft passes. Every step is an
//! [`Event`], collected so that a test can snapshot the whole stream — which is
//! how bot authors test their embeddings.

use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::event::{CollectingSink, Event};
use orchestrator_core::gate::AutoYes;
use orchestrator_core::retry::{Milestone, MilestoneOutcome, RetryPolicy, run_milestone};

/// A rule-based bot that drafts release notes and reports on the exit
/// criteria in the engine's markdown format.
#[derive(Debug, Default)]
pub struct ReleaseNotesBot;

#[async_trait::async_trait]
impl Agent for ReleaseNotesBot {
    fn name(&self) -> &str {
        "release-notes-bot"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        // The engine puts earlier failures into the instruction of a retry;
        // this bot reads them, like a model would.
        let learned = request
            .instruction
            .contains("FAIL Mentions breaking changes");
        let breaking = if learned {
            "- [x] Mentions breaking changes - PASS - `Config::load` now returns a Result"
        } else {
            "- [ ] Mentions breaking changes - FAIL - the draft has no breaking-changes section"
        };
        let text = format!(
            "## Draft\n\nv0.2.0 adds `orchestrator waves`.\n\n\
             - [x] Lists every merged feature - PASS - 1 of 1 features listed\n{breaking}\n"
        );
        Ok(AgentResponse::text(text))
    }
}

/// The milestone the demo runs.
pub fn release_milestone() -> Milestone {
    Milestone {
        id: "release-notes".into(),
        title: "Draft the v0.2.0 release notes".into(),
        instruction: "Write release notes for v0.2.0 from the merged pull requests.".into(),
        exit_criteria: vec![
            "Lists every merged feature".into(),
            "Mentions breaking changes".into(),
        ],
    }
}

/// Runs the bot through the retry/escalation flow; returns the outcome and
/// the event stream.
pub async fn run_demo() -> (MilestoneOutcome, Vec<Event>) {
    let bot = ReleaseNotesBot;
    let sink = CollectingSink::new();
    let milestone = release_milestone();
    let request = AgentRequest::new(&milestone.id, Role::Execute, "", ".");
    let outcome = run_milestone(
        &bot,
        &AutoYes,
        &sink,
        &milestone,
        &RetryPolicy::default(),
        request,
        None,
    )
    .await;
    (outcome, sink.events())
}
