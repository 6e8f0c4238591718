//! `orchestrator ci-autofix` on GitHub, as a user runs it: the real binary,
//! the real `gh` — both versions the project tests, Debian's 2.23 and the
//! pinned 2.102 — and real git, against the scripted GitHub API of
//! `orchestrator_adapters::test_support::github` on 127.0.0.1 (REST,
//! GraphQL, run logs, re-runs and the git remote). Only GitHub's answers
//! are scripted; every test asserts what gh sent.
//!
//! The repository is a tiny Rust crate; the builtin agent fixes its format
//! with the real `cargo fmt`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use forge_support::{commit_feature, git, init_clone, orchestrator, path_with_gh, show, text};
use orchestrator_adapters::test_support::github::{
    CheckStatus, Conclusion, GhBinary, GithubServer, Pushed, Rerun, Scenario, StatusState,
    gh_binaries,
};

const CARGO_TOML: &str =
    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";
const FORMATTED: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
const UNFORMATTED: &str = "pub fn add(a:i32,b:i32)->i32{a+b}\n";

fn corpus(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../ci-autofix/tests/data/corpus")
            .join(name),
    )
    .unwrap()
}

/// A step's own log from a corpus file of `gh run view --log-failed`
/// output (`job<TAB>step<TAB><timestamp> <line>`): the server prints it
/// back the same way.
fn step_log(name: &str) -> String {
    corpus(name)
        .lines()
        .map(|l| {
            let line = l.splitn(3, '\t').nth(2).unwrap_or(l);
            line.split_once(' ')
                .map_or(line, |(_, rest)| rest)
                .to_owned()
                + "\n"
        })
        .collect()
}

/// A job killed for memory: what GitHub's runner prints after `cargo test`
/// was SIGKILLed (the kernel's OOM killer), exit code 137.
const OOM_LOG: &str = "Run cargo test --workspace\n   Compiling tiny v0.1.0 (/home/runner/work/tiny/tiny)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.10s\n     Running unittests src/lib.rs (target/debug/deps/tiny-3f1a2b)\n\nrunning 2 tests\nerror: test failed, to rerun pass `--lib`\n\nCaused by:\n  process didn't exit successfully: `/home/runner/work/tiny/tiny/target/debug/deps/tiny-3f1a2b` (signal: 9, SIGKILL: kill)\n##[error]Process completed with exit code 137.\n";

/// One test's world: `octo/tiny` on the scripted GitHub with PR 7 from
/// `feature` (the crate's `src/lib.rs` unformatted) into `main`, a clone
/// on `feature`, and the gh binary under test first on `PATH`.
struct World {
    tmp: tempfile::TempDir,
    clone: PathBuf,
    /// PR 7's head commit.
    head: String,
    bin: GhBinary,
    server: Option<GithubServer>,
    scenario: Option<Scenario>,
    rt: tokio::runtime::Runtime,
}

