//! `orchestrator ci-autofix --mr N` on GitLab, as a user runs it: the real
//! binary and real git against the scripted GitLab of
//! `orchestrator_adapters::test_support::gitlab` on 127.0.0.1 (REST API v4
//! in the shapes GitLab's docs publish, and a git remote served by the real
//! `git http-backend`). The instance and project come from the clone's
//! `origin` URL (`http://127.0.0.1:<port>/group/sub/tiny.git`: a
//! self-hosted instance on a port, a subgroup), the token from
//! `GITLAB_TOKEN`.
//!
//! The repository is a tiny Rust crate; the builtin agent fixes its format
//! with the real `cargo fmt`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::PathBuf;
use std::process::Output;

use forge_support::{commit_feature, git, init_clone, orchestrator, runtime, show, text};
use orchestrator_adapters::test_support::gitlab::{GitlabServer, Outcome, Pushed, Scenario, TOKEN};

const CARGO_TOML: &str =
    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";
const FORMATTED: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
const UNFORMATTED: &str = "pub fn add(a:i32,b:i32)->i32{a+b}\n";
const PROJECT: &str = "group/sub/tiny";

/// A GitLab runner's trace of `cargo fmt --check` on the unformatted crate
/// (section markers and colours as GitLab's job-log docs show them).
const FMT_TRACE: &str = "\u{1b}[0KRunning with gitlab-runner 17.5.0 (abcdef12)\u{1b}[0;m\n\
\u{1b}[0Ksection_start:1736503200:prepare_executor\r\u{1b}[0K\u{1b}[0K\u{1b}[36;1mPreparing the \"docker\" executor\u{1b}[0;m\u{1b}[0;m\n\
\u{1b}[0Ksection_end:1736503205:prepare_executor\r\u{1b}[0K\n\
\u{1b}[0Ksection_start:1736503206:step_script\r\u{1b}[0K\u{1b}[0K\u{1b}[36;1mExecuting \"step_script\" stage of the job script\u{1b}[0;m\u{1b}[0;m\n\
\u{1b}[32;1m$ cargo fmt --all -- --check\u{1b}[0;m\n\
Diff in /builds/group/sub/tiny/src/lib.rs:1:\n\
\u{1b}[31m-pub fn add(a:i32,b:i32)->i32{a+b}\n\
\u{1b}[32m+pub fn add(a: i32, b: i32) -> i32 {\n\
+    a + b\n\
+}\n\
\u{1b}[0Ksection_end:1736503260:step_script\r\u{1b}[0K\n\
\u{1b}[31;1mERROR: Job failed: exit code 1\n\
\u{1b}[0;m\n";

