//! What [`super::GithubForge`] asks GitHub and the shapes it reads back:
//! the GraphQL documents (every field is in GitHub's public GraphQL schema,
//! `schema.docs.graphql`; the type each field is read from is named beside
//! it) and the REST answers (GitHub's REST OpenAPI description,
//! github/rest-api-description, `components/schemas/<name>`), and how
//! they become the trait's types (threads, review comments, jobs).

use orchestrator_core::forge::{
    CiStatus, Job, NewComment, Position, ReviewComment, ReviewThread, parse_suggestions,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// The request and whether the viewer may push to it.
pub(crate) const PULL_QUERY: &str =
    "query OrchestratorPullRequest($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    viewerPermission
    pullRequest(number: $number) {
      number
      headRefName
      headRefOid
      baseRefName
      isCrossRepository
      maintainerCanModify
      headRepository { nameWithOwner url viewerPermission }
    }
  }
}";

/// The request's review threads, a page at a time.
pub(crate) const THREADS_QUERY: &str = "query OrchestratorReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id
          isResolved
          path
          line
          originalLine
          startLine
          diffSide
          comments(first: 100) {
            nodes { id databaseId author { login } body path line originalLine }
          }
        }
      }
    }
  }
}";

/// The check runs of the request's head commit, a page at a time.
pub(crate) const CHECKS_QUERY: &str =
    "query OrchestratorHeadChecks($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      headRefOid
      commits(last: 1) {
        nodes {
          commit {
            oid
            statusCheckRollup {
              contexts(first: 100, after: $after) {
                pageInfo { hasNextPage endCursor }
                nodes {
                  __typename
                  ... on CheckRun {
                    databaseId
                    name
                    status
                    conclusion
                    startedAt
                    detailsUrl
                    checkSuite { workflowRun { databaseId } }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}";

/// Resolves one review thread.
pub(crate) const RESOLVE_MUTATION: &str = "mutation OrchestratorResolveThread($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } }
}";

/// `{"data": …}` of a GraphQL answer (errors make gh exit non-zero).
#[derive(Debug, Deserialize)]
pub(crate) struct Data<T> {
    pub(crate) data: T,
}

/// `Query.repository`.
#[derive(Debug, Deserialize)]
pub(crate) struct RepoOf<T> {
    pub(crate) repository: Option<T>,
}

/// `Repository.pullRequest`, with `Repository.viewerPermission`
/// (`RepositoryPermission`: ADMIN, MAINTAIN, WRITE, TRIAGE, READ).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PullRepo<T> {
    #[serde(default)]
    pub(crate) viewer_permission: Option<String>,
    pub(crate) pull_request: Option<T>,
}

/// `PullRequest`: `headRefName`, `headRefOid`, `baseRefName`,
/// `isCrossRepository`, `maintainerCanModify` ("Whether or not
/// maintainers can modify the pull request"), `headRepository`
/// (null when the fork was deleted).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WirePull {
    pub(crate) number: u64,
    pub(crate) head_ref_name: String,
    pub(crate) head_ref_oid: String,
    pub(crate) base_ref_name: String,
    pub(crate) is_cross_repository: bool,
    pub(crate) maintainer_can_modify: bool,
    pub(crate) head_repository: Option<WireHeadRepo>,
}

/// `Repository`: `nameWithOwner`, `url`, `viewerPermission`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireHeadRepo {
    pub(crate) name_with_owner: String,
    pub(crate) url: String,
    #[serde(default)]
    pub(crate) viewer_permission: Option<String>,
}

/// Whether a `RepositoryPermission` lets the viewer push.
pub(crate) fn can_write(permission: Option<&str>) -> bool {
    matches!(permission, Some("ADMIN" | "MAINTAIN" | "WRITE"))
}

/// A connection page (`PageInfo.hasNextPage`, `PageInfo.endCursor`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Page<T> {
    pub(crate) page_info: PageInfo,
    pub(crate) nodes: Vec<T>,
}

/// `PageInfo`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageInfo {
    pub(crate) has_next_page: bool,
    pub(crate) end_cursor: Option<String>,
}

/// `PullRequest.reviewThreads`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadsOf {
    pub(crate) review_threads: Page<WireThread>,
}

/// `PullRequestReviewThread`: `line`/`startLine` on the diff's current
/// side, `originalLine` where it was written, `diffSide` (`DiffSide`:
/// LEFT, RIGHT).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireThread {
    pub(crate) id: String,
    pub(crate) is_resolved: bool,
    pub(crate) path: String,
    pub(crate) line: Option<u64>,
    pub(crate) original_line: Option<u64>,
    pub(crate) start_line: Option<u64>,
    pub(crate) diff_side: String,
    pub(crate) comments: Nodes<WireComment>,
}

/// `{nodes}` of a connection read in one page.
#[derive(Debug, Deserialize)]
pub(crate) struct Nodes<T> {
    pub(crate) nodes: Vec<T>,
}

/// `PullRequestReviewComment`: `databaseId` is the REST comment id
/// replies go to; `author` (`Actor`) is null for a deleted user.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireComment {
    pub(crate) id: String,
    pub(crate) database_id: Option<u64>,
    pub(crate) author: Option<WireActor>,
    pub(crate) body: String,
}

