//! `orchestrator review-fix --pr N` on GitHub, as a user runs it: the real
//! binary, the real `gh` — both versions the project tests, Debian's 2.23
//! and the pinned 2.102 — and real git, against the scripted GitHub of
//! `orchestrator_adapters::test_support::github` on 127.0.0.1 (REST and
//! GraphQL in GitHub's published shapes; the git remote served by the real
//! `git http-backend`, so pushes are real pushes into its bare repository).
//!
//! PR #7 adds three lines to `notes.txt`, each with an open review thread:
//! a ```` ```suggestion ```` (applied by the builtin agent), a prose comment
//! the scripted agent fixes, and one whose fix breaks the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod forge_support;

use std::path::PathBuf;
use std::process::Output;

use forge_support::{
    BASE, CHECK, FEATURE, assert_two_fixed_one_failed, assert_user_tree_untouched, commit_feature,
    git, init_clone, orchestrator, path_with_gh, review_fix_args, runtime, show, write_agent,
};
use orchestrator_adapters::test_support::github::{GhBinary, GithubServer, Scenario, gh_binaries};

const REPO: &str = "octo/demo";

struct World {
    tmp: tempfile::TempDir,
    clone: PathBuf,
    head: String,
    server: GithubServer,
    bin: GhBinary,
    rt: tokio::runtime::Runtime,
    /// The three threads: suggestion, prose, failing.
    threads: [String; 3],
}

