//! What a segment's decisions do to the session: counts and the prior, a
//! restart on the last good state, a dropped fix sent back to the retry loop,
//! and a queue that cannot go on failed with its reason.

use super::*;

/// Adds a segment's re-runs and each-equivalent runs (those made in this
/// process; in `each` mode the runs themselves) to the session's counts, and
/// its decisions to the prior.
pub(super) fn account(shared: &Shared, seg: &Segment, count: &mut StageCount) {
    let report = seg.verifier.report();
    let each = if crate::effective_mode(&shared.config) == VerifyMode::Each {
        report.runs.saturating_sub(seg.each_start)
    } else {
        report.each_runs.saturating_sub(seg.each_start)
    };
    let reruns = report.reruns.saturating_sub(seg.reruns_start);
    shared.with_stats(|s| {
        s.each_runs += each;
        s.reruns += reruns;
    });
    count.each_runs += each;
    count.reruns += reruns;
    shared.add_decided(report.dropped.len() as u32, report.landed.len() as u32);
}

/// Starts a new segment: the queue from the first undecided position
/// (`decided`), with `front` (a dropped fix sent back) in place of it.
pub(super) fn restart(
    shared: &Shared,
    state: &mut VerifyState,
    decided: usize,
    front: Option<Option<QueuedFix>>,
    trial: &mut Option<TrialTree>,
) {
    let rest: Vec<QueuedFix> = match front {
        // A drop: the dropped fix is at `decided`.
        Some(item) => item
            .into_iter()
            .chain(state.queue.iter().skip(decided + 1).cloned())
            .collect(),
        None => state.queue.iter().skip(decided).cloned().collect(),
    };
    state.queue = rest;
    state.outcomes.clear();
    state.segment += 1;
    state.config = segment_config(shared);
    // The trial tree stays usable when it holds a prefix of the new queue.
    if let Some(t) = trial.as_mut() {
        let prefix = t.built.len() <= state.queue.len()
            && t.built
                .iter()
                .zip(&state.queue)
                .all(|((fid, _), q)| *fid == q.finding_id);
        if !prefix {
            t.stale = true;
        }
    }
    save_state(shared, state);
}

/// Records a drop: the failure in the progress file, then the fix back into
/// the retry loop (`Some`) or failed for good (`None`).
pub(super) fn drop_fix(
    shared: &Shared,
    state: &VerifyState,
    position: usize,
    log_ref: &str,
    progress: &HashMap<String, Progress>,
) -> Option<QueuedFix> {
    let mut item = state.queue.get(position)?.clone();
    let p = progress.get(&item.group_id)?;
    p.error(&item.finding_id, "test_failure", log_ref);
    shared.sink.emit(&Event::AttemptFailed {
        id: item.finding_id.clone(),
        round: 1,
        attempt: item.attempts,
        error: first_line(log_ref),
    });
    if let Some(digest) = item.digest.take() {
        item.failed.push(KnownFailure {
            digest,
            message: log_ref.to_owned(),
            attempt: item.attempts,
        });
    }
    let max = shared.config.max_iterations.max(1);
    if item.attempts >= max {
        finish_failed(
            shared,
            p,
            &item.finding_id,
            format!("max iterations reached ({}): {log_ref}", item.attempts),
        );
        return None;
    }
    item.commit = None;
    item.failure = Some(log_ref.to_owned());
    Some(item)
}

pub(super) fn group_progress<'a>(
    shared: &Shared,
    state: &VerifyState,
    finding: &str,
    progress: &'a HashMap<String, Progress>,
) -> Option<&'a Progress> {
    let gid = state
        .queue
        .iter()
        .find(|q| q.finding_id == finding)
        .map(|q| q.group_id.clone())
        .or_else(|| {
            shared
                .plan
                .groups
                .iter()
                .find(|g| g.findings.iter().any(|f| f == finding))
                .map(|g| g.group_id.clone())
        })?;
    progress.get(&gid)
}

/// Fails every fix left in the queue (the verification cannot go on).
pub(super) fn fail_queue(
    shared: &Shared,
    state: &mut VerifyState,
    progress: &HashMap<String, Progress>,
    reason: &str,
) {
    for q in std::mem::take(&mut state.queue) {
        if let Some(p) = progress.get(&q.group_id) {
            finish_failed(
                shared,
                p,
                &q.finding_id,
                format!("the fix could not be verified: {reason}"),
            );
        }
    }
}
