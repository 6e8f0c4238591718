//! The GitHub forge through the real `gh` — both versions the tests run,
//! Debian's 2.23 and the pinned 2.102 — against the scripted GitHub
//! (`test_support::github`: REST and GraphQL in GitHub's published shapes,
//! the git remote served by the real `git http-backend`): the core forge
//! conformance suite, and what gh sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use forge_support::{git, suite_branches};
use orchestrator_adapters::forge::{GithubForge, GithubLocation};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_support::github::{
    CheckStatus, Conclusion, GhBinary, GithubServer, Scenario, gh_binaries,
};
use orchestrator_core::conformance::forge::{
    self as suite, BASE_BRANCH, FAILED_JOB, FAILED_LOG_LINE, FILE, FORK_NUMBER, HEAD_BRANCH,
    NUMBER, PASSED_JOB, PROSE_BODY, PROSE_LINE, SUGGESTION_BODY, SUGGESTION_LINE,
};
use orchestrator_core::forge::{Forge, NewComment, NewReview};

const REPO: &str = "octo/demo";
const FORK: &str = "forker/demo";

/// The suite's standard far side on a scripted GitHub; the head commit.
async fn standard(root: &Path) -> (GithubServer, String) {
    let mut s = Scenario::new(root.join("srv"));
    s.repo(REPO, BASE_BRANCH);
    s.repo(FORK, BASE_BRANCH);
    let (work, head) = suite_branches(root);
    for repo in [REPO, FORK] {
        let bare = s.repos[repo].bare.clone();
        git(
            &work,
            &[
                "push",
                "-q",
                bare.to_str().unwrap(),
                BASE_BRANCH,
                HEAD_BRANCH,
            ],
        );
    }
    s.pull(NUMBER, REPO, BASE_BRANCH, REPO, HEAD_BRANCH);
    s.pull(FORK_NUMBER, REPO, BASE_BRANCH, FORK, HEAD_BRANCH);
    s.check(
        &head,
        PASSED_JOB,
        CheckStatus::Completed(Conclusion::Success),
        "Finished\n",
    );
    s.check(
        &head,
        FAILED_JOB,
        CheckStatus::Completed(Conclusion::Failure),
        &format!(
            "cargo fmt --check\n{FAILED_LOG_LINE}\n##[error]Process completed with exit code 1.\n"
        ),
    );
    s.review_comment(NUMBER, FILE, SUGGESTION_LINE, SUGGESTION_BODY);
    s.review_comment(NUMBER, FILE, PROSE_LINE, PROSE_BODY);
    (GithubServer::start(s).await, head)
}

fn forge(bin: &GhBinary, server: &GithubServer, root: &Path) -> GithubForge {
    let home = root.join(format!("home-{}", bin.version));
    let location = GithubLocation::from_remote(&format!("http://github.localhost/{REPO}.git"));
    GithubForge::new(Arc::new(ProcessRunner::default()), root, location.unwrap())
        .with_program(bin.path.display().to_string())
        .with_env(server.gh_env(&home))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_github_forge_conforms_with_both_real_gh_versions() {
    for bin in gh_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let (server, head) = standard(dir.path()).await;
        let forge = forge(&bin, &server, dir.path());
        suite::run_suite(&forge, &head).await;
        let v = &bin.version;
        let requests = server.requests();
        assert!(
            requests
                .iter()
                .filter(|r| r.host == "api.github.localhost")
                .all(|r| r.user_agent.contains(v.as_str()) && r.missing.is_empty()),
            "gh {v} sent every call and asked for nothing the server lacks: {requests:#?}"
        );
        let calls = server.api_calls();
        for expected in [
            "graphql OrchestratorPullRequest",
            "graphql OrchestratorReviewThreads",
            "graphql OrchestratorHeadChecks",
            "graphql OrchestratorResolveThread",
            "GET /repos/octo/demo/pulls/7",
            "POST /repos/octo/demo/pulls/7/reviews",
        ] {
            assert!(
                calls.iter().any(|c| c == expected),
                "gh {v}: {expected} in {calls:#?}"
            );
        }
        assert!(
            calls
                .iter()
                .any(|c| c.starts_with("POST /repos/octo/demo/pulls/7/comments/")
                    && c.ends_with("/replies")),
            "gh {v}: a reply goes to the thread's first comment: {calls:#?}"
        );
        let threads = server.with(|s| s.review_threads());
        assert!(threads[0].resolved && !threads[1].resolved, "gh {v}");
        assert_eq!(
            threads[1].comments.last().map(|c| c.in_reply_to),
            Some(Some(threads[1].comments[0].id)),
            "gh {v}: the reply is in reply to the thread's first comment"
        );
    }
}

/// A range suggestion posts as GitHub's plain block on `start_line..line`
/// and reads back as a block replacing the lines above the comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_suggestion_round_trips_through_a_review() {
    let bin = gh_binaries().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = standard(dir.path()).await;
    let forge = forge(&bin, &server, dir.path());
    let review = NewReview {
        body: String::new(),
        comments: vec![NewComment {
            path: FILE.into(),
            line: 1,
            body: "```suggestion:-0+1\npub fn add() {}\nconst LIMIT: u32 = 2;\n```".into(),
        }],
    };
    forge.post_review(NUMBER, &review).await.unwrap();
    let posted = server.with(|s| s.review_threads()).pop().unwrap();
    assert_eq!((posted.start_line, posted.line), (Some(1), 2));
    assert!(posted.comments[0].body.starts_with("```suggestion\n"));
    let read = forge.threads(NUMBER).await.unwrap().pop().unwrap();
    let block = &read.comments[0].suggestions[0];
    assert_eq!(
        read.comments[0].position.as_ref().unwrap().new_line,
        Some(2)
    );
    assert_eq!((block.lines_above, block.lines_below), (1, 0));
    assert_eq!(server.with(|s| s.submitted_reviews())[0].state, "COMMENTED");
}

/// The scripted GitHub checks review fields against GitHub's public
/// schema: a field the schema lacks fails gh's query, as on GitHub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_outside_the_public_schema_fails_as_on_github() {
    let bin = gh_binaries().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = standard(dir.path()).await;
    let query = "query { repository(owner: \"octo\", name: \"demo\") { pullRequest(number: 7) { reviewThreads(first: 5) { nodes { id lineNumber } } } } }";
    let out = Command::new(&bin.path)
        .args(["api", "graphql", "-f", &format!("query={query}")])
        .current_dir(dir.path())
        .envs(server.gh_env(&dir.path().join("home")))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Field 'lineNumber' doesn't exist on type 'PullRequestReviewThread'"),
        "{stderr}"
    );
}