impl World {
    fn new(bin: &GhBinary) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut scenario = Scenario::new(tmp.path().join("github"));
        let url = scenario.repo(REPO, "main");
        let bare = scenario.repos[REPO].bare.clone();
        let clone = tmp.path().join("clone");
        init_clone(&clone, &[("notes.txt", BASE), ("check.sh", CHECK)]);
        git(&clone, &["push", "-q", bare.to_str().unwrap(), "main"]);
        commit_feature(&clone, &[("notes.txt", FEATURE)], "more notes");
        git(&clone, &["push", "-q", bare.to_str().unwrap(), "feature"]);
        git(&clone, &["remote", "add", "origin", &url]);
        let head = git(&clone, &["rev-parse", "HEAD"]);
        scenario.pull(7, REPO, "main", REPO, "feature");
        let threads = [
            scenario.review_comment(7, "notes.txt", 2, "Typo.\n```suggestion\nbeta\n```\n"),
            scenario.review_comment(7, "notes.txt", 3, "Please drop the TODO marker."),
            scenario.review_comment(7, "notes.txt", 4, "Make delta louder."),
        ];
        write_agent(tmp.path());
        let rt = runtime();
        let server = rt.block_on(GithubServer::start(scenario));
        Self {
            tmp,
            clone,
            head,
            server,
            bin: bin.clone(),
            rt,
            threads,
        }
    }

    /// `orchestrator args…` in the clone, the gh under test first on
    /// `PATH`, gh and git pointed at the scripted GitHub.
    fn orchestrator(&self, args: &[&str]) -> Output {
        let _guard = self.rt.enter();
        let path = path_with_gh(&self.bin, &self.tmp.path().join("bin"));
        orchestrator(&self.clone, self.tmp.path())
            .args(args)
            .envs(self.server.gh_env(&self.tmp.path().join("home")))
            .env("PATH", path)
            .env_remove("GITHUB_TOKEN")
            .env_remove("GH_ENTERPRISE_TOKEN")
            .output()
            .unwrap()
    }

    fn run(&self, extra: &[&str]) -> Output {
        let args = review_fix_args(self.tmp.path(), "--pr", "7", extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.orchestrator(&args)
    }

    /// The bodies of the comments after the first of thread `id`.
    fn replies(&self, id: &str) -> Vec<String> {
        self.server.with(|s| {
            s.review_threads()
                .iter()
                .find(|t| t.id == id)
                .map(|t| t.comments.iter().skip(1).map(|c| c.body.clone()).collect())
                .unwrap_or_default()
        })
    }

    fn feature_tip(&self) -> Option<String> {
        self.server.with(|s| s.branch_head(REPO, "feature"))
    }

    fn agent_calls(&self) -> usize {
        std::fs::read_to_string(self.tmp.path().join("agent-calls"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    fn user_tree_untouched(&self) {
        assert_user_tree_untouched(&self.clone, &self.head);
    }
}

/// Push delivery: two verified commits fast-forward the PR's branch in the
/// scripted server's bare repository, the two fixed threads get "Fixed in
/// <sha>." naming their own commit, the third one reply saying why; nothing
/// is resolved without `--resolve`; the user's checkout is untouched.
#[test]
fn three_review_comments_give_two_pushed_commits_two_fixed_replies_and_one_failure_reply() {
    for bin in gh_binaries() {
        let w = World::new(&bin);
        let v = &bin.version;
        let o = w.run(&[]);
        assert_eq!(o.status.code(), Some(1), "gh {v}: {}", show(&o));
        let tip = w.feature_tip().unwrap();
        let bare = w.server.with(|s| s.repos[REPO].bare.clone());
        let in_bare = |args: &[&str]| {
            let mut all = vec!["--git-dir", bare.to_str().unwrap()];
            all.extend_from_slice(args);
            git(&w.clone, &all)
        };
        in_bare(&["merge-base", "--is-ancestor", &w.head, &tip]);
        let log = in_bare(&["log", "--format=%H %s", &format!("{}..{tip}", w.head)]);
        assert_eq!(
            in_bare(&["show", &format!("{tip}:notes.txt")]),
            "alpha\nbeta\ngamma\ndelta"
        );
        assert_two_fixed_one_failed(&log, &w.threads, |id| w.replies(id), &format!("gh {v}: "));
        assert!(
            w.server
                .with(|s| s.review_threads().iter().all(|t| !t.resolved)),
            "gh {v}: nothing resolved without --resolve"
        );
        assert!(w.server.with(|s| s.submitted_reviews().is_empty()));
        w.user_tree_untouched();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("PR #7: 3 findings from review threads")
                && out.contains(&format!("pushed {} to `feature`", &tip[..7])),
            "gh {v}: {}",
            show(&o)
        );
        // Each reply names its thread whole: GitHub's node ids share a
        // long prefix.
        for t in &w.threads {
            assert!(
                out.contains(&format!("replied in {t}: ")),
                "gh {v}: {}",
                show(&o)
            );
        }
        let calls = w.server.api_calls();
        assert_eq!(
            calls.iter().filter(|c| c.ends_with("/replies")).count(),
            3,
            "gh {v}: {calls:#?}"
        );

        // A second run: every thread already answered, no agent call, no push.
        let calls_before = w.agent_calls();
        let again = w.run(&[]);
        assert_eq!(again.status.code(), Some(0), "gh {v}: {}", show(&again));
        assert_eq!(w.feature_tip(), Some(tip));
        assert_eq!(w.agent_calls(), calls_before, "gh {v}: no agent call");
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("3 threads left out"),
            "gh {v}: {}",
            show(&again)
        );
    }
}

/// `--resolve` resolves (GraphQL `resolveReviewThread`) the threads a
/// pushed fix answered, and only those.
#[test]
fn resolve_resolves_the_fixed_threads_only() {
    let bin = gh_binaries().remove(0);
    let w = World::new(&bin);
    let o = w.run(&["--resolve"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let resolved: Vec<bool> = w
        .server
        .with(|s| s.review_threads().iter().map(|t| t.resolved).collect());
    assert_eq!(resolved, [true, true, false]);
}

/// Suggestion delivery: nothing pushed; one review whose two comments are
/// committable suggestions on the lines each fix changed, and the failure
/// reply.
#[test]
fn deliver_suggestions_posts_one_review_with_two_committable_suggestions_and_pushes_nothing() {
    for bin in gh_binaries() {
        let w = World::new(&bin);
        let v = &bin.version;
        let o = w.run(&["--deliver", "suggestions"]);
        assert_eq!(o.status.code(), Some(1), "gh {v}: {}", show(&o));
        assert_eq!(
            w.feature_tip(),
            Some(w.head.clone()),
            "gh {v}: nothing pushed"
        );
        let reviews = w.server.with(|s| s.submitted_reviews());
        assert_eq!(reviews.len(), 1, "gh {v}: {reviews:#?}");
        assert_eq!(reviews[0].state, "COMMENTED");
        assert_eq!(reviews[0].commit_id, w.head);
        let posted: Vec<(u64, Option<u64>, String)> = w.server.with(|s| {
            s.review_threads()
                .iter()
                .filter(|t| reviews[0].threads.contains(&t.id))
                .map(|t| (t.line, t.start_line, t.comments[0].body.clone()))
                .collect()
        });
        assert_eq!(
            posted,
            [
                (2, None, "```suggestion\nbeta\n```".to_owned()),
                (3, None, "```suggestion\ngamma\n```".to_owned()),
            ],
            "gh {v}"
        );
        assert!(w.replies(&w.threads[0]).is_empty() && w.replies(&w.threads[1]).is_empty());
        assert_eq!(w.replies(&w.threads[2]).len(), 1, "gh {v}");
        assert!(
            String::from_utf8_lossy(&o.stdout)
                .contains("posted one review: 2 suggestions, 0 fixes as a patch in its summary; nothing pushed"),
            "gh {v}: {}",
            show(&o)
        );
        w.user_tree_untouched();
    }
}

/// A fork PR whose author does not allow edits by maintainers, from a fork
/// we cannot write to: with push delivery it is refused before any agent
/// call; nothing is committed, pushed or posted.
#[test]
fn a_fork_pull_request_without_push_rights_is_refused_before_any_agent_call() {
    for bin in gh_binaries() {
        let w = World::new(&bin);
        let v = &bin.version;
        let fork_bare = w.server.with(|s| {
            s.repo("forker/demo", "main");
            s.repos["forker/demo"].bare.clone()
        });
        git(
            &w.clone,
            &["push", "-q", fork_bare.to_str().unwrap(), "feature:patch-1"],
        );
        w.server.with(|s| {
            s.pull(8, REPO, "main", "forker/demo", "patch-1");
            s.review_comment(8, "notes.txt", 3, "Please drop the TODO marker.");
        });
        let agent = format!("command:sh {}", w.tmp.path().join("agent.sh").display());
        let o = w.orchestrator(&[
            "review-fix",
            "--pr",
            "8",
            "-y",
            "--agent",
            &agent,
            "--test-cmd",
            "sh check.sh",
        ]);
        assert_eq!(o.status.code(), Some(2), "gh {v}: {}", show(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(
                "PR #8 comes from the fork forker/demo, which does not allow edits from maintainers"
            ),
            "gh {v}: {}",
            show(&o)
        );
        assert_eq!(w.agent_calls(), 0, "gh {v}: no agent call");
        let calls = w.server.api_calls();
        assert!(
            calls.contains(&"graphql OrchestratorPullRequest".to_owned())
                && !calls
                    .iter()
                    .any(|c| c.contains("Threads") || c.contains("/replies")),
            "gh {v}: {calls:#?}"
        );
        assert_eq!(
            w.server.with(|s| s.branch_head("forker/demo", "patch-1")),
            Some(w.head.clone())
        );
        w.user_tree_untouched();
    }
}
