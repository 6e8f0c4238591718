//! The [`Forge`] suite: every backend, against a far side scripted to hold
//! the standard requests below, keeps the trait's contract.
//!
//! The standard far side (each backend's scripted server builds it from
//! these constants; [`standard_fake`] is the in-memory one):
//! - request [`NUMBER`] from branch [`HEAD_BRANCH`] of the base repository
//!   into [`BASE_BRANCH`], which we may push to; its newest pipeline failed:
//!   job [`FAILED_JOB`] failed (its log holds [`FAILED_LOG_LINE`]) and job
//!   [`PASSED_JOB`] passed;
//! - two open threads on it, oldest first: a comment on
//!   [`FILE`]:[`SUGGESTION_LINE`] whose body is [`SUGGESTION_BODY`] (one
//!   suggestion block), and a prose comment on [`FILE`]:[`PROSE_LINE`]
//!   ([`PROSE_BODY`]);
//! - its diff changes [`FILE`];
//! - request [`FORK_NUMBER`] from a fork that does not let us push.

use crate::conformance::must;
use crate::fakes::FakeForge;
use crate::forge::{
    ChangeRequest, CiStatus, Forge, Job, NewComment, NewReview, Pipeline, Position, ReviewComment,
    ReviewThread, SuggestionBlock, parse_suggestions,
};

/// The standard request's number.
pub const NUMBER: u64 = 7;
/// The fork request's number.
pub const FORK_NUMBER: u64 = 8;
/// The standard request's head branch.
pub const HEAD_BRANCH: &str = "feature";
/// The branch both requests target.
pub const BASE_BRANCH: &str = "main";
/// The job that failed.
pub const FAILED_JOB: &str = "lint";
/// The job that passed.
pub const PASSED_JOB: &str = "build";
/// A line of the failed job's log.
pub const FAILED_LOG_LINE: &str = "error: formatting differs in src/lib.rs";
/// The file the threads comment on.
pub const FILE: &str = "src/lib.rs";
/// The line the suggestion comment is on (new side).
pub const SUGGESTION_LINE: u64 = 2;
/// The suggestion comment.
pub const SUGGESTION_BODY: &str =
    "Name the constant.\n\n```suggestion\nconst LIMIT: u32 = 2;\n```\n";
/// The line the prose comment is on (new side).
pub const PROSE_LINE: u64 = 1;
/// The prose comment.
pub const PROSE_BODY: &str = "This function needs a doc comment.";

/// The standard request as a backend should read it, at head `head_sha`
/// (backends check the fields [`run_suite`] names; URLs and refs are
/// theirs).
fn standard_request(head_sha: &str, repo: &str) -> ChangeRequest {
    ChangeRequest {
        number: NUMBER,
        head_branch: HEAD_BRANCH.into(),
        head_repo: repo.into(),
        base_repo: repo.into(),
        head_sha: head_sha.into(),
        base_branch: BASE_BRANCH.into(),
        cross_repository: false,
        can_push: true,
        head_push_url: None,
        head_ref: format!("refs/fake/{NUMBER}/head"),
    }
}

/// The in-memory forge holding the standard far side at head `head_sha`.
pub fn standard_fake(head_sha: &str) -> FakeForge {
    let fake = FakeForge::new()
        .with_request(standard_request(head_sha, "octo/demo"))
        .with_request(ChangeRequest {
            number: FORK_NUMBER,
            head_repo: "forker/demo".into(),
            cross_repository: true,
            can_push: false,
            head_ref: format!("refs/fake/{FORK_NUMBER}/head"),
            ..standard_request(head_sha, "octo/demo")
        });
    let job = |id: &str, name: &str, status| Job {
        id: id.into(),
        name: name.into(),
        status,
        allow_failure: false,
        failure_reason: (status == CiStatus::Failed).then(|| "script_failure".into()),
        project: "octo/demo".into(),
        web_url: None,
    };
    fake.set_pipeline(
        NUMBER,
        Pipeline {
            id: "100".into(),
            sha: head_sha.into(),
            status: CiStatus::Failed,
            jobs: vec![
                job("1001", FAILED_JOB, CiStatus::Failed),
                job("1002", PASSED_JOB, CiStatus::Success),
            ],
        },
    );
    fake.set_diff(
        NUMBER,
        &format!("--- a/{FILE}\n+++ b/{FILE}\n@@ -1 +1,2 @@\n"),
    );
    fake.set_log("1001", &format!("$ cargo fmt --check\n{FAILED_LOG_LINE}\n"));
    for (id, line, body) in [
        ("t1", SUGGESTION_LINE, SUGGESTION_BODY),
        ("t2", PROSE_LINE, PROSE_BODY),
    ] {
        fake.add_thread(
            NUMBER,
            ReviewThread {
                id: id.into(),
                resolvable: true,
                resolved: false,
                comments: vec![ReviewComment {
                    id: format!("{id}-c1"),
                    author: "reviewer".into(),
                    body: body.into(),
                    position: Some(Position {
                        path: FILE.into(),
                        new_line: Some(line),
                        old_line: None,
                    }),
                    suggestions: parse_suggestions(body),
                }],
            },
        );
    }
    fake
}

