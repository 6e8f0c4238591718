//! The Ray runner's cost against the local runner, on a real Ray 2.60 head
//! started on 127.0.0.1 (`test_support::ray`, which needs `ORCH_RAY_VENV`
//! from `scripts/install-test-deps.sh`), and what it gives a large
//! review-fix on a cluster.
//!
//! Measured, median of [`SAMPLES`] each, against the local runner in the
//! same run: a job's overhead, split into submit → command start (Ray's
//! queue and the job's start) and start → result, for `printf`; and the
//! upload cost per MB of a fresh package.
//!
//! Modelled (no cluster of 16 nodes here): the makespan of a review-fix of
//! [`MAKESPAN_FINDINGS`] findings whose fixes fail at rate
//! [`MAKESPAN_RATE`], with a test run of [`MAKESPAN_TEST_S`] seconds. On
//! `k` nodes the findings are verified as `k` disjoint shares at once (the
//! batch verification's mean runs for a share of `⌈N/k⌉`, from
//! [`crate::verify::mean_runs`]), each run paying the measured job
//! overhead, then one run of the combined tip; one machine verifies the
//! `N` as one queue paying the local overhead.

use std::path::Path;
use std::time::Instant;

use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::ray::{RayConfig, RayRunner};
use orchestrator_adapters::test_support::ray::RayHead;
use orchestrator_core::command::{CommandRunner, CommandSpec};

/// Samples per measured figure.
pub const SAMPLES: usize = 20;
/// Findings of the modelled review-fix.
pub const MAKESPAN_FINDINGS: usize = 200;
/// Failure rate of its fixes.
pub const MAKESPAN_RATE: f64 = 0.1;
/// Seconds one test run of its project takes (a mid-sized crate's
/// `cargo test` with a warm build).
pub const MAKESPAN_TEST_S: f64 = 30.0;
/// Node counts of the model.
pub const NODES: [usize; 3] = [1, 4, 16];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A git repository with one committed file: what a job uploads.
fn repo() -> Result<tempfile::TempDir, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b")
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            Ok(())
        } else {
            Err(format!("git {args:?} failed"))
        }
    };
    git(&["init", "-q"])?;
    std::fs::write(dir.path().join("tracked.txt"), "tracked\n").map_err(|e| e.to_string())?;
    git(&["add", "."])?;
    git(&["commit", "-qm", "init"])?;
    Ok(dir)
}

fn printf(cwd: &Path) -> CommandSpec {
    CommandSpec::shell("printf %s ok", cwd)
}

/// The measured medians, in seconds.
struct Measured {
    /// A Ray job, submit → result.
    total: f64,
    /// Submit → the command runs.
    start: f64,
    /// The command runs → its result is read.
    result: f64,
    /// The local runner, spawn → result.
    local: f64,
    /// Uploading a package, per MB.
    upload_per_mb: f64,
}

async fn measure(ray: &RayRunner, repo: &Path) -> Result<Measured, String> {
    let local = ProcessRunner::default();
    let (mut total, mut start, mut result, mut here) = (vec![], vec![], vec![], vec![]);
    for _ in 0..SAMPLES {
        let t = Instant::now();
        let r = ray.run(printf(repo)).await.map_err(|e| e.to_string())?;
        total.push(t.elapsed().as_secs_f64());
        let record = ray.records().pop().ok_or("the job left no record")?;
        start.push(record.queued_ms as f64 / 1000.0);
        result.push(record.total_ms.saturating_sub(record.queued_ms) as f64 / 1000.0);
        let t = Instant::now();
        let l = local.run(printf(repo)).await.map_err(|e| e.to_string())?;
        here.push(t.elapsed().as_secs_f64());
        if (r.exit_code, &r.stdout) != (l.exit_code, &l.stdout) {
            return Err(format!("the job gave {r:?}, the local run {l:?}"));
        }
    }
    // Upload: a fresh 2 MB of incompressible bytes each time.
    let mut per_mb = Vec::new();
    for i in 0..SAMPLES as u32 {
        let bytes: Vec<u8> = (0..2 * 1024 * 1024u32)
            .map(|n| (n.wrapping_mul(2_654_435_761).wrapping_add(i) >> 13) as u8)
            .collect();
        let name = orchestrator_adapters::ray::package::package_name(&bytes);
        let t = Instant::now();
        ray.client()
            .upload(&name, bytes)
            .await
            .map_err(|e| e.to_string())?;
        per_mb.push(t.elapsed().as_secs_f64() / 2.0);
    }
    Ok(Measured {
        total: median(total),
        start: median(start),
        result: median(result),
        local: median(here),
        upload_per_mb: median(per_mb),
    })
}

/// The modelled makespan in seconds of the review-fix on `nodes` nodes
/// whose jobs cost `overhead_s` each (see the module docs).
pub fn makespan_s(nodes: usize, overhead_s: f64, trials: u32) -> f64 {
    let share = MAKESPAN_FINDINGS.div_ceil(nodes.max(1));
    let runs = crate::verify::mean_runs(share, MAKESPAN_RATE, trials)[2];
    let merge = if nodes > 1 { 1.0 } else { 0.0 };
    (runs + merge) * (MAKESPAN_TEST_S + overhead_s)
}

/// The perf-report figures (collector `ray`, on request: it starts a Ray
/// head, about 20 s); none, with the reason on stderr, when it cannot.
pub fn perf_figures() -> Vec<(String, f64)> {
    match collect() {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("perf-report ray: {e}");
            Vec::new()
        }
    }
}

fn collect() -> Result<Vec<(String, f64)>, String> {
    let head = RayHead::shared();
    let ray = RayRunner::new(
        RayConfig::new(&head.url)
            .token(None)
            .cache_root(head.temp_dir.join("cache").display().to_string()),
    )
    .map_err(|e| e.to_string())?;
    let repo = repo()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let measured = rt.block_on(measure(&ray, repo.path()));
    head.stop();
    let m = measured?;
    let mut out = vec![
        ("ray_job_total_ms".to_owned(), m.total * 1000.0),
        ("ray_job_submit_to_start_ms".to_owned(), m.start * 1000.0),
        ("ray_job_start_to_result_ms".to_owned(), m.result * 1000.0),
        ("local_run_total_ms".to_owned(), m.local * 1000.0),
        ("ray_job_over_local".to_owned(), m.total / m.local),
        ("ray_upload_ms_per_mb".to_owned(), m.upload_per_mb * 1000.0),
    ];
    let local = makespan_s(1, m.local, 2_000);
    out.push((
        format!("review_fix_{MAKESPAN_FINDINGS}_makespan_local_s"),
        local,
    ));
    for nodes in NODES {
        let on = makespan_s(nodes, m.total, 2_000);
        out.push((
            format!("review_fix_{MAKESPAN_FINDINGS}_makespan_ray_{nodes}_nodes_s"),
            on,
        ));
        out.push((
            format!("review_fix_{MAKESPAN_FINDINGS}_makespan_ray_{nodes}_nodes_over_local"),
            on / local,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_nodes_never_take_longer_and_one_node_pays_only_the_overhead() {
        let one = makespan_s(1, 0.0, 200);
        let four = makespan_s(4, 0.0, 200);
        let sixteen = makespan_s(16, 0.0, 200);
        assert!(sixteen < four && four < one, "{one} {four} {sixteen}");
        // The overhead is paid once per run.
        let runs = one / MAKESPAN_TEST_S;
        let slower = makespan_s(1, 3.0, 200);
        assert!((slower - runs * (MAKESPAN_TEST_S + 3.0)).abs() < 1e-6);
    }
}
