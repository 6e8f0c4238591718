//! The [`Scenario`] as GitHub's GraphQL object graph, and the resolver of
//! the fields that take arguments. Every field below is named after the
//! public GraphQL schema (octokit/graphql-schema `schema.graphql`):
//! `Type.field` in the comments. gh's own queries (cli/cli
//! `api/queries_pr.go`, `api/export_pr.go`, `pkg/cmd/pr/checks/`) decide
//! which of them are ever read.

use serde_json::{Value, json};

use super::graphql::{Args, FieldError, Resolver};
use super::scenario::{CheckStatus, Pull, Scenario, StatusState, timestamp};

/// The field names of the types gh 2.102 introspects
/// (`__type(name:){fields{name}}`), from the public schema.
const SCHEMA_FIELDS: &str = include_str!("schema_fields.json");

/// The GraphQL node id of pull request `n` (`PullRequest.id`, opaque).
pub(crate) fn pull_node_id(n: u64) -> String {
    format!("PR_kwDOAAAAAc4AAA{n:03}")
}

fn repo_node_id(full: &str) -> String {
    format!("R_kgDO{}", full.replace('/', "_"))
}

/// The resolver over one scenario (read-only for a request).
pub(crate) struct Graph<'s> {
    pub(crate) scenario: &'s Scenario,
}

