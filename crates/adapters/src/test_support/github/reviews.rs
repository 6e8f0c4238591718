//! Pull request reviews on the scripted GitHub: review threads and their
//! comments, reviews, replies and resolving, in the shapes GitHub
//! publishes — REST (github/rest-api-description: `pull-request-review`,
//! `pull-request-review-comment`, operations `pulls/create-review` and
//! `pulls/create-reply-for-review-comment`) and GraphQL
//! (`PullRequest.reviewThreads`, `PullRequestReviewThread`,
//! `PullRequestReviewComment`, `resolveReviewThread`).
//!
//! A field asked of a review type that GitHub's public schema does not
//! have (`schema_fields.json`) is answered as GitHub does: an error naming
//! it, so a backend's query is checked against the schema, not against
//! this server.
//!
//! The state (`review_state`) lives in the [`Scenario`] behind a
//! `RefCell`, because GraphQL answers from a shared scenario and
//! `resolveReviewThread` changes it.

use serde_json::{Value, json};

use super::graphql::{Args, FieldError};
use super::rest::Reply;
use super::review_state::{Review, Thread, ThreadComment, VIEWER};
use super::scenario::{Scenario, timestamp};

impl Scenario {
    /// A reviewer's comment on `path`:`line` of pull request `pull`, the
    /// first of a new thread; the thread's node id.
    pub fn review_comment(&mut self, pull: u64, path: &str, line: u64, body: &str) -> String {
        self.reviews
            .get_mut()
            .open(pull, path, (None, line), "reviewer", body, None)
    }

    /// The review threads, oldest first.
    pub fn review_threads(&self) -> Vec<Thread> {
        self.reviews.borrow().threads.clone()
    }

    /// The submitted reviews, oldest first.
    pub fn submitted_reviews(&self) -> Vec<Review> {
        self.reviews.borrow().reviews.clone()
    }
}

fn pull_of(s: &Scenario, o: &str, r: &str, n: &str) -> Option<u64> {
    let full = format!("{o}/{r}");
    s.pulls
        .iter()
        .find(|p| p.base == full && p.number.to_string() == n)
        .map(|p| p.number)
}

/// `pull-request-review-comment` of `c` in thread `t`.
fn comment_json(full: &str, t: &Thread, c: &ThreadComment) -> Value {
    json!({
        "id": c.id,                                          // pull-request-review-comment.id
        "node_id": format!("PRRC_kwDOAAAAAc5{}", c.id),      // .node_id
        "pull_request_review_id": c.review,                  // .pull_request_review_id
        "in_reply_to_id": c.in_reply_to,                     // .in_reply_to_id
        "path": t.path,                                      // .path
        "line": t.line,                                      // .line
        "start_line": t.start_line,                          // .start_line
        "side": "RIGHT",                                     // .side
        "body": c.body,                                      // .body
        "user": {"login": c.author, "type": "User"},         // .user (simple-user)
        "created_at": timestamp(0),                          // .created_at
        "html_url": format!("http://{}/{full}/pull/{}#discussion_r{}", super::scenario::HOST, t.pull, c.id),
        "pull_request_url": format!("http://api.github.localhost/repos/{full}/pulls/{}", t.pull),
    })
}

/// The REST routes of reviews, or `None` for another route.
pub(crate) fn rest(s: &mut Scenario, method: &str, path: &str, body: &[u8]) -> Option<Reply> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (method, parts.as_slice()) {
        ("POST", ["repos", o, r, "pulls", n, "reviews"]) => {
            let Some(pull) = pull_of(s, o, r, n) else {
                return Some(Reply::error(404, "Not Found"));
            };
            Some(create_review(s, &format!("{o}/{r}"), pull, &body))
        }
        ("POST", ["repos", o, r, "pulls", n, "comments", id, "replies"]) => {
            let Some(pull) = pull_of(s, o, r, n) else {
                return Some(Reply::error(404, "Not Found"));
            };
            Some(reply(s, &format!("{o}/{r}"), pull, id, &body))
        }
        _ => None,
    }
}

