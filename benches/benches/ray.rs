//! The Ray runner's cost against the local runner, on a real Ray 2.60 head
//! started on 127.0.0.1 (`test_support::ray`, which needs `ORCH_RAY_VENV`
//! from `scripts/install-test-deps.sh`): per-job overhead (submit → result
//! of `printf`) and upload cost per MB, median of 20 each, printed as
//! ratios of the same run. Run with `cargo bench -p orchestrator-benches
//! --bench ray`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::ray::{RayConfig, RayRunner};
use orchestrator_adapters::test_support::ray::RayHead;
use orchestrator_core::command::{CommandRunner, CommandSpec};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A git repository with one committed file: what a job uploads.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("tracked.txt"), "tracked\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    dir
}

fn printf(cwd: &Path) -> CommandSpec {
    CommandSpec::shell("printf %s ok", cwd)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let head = RayHead::shared();
    let ray = RayRunner::new(
        RayConfig::new(&head.url)
            .token(None)
            .cache_root(head.temp_dir.join("cache").display().to_string()),
    )
    .unwrap();
    let local = ProcessRunner::default();
    let repo = repo();
    rt.block_on(async {
        let (mut remote_s, mut local_s) = (Vec::new(), Vec::new());
        for _ in 0..20 {
            let t = Instant::now();
            let r = ray.run(printf(repo.path())).await.unwrap();
            remote_s.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let l = local.run(printf(repo.path())).await.unwrap();
            local_s.push(t.elapsed().as_secs_f64());
            assert_eq!((r.exit_code, r.stdout), (l.exit_code, l.stdout));
        }
        // Upload: a fresh 2 MB of incompressible bytes each time.
        let mut per_mb = Vec::new();
        for i in 0..20u32 {
            let bytes: Vec<u8> = (0..2 * 1024 * 1024u32)
                .map(|n| (n.wrapping_mul(2_654_435_761).wrapping_add(i) >> 13) as u8)
                .collect();
            let name = orchestrator_adapters::ray::package::package_name(&bytes);
            let t = Instant::now();
            ray.client().upload(&name, bytes).await.unwrap();
            per_mb.push(t.elapsed().as_secs_f64() / 2.0);
        }
        let (r, l, u) = (median(remote_s), median(local_s), median(per_mb));
        println!(
            "ray: per-job overhead, median of 20: ray {:.0} ms, local {:.1} ms ({:.0}x); upload {:.1} ms/MB",
            r * 1000.0,
            l * 1000.0,
            r / l,
            u * 1000.0
        );
    });
}
