//! `review-fix --mr N` / `--pr N`: the request's open review threads are
//! the findings, the fixes are delivered into it (`--deliver push` or
//! `suggestions`). The flow is `orchestrator_review_fix::forge`; this
//! module picks the forge, the agents and renders what was delivered.

use std::fmt::Write as _;
use std::sync::Arc;

use orchestrator_core::agent::Agent;
use orchestrator_core::forge::Forge;
use orchestrator_core::text::counted;
use orchestrator_core::vcs::Vcs;
use orchestrator_review_fix::forge::{Delivery, RequestOptions, RequestReport, RoutedAgent};

use crate::commands::gitlab::{RemoteForge, github_forge, remote_forge};

/// How `--deliver` hands verified fixes to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeliverArg {
    /// Push the commits to the request's branch (never forced) and reply
    /// "Fixed in abc1234." in each thread.
    Push,
    /// Push nothing: post one review with committable suggestions.
    Suggestions,
}

/// The flags of a run on a pull/merge request.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestFlags {
    /// Fix the open review threads of this GitLab merge request (token:
    /// GITLAB_TOKEN or CI_JOB_TOKEN; instance and project: the remote).
    #[arg(long, value_name = "N", conflicts_with = "pr",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mr: Option<u64>,
    /// Fix the open review threads of this pull request: GitHub through
    /// `gh` (its `gh auth`; host: the remote, or GH_HOST), GitLab when the
    /// remote or `--gitlab-url` says so.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pr: Option<u64>,
    /// How verified fixes reach the request.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = DeliverArg::Push)]
    pub deliver: DeliverArg,
    /// With `--deliver push`: resolve each thread a pushed fix answered.
    #[arg(long)]
    pub resolve: bool,
    /// GitLab: the instance's URL when the remote does not give it.
    #[arg(long, value_name = "URL")]
    pub gitlab_url: Option<String>,
    /// The git remote of the request's repository.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
}

impl RequestFlags {
    /// The request's number, when the run is on one.
    pub fn number(&self) -> Option<u64> {
        self.mr.or(self.pr)
    }

    /// The library's options.
    pub fn options(&self, number: u64) -> RequestOptions {
        let delivery = match self.deliver {
            DeliverArg::Push => Delivery::Push,
            DeliverArg::Suggestions => Delivery::Suggestions,
        };
        RequestOptions::new(number, delivery)
            .with_resolve(self.resolve)
            .with_remote(self.remote.clone())
    }

    /// Flags that make sense only on a request, given without one.
    pub fn stray(&self) -> Option<&'static str> {
        if self.number().is_some() {
            None
        } else if self.resolve {
            Some("--resolve")
        } else if self.deliver != DeliverArg::Push {
            Some("--deliver")
        } else if self.gitlab_url.is_some() {
            Some("--gitlab-url")
        } else {
            None
        }
    }
}

/// The forge the flags and the remote name; `Err` says what is missing.
pub async fn request_forge(flags: &RequestFlags, vcs: &dyn Vcs) -> Result<Arc<dyn Forge>, String> {
    let found = remote_forge(
        vcs,
        &flags.remote,
        flags.mr.is_some(),
        flags.gitlab_url.as_deref(),
    );
    match found.await? {
        RemoteForge::Gitlab(forge) => Ok(forge),
        RemoteForge::Other { url } => github_forge(&url, vcs.root()).unwrap_or_else(|| {
            Err(format!(
                "review-fix --pr reads GitHub pull requests and GitLab merge requests, and remote \
                 `{}` ({url}) is on neither: set GH_HOST for a GitHub Enterprise host, or give \
                 --gitlab-url for a self-hosted GitLab under another host name",
                flags.remote
            ))
        }),
    }
}

/// The agent of a request run: suggestions to the builtin agent, the rest
/// to `llm` (none with `--agent builtin`).
pub fn routed(builtin: Arc<dyn Agent>, llm: Option<Arc<dyn Agent>>) -> Arc<dyn Agent> {
    Arc::new(RoutedAgent::new(builtin, llm))
}

/// What was delivered, after the run's summary.
pub fn render_delivery(report: &RequestReport) -> String {
    let mut out = String::new();
    let d = &report.delivered;
    let _ = writeln!(
        out,
        "{}: {} from review threads{}",
        report.label,
        counted(report.threads.len() as u64, "finding", "findings"),
        match report.skipped.len() {
            0 => String::new(),
            k => format!(", {} left out", counted(k as u64, "thread", "threads")),
        }
    );
    for (thread, why) in &report.skipped {
        let _ = writeln!(out, "  left out {}: {why}", short(thread));
    }
    match &d.pushed {
        Some((sha, branch)) => {
            let _ = writeln!(
                out,
                "  pushed {} to `{branch}` (fast-forward)",
                &sha[..sha.len().min(7)]
            );
        }
        None if d.suggestions > 0 || !d.patches.is_empty() => {
            let _ = writeln!(
                out,
                "  posted one review: {}, {} as a patch in its summary; nothing pushed",
                counted(d.suggestions as u64, "suggestion", "suggestions"),
                counted(d.patches.len() as u64, "fix", "fixes")
            );
        }
        None => {
            let _ = writeln!(out, "  nothing pushed");
        }
    }
    for (thread, body) in &d.replies {
        let first = body.lines().next().unwrap_or_default();
        let _ = writeln!(out, "  replied in {}: {first}", short(thread));
    }
    if !d.resolved.is_empty() {
        let _ = writeln!(
            out,
            "  resolved {}",
            counted(d.resolved.len() as u64, "thread", "threads")
        );
    }
    out
}