/// `pulls/create-review`: each of `comments[]` opens a thread; `line` (and
/// `start_line`) must be on the diff's new side, `side` `RIGHT`.
fn create_review(s: &mut Scenario, full: &str, pull: u64, body: &Value) -> Reply {
    let event = body["event"].as_str().unwrap_or("PENDING");
    let state = match event {
        "COMMENT" => "COMMENTED",
        "APPROVE" => "APPROVED",
        "REQUEST_CHANGES" => "CHANGES_REQUESTED",
        _ => "PENDING",
    };
    let text = body["body"].as_str().unwrap_or_default();
    let comments = body["comments"].as_array().cloned().unwrap_or_default();
    if event == "COMMENT" && text.is_empty() && comments.is_empty() {
        return Reply::error(
            422,
            "Unprocessable Entity: body is required for a COMMENT review",
        );
    }
    for c in &comments {
        let (Some(_), Some(line)) = (c["path"].as_str(), c["line"].as_u64()) else {
            return Reply::error(422, "Unprocessable Entity: comments[] need path and line");
        };
        let start = c["start_line"].as_u64();
        if c["side"].as_str().unwrap_or("RIGHT") != "RIGHT" || start.is_some_and(|st| st >= line) {
            return Reply::error(422, "Unprocessable Entity: start_line must precede line");
        }
    }
    let commit = s.pull_head(pull).unwrap_or_default();
    let reviews = s.reviews.get_mut();
    let id = 80_000 + reviews.next();
    let threads = comments
        .iter()
        .map(|c| {
            let at = (c["start_line"].as_u64(), c["line"].as_u64().unwrap_or(0));
            let path = c["path"].as_str().unwrap_or_default();
            let body = c["body"].as_str().unwrap_or_default();
            reviews.open(pull, path, at, VIEWER, body, Some(id))
        })
        .collect();
    reviews.reviews.push(Review {
        id,
        pull,
        body: text.to_owned(),
        state: state.to_owned(),
        commit_id: commit.clone(),
        threads,
    });
    Reply::json(
        200,
        &json!({
            "id": id,                                        // pull-request-review.id
            "node_id": format!("PRR_kwDOAAAAAc5{id}"),       // .node_id
            "user": {"login": VIEWER, "type": "User"},       // .user
            "body": text,                                    // .body
            "state": state,                                  // .state
            "commit_id": commit,                             // .commit_id
            "html_url": format!("http://{}/{full}/pull/{pull}#pullrequestreview-{id}", super::scenario::HOST),
            "pull_request_url": format!("http://api.github.localhost/repos/{full}/pulls/{pull}"),
            "submitted_at": timestamp(0),                    // .submitted_at
            "author_association": "OWNER",                   // .author_association
        }),
    )
}

/// `pulls/create-reply-for-review-comment`: 404 unless `id` is a
/// top-level comment of this pull request (replies to replies are not
/// supported, GitHub says).
fn reply(s: &mut Scenario, full: &str, pull: u64, id: &str, body: &Value) -> Reply {
    let Some(text) = body["body"].as_str() else {
        return Reply::error(422, "Unprocessable Entity: body is required");
    };
    let reviews = s.reviews.get_mut();
    let next = 2_000_000 + reviews.next();
    let Some(t) = reviews.threads.iter_mut().find(|t| {
        t.pull == pull && t.comments.first().map(|c| c.id.to_string()).as_deref() == Some(id)
    }) else {
        return Reply::error(404, "Not Found");
    };
    let c = ThreadComment {
        id: next,
        author: VIEWER.to_owned(),
        body: text.to_owned(),
        in_reply_to: t.comments.first().map(|c| c.id),
        review: None,
    };
    t.comments.push(c.clone());
    Reply::json(201, &comment_json(full, t, &c))
}

/// The names of `type_name`'s fields in GitHub's public schema, when the
/// schema list has the type.
fn schema_fields(type_name: &str) -> Option<Vec<String>> {
    let all: Value = serde_json::from_str(include_str!("schema_fields.json")).ok()?;
    let names = all.get(type_name)?.as_array()?;
    Some(
        names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
    )
}

