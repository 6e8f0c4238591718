use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use proptest::prelude::*;

use super::sim::{SimTrace, simulate};
use super::*;
use crate::event::{CollectingSink, Event, JobStatus};

fn cfg(mode: Mode, concurrency: usize) -> SchedulerConfig {
    SchedulerConfig { mode, concurrency }
}

fn diamond() -> Vec<JobSpec> {
    vec![
        JobSpec::new("A"),
        JobSpec::new("B").deps(["A"]),
        JobSpec::new("C").deps(["A"]),
        JobSpec::new("D").deps(["B", "C"]),
    ]
}

/// Renders events one per line, compactly, for whole-stream comparisons.
fn render(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| match e {
            Event::WaveStarted { wave, jobs } => format!("wave {wave}: {}", jobs.join(",")),
            Event::JobStarted { id, .. } => format!("start {id}"),
            Event::JobFinished { id, status, detail } => match detail {
                Some(d) => format!("end {id} {} ({d})", status.as_str()),
                None => format!("end {id} {}", status.as_str()),
            },
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Simulates with unit durations unless given; jobs in `failing` fail.
fn sim(
    specs: Vec<JobSpec>,
    config: SchedulerConfig,
    durations: &[(&str, u64)],
    failing: &[&str],
) -> (Scheduler, SimTrace) {
    let mut s = Scheduler::new(specs, config).unwrap();
    let ids: Vec<String> = s.specs().iter().map(|j| j.id.clone()).collect();
    let dur: HashMap<&str, u64> = durations.iter().copied().collect();
    let trace = simulate(
        &mut s,
        |j| Duration::from_secs(*dur.get(ids[j.0].as_str()).unwrap_or(&1)),
        |j| {
            if failing.contains(&ids[j.0].as_str()) {
                JobOutcome::failed("boom")
            } else {
                JobOutcome::completed()
            }
        },
    );
    (s, trace)
}

#[test]
fn waves_mode_runs_the_diamond_with_barriers_and_skips_like_the_seed() {
    let (mut s, trace) = sim(diamond(), cfg(Mode::Waves, 4), &[], &["B"]);
    assert_eq!(
        render(&s.take_events()),
        "wave 1: A\nstart A\nend A completed\nwave 2: B,C\nstart B\nstart C\n\
         end B failed (boom)\nend C completed\nend D skipped (Dependency failed or skipped)"
    );
    assert_eq!(trace.makespan, Duration::from_secs(2));
    assert!(s.is_finished());
}

#[test]
fn waves_mode_starts_in_natural_id_order_up_to_the_concurrency() {
    let specs = ["T10", "T2", "T1", "T3"].map(JobSpec::new).to_vec();
    let (mut s, _) = sim(specs, cfg(Mode::Waves, 2), &[], &[]);
    let starts: Vec<String> = s
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::JobStarted { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(starts, ["T1", "T2", "T3", "T10"]);
}

#[test]
fn waves_mode_waits_for_the_whole_wave() {
    // B (wave 2) only needs A, but waits for the slow X in wave 1.
    let specs = vec![
        JobSpec::new("A"),
        JobSpec::new("X"),
        JobSpec::new("B").deps(["A"]),
    ];
    let (_, waves) = sim(specs.clone(), cfg(Mode::Waves, 4), &[("X", 5)], &[]);
    let (_, eager) = sim(specs, cfg(Mode::Eager, 4), &[("X", 5)], &[]);
    assert_eq!(waves.makespan, Duration::from_secs(6));
    assert_eq!(eager.makespan, Duration::from_secs(5));
}

#[test]
fn eager_mode_skips_dependents_at_once_and_transitively() {
    let specs = vec![
        JobSpec::new("A"),
        JobSpec::new("B").deps(["A"]),
        JobSpec::new("C").deps(["B"]),
        JobSpec::new("D").after(["B"]),
        JobSpec::new("E"),
    ];
    // A heads the longest path (A → B → C), so it goes first.
    let (mut s, _) = sim(specs, cfg(Mode::Eager, 1), &[], &["A"]);
    assert_eq!(
        render(&s.take_events()),
        "start A\nend A failed (boom)\n\
         end B skipped (Dependency failed or skipped)\nend C skipped (Dependency failed or skipped)\n\
         start D\nend D completed\nstart E\nend E completed"
    );
}

#[test]
fn eager_mode_prefers_the_longest_remaining_path_then_dependents_then_id() {
    // Chain L1 → L2 → L3 is the critical path; W1..W3 are independent; F has
    // two dependents (G, H) and so goes before its equal-length peers.
    let specs = vec![
        JobSpec::new("W1"),
        JobSpec::new("W2"),
        JobSpec::new("L1"),
        JobSpec::new("L2").deps(["L1"]),
        JobSpec::new("L3").deps(["L2"]),
        JobSpec::new("F"),
        JobSpec::new("G").deps(["F"]),
        JobSpec::new("H").deps(["F"]),
        JobSpec::new("K"),
        JobSpec::new("M").deps(["K"]),
    ];
    let s = Scheduler::new(specs, cfg(Mode::Eager, 1)).unwrap();
    let mut order: Vec<(u32, &str)> = s
        .specs()
        .iter()
        .enumerate()
        .map(|(i, j)| (s.priority_rank(JobId(i)).unwrap(), j.id.as_str()))
        .collect();
    order.sort();
    let names: Vec<&str> = order.into_iter().map(|(_, id)| id).collect();
    assert_eq!(
        names,
        ["L1", "F", "K", "L2", "G", "H", "L3", "M", "W1", "W2"]
    );
}

#[test]
fn eager_mode_uses_duration_estimates_for_the_critical_path() {
    let specs = vec![
        JobSpec::new("short1").estimate(Duration::from_secs(1)),
        JobSpec::new("short2")
            .deps(["short1"])
            .estimate(Duration::from_secs(1)),
        JobSpec::new("long").estimate(Duration::from_secs(5)),
    ];
    let s = Scheduler::new(specs, cfg(Mode::Eager, 1)).unwrap();
    assert_eq!(s.priority_rank(JobId(2)), Some(0));
}

#[test]
fn overlapping_scopes_never_run_together_but_disjoint_ones_do() {
    let specs = vec![
        JobSpec::new("a").scopes(["src/auth/**"]),
        JobSpec::new("b").scopes(["src/auth/jwt.rs"]),
        JobSpec::new("c").scopes(["src/authz/**"]),
        JobSpec::new("d"),
    ];
    for mode in [Mode::Waves, Mode::Eager] {
        let (_, trace) = sim(specs.clone(), cfg(mode, 4), &[], &[]);
        let start = |i: usize| trace.runs.iter().find(|r| r.job == JobId(i)).unwrap().start;
        assert_eq!(start(0), Duration::ZERO);
        assert_eq!(start(1), Duration::from_secs(1), "{mode:?}");
        assert_eq!(start(2), Duration::ZERO);
        assert_eq!(start(3), Duration::ZERO);
    }
}

#[test]
fn completed_jobs_from_a_resumed_session_are_not_run_again() {
    let specs = vec![
        JobSpec::new("A").initial(JobStatus::Completed),
        JobSpec::new("B").deps(["A"]).initial(JobStatus::Cancelled),
        JobSpec::new("C").deps(["B"]),
        JobSpec::new("X").initial(JobStatus::Failed),
        JobSpec::new("Y").deps(["X"]),
    ];
    for mode in [Mode::Waves, Mode::Eager] {
        let (mut s, trace) = sim(specs.clone(), cfg(mode, 2), &[], &[]);
        let ran: Vec<&str> = trace
            .runs
            .iter()
            .map(|r| s.spec(r.job).id.as_str())
            .collect();
        assert_eq!(ran, ["B", "C"], "{mode:?}");
        let results = s.results();
        assert_eq!(results["A"].status, JobStatus::Completed);
        assert_eq!(results["X"].status, JobStatus::Failed);
        assert_eq!(
            results["Y"],
            JobOutcome {
                status: JobStatus::Skipped,
                detail: Some(SKIP_REASON.to_owned())
            }
        );
        assert!(!render(&s.take_events()).contains("start A"));
    }
}

#[test]
fn invalid_graphs_and_configs_are_rejected_with_names() {
    let err = Scheduler::new(
        vec![
            JobSpec::new("T1").deps(["T2"]),
            JobSpec::new("T2").after(["T1"]),
        ],
        SchedulerConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid job graph: dependency cycle: T1 → T2 → T1"
    );
    let err = Scheduler::new(
        vec![JobSpec::new("T1").after(["T7"])],
        SchedulerConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid job graph: task "T1" (row 1) depends on unknown task "T7""#
    );
    let err = Scheduler::new(vec![], cfg(Mode::Eager, 0)).unwrap_err();
    assert_eq!(err, SchedulerError::ZeroConcurrency);
}

#[test]
fn finishing_a_job_that_is_not_running_changes_nothing() {
    let mut s = Scheduler::new(diamond(), cfg(Mode::Eager, 2)).unwrap();
    assert!(!s.on_finished(JobId(3), JobOutcome::completed()));
    let a = s.next_startable().unwrap();
    assert!(s.on_finished(a, JobOutcome::completed()));
    assert!(!s.on_finished(a, JobOutcome::failed("again")));
    assert_eq!(s.state(a), JobState::Done(JobStatus::Completed));
}

#[test]
fn durations_format_compactly() {
    assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    assert_eq!(format_duration(Duration::from_secs(30)), "30s");
    assert_eq!(format_duration(Duration::from_secs(125)), "2m 5s");
    assert_eq!(format_duration(Duration::from_secs(600)), "10m");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
}

// ---------------------------------------------------------------- proptest

#[derive(Debug, Clone)]
struct RandomJob {
    hard: Vec<usize>,
    order: Vec<usize>,
    scope: Option<usize>,
    duration: u64,
    fails: bool,
}

const SCOPES: [&str; 6] = [
    "src/a/**",
    "src/a/x.rs",
    "src/b/**",
    "src/*.rs",
    "docs/**",
    "**",
];

fn random_dag() -> impl Strategy<Value = Vec<RandomJob>> {
    (1usize..30).prop_flat_map(|n| {
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                proptest::collection::vec(any::<prop::sample::Index>(), 0..2),
                proptest::option::weighted(0.5, 0usize..SCOPES.len()),
                1u64..6,
                proptest::bool::weighted(0.15),
            ),
            n,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, (hard, order, scope, duration, fails))| {
                    let pick = |v: Vec<prop::sample::Index>| -> Vec<usize> {
                        if i == 0 {
                            Vec::new()
                        } else {
                            v.into_iter().map(|x| x.index(i)).collect()
                        }
                    };
                    RandomJob {
                        hard: pick(hard),
                        order: pick(order),
                        scope,
                        duration,
                        fails,
                    }
                })
                .collect()
        })
    })
}

