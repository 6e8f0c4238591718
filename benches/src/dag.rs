//! DAG workloads for the waves and scheduler benches, and the figures the
//! perf report prints.
//!
//! Generators (all seeded, all from [`SplitMix64`]):
//! - [`WavesWorkload::generate`]: `n` tasks `T0…`, `edges` dependency edges,
//!   each task depending on tasks drawn uniformly from the earlier ones
//!   (1M tasks / 3M edges for `waves_1m_s`).
//! - [`random_job_dag`]: 30–100 jobs, mean in-degree drawn from 2–3, deps
//!   drawn uniformly without repetition from the earlier jobs, durations
//!   lognormal(0, 1) in seconds (Box–Muller over the PRNG). Input order is
//!   shuffled so that it is not a topological order.
//!
//! Figures ([`perf_figures`]):
//! - `waves_1m_s` (wall) and `waves_1m_cpu_s` (thread CPU time): best of five
//!   `compute_waves` runs on 1M tasks / 3M edges (input built beforehand, not
//!   timed).
//! - `scheduler_overhead_us_per_job`: 100k no-op jobs (job `i` hard-depends on
//!   job `i - 64`) through [`Scheduler::new`] and the real tokio driver
//!   ([`run`]) at concurrency 64 on a multi-thread runtime: wall time / jobs,
//!   in µs.
//! - `makespan_eager_over_lower_bound`, `makespan_eager_over_waves`: 400
//!   random DAGs, each at concurrency 4 and 8, simulated on a virtual clock
//!   with the durations known to the scheduler as estimates; the lower bound
//!   is `max(critical path, total work / concurrency)`; averages of the
//!   per-DAG ratios (also per concurrency, suffixed `_c4`, `_c8`).

use std::time::{Duration, Instant};

use orchestrator_core::event::NullSink;
use orchestrator_core::scheduler::sim::simulate;
use orchestrator_core::scheduler::{
    CancelHandle, JobOutcome, JobSpec, Mode, Scheduler, SchedulerConfig, run,
};
use orchestrator_core::waves::{WaveOptions, WaveTask, compute_waves};

pub use crate::rng::SplitMix64;

/// A large task graph for the waves benchmark, shaped like parsed
/// `tasks.csv` rows: each row owns its id and its `deps` cell
/// (`"T12;T345"`), which the input rows borrow from.
#[derive(Debug, Clone)]
pub struct WavesWorkload {
    /// Task ids, `T0`, `T1`, ….
    pub ids: Vec<String>,
    /// Each row's `deps` cell, semicolon-separated.
    pub deps: Vec<String>,
}

impl WavesWorkload {
    /// `n` tasks and exactly `edges` edges (`edges / n` per task, the
    /// remainder on the last tasks), each to a uniformly drawn earlier task
    /// (row 0 has none; its share goes to row 1, as repeated edges to row 0).
    pub fn generate(n: usize, edges: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let ids = (0..n).map(|i| format!("T{i}")).collect();
        let per = edges / n.max(1);
        let extra = edges % n.max(1);
        let mut deps = Vec::with_capacity(n);
        for i in 0..n {
            let mut k = if i == 0 {
                0
            } else {
                per + usize::from(i >= n - extra)
            };
            if i == 1 {
                k += per;
            }
            let cell: Vec<String> = (0..k).map(|_| format!("T{}", rng.index(i))).collect();
            deps.push(cell.join(";"));
        }
        Self { ids, deps }
    }

    /// Total number of edges.
    pub fn edge_count(&self) -> usize {
        self.deps
            .iter()
            .map(|c| c.split(';').filter(|d| !d.is_empty()).count())
            .sum()
    }

    /// Borrowed input rows for [`compute_waves`] (splitting the cells is not
    /// part of the timed work).
    pub fn tasks(&self) -> Vec<WaveTask<'_>> {
        self.ids
            .iter()
            .zip(&self.deps)
            .map(|(id, cell)| WaveTask {
                id,
                deps: cell.split(';').filter(|d| !d.is_empty()).collect(),
                context_from: Vec::new(),
            })
            .collect()
    }
}

/// A random job DAG with known durations.
#[derive(Debug, Clone)]
pub struct JobDag {
    /// The jobs, with their durations as estimates.
    pub specs: Vec<JobSpec>,
    /// The true duration of each spec (equal to its estimate).
    pub durations: Vec<Duration>,
}