/// One test's world: project 10 `group/sub/tiny` on the scripted GitLab,
/// with MR !7 from `feature` (the crate's `src/lib.rs` unformatted) into
/// `main`, whose pipeline's `rustfmt` job failed; a clone on `feature`.
struct World {
    tmp: tempfile::TempDir,
    clone: PathBuf,
    head: String,
    server: GitlabServer,
    rt: tokio::runtime::Runtime,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(tmp.path().join("gitlab"));
        scenario.project(10, PROJECT, "main");
        scenario.project(11, "forker/tiny", "main");
        let rt = runtime();
        let server = rt.block_on(GitlabServer::start(scenario));
        let url = server.remote_url(PROJECT);
        let clone = tmp.path().join("clone");
        init_clone(
            &clone,
            &[
                ("Cargo.toml", CARGO_TOML),
                (".gitignore", "/target\nCargo.lock\n"),
                ("src/lib.rs", FORMATTED),
            ],
        );
        git(&clone, &["remote", "add", "origin", &url]);
        git(&clone, &["push", "-q", "origin", "main"]);
        commit_feature(
            &clone,
            &[("src/lib.rs", UNFORMATTED)],
            "add without formatting",
        );
        git(&clone, &["push", "-q", "-u", "origin", "feature"]);
        let head = git(&clone, &["rev-parse", "HEAD"]);
        server.with(|s| {
            s.merge_request(7, 10, 10, "feature");
            let p = s.mr_pipeline(7);
            s.job(p, "rustfmt", Outcome::failed(FMT_TRACE));
            s.job(p, "build", Outcome::success("Finished\n"));
        });
        Self {
            tmp,
            clone,
            head,
            server,
            rt,
        }
    }

    /// Every push to an MR's branch gets a pipeline whose jobs pass.
    fn green_after_push(&self) {
        self.server.with(|s| {
            s.on_push = Some(Box::new(|s: &mut Scenario, p: &Pushed| {
                for &iid in &p.merge_requests {
                    let id = s.mr_pipeline(iid);
                    s.job(id, "rustfmt", Outcome::success("ok\n"));
                    s.job(id, "build", Outcome::success("ok\n"));
                }
            }));
        });
    }

    /// `orchestrator args…` in the clone with `GITLAB_TOKEN` set.
    fn run(&self, args: &[&str]) -> Output {
        let _guard = self.rt.enter();
        orchestrator(&self.clone, self.tmp.path())
            .args(args)
            .env("CARGO_TARGET_DIR", self.tmp.path().join("target"))
            .env("CARGO_TERM_COLOR", "never")
            .env("GITLAB_TOKEN", TOKEN)
            .env_remove("CI_JOB_TOKEN")
            .output()
            .unwrap()
    }

    fn subjects(&self) -> Vec<String> {
        git(&self.clone, &["log", "--format=%s"])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

const FAST: [&str; 4] = ["--poll-interval", "0.1", "--timeout", "60"];

fn mr_args(n: &str) -> Vec<&str> {
    let mut args = vec!["ci-autofix", "--mr", n, "-y"];
    args.extend_from_slice(&FAST);
    args
}

/// The MR's failed job's trace is classified (a format failure), fixed by
/// the builtin agent, pushed to the MR's source branch as one fast-forward,
/// and the new pipeline of that commit is awaited: green.
#[test]
fn a_merge_requests_failed_format_job_ends_green_after_one_pushed_commit() {
    let w = World::new();
    w.green_after_push();
    let o = w.run(&mr_args("7"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        text(&o.stdout).contains("green") && text(&o.stdout).contains("1 fix commit"),
        "{}",
        show(&o)
    );
    assert_eq!(
        w.subjects(),
        [
            "fix(ci): auto-fix mechanical failure (iter 1)",
            "add without formatting",
            "init"
        ]
    );
    let local = git(&w.clone, &["rev-parse", "HEAD"]);
    let pushes = w.server.with(|s| s.pushes.clone());
    let fix_pushes: Vec<_> = pushes.iter().filter(|p| p.sha == local).collect();
    assert_eq!(fix_pushes.len(), 1, "{pushes:#?}");
    assert_eq!(
        (fix_pushes[0].branch.as_str(), fix_pushes[0].forced),
        ("feature", false),
        "a fast-forward of the MR's source branch"
    );
    assert_eq!(w.server.with(|s| s.branch_head(10, "feature")), Some(local));
    assert_eq!(
        std::fs::read_to_string(w.clone.join("src/lib.rs")).unwrap(),
        FORMATTED
    );
    let calls = w.server.api_calls();
    let job = w
        .server
        .with(|s| s.jobs.iter().find(|j| j.name == "rustfmt").map(|j| j.id))
        .unwrap();
    for wanted in [
        "GET /projects/group%2Fsub%2Ftiny/merge_requests/7".to_owned(),
        format!("GET /projects/10/jobs/{job}/trace"),
        "GET /projects/group%2Fsub%2Ftiny/merge_requests/7/raw_diffs".to_owned(),
    ] {
        assert!(calls.contains(&wanted), "{wanted}: {calls:#?}");
    }
    assert!(
        w.server
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/api/v4/"))
            .all(|r| r.auth == "PRIVATE-TOKEN"),
        "GITLAB_TOKEN goes in PRIVATE-TOKEN"
    );
    // The audit log names the merge request as GitLab does.
    let reports = w.clone.join(".moai/reports/ci-autofix");
    let logs: Vec<_> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let name = logs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("MR-7-"), "{name}");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(log.starts_with("# CI Auto-Fix Log — MR !7 — "), "{log}");
}

/// A fork MR whose author does not allow commits from members: refused
/// before any agent call, naming why; nothing committed or pushed, no log
/// even fetched.
#[test]
fn a_fork_merge_request_without_push_rights_is_refused_before_any_agent_call() {
    let w = World::new();
    let fork = w.server.remote_url("forker/tiny");
    git(&w.clone, &["push", "-q", &fork, "feature:patch-1"]);
    w.server.with(|s| {
        s.merge_request(8, 10, 11, "patch-1");
        if let Some(m) = s.mr_mut(8) {
            m.allow_collaboration = false;
        }
        let p = s.mr_pipeline(8);
        s.job(p, "rustfmt", Outcome::failed(FMT_TRACE));
    });
    let pushes_before = w.server.with(|s| s.pushes.len());
    let o = w.run(&mr_args("8"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(
            "MR !8 comes from the fork forker/tiny, which does not allow edits from maintainers"
        ),
        "{}",
        show(&o)
    );
    assert_eq!(w.subjects().len(), 2, "nothing committed");
    assert_eq!(
        std::fs::read_to_string(w.clone.join("src/lib.rs")).unwrap(),
        UNFORMATTED,
        "no agent ran"
    );
    assert!(
        !w.server.api_calls().iter().any(|c| c.contains("/trace")),
        "no log was even fetched"
    );
    assert_eq!(w.server.with(|s| s.pushes.len()), pushes_before);
    assert_eq!(
        w.server.with(|s| s.branch_head(11, "patch-1")),
        Some(w.head.clone())
    );
}

/// Without a token the run stops before anything, saying what to set.
#[test]
fn a_missing_token_is_bad_input_naming_gitlab_token() {
    let w = World::new();
    let o = orchestrator(&w.clone, w.tmp.path())
        .args(mr_args("7"))
        .env_remove("GITLAB_TOKEN")
        .env_remove("CI_JOB_TOKEN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("no GitLab token: set GITLAB_TOKEN")
            && err.contains(&format!("{}/api/v4", w.server.url())),
        "{err}"
    );
    assert!(w.server.api_calls().is_empty());
}
