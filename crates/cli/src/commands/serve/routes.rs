//! The dashboard's HTTP routes. Every request passes the [`Guard`] first;
//! a session is named by its key in the query (`?key=<repo>/<flow>/<id>`)
//! and must be one found on disk; what is read for it is its folder's
//! files and the repository's git objects of the commits it recorded.
//!
//! | route | answers |
//! |---|---|
//! | `GET /` (`?token=` sets the cookie) | the page |
//! | `GET /app.js`, `/app.css` | the page's script and style |
//! | `GET /api/sessions` | every session, newest first |
//! | `GET /api/session?key=` | one session: items, log digest, flow tables |
//! | `GET /api/timeline.svg?key=` | its timeline so far |
//! | `GET /api/commit?key=&sha=` | a commit it landed, as a diff |
//! | `GET /api/transcript?key=&name=` | a tool-agent transcript of it |
//! | `GET /api/live?key=` | server-sent events: list and session changes |
//! | `POST /api/approve?key=`, `/api/decline?key=`, `/api/cancel?key=` | the actions |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use orchestrator_core::timeline::{Span, SpanOutcome, render_svg};
use orchestrator_core::vcs::{CommitId, Vcs as _};
use serde_json::json;

use super::auth::{Guard, query_value};
use super::sessions::{Digests, Found, find, list, summarize};
use super::{actions, flows, live};

/// The response body every route answers with.
pub type Body = BoxBody<Bytes, Infallible>;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// What every request needs.
#[derive(Debug)]
pub struct App {
    /// The served repositories.
    pub repos: Arc<Vec<PathBuf>>,
    /// Token and hosts.
    pub guard: Guard,
    /// The logs read so far.
    pub digests: Arc<Digests>,
    /// Where the server listens, for the actions' origin.
    pub bound: SocketAddr,
}

fn respond(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    if let Ok(value) = "no-store".parse() {
        response.headers_mut().insert(CACHE_CONTROL, value);
    }
    response
}

fn json_response(status: u16, value: &serde_json::Value) -> Response<Body> {
    respond(status, "application/json", value.to_string())
}

fn error(status: u16, message: &str) -> Response<Body> {
    json_response(status, &json!({ "error": message }))
}

/// Decodes `%XX` escapes (and `+` as a space) of a query value.
fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn param(query: Option<&str>, name: &str) -> Option<String> {
    query.and_then(|q| query_value(q, name)).map(|v| decode(&v))
}

/// Answers one request.
pub async fn handle(
    app: Arc<App>,
    peer: SocketAddr,
    request: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let query = request.uri().query().map(str::to_owned);
    let query = query.as_deref();
    let from_query = match app.guard.check(request.headers(), query) {
        Ok(q) => q,
        Err(refusal) => {
            let (status, message) = refusal.status_and_message();
            return error(status, message);
        }
    };
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if from_query && method == Method::GET && path == "/" {
        // Keep the token in a cookie and take it out of the address bar.
        let mut response = respond(303, "text/plain", "");
        if let (Ok(cookie), Ok(location)) = (app.guard.cookie().parse(), "/".parse()) {
            response.headers_mut().insert(SET_COOKIE, cookie);
            response.headers_mut().insert(LOCATION, location);
        }
        return response;
    }
    let key = param(query, "key");
    match (method, path.as_str()) {
        (Method::GET, "/") => respond(200, "text/html; charset=utf-8", INDEX),
        (Method::GET, "/app.js") => respond(200, "text/javascript; charset=utf-8", SCRIPT),
        (Method::GET, "/app.css") => respond(200, "text/css; charset=utf-8", STYLE),
        (Method::GET, "/api/sessions") => {
            let (repos, digests) = (Arc::clone(&app.repos), Arc::clone(&app.digests));
            match tokio::task::spawn_blocking(move || list(&repos, &digests)).await {
                Ok(sessions) => json_response(200, &json!(sessions)),
                Err(e) => error(500, &format!("listing failed: {e}")),
            }
        }
        (Method::GET, "/api/live") => {
            let body = live::stream(Arc::clone(&app.repos), Arc::clone(&app.digests), key);
            let mut response = Response::new(body.boxed());
            if let Ok(value) = "text/event-stream".parse() {
                response.headers_mut().insert(CONTENT_TYPE, value);
            }
            if let Ok(value) = "no-store".parse() {
                response.headers_mut().insert(CACHE_CONTROL, value);
            }
            response
        }
        (method, route) => {
            let Some(found) = key.as_deref().and_then(|k| find(&app.repos, k)) else {
                return error(404, "no such session in the served repositories");
            };
            session_route(&app, peer, method, route, found, query).await
        }
    }
}

