//! Embedding example: your own `Agent` driving a core flow.
//!
//! Run with `cargo run -p orchestrator-examples --example custom_bot`. It
//! prints every event as a JSON line (what `--json` prints in the CLI), then
//! the outcome. The bot itself lives in `examples/src/custom_bot.rs`, so that
//! `examples/tests/custom_bot.rs` can snapshot its event stream.

use orchestrator_core::retry::MilestoneOutcome;
use orchestrator_examples::custom_bot::run_demo;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let (outcome, events) = run_demo().await;
    for event in &events {
        match serde_json::to_string(event) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("cannot serialise event: {e}"),
        }
    }
    match outcome {
        MilestoneOutcome::Passed { attempts, .. } => {
            println!("passed after {attempts} attempts");
            std::process::ExitCode::SUCCESS
        }
        MilestoneOutcome::NeedsHuman { reason, .. } => {
            println!("needs a human: {reason}");
            std::process::ExitCode::from(3)
        }
        MilestoneOutcome::Failed { reason, .. } => {
            println!("failed: {reason}");
            std::process::ExitCode::from(1)
        }
    }
}