fn specs_of(jobs: &[RandomJob], with_estimates: bool) -> Vec<JobSpec> {
    let name = |i: usize| format!("J{i}");
    // Listed in reverse so input order is not a topological order.
    (0..jobs.len())
        .rev()
        .map(|i| {
            let j = &jobs[i];
            let mut spec = JobSpec::new(name(i))
                .deps(j.hard.iter().map(|&d| name(d)))
                .after(j.order.iter().map(|&d| name(d)))
                .scopes(j.scope.map(|s| SCOPES[s]));
            if with_estimates {
                spec = spec.estimate(Duration::from_secs(j.duration));
            }
            spec
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn simulated_schedules_respect_every_rule(
        jobs in random_dag(),
        concurrency in 1usize..5,
        eager in any::<bool>(),
        estimates in any::<bool>(),
    ) {
        let mode = if eager { Mode::Eager } else { Mode::Waves };
        let specs = specs_of(&jobs, estimates);
        let n = jobs.len();
        // spec position → random job number
        let job_no = |j: JobId| n - 1 - j.0;
        let mut s = Scheduler::new(specs, cfg(mode, concurrency)).unwrap();
        let trace = simulate(
            &mut s,
            |j| Duration::from_secs(jobs[job_no(j)].duration),
            |j| if jobs[job_no(j)].fails { JobOutcome::failed("x") } else { JobOutcome::completed() },
        );
        prop_assert!(s.is_finished());

        let run_of: HashMap<usize, (Duration, Duration)> =
            trace.runs.iter().map(|r| (job_no(r.job), (r.start, r.end))).collect();
        prop_assert_eq!(run_of.len(), trace.runs.len(), "a job ran twice");

        // Concurrency: count runs alive at each start instant.
        for r in &trace.runs {
            let alive = trace.runs.iter().filter(|o| o.start <= r.start && r.start < o.end).count();
            prop_assert!(alive <= concurrency, "{} jobs at {:?}", alive, r.start);
        }
        // Scopes: overlapping runs have disjoint scopes.
        for (a, &(sa, ea)) in &run_of {
            for (b, &(sb, eb)) in &run_of {
                if a < b && sa < eb && sb < ea
                    && let (Some(x), Some(y)) = (jobs[*a].scope, jobs[*b].scope)
                {
                    prop_assert!(!scope::globs_overlap(&[SCOPES[x]], &[SCOPES[y]]),
                        "J{} ({}) and J{} ({}) overlapped in time", a, SCOPES[x], b, SCOPES[y]);
                }
            }
        }
        // Dependencies (hard and order-only) finished before the start.
        for (&i, &(start, _)) in &run_of {
            for &d in jobs[i].hard.iter().chain(&jobs[i].order) {
                if let Some(&(_, dep_end)) = run_of.get(&d) {
                    prop_assert!(dep_end <= start, "J{} started before dep J{} ended", i, d);
                }
            }
        }
        // Skipped = exactly the jobs reachable from a failure over hard edges.
        let mut expected_skipped = BTreeSet::new();
        let mut bad = vec![false; n];
        for i in 0..n {
            if jobs[i].hard.iter().any(|&d| bad[d]) {
                bad[i] = true;
                expected_skipped.insert(format!("J{i}"));
            } else if jobs[i].fails {
                bad[i] = true;
            }
        }
        let results = s.results();
        let skipped: BTreeSet<String> = results.iter()
            .filter(|(_, r)| r.status == JobStatus::Skipped)
            .map(|(id, r)| { assert_eq!(r.detail.as_deref(), Some(SKIP_REASON)); id.clone() })
            .collect();
        prop_assert_eq!(skipped, expected_skipped);
        // Every job not skipped ran exactly once.
        prop_assert_eq!(trace.runs.len() + results.values().filter(|r| r.status == JobStatus::Skipped).count(), n);
    }
}

/// The statuses a full run must end with: failures as drawn, hard
/// dependents of failures skipped, everything else completed.
fn expected_statuses(jobs: &[RandomJob]) -> BTreeMap<String, JobStatus> {
    let mut bad = vec![false; jobs.len()];
    let mut out = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        let status = if job.hard.iter().any(|&d| bad[d]) {
            JobStatus::Skipped
        } else if job.fails {
            JobStatus::Failed
        } else {
            JobStatus::Completed
        };
        bad[i] = status != JobStatus::Completed;
        out.insert(format!("J{i}"), status);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn a_cancelled_run_resumed_from_its_results_ends_like_an_uninterrupted_one(
        jobs in random_dag(),
        stop_after in 0usize..30,
        eager in any::<bool>(),
    ) {
        let mode = if eager { Mode::Eager } else { Mode::Waves };
        let n = jobs.len();
        let outcome = |id: &str| {
            let i: usize = id[1..].parse().unwrap();
            if jobs[i].fails { JobOutcome::failed("x") } else { JobOutcome::completed() }
        };
        // First run, driven by hand: jobs finish in start order; after
        // `stop_after` finishes, everything running is cancelled.
        let mut first = Scheduler::new(specs_of(&jobs, false), cfg(mode, 3)).unwrap();
        let mut running = std::collections::VecDeque::new();
        let mut finished = 0;
        loop {
            while let Some(j) = first.next_startable() {
                running.push_back(j);
            }
            if finished == stop_after {
                first.cancel_running("stopped");
                break;
            }
            let Some(j) = running.pop_front() else { break };
            let o = outcome(&first.spec(j).id);
            prop_assert!(first.on_finished(j, o));
            finished += 1;
        }
        prop_assert_eq!(first.next_startable(), None, "a halted scheduler starts nothing");
        let carried = first.results();
        prop_assert_eq!(carried.len() + first.pending_ids().len(), n);

        // Second run from the carried statuses.
        let specs: Vec<JobSpec> = specs_of(&jobs, false)
            .into_iter()
            .map(|mut s| { s.initial = carried.get(&s.id).map(|r| r.status); s })
            .collect();
        let mut second = Scheduler::new(specs, cfg(mode, 3)).unwrap();
        let ids: Vec<String> = second.specs().iter().map(|s| s.id.clone()).collect();
        let trace = simulate(&mut second, |_| Duration::from_secs(1), |j| outcome(&ids[j.0]));
        for run in &trace.runs {
            let id = &ids[run.job.0];
            let before = carried.get(id).map(|r| r.status);
            prop_assert!(
                before.is_none() || before == Some(JobStatus::Cancelled),
                "{} ran again after ending {:?}", id, before
            );
        }
        let statuses: BTreeMap<String, JobStatus> =
            second.results().into_iter().map(|(id, r)| (id, r.status)).collect();
        prop_assert_eq!(statuses, expected_statuses(&jobs));
    }
}

// ---------------------------------------------------------------- async driver

async fn sleeper(ms: u64, outcome: JobOutcome) -> JobOutcome {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    outcome
}

#[tokio::test(start_paused = true)]
async fn event_stream_for_a_diamond_with_one_failure_in_waves_mode() {
    let mut s = Scheduler::new(diamond(), cfg(Mode::Waves, 4)).unwrap();
    let sink = CollectingSink::new();
    let report = run(
        &mut s,
        |j| match j.0 {
            1 => sleeper(100, JobOutcome::failed("tests failed: auth::login")),
            2 => sleeper(200, JobOutcome::completed().with_detail("added types")),
            _ => sleeper(50, JobOutcome::completed()),
        },
        &sink,
        &CancelHandle::new(),
    )
    .await;
    let lines: Vec<String> = sink
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
    assert!(!report.cancelled);
    assert!(report.pending.is_empty());
    assert_eq!(report.results["D"].status, JobStatus::Skipped);
    assert_eq!(
        report.results["B"].detail.as_deref(),
        Some("tests failed: auth::login")
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_over_its_time_limit_times_out_and_skips_its_dependents() {
    let specs = vec![
        JobSpec::new("slow").timeout(Duration::from_secs(30)),
        JobSpec::new("after").deps(["slow"]),
        JobSpec::new("fast").timeout(Duration::from_secs(30)),
    ];
    let mut s = Scheduler::new(specs, cfg(Mode::Eager, 4)).unwrap();
    let started = tokio::time::Instant::now();
    let report = run(
        &mut s,
        |j| {
            sleeper(
                if j.0 == 0 { 3_600_000 } else { 1_000 },
                JobOutcome::completed(),
            )
        },
        &crate::event::NullSink,
        &CancelHandle::new(),
    )
    .await;
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(
        report.results["slow"],
        JobOutcome::timed_out(Duration::from_secs(30))
    );
    assert_eq!(
        report.results["slow"].detail.as_deref(),
        Some("timed out after 30s")
    );
    assert_eq!(report.results["after"].status, JobStatus::Skipped);
    assert_eq!(report.results["fast"].status, JobStatus::Completed);
}

/// Sets a flag when dropped: proves a cancelled job's future was dropped.
struct DropFlag(Arc<AtomicUsize>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, AtomicOrdering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_drops_running_jobs_and_leaves_the_rest_pending() {
    let specs = vec![
        JobSpec::new("a_quick"),
        JobSpec::new("long1"),
        JobSpec::new("long2"),
        JobSpec::new("next").deps(["long1"]),
        JobSpec::new("queued"),
    ];
    let mut s = Scheduler::new(specs, cfg(Mode::Eager, 3)).unwrap();
    let cancel = CancelHandle::new();
    let dropped = Arc::new(AtomicUsize::new(0));
    let sink = CollectingSink::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        trigger.cancel();
    });
    let flags = dropped.clone();
    let report = run(
        &mut s,
        move |j| {
            let flag = DropFlag(flags.clone());
            let ms = if j.0 == 0 { 1_000 } else { 60_000 };
            async move {
                let _flag = flag;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                JobOutcome::completed()
            }
        },
        &sink,
        &cancel,
    )
    .await;
    assert!(report.cancelled);
    assert!(cancel.is_cancelled());
    // a_quick finished; queued started after it; long1, long2, queued were running.
    assert_eq!(report.results["a_quick"].status, JobStatus::Completed);
    let cancelled: BTreeSet<&str> = report
        .results
        .iter()
        .filter(|(_, r)| r.status == JobStatus::Cancelled)
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(cancelled, BTreeSet::from(["long1", "long2", "queued"]));
    assert_eq!(report.pending, ["next"]);
    assert_eq!(
        dropped.load(AtomicOrdering::SeqCst),
        4,
        "every started future is dropped"
    );
    assert_eq!(s.state(JobId(3)), JobState::Pending);
    let rendered = render(&sink.events());
    assert!(rendered.ends_with("end long1 cancelled (cancelled)\nend long2 cancelled (cancelled)\nend queued cancelled (cancelled)"), "{rendered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_never_exceeds_its_concurrency_on_a_real_runtime() {
    let specs: Vec<JobSpec> = (0..300)
        .map(|i| {
            let deps: Vec<String> = if i >= 10 {
                vec![format!("J{}", i - 10)]
            } else {
                vec![]
            };
            JobSpec::new(format!("J{i}")).deps(deps)
        })
        .collect();
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut s = Scheduler::new(specs, cfg(Mode::Eager, 6)).unwrap();
    let (l, p) = (live.clone(), peak.clone());
    let report = run(
        &mut s,
        move |j| {
            let (l, p) = (l.clone(), p.clone());
            async move {
                let now = l.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                p.fetch_max(now, AtomicOrdering::SeqCst);
                tokio::task::yield_now().await;
                l.fetch_sub(1, AtomicOrdering::SeqCst);
                if j.0 == 5 {
                    JobOutcome::failed("x")
                } else {
                    JobOutcome::completed()
                }
            }
        },
        &crate::event::NullSink,
        &CancelHandle::new(),
    )
    .await;
    assert!(peak.load(AtomicOrdering::SeqCst) <= 6);
    assert!(
        peak.load(AtomicOrdering::SeqCst) >= 2,
        "jobs did run in parallel"
    );
    let skipped = report
        .results
        .values()
        .filter(|r| r.status == JobStatus::Skipped)
        .count();
    // J5 fails; J15, J25, …, J295 are skipped: 29 jobs.
    assert_eq!(skipped, 29);
    assert_eq!(report.results.len(), 300);
}

#[tokio::test]
async fn a_panicking_job_fails_without_taking_the_run_down() {
    let mut s = Scheduler::new(diamond(), cfg(Mode::Eager, 2)).unwrap();
    let report = run(
        &mut s,
        |j| async move {
            if j.0 == 2 {
                panic!("job C exploded");
            }
            JobOutcome::completed()
        },
        &crate::event::NullSink,
        &CancelHandle::new(),
    )
    .await;
    assert_eq!(report.results["C"], JobOutcome::failed("job panicked"));
    assert_eq!(report.results["D"].status, JobStatus::Skipped);
    assert_eq!(report.results["B"].status, JobStatus::Completed);
}
