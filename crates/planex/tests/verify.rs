//! Verified execution (`Planex::with_verification`) on a real git
//! repository, with real commands: what a task changed is measured, held
//! to its scope, checked by the engine and landed as its own commit —
//! whatever its (scripted) agent claims.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::agent::{AgentResponse, Role};
use orchestrator_core::event::CollectingSink;
use orchestrator_core::fakes::{FakeAgent, Reply};
use orchestrator_core::gate::AutoYes;
use orchestrator_core::scheduler::Mode;
use orchestrator_planex::rows::{RowStatus, read_tasks_csv};
use orchestrator_planex::{
    Agents, ExecutionPolicy, Outcome, OutcomeStatus, Planex, PlanexError, PlanexOptions, ScopeMode,
    Stop, Verification,
};
use serde_json::json;

const HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with `src/lib.txt` committed, and the tasks file `rows`
/// outside it.
fn sandbox(rows: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "t@example.com"]);
    git(&repo, &["config", "user.name", "T"]);
    std::fs::write(repo.join("src/lib.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "start"]);
    let mut csv = format!("{HEADER}\n");
    for r in rows {
        csv.push_str(r);
        csv.push('\n');
    }
    std::fs::write(dir.path().join("tasks.csv"), csv).unwrap();
    (dir, repo)
}

/// The task report an agent answers, claiming `files` and passing tests.
fn report(id: &str, files: &[&str]) -> AgentResponse {
    AgentResponse::structured(json!({
        "id": id, "status": "completed", "findings": format!("{id} done"),
        "files_modified": files, "tests_passed": true, "acceptance_met": "all", "error": ""
    }))
}

/// An agent answer that writes `files` and claims `claimed`.
fn edit(id: &str, files: &[(&str, &str)], claimed: &[&str]) -> Reply {
    Reply::Edit {
        files: files
            .iter()
            .map(|(p, c)| ((*p).to_owned(), Some((*c).to_owned())))
            .collect(),
        response: report(id, claimed),
    }
}

async fn run(
    dir: &Path,
    repo: &Path,
    agent: Arc<FakeAgent>,
    tweak: impl FnOnce(Verification) -> Verification,
) -> (Result<Outcome, PlanexError>, Arc<CollectingSink>) {
    let vcs = Arc::new(GitVcs::open(repo).await.unwrap());
    let verification = tweak(Verification::new(vcs, Arc::new(ProcessRunner::default())));
    let sink = Arc::new(CollectingSink::new());
    let options = PlanexOptions::default()
        .with_auto_yes(true)
        .with_concurrency(4)
        .with_schedule(Mode::Eager)
        .with_task_time_limit(Duration::from_secs(20))
        .with_execution(ExecutionPolicy::agent());
    let planex = Planex::new(
        repo,
        Agents::all(agent),
        Arc::new(AutoYes),
        sink.clone(),
        options,
    )
    .with_verification(verification);
    (planex.run_tasks_file(&dir.join("tasks.csv")).await, sink)
}

/// planex over `repo`, `agent` playing every part, gates answered yes,
/// verified over `vcs` with the defaults.
fn verified(
    repo: &Path,
    vcs: Arc<GitVcs>,
    agent: Arc<FakeAgent>,
    sink: Arc<CollectingSink>,
    options: PlanexOptions,
) -> Planex {
    Planex::new(repo, Agents::all(agent), Arc::new(AutoYes), sink, options)
        .with_verification(Verification::new(vcs, Arc::new(ProcessRunner::default())))
}

/// A `planex run` of the sandbox's tasks, verified, stopped at its gate
/// (nothing approved): the session exists, nothing ran.
async fn stopped_at_the_gate(dir: &Path, repo: &Path) -> Outcome {
    let vcs = Arc::new(GitVcs::open(repo).await.unwrap());
    Planex::new(
        repo,
        Agents::all(Arc::new(FakeAgent::new("fake"))),
        Arc::new(orchestrator_core::gate::AlwaysDefer),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default(),
    )
    .with_verification(Verification::new(vcs, Arc::new(ProcessRunner::default())))
    .run_tasks_file(&dir.join("tasks.csv"))
    .await
    .unwrap()
}

fn results(outcome: &Outcome) -> Vec<orchestrator_planex::rows::TaskRow> {
    read_tasks_csv(outcome.summary.session_dir.join("results.csv")).unwrap()
}

fn row<'a>(
    rows: &'a [orchestrator_planex::rows::TaskRow],
    id: &str,
) -> &'a orchestrator_planex::rows::TaskRow {
    rows.iter().find(|r| r.id == id).unwrap()
}