impl JobDag {
    /// Total work.
    pub fn total_work(&self) -> Duration {
        self.durations.iter().sum()
    }

    /// The longest path by duration.
    pub fn critical_path(&self) -> Duration {
        // Specs are shuffled; resolve by id and relax in generation order.
        let index: std::collections::HashMap<&str, usize> = self
            .specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut order: Vec<usize> = (0..self.specs.len()).collect();
        order.sort_by_key(|&i| self.specs[i].id[1..].parse::<usize>().unwrap_or(0));
        let mut finish = vec![Duration::ZERO; self.specs.len()];
        for &i in &order {
            let start = self.specs[i]
                .deps
                .iter()
                .filter_map(|d| index.get(d.as_str()))
                .map(|&d| finish[d])
                .max()
                .unwrap_or(Duration::ZERO);
            finish[i] = start + self.durations[i];
        }
        finish.into_iter().max().unwrap_or(Duration::ZERO)
    }

    /// `max(critical path, total work / concurrency)`.
    pub fn lower_bound(&self, concurrency: usize) -> Duration {
        self.critical_path()
            .max(self.total_work() / concurrency.max(1) as u32)
    }
}

/// 30–100 jobs `J0…`, mean in-degree drawn uniformly from 2–3 (deps drawn
/// without repetition from earlier jobs), durations lognormal(0, 1) seconds,
/// specs in shuffled order.
pub fn random_job_dag(rng: &mut SplitMix64) -> JobDag {
    let n = 30 + rng.index(71);
    let mean_in = 2.0 + rng.next_f64();
    let mut specs = Vec::with_capacity(n);
    let mut durations = Vec::with_capacity(n);
    for i in 0..n {
        // floor(mean) or ceil(mean) deps, so the mean is right, capped at i.
        let k = (mean_in.floor() as usize + usize::from(rng.next_f64() < mean_in.fract())).min(i);
        let mut deps: Vec<usize> = Vec::with_capacity(k);
        while deps.len() < k {
            let d = rng.index(i);
            if !deps.contains(&d) {
                deps.push(d);
            }
        }
        let d = Duration::from_secs_f64(rng.lognormal(0.0, 1.0));
        specs.push(
            JobSpec::new(format!("J{i}"))
                .deps(deps.iter().map(|d| format!("J{d}")))
                .estimate(d),
        );
        durations.push(d);
    }
    // Fisher–Yates shuffle of (spec, duration) pairs.
    for i in (1..n).rev() {
        let j = rng.index(i + 1);
        specs.swap(i, j);
        durations.swap(i, j);
    }
    JobDag { specs, durations }
}

/// Simulated makespan of `dag` in `mode` at `concurrency`, all jobs
/// succeeding.
pub fn simulated_makespan(dag: &JobDag, mode: Mode, concurrency: usize) -> Option<Duration> {
    let mut sched =
        Scheduler::new(dag.specs.clone(), SchedulerConfig { mode, concurrency }).ok()?;
    let trace = simulate(
        &mut sched,
        |j| dag.durations[j.0],
        |_| JobOutcome::completed(),
    );
    Some(trace.makespan)
}

/// Average makespan ratios over `dags` random DAGs at each concurrency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MakespanRatios {
    /// Eager / lower bound.
    pub eager_over_bound: f64,
    /// Eager / waves.
    pub eager_over_waves: f64,
    /// Waves / lower bound.
    pub waves_over_bound: f64,
}

/// Runs the makespan comparison on `dags` DAGs from `seed` at `concurrency`.
pub fn makespan_ratios(dags: usize, seed: u64, concurrency: usize) -> MakespanRatios {
    let mut rng = SplitMix64::new(seed);
    let (mut eb, mut ew, mut wb) = (0.0, 0.0, 0.0);
    let mut counted = 0usize;
    for _ in 0..dags {
        let dag = random_job_dag(&mut rng);
        let bound = dag.lower_bound(concurrency).as_secs_f64();
        let (Some(eager), Some(waves)) = (
            simulated_makespan(&dag, Mode::Eager, concurrency),
            simulated_makespan(&dag, Mode::Waves, concurrency),
        ) else {
            continue;
        };
        let (eager, waves) = (eager.as_secs_f64(), waves.as_secs_f64());
        eb += eager / bound;
        ew += eager / waves;
        wb += waves / bound;
        counted += 1;
    }
    let c = counted.max(1) as f64;
    MakespanRatios {
        eager_over_bound: eb / c,
        eager_over_waves: ew / c,
        waves_over_bound: wb / c,
    }
}