/// The `--json` line of what was delivered (before the `summary` line).
pub fn render_delivery_json(report: &RequestReport) -> String {
    let d = &report.delivered;
    let pair =
        |(thread, body): &(String, String)| serde_json::json!({"thread": thread, "body": body});
    let line = serde_json::json!({
        "event": "delivery",
        "request": report.label,
        "threads": report.threads.iter().map(|t| serde_json::json!({
            "thread": t.thread, "finding": t.finding_id, "suggestion": t.suggestion,
        })).collect::<Vec<_>>(),
        "skipped": report.skipped.iter().map(|(thread, why)| serde_json::json!({"thread": thread, "why": why})).collect::<Vec<_>>(),
        "pushed": d.pushed.as_ref().map(|(sha, branch)| serde_json::json!({"sha": sha, "branch": branch})),
        "replies": d.replies.iter().map(pair).collect::<Vec<_>>(),
        "resolved": d.resolved,
        "suggestions": d.suggestions,
        "patches": d.patches,
    });
    format!("{line}\n")
}

/// A thread's id for people: GitLab's hex discussion ids by their first
/// 8 characters; GitHub's node ids (`PRRT_…`, which share a long prefix
/// within a repository) whole.
fn short(thread: &str) -> &str {
    if thread.contains('_') {
        return thread;
    }
    &thread[..thread.len().min(8)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::forge::ChangeRequest;
    use orchestrator_review_fix::forge::Delivered;
    use orchestrator_review_fix::forge::threads::ThreadFinding;

    fn report(delivered: Delivered) -> RequestReport {
        let thread = |id: &str, line| ThreadFinding {
            thread: id.into(),
            finding_id: format!("thread:{id}@notes.txt:{line}:1"),
            path: "notes.txt".into(),
            line,
            suggestion: line == 2,
        };
        RequestReport {
            label: "MR !7".into(),
            request: ChangeRequest {
                number: 7,
                head_branch: "feature".into(),
                head_repo: "group/demo".into(),
                base_repo: "group/demo".into(),
                head_sha: "1".repeat(40),
                base_branch: "main".into(),
                cross_repository: false,
                can_push: true,
                head_push_url: None,
                head_ref: "refs/merge-requests/7/head".into(),
            },
            threads: vec![thread("d15c0001aa", 2), thread("d15c0002bb", 3)],
            skipped: vec![("d15c0003cc".into(), "resolved".into())],
            passes: None,
            delivered,
        }
    }

    #[test]
    fn what_was_delivered_reads_per_mode() {
        let pushed = Delivered {
            pushed: Some(("abcdef1234567".into(), "feature".into())),
            replies: vec![
                ("d15c0001aa".into(), "Fixed in abcdef0.".into()),
                (
                    "d15c0002bb".into(),
                    "Not fixed by orchestrator review-fix: the tests failed\n\n```\nnot ok\n```"
                        .into(),
                ),
            ],
            resolved: vec!["d15c0001aa".into()],
            ..Delivered::default()
        };
        let suggested = Delivered {
            suggestions: 1,
            patches: vec!["lint@notes.txt:1:1".into()],
            ..Delivered::default()
        };
        insta::assert_snapshot!(
            "json",
            render_delivery_json(&report(Delivered {
                pushed: Some(("abcdef1234567".into(), "feature".into())),
                replies: vec![("d15c0001aa".into(), "Fixed in abcdef0.".into())],
                ..Delivered::default()
            }))
        );
        insta::assert_snapshot!(format!(
            "{}---\n{}---\n{}",
            render_delivery(&report(pushed)),
            render_delivery(&report(suggested)),
            render_delivery(&report(Delivered::default()))
        ));
    }

    #[test]
    fn request_flags_need_a_request() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            flags: RequestFlags,
        }
        let parse = |args: &[&str]| Cli::try_parse_from([&["x"], args].concat()).map(|c| c.flags);
        assert_eq!(parse(&["--resolve"]).unwrap().stray(), Some("--resolve"));
        assert_eq!(
            parse(&["--deliver", "suggestions"]).unwrap().stray(),
            Some("--deliver")
        );
        assert_eq!(parse(&["--mr", "3", "--resolve"]).unwrap().stray(), None);
        assert!(parse(&["--mr", "3", "--pr", "3"]).is_err());
        assert!(parse(&["--mr", "0"]).is_err());
        let options = parse(&["--pr", "4", "--deliver", "suggestions"])
            .unwrap()
            .options(4);
        assert_eq!(
            (options.number, options.delivery),
            (4, Delivery::Suggestions)
        );
    }
}
