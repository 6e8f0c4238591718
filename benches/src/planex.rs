//! planex's makespan with verification on: real `planex run` sessions
//! (library, shell agent, real git, real `sh -c`) over seeded random DAGs
//! of tasks that sleep, then write a file of their own.
//!
//! Each DAG runs three times in a fresh repository at concurrency 4:
//! verified eager (every task in a git worktree of its own outside the
//! repository, its change measured, committed, landed by cherry-pick under
//! the landing lock), verified waves (the seed's barriers), and unverified
//! eager (`--no-commit`: the same commands in the working tree).
//!
//! Figures ([`perf_figures`]):
//! - `planex_verified_eager_over_waves`: total verified eager wall time
//!   over total verified waves wall time (the bound: ≤ 0.8);
//! - `planex_verified_eager_over_lower_bound`: over `max(critical path,
//!   work / 4)` of the true sleeps;
//! - `planex_verify_overhead_ms_per_task`: (verified eager − unverified
//!   eager) × 4 slots / tasks, in ms: what worktree, measurement, commit
//!   and landing add to one task;
//! - `planex_verified_git_runs_per_task`, `planex_verified_git_ms_per_task`:
//!   the git invocations of the verified eager runs per task and their
//!   process time (summed: concurrent tasks overlap), the measured split of
//!   that overhead (the subcommands that cost most go to stderr).
//!
//! DAG ([`sleep_dag`]): `n` tasks, task `i` depends on 0–3 of the 8 before
//! it, sleeps drawn uniformly from a range in ms.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orchestrator_adapters::git::{GitSpent, GitVcs};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_core::scheduler::Mode;
use orchestrator_planex::{
    Agents, ExecutionPolicy, Outcome, Planex, PlanexOptions, ShellTaskAgent, Verification,
};

use crate::rng::SplitMix64;

const HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

/// The concurrency every run uses.
pub const CONCURRENCY: usize = 4;

/// One task of a sleep DAG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SleepTask {
    /// How long it sleeps, in ms.
    pub sleep_ms: u64,
    /// The earlier tasks it depends on (indexes).
    pub deps: Vec<usize>,
}

/// A seeded DAG of `n` sleeping tasks, sleeps uniform in `sleep_ms`.
pub fn sleep_dag(seed: u64, n: usize, sleep_ms: (u64, u64)) -> Vec<SleepTask> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|i| {
            let mut deps = Vec::new();
            if i > 0 {
                for _ in 0..rng.below(4) {
                    let back = (1 + rng.below(8) as usize).min(i);
                    if !deps.contains(&(i - back)) {
                        deps.push(i - back);
                    }
                }
                deps.sort_unstable();
            }
            let span = sleep_ms.1.saturating_sub(sleep_ms.0) + 1;
            SleepTask {
                sleep_ms: sleep_ms.0 + rng.below(span),
                deps,
            }
        })
        .collect()
}

/// `max(critical path, total work / c)` of the sleeps, in seconds.
pub fn lower_bound_s(tasks: &[SleepTask], c: usize) -> f64 {
    let mut finish: Vec<u64> = Vec::with_capacity(tasks.len());
    for t in tasks {
        let start = t.deps.iter().map(|&d| finish[d]).max().unwrap_or(0);
        finish.push(start + t.sleep_ms);
    }
    let critical = finish.iter().copied().max().unwrap_or(0);
    let work: u64 = tasks.iter().map(|t| t.sleep_ms).sum();
    critical.max(work.div_ceil(c as u64)) as f64 / 1000.0
}

/// The tasks.csv of a DAG: task `Ti` sleeps, then writes `out/Ti.txt`, its
/// scope.
pub fn tasks_csv(tasks: &[SleepTask]) -> String {
    let mut csv = format!("{HEADER}\n");
    for (i, t) in tasks.iter().enumerate() {
        let id = format!("T{}", i + 1);
        let deps: Vec<String> = t.deps.iter().map(|d| format!("T{}", d + 1)).collect();
        csv.push_str(&format!(
            "{id},Sleep {ms},Sleep {ms} ms,,,out/{id}.txt,,\"sleep {s:.3}; mkdir -p out; echo {id} > out/{id}.txt\",{deps},,\n",
            ms = t.sleep_ms,
            s = t.sleep_ms as f64 / 1000.0,
            deps = deps.join(";"),
        ));
    }
    csv
}

