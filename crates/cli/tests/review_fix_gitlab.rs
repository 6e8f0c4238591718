//! `orchestrator review-fix --mr N` on GitLab, as a user runs it: the real
//! binary and real git against the scripted GitLab of
//! `orchestrator_adapters::test_support::gitlab` on 127.0.0.1 (REST API v4
//! in the shapes of GitLab's docs; the git remote served by the real
//! `git http-backend`, so pushes are real pushes).
//!
//! MR !7 adds three lines to `notes.txt`, each with an open discussion: a
//! ```` ```suggestion ```` (applied by the builtin agent), a prose comment
//! the scripted agent fixes, and one whose fix breaks the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::PathBuf;
use std::process::Output;

use forge_support::{
    BASE, CHECK, FEATURE, assert_two_fixed_one_failed, assert_user_tree_untouched, commit_feature,
    git, init_clone, orchestrator, review_fix_args, runtime, show, write_agent,
};
use orchestrator_adapters::test_support::gitlab::{GitlabServer, Scenario, TOKEN};

const PROJECT: &str = "group/sub/demo";

struct World {
    tmp: tempfile::TempDir,
    clone: PathBuf,
    head: String,
    server: GitlabServer,
    rt: tokio::runtime::Runtime,
    /// The three discussions: suggestion, prose, failing.
    threads: [String; 3],
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(tmp.path().join("gitlab"));
        scenario.project(10, PROJECT, "main");
        let rt = runtime();
        let server = rt.block_on(GitlabServer::start(scenario));
        let clone = tmp.path().join("clone");
        init_clone(&clone, &[("notes.txt", BASE), ("check.sh", CHECK)]);
        git(
            &clone,
            &["remote", "add", "origin", &server.remote_url(PROJECT)],
        );
        git(&clone, &["push", "-q", "origin", "main"]);
        commit_feature(&clone, &[("notes.txt", FEATURE)], "more notes");
        git(&clone, &["push", "-q", "-u", "origin", "feature"]);
        let head = git(&clone, &["rev-parse", "HEAD"]);
        let threads = server.with(|s| {
            s.merge_request(7, 10, 10, "feature");
            [
                s.thread(
                    10,
                    7,
                    "Typo.\n```suggestion:-0+0\nbeta\n```\n",
                    Some(("notes.txt", 2)),
                ),
                s.thread(
                    10,
                    7,
                    "Please drop the TODO marker.",
                    Some(("notes.txt", 3)),
                ),
                s.thread(10, 7, "Make delta louder.", Some(("notes.txt", 4))),
            ]
        });
        write_agent(tmp.path());
        Self {
            tmp,
            clone,
            head,
            server,
            rt,
            threads,
        }
    }

    fn run(&self, extra: &[&str]) -> Output {
        let _guard = self.rt.enter();
        orchestrator(&self.clone, self.tmp.path())
            .args(review_fix_args(self.tmp.path(), "--mr", "7", extra))
            .env("GITLAB_TOKEN", TOKEN)
            .env_remove("CI_JOB_TOKEN")
            .output()
            .unwrap()
    }

    /// The bodies of the notes after the first of discussion `id`.
    fn replies(&self, id: &str) -> Vec<String> {
        self.server.with(|s| {
            s.discussions
                .iter()
                .find(|d| d.id == id)
                .map(|d| d.notes.iter().skip(1).map(|n| n.body.clone()).collect())
                .unwrap_or_default()
        })
    }

    fn user_tree_untouched(&self) {
        assert_user_tree_untouched(&self.clone, &self.head);
    }
}