/// Best-of-`runs` times of `compute_waves` on `workload`, in seconds:
/// `(wall, cpu)`. CPU time is this thread's on-CPU time (Linux
/// `/proc/thread-self/schedstat`; NaN elsewhere), which a machine shared with
/// other builds inflates much less than wall time.
pub fn time_waves(workload: &WavesWorkload, runs: usize) -> (f64, f64) {
    let tasks = workload.tasks();
    let (mut best_wall, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs.max(1) {
        let cpu0 = thread_cpu_seconds();
        let t = Instant::now();
        let waves = compute_waves(&tasks, WaveOptions::default());
        let wall = t.elapsed().as_secs_f64();
        let cpu = thread_cpu_seconds() - cpu0;
        std::hint::black_box(waves.map(|w| w.max_wave()).ok());
        best_wall = best_wall.min(wall);
        best_cpu = best_cpu.min(cpu);
    }
    (best_wall, best_cpu)
}

/// On-CPU time of the calling thread in seconds (NaN where unavailable).
pub fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(f64::NAN, |ns| ns as f64 / 1e9)
}

/// `jobs` no-op jobs, job `i` hard-depending on job `i - 64`.
pub fn noop_jobs(jobs: usize) -> Vec<JobSpec> {
    let ids: Vec<String> = (0..jobs).map(|i| format!("J{i}")).collect();
    (0..jobs)
        .map(|i| {
            let spec = JobSpec::new(ids[i].clone());
            if i >= 64 {
                spec.deps([ids[i - 64].clone()])
            } else {
                spec
            }
        })
        .collect()
}

/// Runs `specs` as no-op jobs through the tokio driver in eager mode at
/// `concurrency` and returns the wall time including [`Scheduler::new`].
pub async fn run_noop_jobs(specs: Vec<JobSpec>, concurrency: usize) -> Duration {
    let started = Instant::now();
    let Ok(mut sched) = Scheduler::new(
        specs,
        SchedulerConfig {
            mode: Mode::Eager,
            concurrency,
        },
    ) else {
        return Duration::MAX;
    };
    let report = run(
        &mut sched,
        |_| async { JobOutcome::completed() },
        &NullSink,
        &CancelHandle::new(),
    )
    .await;
    let elapsed = started.elapsed();
    std::hint::black_box(report.results.len());
    elapsed
}

/// Scheduler overhead per job in µs: `jobs` no-op jobs at concurrency 64 on a
/// fresh multi-thread runtime.
pub fn scheduler_overhead_us_per_job(jobs: usize) -> f64 {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread().build() else {
        return f64::NAN;
    };
    let specs = noop_jobs(jobs);
    let wall = rt.block_on(run_noop_jobs(specs, 64));
    wall.as_secs_f64() * 1e6 / jobs.max(1) as f64
}

/// How big the measured workloads are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Tasks for the waves timing.
    pub wave_tasks: usize,
    /// Edges for the waves timing.
    pub wave_edges: usize,
    /// Jobs for the overhead timing.
    pub overhead_jobs: usize,
    /// DAGs per concurrency for the makespan ratios.
    pub dags: usize,
}

impl Scale {
    /// The sizes the figures are specified at.
    pub const FULL: Scale = Scale {
        wave_tasks: 1_000_000,
        wave_edges: 3_000_000,
        overhead_jobs: 100_000,
        dags: 400,
    };
}

/// The figures at [`Scale::FULL`].
pub fn perf_figures() -> Vec<(String, f64)> {
    perf_figures_at(Scale::FULL)
}

