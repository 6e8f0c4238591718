//! The GitLab forge against the scripted GitLab (REST API v4 shapes from
//! GitLab's docs, a real git remote): the core forge conformance suite,
//! pagination, credentials and the requests a review makes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::Path;

use forge_support::{git, suite_branches};
use orchestrator_adapters::forge::{GitlabForge, GitlabLocation, GitlabToken};
use orchestrator_adapters::test_support::gitlab::{GitlabServer, Outcome, Scenario, TOKEN};
use orchestrator_core::conformance::forge::{
    self as suite, BASE_BRANCH, FAILED_JOB, FAILED_LOG_LINE, FILE, FORK_NUMBER, HEAD_BRANCH,
    NUMBER, PASSED_JOB, PROSE_BODY, PROSE_LINE, SUGGESTION_BODY, SUGGESTION_LINE,
};
use orchestrator_core::forge::{Forge, ForgeError, NewComment, NewReview};

const PROJECT: &str = "group/sub/demo";
const FORK: &str = "forker/demo";

/// The standard far side of the forge suite, on a scripted GitLab: the
/// branches are pushed with real git through the server's remote.
async fn standard(root: &Path) -> (GitlabServer, String) {
    let mut s = Scenario::new(root.join("srv"));
    s.project(10, PROJECT, BASE_BRANCH);
    s.project(11, FORK, BASE_BRANCH);
    let server = GitlabServer::start(s).await;
    let (work, head) = suite_branches(root);
    for path in [PROJECT, FORK] {
        let url = server.remote_url(path);
        git(&work, &["push", "-q", &url, BASE_BRANCH, HEAD_BRANCH]);
    }
    server.with(|s| {
        s.merge_request(NUMBER, 10, 10, HEAD_BRANCH);
        s.merge_request(FORK_NUMBER, 10, 11, HEAD_BRANCH);
        if let Some(m) = s.mr_mut(FORK_NUMBER) {
            m.allow_collaboration = false;
        }
        let p = s.mr_pipeline(NUMBER);
        s.job(p, PASSED_JOB, Outcome::success("Finished\n"));
        s.job(
            p,
            FAILED_JOB,
            Outcome::failed(&format!(
                "\u{1b}[32;1m$ cargo fmt --check\u{1b}[0;m\n{FAILED_LOG_LINE}\nERROR: Job failed: exit code 1\n"
            )),
        );
        s.thread(10, NUMBER, SUGGESTION_BODY, Some((FILE, SUGGESTION_LINE)));
        s.thread(10, NUMBER, PROSE_BODY, Some((FILE, PROSE_LINE)));
    });
    (server, head)
}