/// Push delivery: two verified commits fast-forward the MR's source
/// branch, the two fixed threads get "Fixed in <sha>." naming their own
/// commit, the third one reply saying why; nothing is resolved without
/// `--resolve`, and the user's checkout is untouched.
#[test]
fn three_discussions_give_two_pushed_commits_two_fixed_replies_and_one_failure_reply() {
    let w = World::new();
    let o = w.run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let pushed = w.server.with(|s| s.pushes.clone());
    let last = pushed.last().unwrap();
    assert_eq!(
        (last.branch.as_str(), last.forced),
        ("feature", false),
        "{pushed:#?}"
    );
    let tip = w.server.with(|s| s.branch_head(10, "feature")).unwrap();
    assert_eq!(tip, last.sha);
    git(&w.clone, &["fetch", "-q", "origin", "feature"]);
    let log = git(
        &w.clone,
        &["log", "--format=%H %s", &format!("{}..FETCH_HEAD", w.head)],
    );
    assert_eq!(
        git(&w.clone, &["show", "FETCH_HEAD:notes.txt"]),
        "alpha\nbeta\ngamma\ndelta"
    );
    assert_two_fixed_one_failed(&log, &w.threads, |id| w.replies(id), "");
    assert!(
        w.server.with(|s| s
            .discussions
            .iter()
            .all(|d| d.notes.iter().all(|n| !n.resolved))),
        "nothing resolved without --resolve"
    );
    w.user_tree_untouched();
    // The request's session is kept apart: a `--resume` on the checkout
    // never finds it.
    let sessions = w.clone.join(".review/requests/gitlab-mr-7/.review/fixes");
    assert!(
        std::fs::read_dir(&sessions).unwrap().count() > 0,
        "{}",
        sessions.display()
    );
    assert!(!w.clone.join(".review/fixes").exists());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("MR !7: 3 findings from review threads"),
        "{}",
        show(&o)
    );
    assert!(
        out.contains(&format!("pushed {} to `feature`", &tip[..7])),
        "{}",
        show(&o)
    );

    // The failed fix was rolled back; `trash list` says whose attempt the
    // saved notes.txt was.
    let listed = orchestrator(&w.clone, w.tmp.path())
        .args(["trash", "list"])
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", show(&listed));
    let listed = String::from_utf8_lossy(&listed.stdout);
    let reason = listed
        .lines()
        .find(|l| l.contains("rollback of an attempt at finding "))
        .unwrap_or_else(|| panic!("no rollback names its finding:\n{listed}"));
    assert!(
        reason.contains(&w.threads[2]) && reason.contains("(Make delta louder.)"),
        "{listed}"
    );

    // A second run: every thread already answered, no agent call, no push.
    let again = w.run(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert_eq!(w.server.with(|s| s.pushes.len()), pushed.len());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("3 threads left out"),
        "{}",
        show(&again)
    );
}

/// `--resolve` resolves the threads a pushed fix answered, and only those.
#[test]
fn resolve_resolves_the_fixed_threads_only() {
    let w = World::new();
    let o = w.run(&["--resolve"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let resolved = |id: &str| {
        w.server.with(|s| {
            s.discussions
                .iter()
                .find(|d| d.id == id)
                .is_some_and(|d| d.notes[0].resolved)
        })
    };
    assert!(resolved(&w.threads[0]) && resolved(&w.threads[1]));
    assert!(!resolved(&w.threads[2]));
}

/// Suggestion delivery: nothing pushed; one review whose two diff notes
/// are committable suggestions on the lines each fix changed, and the
/// failure reply.
#[test]
fn deliver_suggestions_posts_two_committable_suggestions_and_pushes_nothing() {
    let w = World::new();
    let pushes_before = w.server.with(|s| s.pushes.len());
    let o = w.run(&["--deliver", "suggestions"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        w.server.with(|s| s.pushes.len()),
        pushes_before,
        "nothing pushed"
    );
    assert_eq!(
        w.server.with(|s| s.branch_head(10, "feature")),
        Some(w.head.clone())
    );
    let posted: Vec<(Option<u64>, String)> = w.server.with(|s| {
        s.discussions
            .iter()
            .filter(|d| d.notes[0].author == "orchestrator")
            .filter_map(|d| {
                let n = &d.notes[0];
                n.position.as_ref().map(|p| (p.new_line, n.body.clone()))
            })
            .collect()
    });
    assert_eq!(
        posted,
        [
            (Some(2), "```suggestion:-0+0\nbeta\n```".to_owned()),
            (Some(3), "```suggestion:-0+0\ngamma\n```".to_owned()),
        ]
    );
    let calls = w.server.api_calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| *c == "POST /projects/group%2Fsub%2Fdemo/merge_requests/7/discussions")
            .count(),
        2,
        "{calls:#?}"
    );
    assert!(w.replies(&w.threads[0]).is_empty() && w.replies(&w.threads[1]).is_empty());
    assert_eq!(w.replies(&w.threads[2]).len(), 1);
    w.user_tree_untouched();
}

/// A fork MR whose author does not allow edits: with push delivery it is
/// refused before any agent call; nothing is committed, pushed or posted.
#[test]
fn a_fork_merge_request_without_push_rights_is_refused_before_any_agent_call() {
    let w = World::new();
    w.server.with(|s| s.project(11, "forker/demo", "main"));
    let fork = w.server.remote_url("forker/demo");
    git(&w.clone, &["push", "-q", &fork, "feature:patch-1"]);
    w.server.with(|s| {
        s.merge_request(8, 10, 11, "patch-1");
        if let Some(m) = s.mr_mut(8) {
            m.allow_collaboration = false;
        }
    });
    let _guard = w.rt.enter();
    let o = orchestrator(&w.clone, w.tmp.path())
        .args(["review-fix", "--mr", "8", "-y", "--test-cmd", "sh check.sh"])
        .env("GITLAB_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "MR !8 comes from the fork forker/demo, which does not allow edits from maintainers"
        ),
        "{}",
        show(&o)
    );
    let calls = w.server.api_calls();
    assert!(
        !calls.iter().any(|c| c.contains("/discussions")),
        "{calls:#?}"
    );
    w.user_tree_untouched();
}