/// The figures at a given scale (smaller scales for quick checks).
pub fn perf_figures_at(scale: Scale) -> Vec<(String, f64)> {
    let workload = WavesWorkload::generate(scale.wave_tasks, scale.wave_edges, 0x5eed);
    let (wall, cpu) = time_waves(&workload, 5);
    let mut figures = vec![
        ("waves_1m_s".to_owned(), wall),
        ("waves_1m_cpu_s".to_owned(), cpu),
    ];
    drop(workload);
    figures.push((
        "scheduler_overhead_us_per_job".to_owned(),
        scheduler_overhead_us_per_job(scale.overhead_jobs),
    ));
    let per_c: Vec<(usize, MakespanRatios)> = [4usize, 8]
        .into_iter()
        .map(|c| (c, makespan_ratios(scale.dags, 0xda6 + c as u64, c)))
        .collect();
    let mean = |f: fn(&MakespanRatios) -> f64| -> f64 {
        per_c.iter().map(|(_, r)| f(r)).sum::<f64>() / per_c.len() as f64
    };
    figures.push((
        "makespan_eager_over_lower_bound".to_owned(),
        mean(|r| r.eager_over_bound),
    ));
    figures.push((
        "makespan_eager_over_waves".to_owned(),
        mean(|r| r.eager_over_waves),
    ));
    figures.push((
        "makespan_waves_over_lower_bound".to_owned(),
        mean(|r| r.waves_over_bound),
    ));
    for (c, r) in &per_c {
        figures.push((
            format!("makespan_eager_over_lower_bound_c{c}"),
            r.eager_over_bound,
        ));
        figures.push((
            format!("makespan_eager_over_waves_c{c}"),
            r.eager_over_waves,
        ));
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_seeded_and_sized() {
        let a = WavesWorkload::generate(1000, 3000, 7);
        let b = WavesWorkload::generate(1000, 3000, 7);
        assert_eq!(a.deps, b.deps);
        assert_eq!(a.edge_count(), 3000);
        // Every dependency is an earlier row, so the input is acyclic.
        for (i, task) in a.tasks().iter().enumerate() {
            for d in &task.deps {
                let row: usize = d[1..].parse().unwrap();
                assert!(row < i.max(1), "row {i} depends on {d}");
            }
        }

        let mut rng = SplitMix64::new(1);
        let dags: Vec<JobDag> = (0..200).map(|_| random_job_dag(&mut rng)).collect();
        let jobs: usize = dags.iter().map(|d| d.specs.len()).sum();
        let edges: usize = dags
            .iter()
            .flat_map(|d| &d.specs)
            .map(|s| s.deps.len())
            .sum();
        assert!(dags.iter().all(|d| (30..=100).contains(&d.specs.len())));
        let mean_in = edges as f64 / jobs as f64;
        assert!((2.0..3.0).contains(&mean_in), "mean in-degree {mean_in}");
        // lognormal(0,1): median 1, mean e^0.5 ≈ 1.65.
        let mut secs: Vec<f64> = dags
            .iter()
            .flat_map(|d| &d.durations)
            .map(Duration::as_secs_f64)
            .collect();
        secs.sort_by(f64::total_cmp);
        let median = secs[secs.len() / 2];
        assert!((0.9..1.1).contains(&median), "median {median}");
    }

    #[test]
    fn eager_beats_waves_and_never_beats_the_bound_on_a_small_sample() {
        for c in [4, 8] {
            let r = makespan_ratios(40, 3, c);
            assert!(r.eager_over_bound >= 1.0 - 1e-9, "{r:?}");
            assert!(r.eager_over_waves <= 1.0 + 1e-9, "{r:?}");
            assert!(r.waves_over_bound >= r.eager_over_bound, "{r:?}");
        }
    }

    /// The full figures, in release: `PERF_FIGURES=1 cargo test --release -p
    /// orchestrator-benches --lib dag -- --nocapture`. Without the variable a
    /// small scale runs (same code, assertions on sanity only).
    #[test]
    fn perf_figures_report() {
        let full = std::env::var_os("PERF_FIGURES").is_some();
        let scale = if full {
            Scale::FULL
        } else {
            Scale {
                wave_tasks: 20_000,
                wave_edges: 60_000,
                overhead_jobs: 2_000,
                dags: 20,
            }
        };
        let figures = perf_figures_at(scale);
        for (name, value) in &figures {
            println!("{name} = {value:.4}");
        }
        let get = |name: &str| {
            figures
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .unwrap()
        };
        assert!(get("waves_1m_s") > 0.0);
        assert!(get("scheduler_overhead_us_per_job") > 0.0);
        assert!(get("makespan_eager_over_lower_bound") >= 1.0 - 1e-9);
        if full {
            assert!(get("waves_1m_s") <= 1.0);
            assert!(get("makespan_eager_over_lower_bound") <= 1.05);
            assert!(get("makespan_eager_over_waves") <= 0.75);
        }
    }
}
