//! Findings the agent cannot attempt, settled before any group runs.
//!
//! The builtin suggestion agent fixes a finding only by applying the
//! finding's machine-applicable suggestion, so a finding without one is not
//! fixable by it, whatever the tree holds. Settled at the start of the run
//! with the agent's own words, such a finding spends no worktree, no
//! checkpoint, no `git status` and no agent call: on `fnv` with `-W
//! clippy::pedantic` that is 206 of its 214 findings, and most of the run's
//! git processes.

use super::*;

/// The builtin agent that applies findings' suggestions (its
/// [`Agent::name`]).
pub(crate) const SUGGESTION_AGENT: &str = "builtin-suggestion";

/// What the builtin suggestion agent says of a finding without a
/// suggestion (its `SuggestionError::NoSuggestion`).
pub(crate) fn no_suggestion_reason(id: &str) -> String {
    format!("finding {id} carries no machine-applicable suggestion: not fixable by this agent")
}

/// Settles, as not fixable, every open finding the run's agent cannot
/// attempt (see the module docs), and completes the groups left with
/// nothing to do. Returns how many findings it settled.
pub(crate) fn settle_unattemptable(shared: &Shared, progress: &HashMap<String, Progress>) -> usize {
    if shared.agent.name() != SUGGESTION_AGENT {
        return 0;
    }
    let mut settled = 0;
    for group in &shared.plan.groups {
        let Some(p) = progress.get(&group.group_id) else {
            continue;
        };
        let snapshot = p.snapshot();
        let open = |fid: &String| {
            snapshot
                .findings
                .iter()
                .any(|f| &f.finding_id == fid && f.status != ProgressStatus::Completed)
        };
        let unattemptable: Vec<&Finding> = group
            .findings
            .iter()
            .filter(|fid| open(fid))
            .filter_map(|fid| shared.findings.get(fid))
            .filter(|f| f.suggestions.is_empty())
            .collect();
        if unattemptable.is_empty() {
            continue;
        }
        for finding in unattemptable {
            let id = finding.id.to_string();
            shared.sink.emit(&Event::JobStarted {
                id: id.clone(),
                title: Some(finding.title.clone()),
            });
            let reason = no_suggestion_reason(&id);
            finish_unfixed(shared, p, &id, reason, FixResult::NotFixable);
            settled += 1;
        }
        let left = p
            .snapshot()
            .findings
            .iter()
            .any(|f| f.status != ProgressStatus::Completed);
        if !left {
            shared.sink.emit(&Event::JobStarted {
                id: group.group_id.clone(),
                title: Some(group.group_name.clone()),
            });
            finish_group(shared, group, p);
        }
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_adapters::builtin::SuggestionError;

    #[test]
    fn the_reason_is_the_agents_own() {
        let id = "clippy::too_many_lines@src/lib.rs:3:1";
        assert_eq!(
            no_suggestion_reason(id),
            SuggestionError::NoSuggestion { id: id.to_owned() }.to_string()
        );
    }
}
