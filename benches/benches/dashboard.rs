//! The dashboard lists a repository whose review-fix session has 10,000
//! findings (`orchestrator_benches::dashboard`): reading every progress
//! file and digesting the session's whole `events.ndjson`, from cold (a
//! server that has read nothing yet) — what the first page load costs.

use criterion::Criterion;
use orchestrator_tool::commands::serve::sessions::{Digests, list};

fn dashboard(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
    orchestrator_benches::dashboard::review_fix_session(tmp.path(), 10_000)
        .unwrap_or_else(|e| panic!("writing the session: {e}"));
    let repos = vec![tmp.path().to_path_buf()];
    let mut group = c.benchmark_group("dashboard");
    group.sample_size(10);
    group.bench_function("list_review_fix_10000_findings_cold", |b| {
        b.iter(|| {
            let sessions = list(&repos, &Digests::default());
            assert_eq!(sessions[0].counts.done + sessions[0].counts.failed, 10_000);
            sessions.len()
        });
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    dashboard(&mut criterion);
    criterion.final_summary();
}