/// Runs the suite against `forge`, whose far side holds the standard
/// requests with the standard request's head at `head_sha`. It changes
/// that far side (a retry, a reply, a resolution, a review).
pub async fn run_suite(forge: &dyn Forge, head_sha: &str) {
    reads_the_requests(forge, head_sha).await;
    let lint = reads_the_pipeline_and_logs(forge).await;
    retries_a_job(forge, &lint).await;
    let threads = reads_the_threads(forge).await;
    replies_and_resolves(forge, &threads).await;
    posts_a_review(forge).await;
}

async fn reads_the_requests(forge: &dyn Forge, head_sha: &str) {
    let pr = must(
        forge.change_request(NUMBER).await,
        "change_request(standard)",
    );
    assert_eq!(pr.number, NUMBER, "conformance: the request's number");
    assert_eq!(pr.head_branch, HEAD_BRANCH, "conformance: head branch");
    assert_eq!(pr.base_branch, BASE_BRANCH, "conformance: base branch");
    assert!(
        pr.head_sha.eq_ignore_ascii_case(head_sha),
        "conformance: head sha {} is not {head_sha}",
        pr.head_sha
    );
    assert!(
        !pr.cross_repository && pr.can_push,
        "conformance: a branch of the base repository is ours to push: {pr:?}"
    );
    assert_eq!(pr.head_repo, pr.base_repo, "conformance: same repository");
    assert!(!pr.head_ref.is_empty(), "conformance: a head ref is named");
    let fork = must(
        forge.change_request(FORK_NUMBER).await,
        "change_request(fork)",
    );
    assert!(
        fork.cross_repository && !fork.can_push,
        "conformance: a fork without edits allowed is not ours to push: {fork:?}"
    );
    assert_ne!(
        fork.head_repo, fork.base_repo,
        "conformance: the fork's repository"
    );
    let diff = must(forge.diff(NUMBER).await, "diff");
    assert!(
        diff.contains(&format!("b/{FILE}")),
        "conformance: the diff names the changed file: {diff:?}"
    );
    assert!(
        forge.change_request(999_999).await.is_err(),
        "conformance: a request that does not exist is an error"
    );
}

async fn reads_the_pipeline_and_logs(forge: &dyn Forge) -> Job {
    let pipeline = must(forge.pipeline(NUMBER).await, "pipeline");
    let Some(pipeline) = pipeline else {
        panic!("conformance: the standard request has a pipeline")
    };
    assert_eq!(pipeline.status, CiStatus::Failed, "conformance: it failed");
    let failed: Vec<&str> = pipeline
        .failed_jobs()
        .iter()
        .map(|j| j.name.as_str())
        .collect();
    assert_eq!(failed, [FAILED_JOB], "conformance: the failed jobs");
    assert!(
        pipeline
            .jobs
            .iter()
            .any(|j| j.name == PASSED_JOB && j.status == CiStatus::Success),
        "conformance: the passed job is listed: {:?}",
        pipeline.jobs
    );
    let lint = pipeline.failed_jobs()[0].clone();
    let log = must(forge.job_log(&lint).await, "job_log");
    assert!(
        log.contains(FAILED_LOG_LINE),
        "conformance: the failed job's log holds its error: {log:?}"
    );
    lint
}

