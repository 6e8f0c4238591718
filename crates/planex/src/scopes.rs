//! Which tasks wait for one another because their write scopes overlap.
//!
//! The scheduler never runs two tasks whose `scope` globs overlap at the
//! same time (see [`orchestrator_core::scheduler::scope`]), so tasks the
//! plan shows side by side in one wave may still run one after the other.
//! [`scope_waits`] says which: it runs the plan's own scheduler (same mode,
//! same concurrency) on a virtual clock where every task takes the same
//! time, and reports each task that was ready but started only when a task
//! with an overlapping scope ended. The execution plan at the gate, the
//! closing summary and `context.md` print the result.
//!
//! Real tasks take different times, so in eager mode who waits for whom can
//! differ from the prediction; that the tasks serialize does not.

use std::time::Duration;

use orchestrator_core::scheduler::scope::ScopePrefix;
use orchestrator_core::scheduler::sim::simulate;
use orchestrator_core::scheduler::{JobId, JobOutcome, Mode, Scheduler};

use crate::PlanexOptions;
use crate::exec::{scheduler_config, task_specs_of};
use crate::report::ScopeWait;
use crate::rows::TaskRow;

/// The globs of a row's `scope` (`;`-separated, blanks dropped), each with
/// its literal prefix.
fn globs(row: &TaskRow) -> Vec<(String, ScopePrefix)> {
    row.scope
        .split(';')
        .filter_map(|g| ScopePrefix::parse(g).map(|p| (g.trim().to_owned(), p)))
        .collect()
}

/// The first pair of overlapping globs of `a` and `b`.
fn overlap(a: &[(String, ScopePrefix)], b: &[(String, ScopePrefix)]) -> Option<(String, String)> {
    a.iter().find_map(|(ga, pa)| {
        b.iter()
            .find(|(_, pb)| pa.overlaps(pb))
            .map(|(gb, _)| (ga.clone(), gb.clone()))
    })
}

