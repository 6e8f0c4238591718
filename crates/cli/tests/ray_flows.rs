//! The flows with `--runner ray=URL` against a real Ray 2.60 head on
//! 127.0.0.1 (one for the binary), each compared with a local run of the
//! same input:
//! - review-fix on the quickstart crate: the same commits (subjects and
//!   trees), every test run of the session a Ray job;
//! - planex `run` with shell directives: the same commits (the two that run
//!   at once in either order), every directive a Ray job whose file changes
//!   came back to the task's tree.
//!
//! Jobs are counted by the head's own job-driver logs, which Ray writes for
//! each submitted job and keeps after the runner deletes the finished job
//! from the head's list; the tests take the head one at a time so that the
//! counts are theirs.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quickstart_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, PoisonError};

use orchestrator_adapters::test_support::git;
use orchestrator_adapters::test_support::ray::RayHead;
use quickstart_support::{Dated, init_and_commit, quickstart_repo};
use tempfile::TempDir;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The binary's Ray head, held by this test alone while the guard lives.
fn head_alone() -> (MutexGuard<'static, ()>, &'static RayHead) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    (one, RayHead::shared())
}

/// A local and a remote temporary folder with the same repository in each,
/// made by `make` (the folder in, the repository out): the local run's and
/// the Ray run's, as `(local, remote, local_repo, remote_repo)`.
fn two_copies(make: impl Fn(&Path) -> PathBuf) -> (TempDir, TempDir, PathBuf, PathBuf) {
    let local = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let (local_repo, remote_repo) = (make(local.path()), make(remote.path()));
    (local, remote, local_repo, remote_repo)
}

/// `review-fix --fix clippy.json -y` in `dir`'s repository, with `extra`
/// arguments and `config` as the user's configuration file.
fn review_fix(dir: &Path, extra: &[&str], config: &str) -> Output {
    let config_home = dir.join("config");
    std::fs::create_dir_all(config_home.join("orchestrator")).unwrap();
    std::fs::write(config_home.join("orchestrator/config.toml"), config).unwrap();
    let clippy = dir.join("clippy.json");
    Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .arg("review-fix")
        .args(["--fix", clippy.to_str().unwrap(), "-y"])
        .args(extra)
        .current_dir(dir.join("repo"))
        .env("XDG_CONFIG_HOME", &config_home)
        .env("ORCHESTRATOR_CACHE_DIR", dir.join("cache"))
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("RUST_BACKTRACE", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("RUST_LOG")
        .env_remove("RAY_ADDRESS")
        .env_remove("ORCHESTRATOR_AGENT")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap()
}

/// `subject tree` of each commit since the base, oldest first.
fn landed(repo: &Path) -> Vec<String> {
    git(repo, &["log", "--reverse", "--format=%s %T"])
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// The job-driver logs Ray wrote under the head's temp dir.
fn driver_logs(head: &RayHead) -> Vec<PathBuf> {
    let logs = head.temp_dir.join("t/session_latest/logs");
    let Ok(entries) = std::fs::read_dir(&logs) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("job-driver-") && name.ends_with(".log")
        })
        .collect();
    out.sort();
    out
}

