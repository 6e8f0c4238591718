//! A scripted GitLab for tests that run our GitLab client and real git on
//! 127.0.0.1: only GitLab's answers are scripted, from a [`Scenario`] the
//! test builds and changes (the same shape as the scripted GitHub:
//! a scenario, a push hook, a request log).
//!
//! One server answers both the REST API v4 (`/api/v4/…`, in the shapes
//! GitLab's API docs publish: see `api`) and the git remote
//! (`http://127.0.0.1:<port>/<group>/<sub>/<project>.git`, served by the
//! real `git http-backend` on the scenario's bare repositories), so a
//! remote URL gives the client its instance and project as it would on a
//! self-hosted GitLab, and a push is a real git push.
//!
//! Authentication as GitLab answers it: `PRIVATE-TOKEN` must be the
//! scenario's token (else `401 {"message":"401 Unauthorized"}`); a
//! `JOB-TOKEN` may call none of these routes (`404`, as the CI job token
//! docs say).

mod api;
mod scenario;

pub use scenario::{
    Discussion, Job, MergeRequest, Note, NotePosition, Outcome, Pipeline, Project, PushHook,
    Pushed, Scenario, TOKEN,
};

use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::test_support::github::git_http::{self, GitRequest};
use crate::test_support::github::rest::Reply;

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path with its query, as sent (still URL-encoded).
    pub path: String,
    /// Which credential header came: `PRIVATE-TOKEN`, `JOB-TOKEN` or empty.
    pub auth: String,
    /// The body (JSON or form text).
    pub body: String,
}

impl Logged {
    /// `METHOD path`, the path after `/api/v4`.
    pub fn line(&self) -> String {
        let path = self.path.strip_prefix("/api/v4").unwrap_or(&self.path);
        format!("{} {path}", self.method)
    }
}

#[derive(Debug)]
struct Shared {
    scenario: Scenario,
    log: Vec<Logged>,
}

/// The scripted GitLab; see the [module docs](self).
#[derive(Debug)]
pub struct GitlabServer {
    server: MockServer,
    shared: Arc<Mutex<Shared>>,
}

impl GitlabServer {
    /// Starts a server answering from `scenario`.
    pub async fn start(scenario: Scenario) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            scenario,
            log: Vec::new(),
        }));
        let server = MockServer::builder().start().await;
        Mock::given(any())
            .respond_with(Responder(Arc::clone(&shared)))
            .mount(&server)
            .await;
        Self { server, shared }
    }

    /// `http://127.0.0.1:<port>`: the instance's root URL.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// The git remote of project `path` (`http://127.0.0.1:<port>/<path>.git`).
    pub fn remote_url(&self, path: &str) -> String {
        format!("{}/{path}.git", self.url())
    }

    /// Reads or changes the scenario (the server waits meanwhile).
    pub fn with<R>(&self, f: impl FnOnce(&mut Scenario) -> R) -> R {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut shared.scenario)
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Logged> {
        let shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.log.clone()
    }

    /// [`Logged::line`] of every API request (not git).
    pub fn api_calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.path.starts_with("/api/v4/"))
            .map(Logged::line)
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Responder(Arc<Mutex<Shared>>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        // The raw path keeps `%2F` inside a segment (`group%2Fdemo`).
        let path = request.url.path().to_owned();
        let query = request.url.query().unwrap_or_default().to_owned();
        let (auth, token) = if !header("private-token").is_empty() {
            ("PRIVATE-TOKEN", header("private-token"))
        } else if !header("job-token").is_empty() {
            ("JOB-TOKEN", header("job-token"))
        } else {
            ("", String::new())
        };
        let mut shared = self.0.lock().unwrap_or_else(|p| p.into_inner());
        shared.log.push(Logged {
            method: request.method.to_string(),
            path: if query.is_empty() {
                path.clone()
            } else {
                format!("{path}?{query}")
            },
            auth: auth.to_owned(),
            body: String::from_utf8_lossy(&request.body).into_owned(),
        });
        let reply = match path.strip_prefix("/api/v4/") {
            Some(_) if auth == "JOB-TOKEN" => api::message(404, "404 Not Found"),
            Some(_) if auth.is_empty() || token != shared.scenario.token => {
                api::message(401, "401 Unauthorized")
            }
            Some(rest) => {
                let req = api_request(request, rest, &query, &header("content-type"));
                api::route(&mut shared.scenario, &req)
            }
            None => serve_git(
                &mut shared.scenario,
                &GitRequest {
                    method: request.method.as_str(),
                    path: &path,
                    query: &query,
                    content_type: &header("content-type"),
                    content_encoding: &header("content-encoding"),
                    git_protocol: &header("git-protocol"),
                    body: &request.body,
                },
            ),
        };
        drop(shared);
        crate::test_support::github::response(reply)
    }
}

/// A REST call of `request` (`rest`: its path after `/api/v4/`, `query`
/// its query string): the decoded path segments and query pairs, and the
/// body as JSON (a form body turned into JSON).
fn api_request<'a>(
    request: &'a Request,
    rest: &str,
    query: &str,
    content_type: &str,
) -> api::ApiRequest<'a> {
    let body = if content_type.contains("json") {
        serde_json::from_slice(&request.body).unwrap_or(Value::Null)
    } else {
        api::form_to_json(&String::from_utf8_lossy(&request.body))
    };
    api::ApiRequest {
        method: request.method.as_str(),
        segments: rest.split('/').map(api::decode).collect(),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (api::decode(k), api::decode(v))
            })
            .collect(),
        body,
    }
}

/// The git remote: `git http-backend` on the project's bare repository;
/// after a receive-pack, each moved branch is told to the scenario.
fn serve_git(s: &mut Scenario, req: &GitRequest<'_>) -> Reply {
    let repo = req.path.trim_start_matches('/').split(".git/").next();
    let Some(project) = repo.and_then(|r| s.find_project(r)).map(|p| p.id) else {
        return api::message(404, "404 Project Not Found");
    };
    let bare = s.projects.get(&project).map(|p| p.bare.clone());
    let heads = || {
        bare.as_deref()
            .map(git_http::branch_heads)
            .unwrap_or_default()
    };
    let pushing = req.path.ends_with("/git-receive-pack");
    let before = if pushing { heads() } else { Default::default() };
    let reply = git_http::http_backend(&s.root, req, "maintainer");
    if pushing {
        for (branch, sha) in heads() {
            let old = before.get(&branch);
            if old != Some(&sha) {
                s.pushed(project, &branch, old.map(String::as_str), &sha);
            }
        }
    }
    reply
}