impl Graph<'_> {
    /// `Repository`: the fields gh's `RepositoryInfo`, `PullRequestByNumber`
    /// (`headRepository`) and `gh repo view` read.
    fn repository(&self, full: &str) -> Option<Value> {
        let repo = self.scenario.repos.get(full)?;
        let (owner, name) = full.split_once('/')?;
        Some(json!({
            "__typename": "Repository",
            "id": repo_node_id(full),                       // Repository.id
            "databaseId": 1,                                // Repository.databaseId
            "name": name,                                   // Repository.name
            "nameWithOwner": full,                          // Repository.nameWithOwner
            "owner": {"__typename": "User", "login": owner},// Repository.owner: RepositoryOwner
            "url": format!("http://{}/{full}", super::scenario::HOST), // Repository.url
            "sshUrl": format!("git@{}:{full}.git", super::scenario::HOST), // Repository.sshUrl
            "description": "",                              // Repository.description
            "hasIssuesEnabled": true,                       // Repository.hasIssuesEnabled
            "hasWikiEnabled": false,                        // Repository.hasWikiEnabled
            // Repository.viewerPermission: the viewer (`octo`) administers
            // its own repositories and only reads others' (forks).
            "viewerPermission": if owner == super::review_state::VIEWER { "ADMIN" } else { "READ" },
            "defaultBranchRef": {"name": repo.default_branch}, // Repository.defaultBranchRef: Ref
            "parent": null,                                 // Repository.parent
            "mergeCommitAllowed": true,                     // Repository.mergeCommitAllowed
            "rebaseMergeAllowed": true,                     // Repository.rebaseMergeAllowed
            "squashMergeAllowed": true,                     // Repository.squashMergeAllowed
            "_full": full,
        }))
    }

    /// `PullRequest`: the fields of gh's `--json` export and its finders.
    fn pull(&self, p: &Pull) -> Value {
        let head_sha = self.scenario.pull_head(p.number);
        let head_owner = p.head.split('/').next().unwrap_or_default();
        let head_repo = self.repository(&p.head).unwrap_or(Value::Null);
        let commit = head_sha.as_ref().map(|sha| {
            json!({
                "commit": {                                 // PullRequestCommit.commit: Commit
                    "oid": sha,                             // Commit.oid
                    "statusCheckRollup": self.rollup(p, sha), // Commit.statusCheckRollup (nullable)
                }
            })
        });
        json!({
            "__typename": "PullRequest",
            "id": pull_node_id(p.number),                   // PullRequest.id
            "number": p.number,                             // PullRequest.number
            "title": format!("PR {}", p.number),            // PullRequest.title
            "state": "OPEN",                                // PullRequest.state: PullRequestState
            "isDraft": false,                               // PullRequest.isDraft
            "url": format!("http://{}/{}/pull/{}", super::scenario::HOST, p.base, p.number),
            "baseRefName": p.base_ref,                      // PullRequest.baseRefName
            "headRefName": p.head_ref,                      // PullRequest.headRefName
            "headRefOid": head_sha,                         // PullRequest.headRefOid
            "headRepository": head_repo,                    // PullRequest.headRepository: Repository
            "headRepositoryOwner": {                        // PullRequest.headRepositoryOwner: RepositoryOwner
                "__typename": "User",
                "__implements": ["RepositoryOwner"],
                "id": format!("U_kgDO{head_owner}"),        // User.id
                "login": head_owner,                        // RepositoryOwner.login
                "name": head_owner,                         // User.name
            },
            "isCrossRepository": p.head != p.base,          // PullRequest.isCrossRepository
            "maintainerCanModify": p.maintainer_can_modify, // PullRequest.maintainerCanModify
            "_commits": commit.map_or_else(Vec::new, |c| vec![c]),
        })
    }

    /// `StatusCheckRollup` of `sha` for pull request `p`, `null` when no
    /// check or status was ever reported on it. Its contexts, oldest first,
    /// are resolved with paging by `contexts(first:, after:)`.
    fn rollup(&self, p: &Pull, sha: &str) -> Value {
        let required = self
            .scenario
            .repos
            .get(&p.base)
            .and_then(|r| r.protection.get(&p.base_ref))
            .cloned()
            .unwrap_or_default();
        let mut contexts: Vec<(u32, Value)> = Vec::new();
        for c in self.scenario.checks.iter().filter(|c| c.head_sha == sha) {
            let (status, conclusion) = match c.status {
                CheckStatus::Queued => ("QUEUED", Value::Null),
                CheckStatus::InProgress => ("IN_PROGRESS", Value::Null),
                CheckStatus::Completed(k) => ("COMPLETED", json!(k.graphql())),
            };
            let order = c.started.unwrap_or(u32::MAX);
            contexts.push((
                order,
                json!({
                    "__typename": "CheckRun",
                    "id": format!("CR_kwDOAAAAAc8{}", c.job_id), // CheckRun.id
                    "databaseId": c.job_id,                     // CheckRun.databaseId (the REST job id)
                    "name": c.name,                             // CheckRun.name
                    "status": status,                           // CheckRun.status: CheckStatusState
                    "conclusion": conclusion,                   // CheckRun.conclusion: CheckConclusionState
                    "startedAt": c.started.map(timestamp),      // CheckRun.startedAt
                    "completedAt": c.completed.map(timestamp),  // CheckRun.completedAt
                    "detailsUrl": format!(                      // CheckRun.detailsUrl
                        "http://{}/{}/actions/runs/{}/job/{}",
                        super::scenario::HOST, p.base, c.run_id, c.job_id
                    ),
                    "checkSuite": {"workflowRun": {             // CheckRun.checkSuite → CheckSuite.workflowRun
                        "databaseId": c.run_id,                 // WorkflowRun.databaseId
                        "event": "pull_request",                // WorkflowRun.event
                        "runNumber": c.run_id - 5000,           // WorkflowRun.runNumber
                        "workflow": {"name": c.workflow},       // WorkflowRun.workflow → Workflow.name
                    }},
                    "_isRequired": required.contains(&c.name),  // CheckRun.isRequired(pullRequestId:)
                }),
            ));
        }
        for s in self.scenario.statuses.iter().filter(|s| s.sha == sha) {
            let state = match s.state {
                StatusState::Success => "SUCCESS",
                StatusState::Failure => "FAILURE",
                StatusState::Pending => "PENDING",
            };
            contexts.push((
                s.created,
                json!({
                    "__typename": "StatusContext",
                    "id": format!("SC_kwDOAAAAAc8{}", s.created), // StatusContext.id
                    "context": s.context,                       // StatusContext.context
                    "state": state,                             // StatusContext.state: StatusState
                    "targetUrl": s.target_url,                  // StatusContext.targetUrl
                    "createdAt": timestamp(s.created),          // StatusContext.createdAt
                    "description": format!("{} says {state}", s.context), // StatusContext.description
                    "_isRequired": required.contains(&s.context), // StatusContext.isRequired(pullRequestId:)
                }),
            ));
        }
        if contexts.is_empty() {
            return Value::Null;
        }
        // GitHub lists contexts in the order they were created (newer runs
        // after older ones); a queued run, not started, is the newest.
        contexts.sort_by_key(|(order, _)| *order);
        json!({
            "state": "PENDING",                             // StatusCheckRollup.state
            "_contexts": contexts.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        })
    }

    fn pull_by_number(&self, repo: &str, number: u64) -> Option<Value> {
        self.scenario
            .pulls
            .iter()
            .find(|p| p.base == repo && p.number == number)
            .map(|p| self.pull(p))
    }
}