impl World {
    fn new(bin: &GhBinary) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(tmp.path().join("github"));
        let url = scenario.repo("octo/tiny", "main");
        let bare = scenario.repos["octo/tiny"].bare.clone();
        let clone = tmp.path().join("clone");
        init_clone(
            &clone,
            &[
                ("Cargo.toml", CARGO_TOML),
                (".gitignore", "/target\nCargo.lock\n"),
                ("src/lib.rs", FORMATTED),
            ],
        );
        git(&clone, &["push", "-q", bare.to_str().unwrap(), "main"]);
        commit_feature(
            &clone,
            &[("src/lib.rs", UNFORMATTED)],
            "add without formatting",
        );
        git(&clone, &["push", "-q", bare.to_str().unwrap(), "feature"]);
        git(&clone, &["remote", "add", "origin", &url]);
        git(
            &clone,
            &[
                "fetch",
                "-q",
                bare.to_str().unwrap(),
                "+refs/heads/*:refs/remotes/origin/*",
            ],
        );
        git(
            &clone,
            &["branch", "-q", "--set-upstream-to=origin/feature"],
        );
        let head = git(&clone, &["rev-parse", "HEAD"]);
        scenario.pull(7, "octo/tiny", "main", "octo/tiny", "feature");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self {
            tmp,
            clone,
            head,
            bin: bin.clone(),
            server: None,
            scenario: Some(scenario),
            rt,
        }
    }

    /// The scenario, before the server starts.
    fn scenario(&mut self) -> &mut Scenario {
        self.scenario.as_mut().expect("the server has started")
    }

    /// Every push to PR 7's branch gets a passing `rustfmt` check.
    fn green_after_push(&mut self) {
        self.scenario().on_push = Some(Box::new(|s: &mut Scenario, p: &Pushed| {
            s.check(
                &p.sha,
                "rustfmt",
                CheckStatus::Completed(Conclusion::Success),
                "ok\n",
            );
        }));
    }

    fn server(&mut self) -> &GithubServer {
        if self.server.is_none() {
            let scenario = self.scenario.take().unwrap();
            self.server = Some(self.rt.block_on(GithubServer::start(scenario)));
        }
        self.server.as_ref().unwrap()
    }

    /// `orchestrator args…` in the clone, gh and git pointed at the server.
    fn run(&mut self, args: &[&str]) -> Output {
        let home = self.tmp.path().join("home");
        let path = path_with_gh(&self.bin, &self.tmp.path().join("bin"));
        let env = self.server().gh_env(&home);
        let mut cmd = orchestrator(&self.clone, self.tmp.path());
        cmd.args(args)
            .env("CARGO_TARGET_DIR", self.tmp.path().join("target"))
            .env("CARGO_TERM_COLOR", "never")
            .env("PATH", path)
            .env_remove("GITHUB_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// gh's API calls so far (`graphql <Operation>`, `GET /repos/…`).
    fn calls(&mut self) -> Vec<String> {
        self.server().api_calls()
    }

    /// The branch `branch` of `repo` on the scripted GitHub.
    fn remote_branch(&mut self, repo: &str, branch: &str) -> Option<String> {
        self.server().with(|s| s.branch_head(repo, branch))
    }

    fn subjects(&self) -> Vec<String> {
        git(&self.clone, &["log", "--format=%s"])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Runs `test` once per real gh version, naming the version on failure.
fn each_gh(test: impl Fn(&GhBinary)) {
    for bin in gh_binaries() {
        let started = Instant::now();
        test(&bin);
        eprintln!(
            "gh {}: {:.1} s",
            bin.version,
            started.elapsed().as_secs_f64()
        );
    }
}

const FAST: [&str; 4] = ["--poll-interval", "0.1", "--timeout", "60"];

fn fix_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["ci-autofix", "--pr", "7", "-y"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    args
}

fn watch_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["ci-autofix", "watch", "--pr", "7"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    args
}

// ------------------------------------------------------------ the loop

/// The loop reads the PR, fetches the failed job's log with `--job`, fixes
/// the format on the PR's branch (checked out, at the PR head), pushes a
/// fast-forward of the PR's branch, and waits for that commit's checks.
#[test]
fn the_pr_loop_fixes_pushes_and_watches_the_pushed_head() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        let head = w.head.clone();
        let job = w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        w.green_after_push();
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(
            text(&o.stdout).starts_with("ci-autofix: green on PR #7 — 1 fix commit ("),
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
        assert_eq!(
            w.remote_branch("octo/tiny", "feature"),
            Some(local),
            "pushed to the PR's branch"
        );
        let calls = w.calls();
        assert!(
            calls.contains(&format!("GET /repos/octo/tiny/actions/jobs/{job}")),
            "--job: {calls:?}"
        );
        assert!(
            calls.iter().any(|c| c == "GET /repos/octo/tiny/pulls/7"),
            "the PR diff: {calls:?}"
        );
        assert!(
            w.server().requests().iter().all(|r| r.missing.is_empty()),
            "gh asked for fields the scenario lacks"
        );
        assert_eq!(
            std::fs::read_to_string(w.clone.join("src/lib.rs")).unwrap(),
            FORMATTED
        );
    });
}

// ---------------------------------------------- item 3: each defect

/// A branch without protection: `gh pr checks --required` says "no
/// required checks reported" (exit 1). Every reported check counts, and
/// the run says so once. (Before: read as pending; `watch` ended "still
/// pending" at the time limit, exit 3.)
#[test]
fn without_required_checks_every_reported_check_counts() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "build",
            CheckStatus::Completed(Conclusion::Success),
            "ok\n",
        );
        w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Success),
            "ok\n",
        );
        let started = Instant::now();
        let o = w.run(&watch_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no wait for the time limit"
        );
        let stderr = text(&o.stderr);
        assert_eq!(
            stderr
                .matches("requires no checks: every check reported on PR #7 counts")
                .count(),
            1,
            "{stderr}"
        );
        // One failed check: it counts (exit 1, the handoff names it).
        let mut w = World::new(bin);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "build",
            CheckStatus::Completed(Conclusion::Success),
            "ok\n",
        );
        w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-test-failures.log"),
        );
        let o = w.run(&watch_args(&[]));
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        let handoff: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(handoff["failedChecks"][0]["name"], "test", "{handoff}");
        assert_eq!(handoff["totalRequired"], 2, "every check counts: {handoff}");
        assert_eq!(handoff["branch"], "feature");
    });
}

