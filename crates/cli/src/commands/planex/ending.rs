//! How a planex run's end is written into the session's log.

use orchestrator_core::state::event_log::RunState;
use orchestrator_planex::{Outcome, OutcomeStatus, Stop};

/// How an outcome reads in the session's log.
pub(super) fn run_state(outcome: &Outcome) -> (RunState, Option<String>) {
    match &outcome.status {
        OutcomeStatus::Completed => (RunState::Done, None),
        OutcomeStatus::Incomplete => (RunState::Failed, None),
        OutcomeStatus::Stopped(stop) => {
            let state = match stop {
                Stop::Interrupted => RunState::Interrupted,
                Stop::LimitReached { .. } => RunState::Limit,
                Stop::Cancelled { .. } => RunState::Failed,
                _ => RunState::Waiting,
            };
            let first = |hint: String| hint.lines().next().unwrap_or_default().to_owned();
            (state, outcome.resume_hint().map(first))
        }
    }
}