fn extra<'a>(row: &'a orchestrator_planex::rows::TaskRow, column: &str) -> &'a str {
    row.extra
        .iter()
        .find(|(name, _)| name == column)
        .map_or("", |(_, v)| v.as_str())
}

/// The subjects of the commits after `start`, oldest first.
fn subjects(repo: &Path) -> Vec<String> {
    git(repo, &["log", "--reverse", "--format=%s"])
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_file_is_measured_and_lands_as_the_tasks_commit() {
    let (dir, repo) =
        sandbox(&["T1,Add greeting,Write src/hello.txt,,,src/**,,grep -q hi src/hello.txt,,,"]);
    // The agent writes a file but lists nothing.
    let agent =
        Arc::new(FakeAgent::new("fake").on("T1", edit("T1", &[("src/hello.txt", "hi\n")], &[])));
    let (outcome, _) = run(dir.path(), &repo, agent, |v| v).await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    let rows = results(&outcome);
    let t1 = row(&rows, "T1");
    assert_eq!(t1.status, RowStatus::Completed);
    assert_eq!(t1.files_modified, ["src/hello.txt"]);
    assert_eq!(t1.tests_passed, Some(true));
    assert_eq!(extra(t1, "verification"), "grep -q hi src/hello.txt");
    assert_eq!(extra(t1, "claimed_files_modified"), "");
    assert_eq!(subjects(&repo), ["feat(planex): Add greeting [T1]"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    assert_eq!(extra(t1, "commit"), head.trim());
    let message = git(&repo, &["log", "-1", "--format=%B"]);
    assert_eq!(
        message.trim_end(),
        "feat(planex): Add greeting [T1]\n\nPlanex-Task: T1"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    let context = std::fs::read_to_string(outcome.summary.session_dir.join("context.md")).unwrap();
    assert!(context.contains("## Verification"), "{context}");
    assert!(
        context
            .contains("| T1 | completed | 1 | src/hello.txt | grep -q hi src/hello.txt | true |"),
        "{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_the_scope_fails_and_is_rolled_back_and_its_dependent_skipped() {
    let (dir, repo) = sandbox(&[
        "T1,Change lib,Edit src/lib.txt,,,src/lib.txt,,,,,",
        "T2,Use it,Needs T1,,,src/**,,,T1,,",
    ]);
    let agent = Arc::new(FakeAgent::new("fake").otherwise(edit(
        "T1",
        &[("src/lib.txt", "two\n"), ("README.md", "sneaky\n")],
        &["src/lib.txt"],
    )));
    let (outcome, _) = run(dir.path(), &repo, agent.clone(), |v| v).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.exit_code(), 1);
    let rows = results(&outcome);
    let t1 = row(&rows, "T1");
    assert_eq!(t1.status, RowStatus::Failed);
    assert!(
        t1.error
            .contains("changed files outside its scope `src/lib.txt`: README.md"),
        "{}",
        t1.error
    );
    assert!(t1.files_modified.is_empty(), "{:?}", t1.files_modified);
    let t2 = row(&rows, "T2");
    assert_eq!(t2.status, RowStatus::Skipped);
    assert!(t2.error.contains("Dependency"), "{}", t2.error);
    assert_eq!(agent.calls_for("T2"), 0);
    // Nothing stays changed, inside the scope or out of it; no commit.
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(!repo.join("README.md").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "one\n"
    );
    assert!(subjects(&repo).is_empty());

    // With --scope-mode warn the same change lands, the paths named.
    let (dir, repo) = sandbox(&["T1,Change lib,Edit src/lib.txt,,,src/lib.txt,,,,,"]);
    let agent = Arc::new(FakeAgent::new("fake").otherwise(edit(
        "T1",
        &[("src/lib.txt", "two\n"), ("README.md", "sneaky\n")],
        &["src/lib.txt"],
    )));
    let (outcome, sink) = run(dir.path(), &repo, agent, |v| {
        v.with_scope_mode(ScopeMode::Warn)
    })
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    assert!(sink.events().iter().any(|e| matches!(e,
        orchestrator_core::event::Event::Warning { message }
            if message == "task T1 changed files outside its scope `src/lib.txt`: README.md")));
    let rows = results(&outcome);
    assert_eq!(
        row(&rows, "T1").files_modified,
        ["README.md", "src/lib.txt"]
    );
    assert_eq!(
        extra(row(&rows, "T1"), "claimed_files_modified"),
        "src/lib.txt"
    );
    assert_eq!(subjects(&repo), ["feat(planex): Change lib [T1]"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_pass_whose_directive_fails_is_a_failed_task_with_the_output() {
    let (dir, repo) = sandbox(&[
        "T1,Fix lib,Make the check pass,,,src/**,,sh -c 'grep -q fixed src/lib.txt || { echo CHECK FAILED: lib not fixed; exit 1; }',,,",
    ]);
    // Both attempts claim tests_passed=true, neither fixes it.
    let agent = Arc::new(FakeAgent::new("fake").otherwise(edit(
        "T1",
        &[("src/lib.txt", "still broken\n")],
        &["src/lib.txt"],
    )));
    let (outcome, _) = run(dir.path(), &repo, agent.clone(), |v| v).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.exit_code(), 1);
    let rows = results(&outcome);
    let t1 = row(&rows, "T1");
    assert_eq!(t1.status, RowStatus::Failed);
    assert!(
        t1.error.contains("verification by the engine failed"),
        "{}",
        t1.error
    );
    assert!(
        t1.error.contains("CHECK FAILED: lib not fixed"),
        "{}",
        t1.error
    );
    assert_eq!(t1.tests_passed, None, "the agent's claim is not taken");
    // Retried with the failure in its prompt (ExecutionPolicy::agent: 2
    // rounds), rolled back each time.
    let calls = agent.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].role, Role::Execute);
    assert!(
        calls[1].instruction.contains("CHECK FAILED: lib not fixed"),
        "{}",
        calls[1].instruction
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(subjects(&repo).is_empty());
    let context = std::fs::read_to_string(outcome.summary.session_dir.join("context.md")).unwrap();
    assert!(
        context.contains("| T1 | failed | 2 | — | sh -c "),
        "{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_agent_changed_nothing_fails_with_no_change() {
    let (dir, repo) = sandbox(&["T1,Do it,Change something,,,,,,,,"]);
    let agent =
        Arc::new(FakeAgent::new("fake").otherwise(Reply::Answer(report("T1", &["src/lib.txt"]))));
    let (outcome, _) = run(dir.path(), &repo, agent, |v| v).await;
    let outcome = outcome.unwrap();
    let rows = results(&outcome);
    let t1 = row(&rows, "T1");
    assert_eq!(t1.status, RowStatus::Failed);
    assert!(
        t1.error
            .contains("no change: the agent reported the task completed, but no file changed"),
        "{}",
        t1.error
    );
}

/// A session keeps the mode its first execution ran in: one whose tasks
/// ran unverified is refused a verified continuation (its tasks' changes
/// sit uncommitted in the tree), and `session_verified` tells which mode a
/// session is in, or none before its first execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_the_mode_its_first_execution_ran_in() {
    use orchestrator_planex::session_verified;
    let (dir, repo) = sandbox(&["T1,Do it,Change something,,,,,,,,"]);
    stopped_at_the_gate(dir.path(), &repo).await;
    assert_eq!(session_verified(&repo, None).unwrap(), None);

    let agent = Arc::new(FakeAgent::new("fake").otherwise(Reply::fail("the backend is down")));
    let outcome = Planex::new(
        &repo,
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .resume(None)
    .await
    .unwrap();
    assert_eq!(outcome.exit_code(), 1, "{}", outcome.summary);
    assert_eq!(session_verified(&repo, None).unwrap(), Some(false));
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let refused = verified(
        &repo,
        vcs,
        agent,
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .retry_failed(None)
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains(
            "runs its tasks unverified (it was started with --no-commit): continue it with --no-commit"
        ),
        "{refused}"
    );

    let (dir, repo) = sandbox(&["T1,Do it,Change something,,,,,,,,"]);
    let agent =
        Arc::new(FakeAgent::new("fake").otherwise(edit("T1", &[("src/lib.txt", "two\n")], &[])));
    let (outcome, _) = run(dir.path(), &repo, agent, |v| v).await;
    assert_eq!(outcome.unwrap().exit_code(), 0);
    assert_eq!(session_verified(&repo, None).unwrap(), Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependent_tasks_land_in_dependency_order_each_verified_against_the_others_work() {
    let (dir, repo) = sandbox(&[
        "T2,Second,Append to the first,,,src/b.txt,,grep -q a src/a.txt,T1,,",
        "T1,First,Create a,,,src/a.txt,,,,,",
    ]);
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("T1", edit("T1", &[("src/a.txt", "a\n")], &["src/a.txt"]))
            .on("T2", edit("T2", &[("src/b.txt", "b\n")], &["src/b.txt"])),
    );
    let (outcome, sink) = run(dir.path(), &repo, agent, |v| {
        v.with_test_command(Some("test -f src/a.txt".to_owned()))
    })
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        subjects(&repo),
        ["feat(planex): First [T1]", "feat(planex): Second [T2]"]
    );
    let rows = results(&outcome);
    // T1 has no directives: the project's test command verified it.
    assert_eq!(extra(row(&rows, "T1"), "verification"), "test -f src/a.txt");
    assert_eq!(
        extra(row(&rows, "T2"), "verification"),
        "grep -q a src/a.txt"
    );
    assert!(
        !sink
            .events()
            .iter()
            .any(|e| matches!(e, orchestrator_core::event::Event::Warning { .. })),
        "{:?}",
        sink.events()
    );
    assert_no_worktree_left(&repo);
}

/// No task worktree or `planex/` branch is left.
fn assert_no_worktree_left(repo: &Path) {
    assert_eq!(git(repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(repo, &["branch", "--list", "planex/*"]), "");
}

/// Two tasks that run at once, each checking that the other's file is not
/// in its tree, meet half-way (each waits for the other to have written
/// its file: they cannot pass one after the other in one tree). In
/// worktrees of their own both pass and land as two commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_do_not_see_each_others_half_done_work() {
    let meet = tempfile::tempdir().unwrap();
    let m = meet.path().display();
    let directive = |mine: &str, other: &str| {
        format!(
            "echo {mine} > src/{mine}.txt; touch {m}/{mine}; i=0; while [ ! -e {m}/{other} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; test -e {m}/{other} && test ! -e src/{other}.txt"
        )
    };
    let (dir, repo) = sandbox(&[
        &format!("A,Write a,,,,src/a.txt,,{},,,", directive("a", "b")),
        &format!("B,Write b,,,,src/b.txt,,{},,,", directive("b", "a")),
    ]);
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let runner: Arc<dyn orchestrator_core::command::CommandRunner> =
        Arc::new(ProcessRunner::default());
    let shell = Arc::new(orchestrator_planex::ShellTaskAgent::new(runner.clone()));
    let options = PlanexOptions::default()
        .with_auto_yes(true)
        .with_concurrency(2)
        .with_task_time_limit(Duration::from_secs(60))
        .with_execution(ExecutionPolicy::shell());
    let outcome = Planex::new(
        &repo,
        Agents::all(shell),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        options,
    )
    .with_verification(Verification::new(vcs, runner).with_executor_runs_directives(true))
    .run_tasks_file(&dir.path().join("tasks.csv"))
    .await
    .unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    let mut landed = subjects(&repo);
    landed.sort();
    assert_eq!(
        landed,
        ["feat(planex): Write a [A]", "feat(planex): Write b [B]"]
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_no_worktree_left(&repo);
    let rows = results(&outcome);
    for id in ["A", "B"] {
        assert_eq!(extra(row(&rows, id), "commit").len(), 40, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_tree_is_refused_before_anything_runs_and_left_as_it_is() {
    let (dir, repo) = sandbox(&["T1,Do it,Change something,,,,,,,,"]);
    std::fs::write(repo.join("src/lib.txt"), "my own work\n").unwrap();
    let agent = Arc::new(FakeAgent::new("fake"));
    let (outcome, _) = run(dir.path(), &repo, agent.clone(), |v| v).await;
    let error = outcome.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the working tree has uncommitted changes (src/lib.txt)"),
        "{error}"
    );
    assert!(agent.calls().is_empty());
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "my own work\n"
    );
    // The tasks file itself may be untracked inside the repository.
    std::fs::write(repo.join("src/lib.txt"), "one\n").unwrap();
    std::fs::copy(dir.path().join("tasks.csv"), repo.join("tasks.csv")).unwrap();
    let agent =
        Arc::new(FakeAgent::new("fake").otherwise(edit("T1", &[("src/c.txt", "c\n")], &[])));
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let planex = verified(
        &repo,
        vcs,
        agent,
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    );
    let outcome = planex
        .run_tasks_file(&repo.join("tasks.csv"))
        .await
        .unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "?? tasks.csv\n");
    // No directive and no test command: nothing was tested, whatever the
    // agent claimed.
    let rows = results(&outcome);
    assert_eq!(row(&rows, "T1").tests_passed, None);
    assert_eq!(extra(row(&rows, "T1"), "verification"), "");
}

/// A run killed after a task's commit and before its result was journaled:
/// `--continue` finds the commit by its trailer, records the task as
/// completed, and neither runs nor commits it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_committed_before_a_crash_is_not_run_or_committed_again() {
    let (dir, repo) = sandbox(&["T1,First,Create a,,,src/a.txt,,,,,"]);
    // The first run stops at the gate (nothing approved): the session
    // exists, nothing ran.
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let stopped = stopped_at_the_gate(dir.path(), &repo).await;
    assert_eq!(stopped.exit_code(), 3, "{}", stopped.summary);
    let session = stopped.summary.session_id.clone();
    // What the killed run left: the base it started from, and T1's commit.
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        stopped.summary.session_dir.join("verify-base.txt"),
        base.trim(),
    )
    .unwrap();
    std::fs::write(repo.join("src/a.txt"), "a\n").unwrap();
    git(&repo, &["add", "src/a.txt"]);
    git(
        &repo,
        &[
            "commit",
            "-qm",
            "feat(planex): First [T1]\n\nPlanex-Task: T1",
        ],
    );
    let agent =
        Arc::new(FakeAgent::new("fake").otherwise(edit("T1", &[("src/a.txt", "again\n")], &[])));
    let outcome = verified(
        &repo,
        vcs,
        agent.clone(),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .resume(Some(&session))
    .await
    .unwrap();
    assert_eq!(
        outcome.exit_code(),
        0,
        "{}\n{:?}",
        outcome.summary,
        results(&outcome)
            .iter()
            .map(|r| &r.error)
            .collect::<Vec<_>>()
    );
    assert!(agent.calls().is_empty(), "T1 ran again");
    assert_eq!(subjects(&repo), ["feat(planex): First [T1]"]);
    // Running a verified session's tasks again without verification is
    // refused.
    let unverified = Planex::new(
        &repo,
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .retry_failed(Some(&session))
    .await
    .unwrap_err();
    assert!(
        unverified
            .to_string()
            .contains("runs verified tasks (one commit per task): continue it without --no-commit"),
        "{unverified}"
    );
    let rows = results(&outcome);
    assert_eq!(row(&rows, "T1").status, RowStatus::Completed);
    assert_eq!(
        extra(row(&rows, "T1"), "commit"),
        git(&repo, &["rev-parse", "HEAD"]).trim()
    );
}

/// A run killed while a task's agent was writing in its worktree, and the
/// user's edits made before the resume: `--continue` removes the killed
/// run's worktree (the half-done change was never in the user's tree) and
/// runs the task again in a fresh one; the user's edit and new file are
/// never rolled back. Without `--allow-dirty` the resume refuses the dirty
/// tree, naming it, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_in_flight_at_a_crash_runs_again_and_the_users_edits_since_stay() {
    use orchestrator_core::vcs::Vcs as _;
    let (dir, repo) = sandbox(&["T1,First,Create a,,,src/a.txt,,,,,"]);
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let stopped = stopped_at_the_gate(dir.path(), &repo).await;
    let session_dir = stopped.summary.session_dir.clone();
    let session = stopped.summary.session_id.clone();
    // What the killed run left: its base, T1's worktree with a half-done
    // change, its record and the pool's journal.
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(session_dir.join("verify-base.txt"), base.trim()).unwrap();
    let slot = orchestrator_core::state::worktree_root(&repo)
        .join(format!("planex-{session}"))
        .join("slot-0");
    let branch = format!("planex/{session}/slot-0");
    let head = vcs.head().await.unwrap();
    vcs.worktree_add(&slot, &branch, &head).await.unwrap();
    std::fs::write(slot.join("src/a.txt"), "half\n").unwrap();
    let record = orchestrator_planex::verify::InFlight {
        id: "T1".into(),
        checkpoint: None,
        worktree: Some(orchestrator_planex::verify::TaskWorktree {
            path: slot.clone(),
            branch: branch.clone(),
        }),
        landing: None,
    };
    let path = orchestrator_planex::verify::in_flight_path(&session_dir, "T1");
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    // The user works between the kill and the resume.
    std::fs::write(repo.join("src/lib.txt"), "the user's edit\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "the user's new file\n").unwrap();

    let agent =
        Arc::new(FakeAgent::new("fake").otherwise(edit("T1", &[("src/a.txt", "a\n")], &[])));
    let refused = verified(
        &repo,
        Arc::clone(&vcs),
        agent.clone(),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .resume(Some(&session))
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("notes.txt, src/lib.txt"),
        "{refused}"
    );
    assert_eq!(agent.calls().len(), 0);
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "the user's edit\n"
    );

    let outcome = Planex::new(
        &repo,
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .with_verification(
        Verification::new(vcs, Arc::new(ProcessRunner::default())).with_allow_dirty(true),
    )
    .resume(Some(&session))
    .await
    .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{}", outcome.summary);
    assert_eq!(agent.calls().len(), 1);
    assert_eq!(subjects(&repo), ["feat(planex): First [T1]"]);
    assert_eq!(
        std::fs::read_to_string(repo.join("src/a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "the user's edit\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "the user's new file\n"
    );
    assert_eq!(
        git(&repo, &["status", "--porcelain"]),
        " M src/lib.txt\n?? notes.txt\n",
        "the user's work stays uncommitted"
    );
    assert!(!path.exists(), "the record is gone");
    assert_no_worktree_left(&repo);
}

/// A record an older version left for a task it ran in the working tree
/// itself: its half-done change cannot be told from what the user edited
/// since, so the resume rolls nothing back, says so, and the tree check
/// refuses the uncommitted files — every byte stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_tree_record_of_an_older_version_is_never_rolled_back() {
    use orchestrator_core::vcs::Vcs as _;
    let (dir, repo) = sandbox(&["T1,First,Create a,,,src/**,,,,,"]);
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let stopped = stopped_at_the_gate(dir.path(), &repo).await;
    let session_dir = stopped.summary.session_dir.clone();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(session_dir.join("verify-base.txt"), base.trim()).unwrap();
    let record = orchestrator_planex::verify::InFlight {
        id: "T1".into(),
        checkpoint: Some(vcs.checkpoint().await.unwrap()),
        worktree: None,
        landing: None,
    };
    let path = orchestrator_planex::verify::in_flight_path(&session_dir, "T1");
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    std::fs::write(repo.join("src/a.txt"), "half, or the user's?\n").unwrap();
    std::fs::write(repo.join("src/lib.txt"), "edited\n").unwrap();
    let agent = Arc::new(FakeAgent::new("fake"));
    let sink = Arc::new(CollectingSink::new());
    let refused = verified(
        &repo,
        vcs,
        agent.clone(),
        sink.clone(),
        PlanexOptions::default().with_auto_yes(true),
    )
    .resume(Some(&stopped.summary.session_id))
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("src/a.txt, src/lib.txt"),
        "{refused}"
    );
    assert!(sink.events().iter().any(|e| matches!(e,
        orchestrator_core::event::Event::Warning { message }
            if message.starts_with("task T1 was interrupted in the working tree before it landed; nothing was rolled back"))));
    assert_eq!(
        std::fs::read_to_string(repo.join("src/a.txt")).unwrap(),
        "half, or the user's?\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "edited\n"
    );
    assert_eq!(agent.calls().len(), 0);
}

/// `--allow-dirty`: the tasks run in worktrees made at HEAD, the user's
/// modified and untracked files are neither committed nor changed, and a
/// task whose change would overwrite one of them does not land and fails
/// naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_dirty_never_touches_the_users_uncommitted_work() {
    let (dir, repo) = sandbox(&[
        "T1,First,Create a,,,src/a.txt,,,,,",
        "T2,Edit lib,Edit src/lib.txt,,,src/lib.txt,,,,,",
    ]);
    std::fs::write(repo.join("src/lib.txt"), "my work\n").unwrap();
    std::fs::write(repo.join("mine.txt"), "untracked\n").unwrap();
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("T1", edit("T1", &[("src/a.txt", "a\n")], &[]))
            .on("T2", edit("T2", &[("src/lib.txt", "theirs\n")], &[]))
            .on("T2", edit("T2", &[("src/lib.txt", "theirs\n")], &[])),
    );
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let outcome = Planex::new(
        &repo,
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default()
            .with_auto_yes(true)
            .with_concurrency(1),
    )
    .with_verification(
        Verification::new(vcs, Arc::new(ProcessRunner::default())).with_allow_dirty(true),
    )
    .run_tasks_file(&dir.path().join("tasks.csv"))
    .await
    .unwrap();
    assert_eq!(outcome.exit_code(), 3, "{}", outcome.summary);
    // The agents worked elsewhere: not in the repository.
    for call in agent.calls() {
        assert!(
            !call.workdir.starts_with(&repo),
            "{}",
            call.workdir.display()
        );
    }
    assert_eq!(subjects(&repo), ["feat(planex): First [T1]"]);
    assert_eq!(
        git(&repo, &["show", "--stat", "--format=", "HEAD"]).trim(),
        "src/a.txt | 1 +\n 1 file changed, 1 insertion(+)"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "my work\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("mine.txt")).unwrap(),
        "untracked\n"
    );
    // T2's verified change is in the way of the user's work: it waits,
    // kept, for the user (exit 3), naming the path and what to do.
    let OutcomeStatus::Stopped(Stop::NeedsHuman { tasks }) = &outcome.status else {
        panic!("{:?}", outcome.status)
    };
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].0, "T2");
    assert!(
        tasks[0]
            .1
            .contains("your uncommitted changes to src/lib.txt are in the way")
            && tasks[0].1.contains("planex --continue"),
        "{}",
        tasks[0].1
    );
    assert_no_worktree_left(&repo);
    // The user puts their work aside; --continue lands the kept commit
    // without asking the agent again.
    git(&repo, &["stash", "-q"]);
    let calls = agent.calls().len();
    let vcs = Arc::new(GitVcs::open(&repo).await.unwrap());
    let resumed = Planex::new(
        &repo,
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        Arc::new(CollectingSink::new()),
        PlanexOptions::default().with_auto_yes(true),
    )
    .with_verification(
        Verification::new(vcs, Arc::new(ProcessRunner::default())).with_allow_dirty(true),
    )
    .resume(Some(&outcome.summary.session_id))
    .await
    .unwrap();
    assert_eq!(resumed.exit_code(), 0, "{}", resumed.summary);
    assert_eq!(agent.calls().len(), calls, "no agent call on --continue");
    assert_eq!(
        subjects(&repo),
        ["feat(planex): First [T1]", "feat(planex): Edit lib [T2]"]
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.txt")).unwrap(),
        "theirs\n"
    );
    assert_no_worktree_left(&repo);
}

/// A scope is enforced with real glob semantics: `src/{a,b}.txt` lets the
/// task write `src/a.txt`, not `src/c.txt` (which the scheduler's
/// conservative reading took for inside: any file in `src/`). A scope
/// that leaves the repository is refused when the plan is read, naming
/// the row, before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_with_alternatives_is_enforced_exactly_and_an_escaping_one_refused() {
    let (dir, repo) = sandbox(&["T1,Write a,Create a,,,\"src/{a,b}.txt\",,,,,"]);
    let agent = Arc::new(FakeAgent::new("fake").otherwise(edit(
        "T1",
        &[("src/a.txt", "a\n"), ("src/c.txt", "c\n")],
        &["src/a.txt"],
    )));
    let (outcome, _) = run(dir.path(), &repo, agent, |v| v).await;
    let rows = results(&outcome.unwrap());
    let t1 = row(&rows, "T1");
    assert_eq!(t1.status, RowStatus::Failed);
    assert!(
        t1.error
            .contains("changed files outside its scope `src/{a,b}.txt`: src/c.txt"),
        "{}",
        t1.error
    );
    assert!(subjects(&repo).is_empty());
    assert!(!repo.join("src/c.txt").exists());

    let (dir, repo) = sandbox(&["T1,Escape,Write outside,,,../elsewhere/**,,,,,"]);
    let agent = Arc::new(FakeAgent::new("fake"));
    let (outcome, _) = run(dir.path(), &repo, agent.clone(), |v| v).await;
    let err = outcome.unwrap_err();
    assert!(
        err.to_string().contains(
            "task \"T1\": scope \"../elsewhere/**\" has a `..` segment: a scope stays inside the repository"
        ),
        "{err}"
    );
    assert!(err.to_string().contains("line 2"), "names the row: {err}");
    assert_eq!(agent.calls().len(), 0);
}