/// The tasks of `tasks` that wait for an overlapping scope under `options`
/// (schedule and concurrency), in the order the tasks are listed; each names
/// the task whose end lets it start. Every task counts as pending (this is a
/// property of the plan, not of how far a session got). Empty when no two
/// scopes overlap or the plan cannot be scheduled (a cycle, an unknown
/// dependency: the run reports those).
pub fn scope_waits(tasks: &[TaskRow], options: &PlanexOptions) -> Vec<ScopeWait> {
    let scopes: Vec<Vec<(String, ScopePrefix)>> = tasks.iter().map(globs).collect();
    let any_overlap = scopes
        .iter()
        .enumerate()
        .any(|(i, a)| !a.is_empty() && scopes[i + 1..].iter().any(|b| overlap(a, b).is_some()));
    if !any_overlap {
        return Vec::new();
    }
    let mut specs = task_specs_of(tasks);
    for spec in &mut specs {
        spec.initial = None;
    }
    let Ok(mut scheduler) = Scheduler::new(specs, scheduler_config(options)) else {
        return Vec::new();
    };
    let unit = Duration::from_secs(1);
    let trace = simulate(&mut scheduler, |_| unit, |_| JobOutcome::completed());
    let mut run = vec![None; tasks.len()];
    for r in &trace.runs {
        run[r.job.0] = Some((r.start, r.end));
    }
    // When a task could have started: its dependencies (hard and
    // order-only) ended and, in waves mode, its wave opened.
    let ends_of = |ids: &mut dyn Iterator<Item = &String>| -> Duration {
        ids.filter_map(|id| scheduler.job_id(id))
            .filter_map(|j| run[j.0].map(|(_, end)| end))
            .max()
            .unwrap_or_default()
    };
    let wave_open = |job: JobId| -> Duration {
        if options.schedule != Mode::Waves {
            return Duration::ZERO;
        }
        let wave = scheduler.wave(job);
        (0..tasks.len())
            .filter(|&j| scheduler.wave(JobId(j)) < wave)
            .filter_map(|j| run[j].map(|(_, end)| end))
            .max()
            .unwrap_or_default()
    };
    let mut waits = Vec::new();
    for (i, row) in tasks.iter().enumerate() {
        let Some((start, _)) = run[i] else { continue };
        let spec = scheduler.spec(JobId(i));
        let ready =
            ends_of(&mut spec.deps.iter().chain(spec.after.iter())).max(wave_open(JobId(i)));
        if start <= ready || scopes[i].is_empty() {
            continue;
        }
        // The overlapping task that ran while this one was ready and ended
        // last before it started.
        let blocker = (0..tasks.len())
            .filter(|&j| j != i)
            .filter_map(|j| run[j].map(|(s, e)| (j, s, e)))
            .filter(|&(_, s, e)| s < start && e > ready && e <= start)
            .filter_map(|(j, _, e)| overlap(&scopes[i], &scopes[j]).map(|o| (e, j, o)))
            .max_by_key(|(e, j, _)| (*e, std::cmp::Reverse(*j)));
        if let Some((_, j, (scope, other_scope))) = blocker {
            waits.push(ScopeWait {
                task: row.id.clone(),
                waits_for: tasks[j].id.clone(),
                scope,
                other_scope,
            });
        }
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, scope: &str, deps: &[&str]) -> TaskRow {
        let mut t = TaskRow::new(id, id, format!("do {id}"));
        t.scope = scope.to_owned();
        t.deps = deps.iter().map(|d| (*d).to_owned()).collect();
        t
    }

    fn check(tasks: &[TaskRow], mode: Mode, concurrency: usize, expect: &[&str]) {
        let options = PlanexOptions {
            schedule: mode,
            concurrency,
            ..PlanexOptions::default()
        };
        let got: Vec<String> = scope_waits(tasks, &options)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, expect, "{mode:?} -c {concurrency}");
    }

    #[test]
    fn one_common_scope_serializes_every_task() {
        let tasks: Vec<TaskRow> = (1..=4)
            .map(|i| task(&format!("T{i}"), "out/**", &[]))
            .collect();
        let expect = [
            "T2 waits for T1: overlapping scope out/**",
            "T3 waits for T2: overlapping scope out/**",
            "T4 waits for T3: overlapping scope out/**",
        ];
        check(&tasks, Mode::Eager, 8, &expect);
        check(&tasks, Mode::Waves, 8, &expect);
    }

    #[test]
    fn disjoint_scopes_dependencies_and_blank_scopes_wait_for_nothing() {
        check(
            &[
                task("T1", "src/auth/**", &[]),
                task("T2", "src/authz/**", &[]),
                task("T3", "", &[]),
                task("T4", "src/auth/jwt.rs", &["T1"]),
            ],
            Mode::Eager,
            8,
            &[],
        );
    }

    #[test]
    fn different_globs_that_overlap_are_both_named() {
        check(
            &[
                task("T1", "docs/*.md;out/**", &[]),
                task("T2", "out/a.txt", &[]),
            ],
            Mode::Eager,
            8,
            &["T2 waits for T1: overlapping scopes out/a.txt and out/**"],
        );
    }

    #[test]
    fn a_task_that_waits_for_its_dependency_waits_for_a_scope_only_after_it() {
        // T3 depends on T1 and shares T2's scope: once T1 ends, T2 holds out/**.
        let tasks = [
            task("T1", "src/**", &[]),
            task("T2", "out/**", &["T1"]),
            task("T3", "out/**", &["T1"]),
        ];
        check(
            &tasks,
            Mode::Eager,
            8,
            &["T3 waits for T2: overlapping scope out/**"],
        );
    }

    #[test]
    fn a_slot_limit_alone_is_not_a_scope_wait() {
        let tasks = [
            task("T1", "a/**", &[]),
            task("T2", "b/**", &[]),
            task("T3", "c/**", &[]),
        ];
        check(&tasks, Mode::Eager, 1, &[]);
    }
}