/// A head with no check at all ends after the grace period with "no
/// checks on <sha>", for `watch` and the loop. (Before: pending until the
/// time limit, "still pending".)
#[test]
fn no_checks_at_all_is_said_after_the_grace_period_not_at_the_time_limit() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        let short = w.head[..12].to_owned();
        for args in [
            watch_args(&["--checks-grace", "0.5"]),
            fix_args(&["--checks-grace", "0.5"]),
        ] {
            let started = Instant::now();
            let o = w.run(&args);
            assert_eq!(o.status.code(), Some(3), "{}", show(&o));
            assert!(
                show(&o).contains(&format!("no checks on {short}")),
                "{}",
                show(&o)
            );
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "ended at the grace period"
            );
        }
        assert_eq!(w.subjects().len(), 2, "nothing committed");
    });
}

/// Checked out on `main`, `--pr 7` fixes PR 7's head in a worktree and
/// pushes it to the PR's branch; `main` (local and remote) is untouched.
/// (Before: it fixed and pushed `main`.)
#[test]
fn a_pr_is_fixed_on_its_head_whatever_is_checked_out() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        w.green_after_push();
        git(&w.clone, &["checkout", "-q", "main"]);
        let main_before = git(&w.clone, &["rev-parse", "HEAD"]);
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert_eq!(
            git(&w.clone, &["rev-parse", "HEAD"]),
            main_before,
            "local main untouched"
        );
        assert_eq!(git(&w.clone, &["status", "--porcelain"]), "");
        assert_eq!(w.remote_branch("octo/tiny", "main"), Some(main_before));
        let pushed = w.remote_branch("octo/tiny", "feature").unwrap();
        assert_ne!(pushed, head);
        assert_eq!(
            git(
                &w.tmp.path().join("github/octo/tiny.git"),
                &["rev-parse", &format!("{pushed}^")]
            ),
            head,
            "a fast-forward of the PR head"
        );
        let shown = git(
            &w.tmp.path().join("github/octo/tiny.git"),
            &["show", &format!("{pushed}:src/lib.rs")],
        );
        assert_eq!(shown + "\n", FORMATTED);
        assert!(
            git(&w.clone, &["worktree", "list"]).lines().count() == 1,
            "the worktree is gone"
        );
    });
}

