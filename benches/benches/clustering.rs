//! Criterion benches of batching: the fast path at 10k and 100k findings and
//! the naive all-pairs reference at 10k, on the seeded workload of
//! `orchestrator_benches::clustering`.
//!
//! `cargo bench -p orchestrator-benches --bench clustering`

use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use orchestrator_benches::clustering::{
    SEED, blocked_naive_cluster_findings, generate_findings, naive_cluster_findings,
};
use orchestrator_core::batching::{
    BatchConfig, DEFAULT_SIMILARITY_THRESHOLD, batch_findings, cluster_findings,
};

fn clustering(c: &mut Criterion) {
    let mut group = c.benchmark_group("clustering");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    let config = BatchConfig::default();
    for n in [10_000usize, 100_000] {
        let findings = generate_findings(n, SEED);
        group.bench_with_input(BenchmarkId::new("batch_findings", n), &findings, |b, f| {
            b.iter(|| batch_findings(f, &config))
        });
        group.bench_with_input(
            BenchmarkId::new("cluster_findings", n),
            &findings,
            |b, f| b.iter(|| cluster_findings(f, DEFAULT_SIMILARITY_THRESHOLD)),
        );
    }
    let findings = generate_findings(10_000, SEED);
    group.bench_with_input(BenchmarkId::new("naive", 10_000), &findings, |b, f| {
        b.iter(|| naive_cluster_findings(f, DEFAULT_SIMILARITY_THRESHOLD))
    });
    group.bench_with_input(
        BenchmarkId::new("blocked_naive", 10_000),
        &findings,
        |b, f| b.iter(|| blocked_naive_cluster_findings(f, DEFAULT_SIMILARITY_THRESHOLD)),
    );
    group.finish();
}

// What `criterion_group!`/`criterion_main!` expand to, written out so that
// no undocumented public function is generated.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    clustering(&mut c);
    c.final_summary();
}
