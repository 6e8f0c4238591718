//! Findings the agent declines whatever the tree holds, settled before any
//! group runs.
//!
//! An agent can say, from the finding alone, that it would decline a fix
//! ([`Agent::declines`]): the builtin agent fixes a finding only by
//! applying its machine-applicable suggestion, so it declines a finding
//! without one. Settled at the start of the run with the agent's own
//! words, such a finding spends no worktree, no checkpoint, no `git status`
//! and no agent call: on `fnv` with `-W clippy::pedantic` that is 206 of
//! its 214 findings, and most of the run's git processes.

use super::*;

/// Settles, as not fixable, every open finding the run's agent declines
/// (see the module docs), and completes the groups left with nothing to
/// do. Returns how many findings it settled.
pub(crate) fn settle_unattemptable(shared: &Shared, progress: &HashMap<String, Progress>) -> usize {
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
        let unattemptable: Vec<(&Finding, String)> = group
            .findings
            .iter()
            .filter(|fid| open(fid))
            .filter_map(|fid| shared.findings.get(fid))
            .filter_map(|f| shared.agent.declines(f).map(|reason| (f, reason)))
            .collect();
        if unattemptable.is_empty() {
            continue;
        }
        for (finding, reason) in unattemptable {
            let id = finding.id.to_string();
            shared.sink.emit(&Event::JobStarted {
                id: id.clone(),
                title: Some(finding.title.clone()),
            });
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
