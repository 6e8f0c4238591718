//! The scripted GitHub (`test_support::github`) against the real gh, both
//! versions the tests run (Debian's 2.23 and the pinned 2.102): the
//! commands ci-autofix uses answer as gh's own behaviour says they do, and
//! the server sees exactly what gh sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use orchestrator_adapters::test_support::github::{
    CheckStatus, Conclusion, GhBinary, GithubServer, Rerun, Scenario, gh_binaries,
};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// A scenario with `octo/demo` (branch `main`, PR 7 from `feature`) and a
/// clone whose `origin` is the scripted remote; the PR head's commit.
struct World {
    tmp: tempfile::TempDir,
    clone: PathBuf,
    head: String,
}

fn world(server_env: &[(String, String)], scenario: &mut Scenario) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let clone = tmp.path().join("clone");
    std::fs::create_dir_all(&clone).unwrap();
    let url = scenario.repo("octo/demo", "main");
    git(&clone, &["init", "-q", "-b", "main"]);
    git(&clone, &["config", "user.email", "t@example.com"]);
    git(&clone, &["config", "user.name", "T"]);
    std::fs::write(clone.join("a.txt"), "one\n").unwrap();
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-qm", "init"]);
    git(&clone, &["remote", "add", "origin", &url]);
    let bare = scenario.repos["octo/demo"].bare.clone();
    git(&clone, &["push", "-q", bare.to_str().unwrap(), "main"]);
    git(&clone, &["checkout", "-qb", "feature"]);
    std::fs::write(clone.join("a.txt"), "two\n").unwrap();
    git(&clone, &["commit", "-qam", "feature"]);
    git(&clone, &["push", "-q", bare.to_str().unwrap(), "feature"]);
    let head = git(&clone, &["rev-parse", "HEAD"]);
    scenario.pull(7, "octo/demo", "main", "octo/demo", "feature");
    let _ = server_env;
    World { tmp, clone, head }
}

fn gh(bin: &GhBinary, server: &GithubServer, home: &Path, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(&bin.path);
    cmd.args(args)
        .current_dir(dir)
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_ENTERPRISE_TOKEN");
    for (k, v) in server.gh_env(home) {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn pr_view_and_checks_answer_as_the_real_gh_expects() {
    let rt = runtime();
    for bin in gh_binaries() {
        let root = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(root.path());
        let w = world(&[], &mut scenario);
        let failed = scenario.check(
            &w.head,
            "test",
            CheckStatus::Completed(Conclusion::Failure),
            "boom",
        );
        scenario.check(
            &w.head,
            "lint",
            CheckStatus::Completed(Conclusion::Success),
            "ok",
        );
        scenario.job_mut(failed).unwrap().rerun = Some(Rerun {
            status: CheckStatus::Completed(Conclusion::Success),
            log: "passed".into(),
        });
        let server = rt.block_on(GithubServer::start(scenario));
        let home = w.tmp.path().join(format!("home-{}", bin.version));
        let v = &bin.version;

        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &[
                "pr",
                "view",
                "7",
                "--json",
                "number,headRefName,headRefOid,headRepository,headRepositoryOwner,isCrossRepository,maintainerCanModify,baseRefName,statusCheckRollup",
            ],
        );
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        let view: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(view["headRefOid"], w.head.as_str(), "{v}");
        assert_eq!(view["headRefName"], "feature");
        assert_eq!(view["headRepository"]["name"], "demo");
        assert_eq!(view["headRepositoryOwner"]["login"], "octo");
        assert_eq!(view["isCrossRepository"], false);
        assert_eq!(view["statusCheckRollup"].as_array().unwrap().len(), 2);
        assert!(
            server.requests().iter().all(|r| r.missing.is_empty()),
            "{v}: {:?}",
            server.requests()
        );

        // A branch without protection: gh's own message, exit 1.
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["pr", "checks", "7", "--required"],
        );
        assert_eq!(o.status.code(), Some(1), "{v}");
        assert_eq!(
            text(&o.stderr).trim(),
            "no required checks reported on the 'feature' branch",
            "{v}"
        );
        // With protection: the required rows only.
        server.with(|s| s.protect("octo/demo", "main", &["test"]));
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["pr", "checks", "7", "--required"],
        );
        assert_eq!(o.status.code(), Some(1), "{v}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.starts_with("test\tfail\t"), "{v}: {out}");
        assert_eq!(out.lines().count(), 1, "{v}: {out}");

        // The failed job's log, then its re-run.
        server.clear_requests();
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["run", "view", "--job", &failed.to_string(), "--log-failed"],
        );
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("test\tRun test\t") && text(&o.stdout).contains("boom"),
            "{v}: {}",
            text(&o.stdout)
        );
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["run", "rerun", "--job", &failed.to_string()],
        );
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        assert!(
            server.api_calls().contains(&format!(
                "POST /repos/octo/demo/actions/jobs/{failed}/rerun"
            )),
            "{v}: {:?}",
            server.api_calls()
        );
        // Both attempts are in the rollup; `pr checks` keeps the newest.
        let o = gh(&bin, &server, &home, &w.clone, &["pr", "checks", "7"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{v}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["pr", "view", "7", "--json", "statusCheckRollup"],
        );
        let view: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            view["statusCheckRollup"].as_array().unwrap().len(),
            3,
            "{v}"
        );
    }
}