fn forge(server: &GitlabServer, token: GitlabToken) -> GitlabForge {
    let location = GitlabLocation::from_remote(&server.remote_url(PROJECT)).unwrap();
    GitlabForge::new(location, token).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gitlab_forge_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let (server, head) = standard(dir.path()).await;
    let forge = forge(&server, GitlabToken::Private(TOKEN.into()));
    suite::run_suite(&forge, &head).await;
    let calls = server.api_calls();
    assert!(
        calls.contains(&format!(
            "GET /projects/group%2Fsub%2Fdemo/merge_requests/{NUMBER}"
        )),
        "the project path is URL-encoded: {calls:#?}"
    );
    assert!(
        calls.iter().any(|c| c.starts_with("GET /projects/11")),
        "a fork's path is read from its project: {calls:#?}"
    );
    assert!(
        server
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/api/v4/"))
            .all(|r| r.auth == "PRIVATE-TOKEN"),
        "an access token goes in PRIVATE-TOKEN"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_of_a_list_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = standard(dir.path()).await;
    server.with(|s| {
        s.max_per_page = 1;
        for i in 0..3 {
            s.thread(10, NUMBER, &format!("note {i}"), None);
        }
    });
    let forge = forge(&server, GitlabToken::Private(TOKEN.into()));
    let threads = forge.threads(NUMBER).await.unwrap();
    assert_eq!(threads.len(), 5, "{threads:#?}");
    let pipeline = forge.pipeline(NUMBER).await.unwrap().unwrap();
    assert_eq!(pipeline.jobs.len(), 2, "jobs are paged without x-total");
    let pages = server
        .api_calls()
        .iter()
        .filter(|c| c.contains("/discussions?"))
        .count();
    assert_eq!(pages, 5, "one request per page of one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_sent_as_gitlab_takes_them_and_failures_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = standard(dir.path()).await;
    let job = forge(&server, GitlabToken::Job("job-token".into()));
    let err = job.change_request(NUMBER).await.unwrap_err();
    let ForgeError::Http { status: 404, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(err.to_string().contains("set GITLAB_TOKEN"), "{err}");
    assert_eq!(server.requests().last().unwrap().auth, "JOB-TOKEN");
    let wrong = forge(&server, GitlabToken::Private("nope".into()));
    let err = wrong.change_request(NUMBER).await.unwrap_err().to_string();
    assert!(
        err.contains("HTTP 401")
            && err.contains("401 Unauthorized")
            && err.contains("GITLAB_TOKEN"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_is_a_diff_thread_per_comment_on_the_diff_refs_and_a_summary_note() {
    let dir = tempfile::tempdir().unwrap();
    let (server, head) = standard(dir.path()).await;
    let forge = forge(&server, GitlabToken::Private(TOKEN.into()));
    let review = NewReview {
        body: "Two fixes.".into(),
        comments: vec![NewComment {
            path: FILE.into(),
            line: 2,
            body: "```suggestion\nconst LIMIT: u32 = 2;\n```".into(),
        }],
    };
    forge.post_review(NUMBER, &review).await.unwrap();
    let posts: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/api/v4/"))
        .collect();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    let thread: serde_json::Value = serde_json::from_str(&posts[0].body).unwrap();
    assert!(posts[0].path.ends_with("/merge_requests/7/discussions"));
    assert_eq!(thread["position"]["position_type"], "text");
    assert_eq!(thread["position"]["head_sha"], head.as_str());
    assert_eq!(thread["position"]["new_line"], 2);
    assert!(posts[1].path.ends_with("/merge_requests/7/notes"));
    let threads = forge.threads(NUMBER).await.unwrap();
    let summary = threads.last().unwrap();
    assert!(!summary.resolvable && summary.comments[0].body == "Two fixes.");
    // A position GitLab refuses is an error naming GitLab's message.
    let bad = forge.resolve(NUMBER, "0000").await.unwrap_err().to_string();
    assert!(bad.contains("404 Discussion Not Found"), "{bad}");
}

/// GitLab's rate limits answer `429` with `Retry-After`: the request is sent
/// again after the wait asked for — a write too, once — and a limit that
/// does not lift ends in an error saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_request_waits_as_asked_then_gives_up_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = standard(dir.path()).await;
    let forge = forge(&server, GitlabToken::Private(TOKEN.into()));
    let thread = forge.threads(NUMBER).await.unwrap()[0].id.clone();

    server.with(|s| {
        s.rate_limited = 2;
        s.retry_after = 1;
    });
    let started = std::time::Instant::now();
    let request = forge.change_request(NUMBER).await.unwrap();
    assert_eq!(request.number, NUMBER);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "waited {:?}, where the forge asked for 1 s twice",
        started.elapsed()
    );
    let path = format!("GET /projects/group%2Fsub%2Fdemo/merge_requests/{NUMBER}");
    let calls = server.api_calls();
    assert_eq!(calls[calls.len() - 3..], [path.clone(), path.clone(), path]);

    server.with(|s| {
        s.rate_limited = 1;
        s.retry_after = 0;
    });
    forge
        .reply(NUMBER, &thread, "Fixed in abc1234")
        .await
        .unwrap();
    let replies = server.with(|s| {
        s.discussions
            .iter()
            .flat_map(|d| &d.notes)
            .filter(|n| n.body == "Fixed in abc1234")
            .count()
    });
    assert_eq!(replies, 1, "the write was made once");

    server.with(|s| s.rate_limited = 100);
    let err = forge.change_request(NUMBER).await.unwrap_err();
    let ForgeError::Http { status: 429, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        err.to_string().contains("Retry later")
            && err
                .to_string()
                .contains("rate limited: gave up after 4 retries"),
        "{err}"
    );
    assert_eq!(server.with(|s| s.rate_limited), 95, "1 try and 4 retries");
}