async fn retries_a_job(forge: &dyn Forge, lint: &Job) {
    let retried = must(forge.retry_job(lint).await, "retry_job");
    assert_eq!(
        retried.name, lint.name,
        "conformance: the retry is the same job"
    );
    assert_ne!(
        retried.id, lint.id,
        "conformance: the retry is a new attempt"
    );
    let after = must(forge.pipeline(NUMBER).await, "pipeline after a retry");
    let jobs = after.map(|p| p.jobs).unwrap_or_default();
    assert!(
        jobs.iter().any(|j| j.id == retried.id),
        "conformance: the pipeline lists the new attempt: {jobs:?}"
    );
}

async fn reads_the_threads(forge: &dyn Forge) -> Vec<ReviewThread> {
    let threads = must(forge.threads(NUMBER).await, "threads");
    let open: Vec<&ReviewThread> = threads.iter().filter(|t| t.resolvable).collect();
    assert_eq!(
        open.len(),
        2,
        "conformance: two review threads: {threads:?}"
    );
    let (first, second) = (&open[0].comments[0], &open[1].comments[0]);
    assert_eq!(first.body.trim_end(), SUGGESTION_BODY.trim_end());
    assert_eq!(
        first.position,
        Some(Position {
            path: FILE.into(),
            new_line: Some(SUGGESTION_LINE),
            old_line: first.position.as_ref().and_then(|p| p.old_line),
        }),
        "conformance: the suggestion comment's position"
    );
    assert_eq!(
        first.suggestions,
        vec![SuggestionBlock {
            lines_above: 0,
            lines_below: 0,
            replacement: "const LIMIT: u32 = 2;\n".into()
        }],
        "conformance: the suggestion block"
    );
    assert_eq!(second.body.trim_end(), PROSE_BODY);
    assert!(
        second.suggestions.is_empty(),
        "conformance: prose has no suggestion"
    );
    assert_eq!(
        second.position.as_ref().and_then(|p| p.new_line),
        Some(PROSE_LINE)
    );
    assert!(open.iter().all(|t| !t.resolved), "conformance: both open");
    open.into_iter().cloned().collect()
}

async fn replies_and_resolves(forge: &dyn Forge, threads: &[ReviewThread]) {
    let (first, second) = (&threads[0].id, &threads[1].id);
    must(
        forge.reply(NUMBER, second, "Fixed in abc1234").await,
        "reply",
    );
    must(forge.resolve(NUMBER, first).await, "resolve");
    let after = must(forge.threads(NUMBER).await, "threads after reply");
    let find = |id: &str| after.iter().find(|t| t.id == id).cloned();
    let Some(replied) = find(second) else {
        panic!("conformance: thread {second} is still there")
    };
    assert_eq!(
        replied.comments.last().map(|c| c.body.trim_end()),
        Some("Fixed in abc1234"),
        "conformance: the reply is the thread's last comment"
    );
    assert!(
        find(first).is_some_and(|t| t.resolved),
        "conformance: the resolved thread reads resolved"
    );
    assert!(
        forge.reply(NUMBER, "no-such-thread", "x").await.is_err(),
        "conformance: a reply to a thread that does not exist is an error"
    );
}

async fn posts_a_review(forge: &dyn Forge) {
    let before = must(forge.threads(NUMBER).await, "threads before a review").len();
    let body = "Suggested fix.\n\n```suggestion\n/// Adds.\n```\n";
    let review = NewReview {
        body: "ci-autofix: one verified fix".into(),
        comments: vec![NewComment {
            path: FILE.into(),
            line: PROSE_LINE,
            body: body.into(),
        }],
    };
    must(forge.post_review(NUMBER, &review).await, "post_review");
    let after = must(forge.threads(NUMBER).await, "threads after a review");
    let posted = after[before.min(after.len())..]
        .iter()
        .flat_map(|t| &t.comments)
        .find(|c| c.body.trim_end() == body.trim_end());
    let Some(posted) = posted else {
        panic!("conformance: the review's comment is a new thread: {after:?}")
    };
    assert_eq!(
        posted
            .position
            .as_ref()
            .map(|p| (p.path.as_str(), p.new_line)),
        Some((FILE, Some(PROSE_LINE))),
        "conformance: the review comment's position"
    );
    assert_eq!(posted.suggestions.len(), 1, "conformance: its suggestion");
}
