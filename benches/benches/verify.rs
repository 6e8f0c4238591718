//! Verification bench: the cost of deciding a stage's fixes with each mode on
//! the simulated suite of `orchestrator_benches::verify` (CPU time of the
//! state machine; the test-run counts themselves are perf-report figures).

use criterion::{BenchmarkId, Criterion};
use orchestrator_benches::verify::{MODES, draw_breaks, runs_for};

fn verify(c: &mut Criterion) {
    let mut group = c.benchmark_group("verify");
    group.sample_size(10);
    for (n, p) in [(16, 0.1), (100, 0.05)] {
        let sequences: Vec<Vec<bool>> = (0..100).map(|t| draw_breaks(n, p, t)).collect();
        for mode in MODES {
            group.bench_with_input(
                BenchmarkId::new(mode.as_str(), format!("n{n}_p{p}_x100")),
                &sequences,
                |b, sequences| {
                    b.iter(|| {
                        sequences
                            .iter()
                            .map(|breaks| u64::from(runs_for(mode, breaks)))
                            .sum::<u64>()
                    });
                },
            );
        }
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    verify(&mut criterion);
    criterion.final_summary();
}