/// `Actor.login`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireActor {
    pub(crate) login: String,
}

/// `PullRequest.headRefOid` and `commits(last: 1)`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChecksOf {
    pub(crate) head_ref_oid: String,
    pub(crate) commits: Nodes<CommitNode>,
}

/// `PullRequestCommit.commit`.
#[derive(Debug, Deserialize)]
pub(crate) struct CommitNode {
    pub(crate) commit: WireCommit,
}

/// `Commit.oid`, `Commit.statusCheckRollup` (null: nothing reported).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCommit {
    pub(crate) oid: String,
    pub(crate) status_check_rollup: Option<Rollup>,
}

/// `StatusCheckRollup.contexts`.
#[derive(Debug, Deserialize)]
pub(crate) struct Rollup {
    pub(crate) contexts: Page<WireContext>,
}

/// A `StatusCheckRollupContext`: a `CheckRun` (its fields below) or a
/// `StatusContext` of another CI (only `__typename` read: it has no job
/// to read a log of or re-run).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireContext {
    #[serde(rename = "__typename")]
    pub(crate) typename: String,
    pub(crate) database_id: Option<u64>,
    pub(crate) name: Option<String>,
    /// `CheckStatusState`.
    pub(crate) status: Option<String>,
    /// `CheckConclusionState`.
    pub(crate) conclusion: Option<String>,
    pub(crate) started_at: Option<String>,
    pub(crate) details_url: Option<String>,
    pub(crate) check_suite: Option<WireSuite>,
}

/// `CheckRun.checkSuite` → `CheckSuite.workflowRun` (null for a check of
/// another app).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireSuite {
    pub(crate) workflow_run: Option<WireRunId>,
}

/// `WorkflowRun.databaseId`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireRunId {
    pub(crate) database_id: Option<u64>,
}

/// REST `job` (`actions/get-job-for-workflow-run`): `status` is
/// queued/in_progress/completed (and waiting, requested, pending),
/// `conclusion` once completed.
#[derive(Debug, Deserialize)]
pub(crate) struct RestJob {
    pub(crate) id: u64,
    pub(crate) run_id: u64,
    pub(crate) name: String,
    pub(crate) status: String,
    pub(crate) conclusion: Option<String>,
    pub(crate) html_url: Option<String>,
}

/// REST `GET …/actions/runs/{run_id}/jobs`: `{total_count, jobs}`.
#[derive(Debug, Deserialize)]
pub(crate) struct RestJobs {
    pub(crate) jobs: Vec<RestJob>,
}

/// A check's state from `CheckStatusState` and `CheckConclusionState`
/// (GraphQL, upper case) or REST's lower-case `status`/`conclusion`.
pub(crate) fn check_status(status: &str, conclusion: Option<&str>) -> CiStatus {
    if !status.eq_ignore_ascii_case("completed") {
        return CiStatus::Pending;
    }
    match conclusion.map(str::to_ascii_uppercase).as_deref() {
        Some("SUCCESS" | "NEUTRAL") => CiStatus::Success,
        Some("SKIPPED") => CiStatus::Skipped,
        Some("CANCELLED") => CiStatus::Canceled,
        _ => CiStatus::Failed,
    }
}

/// A thread as the trait has it. GitHub's suggestion blocks replace the
/// commented line or range (`startLine`..`line`), so a block's
/// `lines_above` is the range's length above `line`.
pub(crate) fn thread(t: WireThread) -> ReviewThread {
    let new_side = t.diff_side == "RIGHT";
    let above = match (t.start_line, t.line) {
        (Some(s), Some(l)) if s < l => u32::try_from(l - s).unwrap_or(0),
        _ => 0,
    };
    // `line` is null once the thread is outdated (its line changed since):
    // no new-side line is named then, so no fix is aimed at a moved line.
    let position = Position {
        path: t.path,
        new_line: if new_side { t.line } else { None },
        old_line: if new_side {
            None
        } else {
            t.line.or(t.original_line)
        },
    };
    let comments = t
        .comments
        .nodes
        .into_iter()
        .map(|c| {
            let mut suggestions = parse_suggestions(&c.body);
            for s in &mut suggestions {
                s.lines_above = s.lines_above.max(above);
            }
            ReviewComment {
                id: c.database_id.map_or(c.id, |d| d.to_string()),
                author: c.author.map(|a| a.login).unwrap_or_default(),
                position: Some(position.clone()),
                suggestions,
                body: c.body,
            }
        })
        .collect();
    ReviewThread {
        id: t.id,
        resolvable: true,
        resolved: t.is_resolved,
        comments,
    }
}

