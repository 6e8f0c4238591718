//! The Ray runner against a real Ray 2.60 head on 127.0.0.1 (one for the
//! whole binary, 2 CPUs, started by `test_support::ray`). The tests share
//! it one at a time, since one of them measures how many jobs run at once.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orchestrator_adapters::ray::{RayConfig, RayRunner};
use orchestrator_adapters::test_runner::{CommandTestRunner, RemoteTestRunner};
use orchestrator_adapters::test_support::ray::RayHead;
use orchestrator_core::command::{CommandError, CommandRunner, CommandSpec};
use orchestrator_core::test_runner::{TestOutcome, TestRequest, TestRunner};

#[path = "ray_jobs/entry_stop.rs"]
mod entry_stop;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn runner(head: &RayHead) -> RayRunner {
    RayRunner::new(
        RayConfig::new(&head.url)
            .token(None)
            .cache_root(head.temp_dir.join("cache").display().to_string()),
    )
    .unwrap()
}

/// A git repository with one committed file and one untracked file.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("tracked.txt"), "tracked\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "ignored.txt\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(dir.path().join("untracked.txt"), "untracked\n").unwrap();
    std::fs::write(dir.path().join("ignored.txt"), "ignored\n").unwrap();
    dir
}

fn sh(script: &str, cwd: &Path) -> CommandSpec {
    CommandSpec::shell(script, cwd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_passing_commands_map_like_the_local_runner() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let ray = runner(head);
    let repo = repo();

    let out = ray
        .run(sh("printf out; printf 'e\\377rr' >&2; exit 3", repo.path()))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stdout, "out");
    assert_eq!(out.stderr, "e\u{fffd}rr", "bytes that are not UTF-8 arrive");
    assert!(!out.timed_out);

    let files = ray
        .run(sh("cat tracked.txt untracked.txt; ls", repo.path()))
        .await
        .unwrap();
    assert_eq!(files.exit_code, Some(0));
    assert_eq!(
        files.stdout, "tracked\nuntracked\ntracked.txt\nuntracked.txt\n",
        "the package holds what git would commit, and no ignored file"
    );

    let out = ray
        .run(CommandSpec::new("cat", Vec::<String>::new(), repo.path()).with_stdin("piped\n"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "piped\n");

    match ray
        .run(CommandSpec::new(
            "orchestrator-no-such-program",
            Vec::<String>::new(),
            repo.path(),
        ))
        .await
    {
        Err(CommandError::Spawn { .. }) => {}
        other => panic!("a missing program is Err(Spawn), got {other:?}"),
    }

    // The same through the TestRunner, as the flows use it.
    let ray: Arc<dyn CommandRunner> = Arc::new(ray);
    let failing = RemoteTestRunner::new(
        CommandTestRunner::shell(
            "echo 'test result: FAILED. 1 passed; 2 failed; 0 ignored'; exit 101",
        ),
        Arc::clone(&ray),
    );
    let report = failing.run(TestRequest::all(repo.path())).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::Failed);
    assert_eq!(
        (report.exit_code, report.passed, report.failed),
        (Some(101), 1, 2)
    );
    let passing = RemoteTestRunner::new(CommandTestRunner::argv(["true"]), ray);
    let report = passing.run(TestRequest::all(repo.path())).await.unwrap();
    assert_eq!(
        (report.outcome, report.exit_code),
        (TestOutcome::Passed, Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_limit_stops_the_job() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let ray = runner(head);
    let repo = repo();
    let started = Instant::now();
    let out = ray
        .run(
            sh("echo before; sleep 987001; echo after", repo.path())
                .with_time_limit(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(
        out.stdout, "before\n",
        "what it wrote before the stop is kept"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        gone_soon(head, "sleep 987001"),
        "the command's processes are gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_every_job_of_the_run() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let ray = runner(head);
    let repo = repo();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (ray, dir) = (ray.clone(), repo.path().to_path_buf());
            tokio::spawn(async move { ray.run(sh("sleep 987002", &dir)).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    // The commands themselves, not only the shells about to start them.
    while head.commands_running(&["sleep", "987002"]).len() < 2 {
        assert!(Instant::now() < deadline, "both jobs never ran");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ids = ray.in_flight();
    assert_eq!(ids.len(), 2);
    for t in &tasks {
        t.abort();
    }
    for id in &ids {
        loop {
            let info = ray.client().job(id).await.unwrap();
            if info.is_terminal() {
                assert_eq!(info.status, "STOPPED", "job {id}");
                break;
            }
            assert!(Instant::now() < deadline, "job {id} still {}", info.status);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert!(gone_soon(head, "sleep 987002"), "the commands are gone");
}

/// Whether no process of the head mentions `needle` within five seconds: a
/// killed process leaves `/proc` a moment after its group leader is reaped.
fn gone_soon(head: &RayHead, needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !head.processes_running(needle).is_empty() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_tree_is_uploaded_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let ray = runner(head);
    let repo = repo();
    // A tree no other test of this head has sent: the head already holds
    // the packages of the others' identical trees.
    let nonce = format!("{:?}", Instant::now());
    std::fs::write(repo.path().join("nonce.txt"), nonce).unwrap();
    for _ in 0..2 {
        let out = ray.run(sh("cat tracked.txt", repo.path())).await.unwrap();
        assert_eq!(out.stdout, "tracked\n");
    }
    assert_eq!(ray.uploads(), 1);
    std::fs::write(repo.path().join("tracked.txt"), "changed\n").unwrap();
    let out = ray.run(sh("cat tracked.txt", repo.path())).await.unwrap();
    assert_eq!(out.stdout, "changed\n");
    assert_eq!(ray.uploads(), 2);
    // A job's writes are its own: the next job of the same tree does not see them.
    let out = ray
        .run(sh("ls; echo x > written.txt", repo.path()))
        .await
        .unwrap();
    assert!(!out.stdout.contains("written.txt"));
    let out = ray.run(sh("ls", repo.path())).await.unwrap();
    assert!(!out.stdout.contains("written.txt"), "{}", out.stdout);
    assert_eq!(ray.uploads(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_one_cpu_jobs_on_two_cpus_run_two_at_a_time() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    assert_eq!(head.cpus, 2);
    let ray = runner(head);
    assert_eq!(
        ray.width().await.unwrap(),
        2,
        "the cluster's width is read from it"
    );
    let repo = repo();
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let (ray, dir) = (ray.clone(), repo.path().to_path_buf());
            tokio::spawn(async move {
                ray.run(sh("date +%s.%N; sleep 3; date +%s.%N", &dir))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut spans = Vec::new();
    for t in tasks {
        let out = t.await.unwrap();
        let times: Vec<f64> = out.stdout.lines().map(|l| l.parse().unwrap()).collect();
        spans.push((times[0], times[1]));
    }
    let peak = spans
        .iter()
        .map(|(s, _)| spans.iter().filter(|(a, b)| a <= s && s < b).count())
        .max()
        .unwrap();
    assert_eq!(peak, 2, "spans {spans:?}");
    let queued = ray.records().iter().filter(|r| r.queued_ms >= 2500).count();
    assert!(queued >= 1, "one job waited for a CPU: {:?}", ray.records());
    assert!(ray.records().iter().all(|r| r.node.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_local_cache_reaches_the_job_and_persists() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let ray = runner(head);
    let repo = repo();
    let cache_root = head.temp_dir.join("cache").display().to_string();
    let out = ray
        .run(sh(
            "printf %s \"$CARGO_TARGET_DIR\"; mkdir -p \"$CARGO_TARGET_DIR\"; touch \"$CARGO_TARGET_DIR/built\"",
            repo.path(),
        ))
        .await
        .unwrap();
    assert!(out.stdout.starts_with(&cache_root), "{}", out.stdout);
    assert!(out.stdout.ends_with("/cargo-target"), "{}", out.stdout);
    let again = ray
        .run(sh("ls \"$CARGO_TARGET_DIR\"", repo.path()))
        .await
        .unwrap();
    assert_eq!(again.stdout, "built\n", "the cache outlives the job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_lines_run_on_the_node_and_changes_come_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let head = RayHead::shared();
    let repo = repo();
    let ray = RayRunner::new(
        RayConfig::new(&head.url)
            .token(None)
            .cache_root(head.temp_dir.join("cache").display().to_string())
            .setup(vec!["echo made-on-the-node > ignored.txt".to_owned()]),
    )
    .unwrap()
    .with_changes_back();

    // The setup made the (ignored) file the command reads; the command's
    // own edit came back, the setup's file did not.
    let out = ray
        .run(sh(
            "cat ignored.txt && echo changed >> tracked.txt",
            repo.path(),
        ))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "made-on-the-node\n");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("tracked.txt")).unwrap(),
        "tracked\nchanged\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("ignored.txt")).unwrap(),
        "ignored\n",
        "the local ignored file is untouched"
    );

    // A failing setup line is the cluster's error, naming the line.
    let failing = RayRunner::new(
        RayConfig::new(&head.url)
            .token(None)
            .setup(vec!["echo no venv here >&2; exit 7".to_owned()]),
    )
    .unwrap();
    let err = failing
        .run(sh("true", repo.path()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the [worktree] setup line `echo no venv here >&2; exit 7` failed on the node with status 7: no venv here"),
        "{err}"
    );
}