/// How a run executes its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Verified, eager scheduler.
    VerifiedEager,
    /// Verified, the seed's wave barriers.
    VerifiedWaves,
    /// Unverified (`--no-commit`), eager.
    UnverifiedEager,
}

/// What one run took and made.
#[derive(Debug, Clone)]
pub struct Timed {
    /// Wall time of the whole `run_tasks_file`.
    pub wall: Duration,
    /// The flow's outcome.
    pub outcome: Outcome,
    /// Commits on the branch after the run, the repository's first aside.
    pub commits: usize,
    /// Git invocations the run made, per subcommand (process time summed:
    /// concurrent tasks overlap).
    pub git: BTreeMap<String, GitSpent>,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()
        .map_err(|e| format!("git {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `csv` as `planex run` (shell agent, `-y`, concurrency
/// [`CONCURRENCY`]) in a fresh git repository under `base`.
pub async fn run_once(base: &Path, csv: &str, run: Run) -> Result<Timed, String> {
    let repo = base.join(format!("repo-{run:?}").to_lowercase());
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["config", "user.name", "bench"])?;
    git(&repo, &["config", "user.email", "bench@example.invalid"])?;
    let file = repo.join("tasks.csv");
    std::fs::write(&file, csv).map_err(|e| e.to_string())?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-qm", "tasks"])?;
    let runner = Arc::new(ProcessRunner::default());
    let options = PlanexOptions::default()
        .with_auto_yes(true)
        .with_concurrency(CONCURRENCY)
        .with_schedule(match run {
            Run::VerifiedWaves => Mode::Waves,
            _ => Mode::Eager,
        })
        .with_execution(ExecutionPolicy::shell());
    let mut planex = Planex::new(
        &repo,
        Agents::all(Arc::new(ShellTaskAgent::new(runner.clone()))),
        Arc::new(AutoYes),
        Arc::new(NullSink),
        options,
    );
    if run != Run::UnverifiedEager {
        let vcs = GitVcs::open(&repo).await.map_err(|e| e.to_string())?;
        planex = planex.with_verification(
            Verification::new(Arc::new(vcs), runner).with_executor_runs_directives(true),
        );
    }
    let git_before = orchestrator_adapters::git::spent();
    let started = Instant::now();
    let outcome = planex
        .run_tasks_file(&file)
        .await
        .map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let git_spent = crate::review_fix::git_delta(&git_before, &orchestrator_adapters::git::spent());
    let commits = git(&repo, &["rev-list", "--count", "HEAD"])?
        .trim()
        .parse::<usize>()
        .map_err(|e| e.to_string())?
        - 1;
    Ok(Timed {
        wall,
        outcome,
        commits,
        git: git_spent,
    })
}

/// The three runs of one DAG, checked: every run completes every task, and
/// a verified run lands one commit per task.
pub async fn measure(tasks: &[SleepTask]) -> Result<[Timed; 3], String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let csv = tasks_csv(tasks);
    let mut out = Vec::new();
    for run in [Run::VerifiedEager, Run::VerifiedWaves, Run::UnverifiedEager] {
        let timed = run_once(dir.path(), &csv, run).await?;
        if timed.outcome.exit_code() != 0 {
            return Err(format!(
                "{run:?}: exit {}: {}",
                timed.outcome.exit_code(),
                timed.outcome.summary
            ));
        }
        let want = if run == Run::UnverifiedEager {
            0
        } else {
            tasks.len()
        };
        if timed.commits != want {
            return Err(format!("{run:?}: {} commits, want {want}", timed.commits));
        }
        out.push(timed);
    }
    out.try_into().map_err(|_| "three runs expected".to_owned())
}

/// The figures (module docs): two DAGs of 30–45 tasks sleeping 100–600 ms.
pub fn perf_figures() -> Vec<(String, f64)> {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let mut sums = [0.0f64; 4];
    let mut n_tasks = 0usize;
    let mut git = BTreeMap::<String, GitSpent>::new();
    let mut seeds = SplitMix64::new(0x9_1a4e);
    for _ in 0..2 {
        let n = 30 + seeds.below(16) as usize;
        let tasks = sleep_dag(seeds.next_u64(), n, (100, 600));
        match rt.block_on(measure(&tasks)) {
            Ok([eager, waves, plain]) => {
                sums[0] += eager.wall.as_secs_f64();
                sums[1] += waves.wall.as_secs_f64();
                sums[2] += plain.wall.as_secs_f64();
                sums[3] += lower_bound_s(&tasks, CONCURRENCY);
                n_tasks += tasks.len();
                for (k, v) in eager.git {
                    let e = git.entry(k).or_default();
                    e.runs += v.runs;
                    e.time += v.time;
                }
            }
            Err(e) => {
                eprintln!("  planex makespan not measured: {e}");
                return Vec::new();
            }
        }
    }
    let [eager, waves, plain, bound] = sums;
    let per_task = |x: f64| x / n_tasks as f64;
    let git_runs: u64 = git.values().map(|s| s.runs).sum();
    let git_s: f64 = git.values().map(|s| s.time.as_secs_f64()).sum();
    let mut by: Vec<_> = git.iter().collect();
    by.sort_by_key(|b| std::cmp::Reverse(b.1.time));
    let top: Vec<String> = by
        .iter()
        .take(8)
        .map(|(k, s)| {
            format!(
                "{k}×{:.1}={:.1}ms",
                per_task(s.runs as f64),
                per_task(s.time.as_secs_f64()) * 1000.0
            )
        })
        .collect();
    eprintln!("  verified eager, git per task: {}", top.join(" "));
    vec![
        (
            "planex_verified_git_runs_per_task".to_owned(),
            per_task(git_runs as f64),
        ),
        (
            "planex_verified_git_ms_per_task".to_owned(),
            per_task(git_s) * 1000.0,
        ),
        ("planex_verified_eager_over_waves".to_owned(), eager / waves),
        (
            "planex_verified_eager_over_lower_bound".to_owned(),
            eager / bound,
        ),
        (
            "planex_verify_overhead_ms_per_task".to_owned(),
            (eager - plain) * CONCURRENCY as f64 / n_tasks as f64 * 1000.0,
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn dags_are_seeded_and_acyclic() {
        let a = sleep_dag(7, 40, (100, 600));
        assert_eq!(a, sleep_dag(7, 40, (100, 600)));
        for (i, t) in a.iter().enumerate() {
            assert!(t.deps.iter().all(|&d| d < i), "task {i}: {:?}", t.deps);
            assert!((100..=600).contains(&t.sleep_ms));
        }
        assert!(a.iter().any(|t| !t.deps.is_empty()));
    }

    #[test]
    fn lower_bound_is_the_longer_of_critical_path_and_spread_work() {
        let chain = vec![
            SleepTask {
                sleep_ms: 100,
                deps: vec![],
            },
            SleepTask {
                sleep_ms: 200,
                deps: vec![0],
            },
        ];
        assert!((lower_bound_s(&chain, 4) - 0.3).abs() < 1e-9);
        let flat: Vec<SleepTask> = (0..8)
            .map(|_| SleepTask {
                sleep_ms: 100,
                deps: vec![],
            })
            .collect();
        assert!((lower_bound_s(&flat, 4) - 0.2).abs() < 1e-9);
    }

    /// The measured runs do what they claim: each verified run lands one
    /// commit per task, the unverified one none (checked in `measure`).
    #[test]
    fn a_small_dag_runs_verified_and_unverified() {
        let tasks = sleep_dag(3, 5, (10, 30));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let [eager, waves, plain] = rt.block_on(measure(&tasks)).unwrap();
        assert_eq!(eager.commits, 5);
        assert_eq!(waves.commits, 5);
        assert_eq!(plain.commits, 0);
    }
}