/// A `--fix` finding on a line the MR does not add (line 1 is the target
/// branch's) cannot be a suggestion: with `--deliver suggestions` it goes
/// into the review's summary note as a patch, beside the two suggestions.
#[test]
fn a_fix_outside_the_merge_requests_diff_goes_into_the_summary_as_a_patch() {
    let w = World::new();
    let findings = w.tmp.path().join("extra.rdjson");
    std::fs::write(
        &findings,
        r#"{"source": {"name": "lint"}, "diagnostics": [{"message": "Capitalise the first note",
            "location": {"path": "notes.txt", "range": {"start": {"line": 1}}},
            "code": {"value": "capital"},
            "suggestions": [{"range": {"start": {"line": 1}, "end": {"line": 1}}, "text": "Alpha\n"}]}]}"#,
    )
    .unwrap();
    let o = w.run(&[
        "--deliver",
        "suggestions",
        "--fix",
        findings.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let notes: Vec<String> = w.server.with(|s| {
        s.discussions
            .iter()
            .filter(|d| d.individual_note && d.notes[0].author == "orchestrator")
            .map(|d| d.notes[0].body.clone())
            .collect()
    });
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(
        notes[0]
            .starts_with("orchestrator review-fix: 2 verified fixes as committable suggestions")
            && notes[0].contains("capital@notes.txt:1:1:\n\n```diff\n")
            && notes[0].contains("-alpha\n+Alpha\n"),
        "{}",
        notes[0]
    );
    let suggestions = w.server.with(|s| {
        s.discussions
            .iter()
            .filter(|d| !d.individual_note && d.notes[0].author == "orchestrator")
            .count()
    });
    assert_eq!(suggestions, 2);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(
            "posted one review: 2 suggestions, 1 fix as a patch in its summary; nothing pushed"
        ),
        "{}",
        show(&o)
    );
    w.user_tree_untouched();
}

/// With `--agent builtin` (no LLM) only the suggestion is fixed; the two
/// prose discussions are declined before any agent call, each with one
/// reply saying an LLM agent is needed. `--pr N` with `--gitlab-url` reads
/// the same merge request.
#[test]
fn prose_discussions_without_an_llm_are_declined_with_one_reply_each() {
    let w = World::new();
    let _guard = w.rt.enter();
    let o = orchestrator(&w.clone, w.tmp.path())
        .args([
            "review-fix",
            "--pr",
            "7",
            "--gitlab-url",
            &w.server.url(),
            "-y",
        ])
        .args(["--agent", "builtin", "--test-cmd", "sh check.sh"])
        .env("GITLAB_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let head = w.server.with(|s| s.branch_head(10, "feature")).unwrap();
    assert_eq!(
        w.replies(&w.threads[0]),
        [format!("Fixed in {}.", &head[..7])]
    );
    for t in &w.threads[1..] {
        let replies = w.replies(t);
        assert_eq!(replies.len(), 1, "{replies:?}");
        assert!(
            replies[0].starts_with("Not fixed by orchestrator review-fix: ")
                && replies[0].contains("needs an LLM agent"),
            "{replies:?}"
        );
    }
    w.user_tree_untouched();
}