/// A fork that allows maintainer edits, checked out with the real `gh pr
/// checkout`: the fix is pushed to the fork's branch, and origin gets no
/// new branch. (Before: pushed a new branch to origin; the PR never moved.)
#[test]
fn a_fork_pr_is_pushed_to_the_fork_when_maintainers_may_edit() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        w.scenario().repo("forker/tiny", "main");
        let fork = w.scenario().repos["forker/tiny"].bare.clone();
        git(
            &w.clone,
            &["push", "-q", fork.to_str().unwrap(), "feature:patch-1"],
        );
        w.scenario()
            .pull(8, "octo/tiny", "main", "forker/tiny", "patch-1");
        w.scenario().pulls.last_mut().unwrap().maintainer_can_modify = true;
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        w.green_after_push();
        git(&w.clone, &["checkout", "-q", "main"]);
        // The user checks the PR out with the real gh, as they would.
        let home = w.tmp.path().join("home");
        let env = w.server().gh_env(&home);
        let o = Command::new(&bin.path)
            .args(["pr", "checkout", "8"])
            .current_dir(&w.clone)
            .envs(env)
            .output()
            .unwrap();
        assert!(o.status.success(), "gh pr checkout: {}", show(&o));
        let mut args = fix_args(&[]);
        args[2] = "8";
        let o = w.run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let pushed = w.remote_branch("forker/tiny", "patch-1").unwrap();
        assert_ne!(pushed, head, "the fork's branch moved");
        assert_eq!(w.server().with(|s| s.pull_head(8)), Some(pushed));
        assert_eq!(
            w.remote_branch("octo/tiny", "patch-1"),
            None,
            "no new branch on origin"
        );
        assert!(
            w.server()
                .requests()
                .iter()
                .any(|r| r.path == "/forker/tiny.git/git-receive-pack")
        );
    });
}

/// A fork that does not allow maintainer edits: refused before any agent
/// call, naming why; nothing is committed or pushed. (Before: fixed and
/// pushed a new branch to origin.)
#[test]
fn a_fork_pr_without_maintainer_edits_is_refused_before_any_agent_call() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        w.scenario().repo("forker/tiny", "main");
        let fork = w.scenario().repos["forker/tiny"].bare.clone();
        git(
            &w.clone,
            &["push", "-q", fork.to_str().unwrap(), "feature:patch-1"],
        );
        w.scenario()
            .pull(8, "octo/tiny", "main", "forker/tiny", "patch-1");
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        let mut args = fix_args(&[]);
        args[2] = "8";
        let o = w.run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        assert!(
            text(&o.stderr).contains(
                "comes from the fork forker/tiny, which does not allow edits from maintainers"
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
            !w.calls().iter().any(|c| c.contains("/actions/")),
            "no log was even fetched"
        );
        assert_eq!(w.remote_branch("forker/tiny", "patch-1"), Some(head));
    });
}

/// Local commits the PR head does not have are never pushed: refused,
/// naming them. (Before: the fix was committed on top and both pushed.)
#[test]
fn unpushed_local_commits_are_refused_naming_them() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        std::fs::write(w.clone.join("NOTES.md"), "wip\n").unwrap();
        git(&w.clone, &["add", "NOTES.md"]);
        git(&w.clone, &["commit", "-qm", "wip: my local notes"]);
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        let err = text(&o.stderr);
        assert!(
            err.contains("1 commit(s) that PR #7's head does not have")
                && err.contains("wip: my local notes"),
            "{err}"
        );
        assert_eq!(
            w.remote_branch("octo/tiny", "feature"),
            Some(head),
            "nothing pushed"
        );
        assert_eq!(w.subjects()[0], "wip: my local notes");
    });
}

/// A check that failed and passed on a re-run: the rollup lists both
/// attempts; the latest counts. (Before: reported failed.)
#[test]
fn a_rerun_that_passed_counts_not_the_attempt_before_it() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        let head = w.head.clone();
        let job = w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        w.scenario().job_mut(job).unwrap().rerun = Some(Rerun {
            status: CheckStatus::Completed(Conclusion::Success),
            log: "ok\n".into(),
        });
        w.scenario().rerun_job(job).unwrap();
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        let o = w.run(&watch_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let rollup = w
            .server()
            .with(|s| s.checks.iter().filter(|c| c.name == "rustfmt").count());
        assert_eq!(rollup, 2, "both attempts are in the rollup");
    });
}

