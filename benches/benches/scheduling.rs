//! Criterion benches for wave layering and the scheduler driver.
//!
//! - `waves/100k` and `waves/1m`: `compute_waves` on 100k tasks / 300k edges
//!   and 1M tasks / 3M edges (inputs built once, outside the timing).
//! - `scheduler/noop_10k_c64`: 10k no-op jobs through `Scheduler::new` and the
//!   tokio driver at concurrency 64 (multi-thread runtime).
//! - `scheduler/simulate_eager_c4`: one 30–100-job random DAG simulated on
//!   the virtual clock in eager mode.
//!
//! Sample sizes are small: these are regression guards, the figures that
//! matter are printed by `perf-report` (see `orchestrator_benches::dag`).

use std::time::Duration;

use criterion::{Criterion, criterion_main};
use orchestrator_benches::dag::{
    SplitMix64, WavesWorkload, noop_jobs, random_job_dag, run_noop_jobs, simulated_makespan,
};
use orchestrator_core::scheduler::Mode;
use orchestrator_core::waves::{WaveOptions, compute_waves};

fn waves(c: &mut Criterion) {
    let mut group = c.benchmark_group("waves");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for (name, n) in [("100k", 100_000usize), ("1m", 1_000_000)] {
        let workload = WavesWorkload::generate(n, 3 * n, 0x5eed);
        let tasks = workload.tasks();
        group.bench_function(name, |b| {
            b.iter(|| compute_waves(&tasks, WaveOptions::default()).map(|w| w.max_wave()))
        });
    }
    group.finish();
}

fn scheduler(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler");
    group.sample_size(10);
    if let Ok(rt) = tokio::runtime::Builder::new_multi_thread().build() {
        group.bench_function("noop_10k_c64", |b| {
            b.iter_batched(
                || noop_jobs(10_000),
                |specs| rt.block_on(run_noop_jobs(specs, 64)),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    let dag = random_job_dag(&mut SplitMix64::new(42));
    group.bench_function("simulate_eager_c4", |b| {
        b.iter(|| simulated_makespan(&dag, Mode::Eager, 4))
    });
    group.finish();
}

#[allow(missing_docs)] // the macro generates an undocumented `pub fn`
mod registration {
    use super::{scheduler, waves};
    criterion::criterion_group!(benches, waves, scheduler);
}
criterion_main!(registration::benches);
