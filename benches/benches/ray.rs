//! The Ray runner's cost against the local runner, on a real Ray 2.60 head
//! started on 127.0.0.1: the figures of `orchestrator_benches::ray` (also
//! `perf-report ray`). Needs `ORCH_RAY_VENV` from
//! `scripts/install-test-deps.sh`. Run with `cargo bench -p
//! orchestrator-benches --bench ray`.

fn main() {
    for (key, value) in orchestrator_benches::ray::perf_figures() {
        println!("ray: {key} = {value:.1}");
    }
}