/// A failed commit status of another CI is "not fixable from a log";
/// the failed Actions job beside it is still fixed. (Before: the whole
/// run stopped with "has no run id", nothing fixed.)
#[test]
fn another_cis_failure_is_not_fixable_from_a_log_and_actions_failures_are_still_fixed() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario()
            .protect("octo/tiny", "main", &["rustfmt", "ci/jenkins"]);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        w.scenario()
            .status(&head, "ci/jenkins", StatusState::Failure);
        w.scenario().on_push = Some(Box::new(|s: &mut Scenario, p: &Pushed| {
            s.check(
                &p.sha,
                "rustfmt",
                CheckStatus::Completed(Conclusion::Success),
                "ok\n",
            );
            s.status(&p.sha, "ci/jenkins", StatusState::Failure);
        }));
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        let all = show(&o);
        assert!(
            all.contains("not fixable from a log: `ci/jenkins` is a commit status of another CI"),
            "{all}"
        );
        assert_eq!(
            w.subjects()[0],
            "fix(ci): auto-fix mechanical failure (iter 1)",
            "the Actions failure was fixed"
        );
        assert_ne!(w.remote_branch("octo/tiny", "feature"), Some(head));
    });
}

/// Logs are fetched per failed required job (`run view --job`): an
/// optional job that failed in the same run is never read. (Before: `run
/// view <run> --log-failed` read every failed job of the run.)
#[test]
fn logs_are_read_per_failed_required_job() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        let head = w.head.clone();
        let required = w.scenario().check(
            &head,
            "rustfmt",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-rustfmt-check.log"),
        );
        let optional = w.scenario().check(
            &head,
            "coverage",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-test-failures.log"),
        );
        w.scenario().protect("octo/tiny", "main", &["rustfmt"]);
        w.green_after_push();
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let calls = w.calls();
        assert!(
            calls.contains(&format!("GET /repos/octo/tiny/actions/jobs/{required}")),
            "{calls:?}"
        );
        assert!(
            !calls
                .iter()
                .any(|c| c.contains(&format!("/jobs/{optional}"))),
            "{calls:?}"
        );
        assert!(
            !calls
                .iter()
                .any(|c| c.ends_with("/jobs") || c.contains("/jobs?")),
            "no whole-run job list: {calls:?}"
        );
        // The optional test failure did not reach the classifier: the
        // format fix was applied (a semantic failure would escalate).
        assert_eq!(
            w.subjects()[0],
            "fix(ci): auto-fix mechanical failure (iter 1)"
        );
    });
}

/// `watch` shares the exit-code table: usage errors 2, a failed required
/// check 1 (handoff on stdout), `--help` 0. (Before: usage 1, failure 2.)
#[test]
fn watch_exit_codes_follow_the_table_every_command_uses() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        for bad in [
            &["ci-autofix", "watch"][..],
            &["ci-autofix", "watch", "--pr", "x"],
            &["ci-autofix", "watch", "--pr", "7", "--bogus"],
        ] {
            let o = w.run(bad);
            assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", show(&o));
            assert_eq!(text(&o.stdout), "");
        }
        let o = w.run(&["ci-autofix", "watch", "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(w.calls().is_empty(), "no gh call for bad usage");
        let head = w.head.clone();
        w.server().with(|s| {
            s.check(
                &head,
                "rustfmt",
                CheckStatus::Completed(Conclusion::Failure),
                "Diff in /w/src/lib.rs:1:\n",
            );
        });
        let o = w.run(&watch_args(&[]));
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        assert!(text(&o.stdout).contains("\"failedChecks\""), "{}", show(&o));
        // A handoff for another branch than the PR's head is bad input.
        let handoff =
            r#"{"prNumber": 7, "branch": "other", "failedChecks": [{"name": "rustfmt"}]}"#;
        let path = w.tmp.path().join("handoff.json");
        std::fs::write(&path, handoff).unwrap();
        let o = w.run(&["ci-autofix", "--handoff", path.to_str().unwrap(), "-y"]);
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        assert!(
            text(&o.stderr)
                .contains("the handoff is for branch `other` but PR #7's head is `feature`"),
            "{}",
            show(&o)
        );
    });
}