/// The `test runs: N` figure of a review-fix summary.
fn test_runs(summary: &str) -> usize {
    let at = summary.find("test runs: ").expect(summary) + "test runs: ".len();
    summary[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn review_fix_on_ray_lands_the_commits_a_local_run_lands_every_test_run_a_ray_job() {
    let (_one, head) = head_alone();
    let (local, remote, local_repo, remote_repo) =
        two_copies(|dir| quickstart_repo(dir, Dated::Fixed));
    assert_eq!(
        git(&local_repo, &["rev-parse", "HEAD"]),
        git(&remote_repo, &["rev-parse", "HEAD"]),
        "both runs start from one commit"
    );

    let here = review_fix(local.path(), &[], "version = 1\n");
    let here_out = String::from_utf8_lossy(&here.stdout).into_owned();
    assert_eq!(
        here.status.code(),
        Some(1),
        "one finding's fix breaks the tests:\n{here_out}{}",
        String::from_utf8_lossy(&here.stderr)
    );

    let before = driver_logs(head);
    let cache_root = remote.path().join("node-cache");
    let config = format!(
        "version = 1\n\n[runner]\ncache_root = {:?}\n",
        cache_root.display().to_string()
    );
    let runner = format!("ray={}", head.url);
    let there = review_fix(remote.path(), &["--runner", &runner], &config);
    let there_out = String::from_utf8_lossy(&there.stdout).into_owned();
    let there_err = String::from_utf8_lossy(&there.stderr).into_owned();
    assert_eq!(
        there.status.code(),
        Some(1),
        "stdout:\n{there_out}\nstderr:\n{there_err}"
    );

    // The same commits: subjects and trees.
    let commits = landed(&local_repo);
    assert_eq!(commits.len(), 6, "{here_out}");
    assert_eq!(landed(&remote_repo), commits, "{there_out}\n{there_err}");

    // Every test run was a job on the head: Ray's own driver logs, one per
    // submitted job, each with the cargo test the job ran; and the run's
    // report says so too.
    let runs = test_runs(&there_out);
    assert_eq!(runs, test_runs(&here_out), "{there_out}");
    let after = driver_logs(head);
    let new: Vec<&PathBuf> = after.iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(new.len(), runs, "{new:?}\n{there_err}");
    for log in &new {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(
            text.contains("( exec 'cargo' 'test' '--no-fail-fast' )")
                && text.contains("@@ORCH-RESULT"),
            "{}:\n{text}",
            log.display()
        );
    }
    assert!(
        there_err.contains(&format!("{runs} job(s) on Ray at {}", head.url)),
        "{there_err}"
    );
    // The node cache kept the crate's build between jobs.
    assert!(cache_root.is_dir(), "{}", cache_root.display());
}

/// A git repository with one commit, dated so that two copies are the same.
fn plain_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(repo.join("README"), "a project\n").unwrap();
    std::fs::write(repo.join("docs/old.txt"), "to be removed\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "build/\n").unwrap();
    init_and_commit(&repo, "start", Dated::Fixed);
    repo
}

/// Five shell tasks: a diamond passing context, and edits of every kind a
/// directive makes (a new executable, a binary file, a removal, an edit in
/// place, ignored build output that stays where it was made).
fn tasks_csv() -> String {
    let header = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";
    let rows = [
        (
            "T1",
            "Write the base",
            "mkdir -p out && echo base > out/base.txt && echo 'T1: base written'",
            "",
            "",
        ),
        (
            "T2",
            "Left branch",
            "printf '%s\\n' \"$ORCH_PREV_CONTEXT\" > out/left.txt && echo 'T2: left'",
            "T1",
            "T1",
        ),
        (
            "T3",
            "Right branch",
            "printf 'x\\000\\377y' > out/blob.bin && printf '#!/bin/sh\\necho hi\\n' > out/run.sh && chmod +x out/run.sh && echo 'T3: right'",
            "T1",
            "T1",
        ),
        (
            "T4",
            "Join",
            "test -f out/left.txt && test -x out/run.sh && printf '%s\\n' \"$ORCH_PREV_CONTEXT\" > out/join.txt && rm docs/old.txt && echo joined",
            "T2;T3",
            "T2;T3",
        ),
        (
            "T5",
            "Edit in place",
            "sed -i 's/a project/the project/' README && mkdir -p build && echo artefact > build/out.o && echo edited",
            "T4",
            "",
        ),
    ];
    let mut text = format!("{header}\n");
    for (id, title, directives, deps, context) in rows {
        let quoted = format!("\"{}\"", directives.replace('"', "\"\""));
        text.push_str(&format!(
            "{id},{title},Do {title},,,,,{quoted},{deps},{context},\n"
        ));
    }
    text
}

/// `planex run tasks.csv -y` in `dir`'s repository.
fn planex_run(dir: &Path, extra: &[&str], config: &str) -> Output {
    let config_home = dir.join("config");
    std::fs::create_dir_all(config_home.join("orchestrator")).unwrap();
    std::fs::write(config_home.join("orchestrator/config.toml"), config).unwrap();
    std::fs::write(dir.join("tasks.csv"), tasks_csv()).unwrap();
    Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["planex", "run"])
        .arg(dir.join("tasks.csv"))
        .arg("-y")
        .args(extra)
        .current_dir(dir.join("repo"))
        .env("XDG_CONFIG_HOME", &config_home)
        .env("ORCHESTRATOR_CACHE_DIR", dir.join("cache"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("RUST_LOG")
        .env_remove("RAY_ADDRESS")
        .env_remove("ORCHESTRATOR_AGENT")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn planex_shell_directives_on_ray_land_the_commits_a_local_run_lands() {
    let (_one, head) = head_alone();
    let (local, remote, local_repo, remote_repo) = two_copies(plain_repo);

    let here = planex_run(local.path(), &[], "version = 1\n");
    let here_err = String::from_utf8_lossy(&here.stderr).into_owned();
    assert_eq!(here.status.code(), Some(0), "{here_err}");

    let before = driver_logs(head);
    let config = format!(
        "version = 1\n\n[runner]\ncache_root = {:?}\n",
        remote.path().join("node-cache").display().to_string()
    );
    let runner = format!("ray={}", head.url);
    let there = planex_run(remote.path(), &["--runner", &runner], &config);
    let there_err = String::from_utf8_lossy(&there.stderr).into_owned();
    assert_eq!(there.status.code(), Some(0), "{there_err}");

    // The same commits: T2 and T3 run at once and land in the order they
    // finish, so the subjects are compared as a set, and the trees where
    // the order is fixed (after T1, after the join, at the end).
    let (here_commits, there_commits) = (landed(&local_repo), landed(&remote_repo));
    assert_eq!(here_commits.len(), 5, "{here_commits:?}\n{here_err}");
    let subjects = |commits: &[String]| {
        let mut s: Vec<String> = commits
            .iter()
            .map(|c| c.rsplit_once(' ').unwrap().0.to_owned())
            .collect();
        s.sort();
        s
    };
    assert_eq!(
        subjects(&there_commits),
        subjects(&here_commits),
        "{there_err}"
    );
    for at in [0, 3, 4] {
        assert_eq!(there_commits[at], here_commits[at], "{there_err}");
    }
    // What the directives made, as they made it: the binary file's bytes,
    // the executable bit, the removal, the edit.
    assert_eq!(
        std::fs::read(remote_repo.join("out/blob.bin")).unwrap(),
        b"x\0\xffy"
    );
    let mode = std::fs::metadata(remote_repo.join("out/run.sh")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111,
        0o111
    );
    assert!(!remote_repo.join("docs/old.txt").exists());
    assert_eq!(
        std::fs::read_to_string(remote_repo.join("README")).unwrap(),
        "the project\n"
    );
    // Ignored build output stayed on the node; locally it was made in the
    // task's worktree, never in the repository.
    assert!(!remote_repo.join("build").exists());
    assert!(!local_repo.join("build").exists());

    // Every directive ran as a job on the head.
    let after = driver_logs(head);
    let new = after.iter().filter(|p| !before.contains(p)).count();
    assert_eq!(new, 5, "{there_err}");
    assert!(
        there_err.contains(&format!("5 job(s) on Ray at {}", head.url)),
        "{there_err}"
    );
}