/// One `comments[]` entry of `POST …/pulls/{n}/reviews` (REST
/// `pulls/create-review`: `path`, `body`, `line`, `side`, and for a range
/// `start_line`, `start_side`). A ```` ```suggestion:-A+B ```` block (the
/// trait's range form) becomes GitHub's plain block on lines
/// `line-A`..`line+B`.
pub(crate) fn review_comment(c: &NewComment) -> Value {
    let block = parse_suggestions(&c.body).into_iter().next();
    let (above, below) = block.map_or((0, 0), |b| (b.lines_above, b.lines_below));
    let body = c
        .body
        .lines()
        .map(|l| {
            let t = l.trim_start();
            let ticks = t.chars().take_while(|ch| *ch == '`').count();
            if ticks >= 3 && t[ticks..].starts_with("suggestion:") {
                format!("{}suggestion", &t[..ticks])
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let body = if c.body.ends_with('\n') {
        body + "\n"
    } else {
        body
    };
    let line = c.line + u64::from(below);
    let mut out = json!({ "path": c.path, "body": body, "line": line, "side": "RIGHT" });
    if above + below > 0 {
        out["start_line"] = json!(c.line.saturating_sub(u64::from(above)).max(1));
        out["start_side"] = json!("RIGHT");
    }
    out
}

pub(crate) fn rest_job(project: &str, j: RestJob) -> Job {
    let status = check_status(&j.status, j.conclusion.as_deref());
    Job {
        id: j.id.to_string(),
        name: j.name,
        status,
        allow_failure: false,
        failure_reason: (status == CiStatus::Failed)
            .then_some(j.conclusion)
            .flatten(),
        project: project.to_owned(),
        web_url: j.html_url,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_states_reduce_to_what_a_flow_decides_on() {
        assert_eq!(check_status("IN_PROGRESS", None), CiStatus::Pending);
        assert_eq!(check_status("queued", None), CiStatus::Pending);
        assert_eq!(
            check_status("COMPLETED", Some("NEUTRAL")),
            CiStatus::Success
        );
        assert_eq!(
            check_status("completed", Some("timed_out")),
            CiStatus::Failed
        );
        assert_eq!(
            check_status("COMPLETED", Some("CANCELLED")),
            CiStatus::Canceled
        );
        assert_eq!(
            check_status("COMPLETED", Some("SKIPPED")),
            CiStatus::Skipped
        );
        assert!(can_write(Some("MAINTAIN")) && !can_write(Some("READ")) && !can_write(None));
    }

    #[test]
    fn an_outdated_thread_names_no_new_side_line() {
        let wire: WireThread = serde_json::from_value(json!({
            "id": "PRRT_1", "isResolved": false, "path": "a.rs", "line": null,
            "originalLine": 4, "startLine": null, "diffSide": "RIGHT",
            "comments": {"nodes": [{"id": "PRRC_1", "databaseId": 9, "author": null,
                                    "body": "```suggestion\nx\n```"}]}
        }))
        .unwrap();
        let t = thread(wire);
        let c = &t.comments[0];
        assert_eq!(c.position.as_ref().map(|p| p.new_line), Some(None));
        assert_eq!((c.id.as_str(), c.author.as_str()), ("9", ""));
        assert_eq!(c.suggestions.len(), 1);
    }

    #[test]
    fn a_range_suggestion_becomes_githubs_plain_block_on_a_line_range() {
        let one = review_comment(&NewComment {
            path: "a.rs".into(),
            line: 3,
            body: "```suggestion:-0+0\nx\n```".into(),
        });
        assert_eq!(
            one,
            json!({"path": "a.rs", "body": "```suggestion\nx\n```", "line": 3, "side": "RIGHT"})
        );
        let range = review_comment(&NewComment {
            path: "a.rs".into(),
            line: 5,
            body: "Fix.\n````suggestion:-2+1\nx\n````\n".into(),
        });
        assert_eq!(range["body"], "Fix.\n````suggestion\nx\n````\n");
        assert_eq!(
            (range["start_line"].clone(), range["line"].clone()),
            (json!(3), json!(6))
        );
    }

    proptest::proptest! {
        /// A suggestion posted as `suggestion:-A+B` on line L and read back
        /// from GitHub's range comment replaces the same lines, L-A..=L+B.
        #[test]
        fn a_suggestion_range_survives_the_trip_through_github(
            line in 1u64..500, above in 0u32..20, below in 0u32..20,
        ) {
            proptest::prop_assume!(u64::from(above) < line);
            let posted = review_comment(&NewComment {
                path: "a.rs".into(),
                line,
                body: format!("```suggestion:-{above}+{below}\nx\n```\n"),
            });
            let wire: WireThread = serde_json::from_value(json!({
                "id": "PRRT_1", "isResolved": false, "path": "a.rs",
                "line": posted["line"], "originalLine": posted["line"],
                "startLine": posted.get("start_line"), "diffSide": posted["side"],
                "comments": {"nodes": [{"id": "PRRC_1", "databaseId": 1,
                    "author": {"login": "octo"}, "body": posted["body"]}]},
            }))
            .unwrap();
            let read = thread(wire);
            let c = &read.comments[0];
            let at = c.position.as_ref().and_then(|p| p.new_line).unwrap();
            let b = &c.suggestions[0];
            proptest::prop_assert_eq!(
                (at - u64::from(b.lines_above), at + u64::from(b.lines_below)),
                (line - u64::from(above), line + u64::from(below))
            );
        }
    }
}