fn thread_json(t: &Thread) -> Value {
    json!({
        "__typename": "PullRequestReviewThread",
        "id": t.id,                                         // PullRequestReviewThread.id
        "isResolved": t.resolved,                           // .isResolved
        "isOutdated": false,                                // .isOutdated
        "isCollapsed": t.resolved,                          // .isCollapsed
        "path": t.path,                                     // .path
        "line": t.line,                                     // .line
        "originalLine": t.line,                             // .originalLine
        "startLine": t.start_line,                          // .startLine
        "originalStartLine": t.start_line,                  // .originalStartLine
        "diffSide": "RIGHT",                                // .diffSide: DiffSide
        "startDiffSide": t.start_line.map(|_| "RIGHT"),     // .startDiffSide
        "subjectType": "LINE",                              // .subjectType
        "viewerCanResolve": true,                           // .viewerCanResolve
        "viewerCanReply": true,                             // .viewerCanReply
        "_comments": t.comments.iter().map(|c| json!({
            "__typename": "PullRequestReviewComment",
            "id": format!("PRRC_kwDOAAAAAc5{}", c.id),      // PullRequestReviewComment.id
            "databaseId": c.id,                             // .databaseId
            "author": {"__typename": "User", "login": c.author}, // .author: Actor
            "body": c.body,                                 // .body
            "path": t.path,                                 // .path
            "line": t.line,                                 // .line
            "originalLine": t.line,                         // .originalLine
            "startLine": t.start_line,                      // .startLine
            "createdAt": timestamp(0),                      // .createdAt
        })).collect::<Vec<_>>(),
    })
}

/// `first`/`after` paging of `all` (the cursor is the next index).
fn page(all: Vec<Value>, args: &Args) -> Value {
    let first = args.get("first").and_then(Value::as_u64).unwrap_or(100) as usize;
    let start = args
        .get("after")
        .and_then(Value::as_str)
        .and_then(|c| c.strip_prefix("cursor:"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0)
        .min(all.len());
    let end = (start + first.min(100)).min(all.len());
    let has_next = end < all.len();
    json!({
        "nodes": all[start..end],                           // *Connection.nodes
        "totalCount": all.len(),                            // *Connection.totalCount
        "pageInfo": {"hasNextPage": has_next, "endCursor": has_next.then(|| format!("cursor:{end}"))},
    })
}

/// The GraphQL fields of reviews, or `None` for another field.
pub(crate) fn resolve(
    s: &Scenario,
    parent: &Value,
    field: &str,
    args: &Args,
) -> Option<Result<Value, FieldError>> {
    let typename = parent["__typename"].as_str().unwrap_or_default();
    if typename.starts_with("PullRequestReview")
        && field != "__typename"
        && let Some(fields) = schema_fields(typename)
        && !fields.iter().any(|f| f == field)
    {
        return Some(Err(FieldError {
            kind: "undefinedField",
            message: format!("Field '{field}' doesn't exist on type '{typename}'"),
        }));
    }
    match (typename, field) {
        ("PullRequest", "reviewThreads") => {
            let n = parent["number"].as_u64().unwrap_or(0);
            let all = s
                .reviews
                .borrow()
                .threads
                .iter()
                .filter(|t| t.pull == n)
                .map(thread_json)
                .collect();
            Some(Ok(page(all, args)))
        }
        ("PullRequestReviewThread", "comments") => {
            let all = parent["_comments"].as_array().cloned().unwrap_or_default();
            Some(Ok(page(all, args)))
        }
        ("", "resolveReviewThread") => Some(resolve_thread(s, args)),
        _ => None,
    }
}

/// `Mutation.resolveReviewThread(input: {threadId})` →
/// `ResolveReviewThreadPayload.thread`.
fn resolve_thread(s: &Scenario, args: &Args) -> Result<Value, FieldError> {
    let id = args
        .get("input")
        .and_then(|i| i["threadId"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut reviews = s.reviews.borrow_mut();
    let Some(t) = reviews.threads.iter_mut().find(|t| t.id == id) else {
        return Err(FieldError {
            kind: "NOT_FOUND",
            message: format!("Could not resolve to a node with the global id of '{id}'"),
        });
    };
    t.resolved = true;
    Ok(json!({
        "__typename": "ResolveReviewThreadPayload",
        "clientMutationId": null,
        "thread": thread_json(t),
    }))
}