#[test]
fn fork_checkout_and_pushes_go_through_the_scripted_remote() {
    let rt = runtime();
    for bin in gh_binaries() {
        let root = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(root.path());
        let w = world(&[], &mut scenario);
        // forker/demo holds PR 8's head on its own `fix` branch.
        scenario.repo("forker/demo", "main");
        let fork = scenario.repos["forker/demo"].bare.clone();
        git(
            &w.clone,
            &["push", "-q", fork.to_str().unwrap(), "feature:fix"],
        );
        scenario.pull(8, "octo/demo", "main", "forker/demo", "fix");
        scenario.pulls.last_mut().unwrap().maintainer_can_modify = true;
        let server = rt.block_on(GithubServer::start(scenario));
        let home = w.tmp.path().join(format!("home-{}", bin.version));
        let v = &bin.version;
        git(&w.clone, &["checkout", "-q", "main"]);
        let o = gh(&bin, &server, &home, &w.clone, &["pr", "checkout", "8"]);
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        assert_eq!(git(&w.clone, &["rev-parse", "HEAD"]), w.head, "{v}");
        assert_eq!(
            git(&w.clone, &["config", "branch.fix.pushRemote"]),
            "http://github.localhost/forker/demo.git",
            "{v}"
        );
        // A push through the proxy moves the fork's branch and the PR head.
        std::fs::write(w.clone.join("a.txt"), "three\n").unwrap();
        git(&w.clone, &["commit", "-qam", "more"]);
        let mut push = Command::new("git");
        push.args([
            "push",
            "-q",
            "http://github.localhost/forker/demo.git",
            "HEAD:refs/heads/fix",
        ])
        .current_dir(&w.clone);
        for (k, val) in server.gh_env(&home) {
            push.env(k, val);
        }
        let o = push.output().unwrap();
        assert!(o.status.success(), "{v}: {}", text(&o.stderr));
        let new = git(&w.clone, &["rev-parse", "HEAD"]);
        assert_eq!(server.with(|s| s.pull_head(8)), Some(new.clone()), "{v}");
        let o = gh(
            &bin,
            &server,
            &home,
            &w.clone,
            &["pr", "view", "8", "--json", "headRefOid"],
        );
        assert!(text(&o.stdout).contains(&new), "{v}: {}", text(&o.stdout));
        assert!(
            server
                .requests()
                .iter()
                .any(|r| r.host == "github.localhost" && r.path.ends_with("git-receive-pack")),
            "{v}"
        );
    }
}