/// `contexts(first:, after:)`: a `StatusCheckRollupContextConnection`
/// page, the cursor being the index of the page's first node.
fn contexts_page(all: &[Value], args: &Args) -> Value {
    let first = args
        .get("first")
        .and_then(Value::as_u64)
        .unwrap_or(100)
        .min(100) as usize;
    let start = args
        .get("after")
        .and_then(Value::as_str)
        .and_then(|c| c.strip_prefix("cursor:"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0)
        .min(all.len());
    let end = (start + first).min(all.len());
    let has_next = end < all.len();
    let nodes: Vec<Value> = all[start..end]
        .iter()
        .map(|n| {
            let mut n = n.clone();
            n["isRequired"] = n["_isRequired"].clone();
            n
        })
        .collect();
    json!({
        "nodes": nodes,                                     // StatusCheckRollupContextConnection.nodes
        "totalCount": all.len(),                            // …totalCount
        "checkRunCount": all.iter().filter(|n| n["__typename"] == "CheckRun").count(),
        "statusContextCount": all.iter().filter(|n| n["__typename"] == "StatusContext").count(),
        "pageInfo": {                                       // …pageInfo: PageInfo
            "hasNextPage": has_next,
            "endCursor": has_next.then(|| format!("cursor:{end}")),
        },
    })
}

fn not_found(message: String) -> Option<Result<Value, FieldError>> {
    Some(Err(FieldError {
        kind: "NOT_FOUND",
        message,
    }))
}

impl Graph<'_> {
    /// `Query.repository(owner:, name:)`.
    fn repository_field(&self, owner: &Value, name: &Value) -> Option<Result<Value, FieldError>> {
        let full = format!(
            "{}/{}",
            owner.as_str().unwrap_or_default(),
            name.as_str().unwrap_or_default()
        );
        match self.repository(&full) {
            Some(r) => Some(Ok(r)),
            None => not_found(format!(
                "Could not resolve to a Repository with the name '{full}'."
            )),
        }
    }

    /// `Repository.pullRequests(headRefName:, states:, first:)`.
    fn pull_requests(&self, parent: &Value, head: &Value) -> Value {
        let repo = parent["_full"].as_str().unwrap_or_default();
        let nodes: Vec<Value> = self
            .scenario
            .pulls
            .iter()
            .filter(|p| p.base == repo)
            .filter(|p| head.as_str().is_none_or(|h| h == p.head_ref))
            .map(|p| self.pull(p))
            .collect();
        json!({"nodes": nodes, "totalCount": nodes.len()})
    }

    /// `Query.node(id:)`: the pull requests are the nodes with ids.
    fn node(&self, id: &Value) -> Option<Result<Value, FieldError>> {
        let found = self
            .scenario
            .pulls
            .iter()
            .find(|p| Some(pull_node_id(p.number).as_str()) == id.as_str());
        match found {
            Some(p) => Some(Ok(self.pull(p))),
            None => not_found(format!(
                "Could not resolve to a node with the global id of '{}'",
                id.as_str().unwrap_or_default()
            )),
        }
    }
}

/// `Query.__type(name:)`: introspection of the public schema (the field
/// names of type `name`, `null` for a type it does not know).
fn introspect_type(name: &Value) -> Value {
    let fields: Value = serde_json::from_str(SCHEMA_FIELDS).unwrap_or(Value::Null);
    match fields.get(name.as_str().unwrap_or_default()) {
        Some(Value::Array(names)) => json!({
            "name": name,
            "fields": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        }),
        _ => Value::Null,
    }
}

impl Resolver for Graph<'_> {
    fn resolve(
        &self,
        parent: &Value,
        field: &str,
        args: &Args,
    ) -> Option<Result<Value, FieldError>> {
        if let Some(r) = super::reviews::resolve(self.scenario, parent, field, args) {
            return Some(r);
        }
        let arg = |k: &str| args.get(k).cloned().unwrap_or(Value::Null);
        match field {
            // Query.repository(owner:, name:)
            "repository" if parent.get("__typename").is_none() => {
                self.repository_field(&arg("owner"), &arg("name"))
            }
            // Repository.pullRequest(number:)
            "pullRequest" => {
                let n = arg("number").as_u64().unwrap_or(0);
                let repo = parent["_full"].as_str().unwrap_or_default();
                match self.pull_by_number(repo, n) {
                    Some(p) => Some(Ok(p)),
                    None => not_found(format!(
                        "Could not resolve to a PullRequest with the number of {n}."
                    )),
                }
            }
            // Repository.pullRequests(headRefName:, states:, first:)
            "pullRequests" => Some(Ok(self.pull_requests(parent, &arg("headRefName")))),
            // Query.node(id:)
            "node" => self.node(&arg("id")),
            // PullRequest.commits(last:): the head commit.
            "commits" => {
                let all = parent["_commits"].as_array().cloned().unwrap_or_default();
                Some(Ok(json!({"nodes": all, "totalCount": all.len()})))
            }
            // StatusCheckRollup.contexts(first:, after:)
            "contexts" => {
                let all = parent["_contexts"].as_array().cloned().unwrap_or_default();
                Some(Ok(contexts_page(&all, args)))
            }
            // CheckRun.isRequired(pullRequestId:) / StatusContext.isRequired
            "isRequired" => Some(Ok(parent["_isRequired"].clone())),
            // Query.__type(name:): introspection of the public schema.
            "__type" => Some(Ok(introspect_type(&arg("name")))),
            // Query.viewer: User
            "viewer" => Some(Ok(
                json!({"__typename": "User", "login": "octo", "name": "Octo"}),
            )),
            _ => None,
        }
    }
}
