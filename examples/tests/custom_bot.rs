//! Snapshot of the event stream the custom bot produces: change the bot or the
//! engine's retry flow and this test shows exactly what changed.

use orchestrator_core::retry::MilestoneOutcome;
use orchestrator_examples::custom_bot::run_demo;

#[tokio::test]
async fn custom_bot_event_stream() {
    let (outcome, events) = run_demo().await;
    match outcome {
        MilestoneOutcome::Passed { attempts, .. } => assert_eq!(attempts, 2),
        other => panic!("the bot should pass on its second attempt, got {other:?}"),
    }
    insta::assert_json_snapshot!("custom_bot_events", events);
}