// -------------------------------------- item 4: flaky and infrastructure

/// A failed test that passes when its job is re-run at the same commit:
/// reported flaky (with the test's name), no commit, exit 0; the re-run's
/// cost is in the audit log.
#[test]
fn a_test_that_passes_on_a_rerun_is_flaky_and_nothing_is_committed() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["test"]);
        let head = w.head.clone();
        let job = w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-test-failures.log"),
        );
        w.scenario().job_mut(job).unwrap().rerun = Some(Rerun {
            status: CheckStatus::Completed(Conclusion::Success),
            log: "test result: ok\n".into(),
        });
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let out = text(&o.stdout);
        assert!(out.starts_with("ci-autofix: flaky on PR #7 — test failed and passed on a re-run at the same commit (test tests::first_of_empty, tests::adds); no commit; 1 flaky, 1 re-run,"), "{out}");
        assert_eq!(w.subjects().len(), 2, "nothing committed");
        assert!(
            w.calls()
                .contains(&format!("POST /repos/octo/tiny/actions/jobs/{job}/rerun")),
            "{:?}",
            w.calls()
        );
        let audit_dir = w.clone.join(".moai/reports/ci-autofix");
        let audit = std::fs::read_dir(&audit_dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let audit = std::fs::read_to_string(audit).unwrap();
        assert!(
            audit.contains("- **classification**: flaky")
                && audit.contains("- **rerun** (flaky?): 1 run at the same commit"),
            "{audit}"
        );
        assert!(
            audit.contains("- **tests**: tests::first_of_empty, tests::adds"),
            "{audit}"
        );
        // Off by flag: the failure is escalated as semantic at once.
        let mut w = World::new(bin);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            &step_log("gh-rust-test-failures.log"),
        );
        let o = w.run(&fix_args(&["--rerun-before-fix=false"]));
        assert_eq!(o.status.code(), Some(3), "{}", show(&o));
        assert!(
            !w.calls().iter().any(|c| c.ends_with("/rerun")),
            "{:?}",
            w.calls()
        );
    });
}

/// A job killed with exit 137 is infrastructure: never patched, re-run
/// once, and escalated with its evidence line when it fails again.
#[test]
fn a_job_killed_with_exit_137_is_infrastructure_rerun_once_and_never_patched() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["test"]);
        let head = w.head.clone();
        w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            OOM_LOG,
        );
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(3), "{}", show(&o));
        let out = text(&o.stdout);
        assert!(out.contains("infrastructure"), "{out}");
        assert!(
            out.contains("Process completed with exit code 137") || out.contains("SIGKILL"),
            "the evidence line: {out}"
        );
        assert!(
            out.contains("an infrastructure failure again after its re-run"),
            "{out}"
        );
        assert_eq!(w.subjects().len(), 2, "never patched");
        let reruns = w.calls().iter().filter(|c| c.ends_with("/rerun")).count();
        assert_eq!(reruns, 1, "re-run once: {:?}", w.calls());
    });
}

/// The same failure cleared by its re-run: exit 0, no commit.
#[test]
fn an_infrastructure_failure_that_clears_on_its_rerun_needs_no_commit() {
    each_gh(|bin| {
        let mut w = World::new(bin);
        // Protected, so that only this test's own defect is in play.
        w.scenario().protect("octo/tiny", "main", &["test"]);
        let head = w.head.clone();
        let job = w.scenario().check(
            &head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            OOM_LOG,
        );
        w.scenario().job_mut(job).unwrap().rerun = Some(Rerun {
            status: CheckStatus::Completed(Conclusion::Success),
            log: "ok\n".into(),
        });
        let o = w.run(&fix_args(&[]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(
            text(&o.stdout).starts_with("ci-autofix: an infrastructure failure, cleared on PR #7"),
            "{}",
            show(&o)
        );
        assert_eq!(w.subjects().len(), 2);
    });
}
