//! planex with verification on, end to end: `planex run` over a seeded
//! 10-task sleep DAG (20–60 ms each) in a fresh git repository, verified
//! eager vs verified waves vs unverified eager (see
//! `orchestrator_benches::planex`; the makespan figures over bigger DAGs
//! are printed by `perf-report`). Each iteration is three whole sessions,
//! repositories and worktrees included.

use std::time::Duration;

use criterion::{Criterion, criterion_main};
use orchestrator_benches::planex::{Run, run_once, sleep_dag, tasks_csv};

fn planex(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let csv = tasks_csv(&sleep_dag(0x5eed, 10, (20, 60)));
    let mut group = c.benchmark_group("planex_10_tasks_c4");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for (name, run) in [
        ("verified_eager", Run::VerifiedEager),
        ("verified_waves", Run::VerifiedWaves),
        ("unverified_eager", Run::UnverifiedEager),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let Ok(dir) = tempfile::tempdir() else {
                        continue;
                    };
                    // Only the run counts, not the repository's setup.
                    match rt.block_on(run_once(dir.path(), &csv, run)) {
                        Ok(timed) => total += timed.wall,
                        Err(e) => panic!("{name}: {e}"),
                    }
                }
                total
            })
        });
    }
    group.finish();
}

#[allow(missing_docs)] // the macro generates an undocumented `pub fn`
mod registration {
    use super::planex;
    criterion::criterion_group!(benches, planex);
}
criterion_main!(registration::benches);