async fn session_route(
    app: &App,
    peer: SocketAddr,
    method: Method,
    route: &str,
    found: Found,
    query: Option<&str>,
) -> Response<Body> {
    let origin = format!("dashboard http://{} (from {peer})", app.bound);
    let digests = Arc::clone(&app.digests);
    match (method, route) {
        (Method::GET, "/api/session") => blocking(move || Ok(detail(&found, &digests))).await,
        (Method::GET, "/api/timeline.svg") => {
            let (_, _, digest) = summarize(&found, &digests);
            respond(200, "image/svg+xml", timeline(&found, &digest))
        }
        (Method::GET, "/api/commit") => {
            let Some(sha) = param(query, "sha").filter(|s| is_commit_id(s)) else {
                return error(400, "sha: expected a commit id (7 to 40 hex digits)");
            };
            commit(&found, &digests, &sha).await
        }
        (Method::GET, "/api/transcript") => {
            let name = param(query, "name").unwrap_or_default();
            match transcripts(&found).into_iter().find(|n| *n == name) {
                Some(n) => match std::fs::read(found.dir.join("transcripts").join(n)) {
                    Ok(bytes) => respond(200, "text/plain; charset=utf-8", bytes),
                    Err(e) => error(500, &format!("failed to read the transcript: {e}")),
                },
                None => error(404, "no such transcript in this session"),
            }
        }
        (Method::POST, "/api/approve") => {
            blocking(move || actions::approve(&found, &origin).map(|d| json!({"done": d}))).await
        }
        (Method::POST, "/api/decline") => {
            blocking(move || actions::decline(&found, &origin).map(|d| json!({"done": d}))).await
        }
        (Method::POST, "/api/cancel") => {
            blocking(move || actions::cancel(&found, &origin).map(|d| json!({"done": d}))).await
        }
        _ => error(404, "no such route"),
    }
}

async fn blocking(
    work: impl FnOnce() -> Result<serde_json::Value, String> + Send + 'static,
) -> Response<Body> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => json_response(200, &value),
        Ok(Err(message)) => error(409, &message),
        Err(e) => error(500, &e.to_string()),
    }
}

fn is_commit_id(s: &str) -> bool {
    (7..=40).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The session page's data.
fn detail(found: &Found, digests: &Digests) -> serde_json::Value {
    let (summary, view, digest) = summarize(found, digests);
    json!({
        "summary": summary,
        "items": view.items,
        "jobs": digest.jobs,
        "notes": digest.notes,
        "tokens": digest.tokens,
        "run_end": digest.run_end,
        "extras": flows::extras(found),
        "transcripts": transcripts(found),
    })
}

/// The tool agent's transcripts in the session folder.
fn transcripts(found: &Found) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(found.dir.join("transcripts"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    names
}

/// The timeline so far, as `timeline.svg` draws it.
fn timeline(found: &Found, digest: &super::digest::Digest) -> String {
    let origin = digest.first_ms.unwrap_or(0);
    let now = orchestrator_core::state::event_log::now_ms();
    let at = |ms: i64| Duration::from_millis(u64::try_from(ms - origin).unwrap_or(0));
    let mut spans: Vec<Span> = digest
        .jobs
        .iter()
        .filter_map(|(id, job)| {
            let start = job.started_ms?;
            let outcome = match job.status {
                None => SpanOutcome::Unfinished,
                Some(orchestrator_core::event::JobStatus::Completed) => SpanOutcome::Done,
                Some(
                    orchestrator_core::event::JobStatus::Failed
                    | orchestrator_core::event::JobStatus::TimedOut,
                ) => SpanOutcome::Failed,
                Some(_) => SpanOutcome::Skipped,
            };
            Some(Span {
                id: id.clone(),
                title: job.title.clone(),
                start: at(start),
                end: at(job.finished_ms.unwrap_or(now).max(start)),
                outcome,
                cost_usd: (job.calls > 0).then_some(job.cost_usd),
            })
        })
        .collect();
    spans.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
    render_svg(&format!("{} {}", found.flow.as_str(), found.id), &spans)
}

/// The diff of a commit the session recorded, from git.
async fn commit(found: &Found, digests: &Digests, sha: &str) -> Response<Body> {
    let (_, view, digest) = summarize(found, digests);
    let recorded = digest
        .commits()
        .map(|(_, c, _)| c.to_owned())
        .chain(view.items.iter().flat_map(|i| i.commits.iter().cloned()))
        .any(|c| c.starts_with(sha) || sha.starts_with(&c));
    if !recorded {
        return error(404, "this session recorded no such commit");
    }
    let vcs = match orchestrator_adapters::git::GitVcs::open(&found.repo_dir).await {
        Ok(v) => v,
        Err(e) => return error(500, &e.to_string()),
    };
    match vcs
        .diff(&CommitId(format!("{sha}^")), &CommitId(sha.to_owned()))
        .await
    {
        Ok(diff) => respond(200, "text/plain; charset=utf-8", diff),
        Err(e) => error(500, &e.to_string()),
    }
}
