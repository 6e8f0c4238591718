//! The Jobs REST API of a Ray head (2.60), over plain HTTP: no Python here.
//!
//! Paths are exact (`POST /api/jobs/` with its slash, `GET /api/jobs/<id>`
//! without). Error bodies are text (often a Python traceback), so errors
//! carry the status and the body's first line. No browser headers are sent:
//! the head refuses writes from anything that looks like a browser.

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::RayError;

/// A job's state as the head reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct JobInfo {
    /// `PENDING`, `RUNNING`, `STOPPED`, `SUCCEEDED` or `FAILED`.
    pub status: String,
    /// Ray's explanation of the status.
    #[serde(default)]
    pub message: Option<String>,
    /// Why Ray failed the job (`JOB_SUPERVISOR_ACTOR_DIED`, …).
    #[serde(default)]
    pub error_type: Option<String>,
    /// The node the entrypoint runs on, once it started.
    #[serde(default)]
    pub driver_node_id: Option<String>,
    /// The entrypoint's exit status (negative: killed by that signal).
    #[serde(default)]
    pub driver_exit_code: Option<i64>,
}

impl JobInfo {
    /// Whether the job will not change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "STOPPED" | "SUCCEEDED" | "FAILED")
    }
}

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NodeInfo {
    /// Ray's node id.
    pub node_id: String,
    /// Its address.
    #[serde(default)]
    pub node_ip: String,
    /// `ALIVE` or `DEAD`.
    pub state: String,
    /// Its resources (`CPU`, `memory`, …).
    #[serde(default)]
    pub resources_total: std::collections::BTreeMap<String, f64>,
}

/// A client of one head's Jobs API.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// What a job is submitted with.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission<'a> {
    /// Our id for it (`[A-Za-z0-9_-]`, never reused).
    pub id: &'a str,
    /// The `sh -c` line.
    pub entrypoint: &'a str,
    /// `gcs://…` of its package.
    pub working_dir: &'a str,
    /// Environment of the entrypoint.
    pub env: &'a std::collections::BTreeMap<String, String>,
    /// CPUs reserved for it (it waits until they are free).
    pub cpus: f64,
}

impl Client {
    /// A client of the head at `base` (`http://host:8265`).
    pub fn new(base: &str, token: Option<String>) -> Result<Self, RayError> {
        let base = base.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(RayError::Config(format!(
                "the Ray address {base:?} is not the Jobs API's URL: give the head's dashboard \
                 address, e.g. http://127.0.0.1:8265"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .user_agent("orchestrator-ray-runner")
            .build()
            .map_err(|e| RayError::Config(format!("building the HTTP client: {e}")))?;
        Ok(Self { http, base, token })
    }

    /// The head's URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send(
        &self,
        what: &str,
        r: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, String), RayError> {
        let resp = r.send().await.map_err(|e| RayError::Http {
            what: what.to_owned(),
            message: error_chain(&e),
        })?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| RayError::Http {
            what: what.to_owned(),
            message: error_chain(&e),
        })?;
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(RayError::Auth(format!(
                "{what}: {status} {}",
                first_line(&body)
            )));
        }
        Ok((status, body))
    }

    fn refused(what: &str, status: StatusCode, body: &str) -> RayError {
        RayError::Refused {
            what: what.to_owned(),
            status: status.as_u16(),
            message: first_line(body),
        }
    }

    /// `GET /api/version`: the Ray version, checking the head answers.
    pub async fn version(&self) -> Result<String, RayError> {
        let what = "reading the head's version";
        let (status, body) = self
            .send(what, self.req(reqwest::Method::GET, "/api/version"))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(what, status, &body));
        }
        let v: Value = parse(what, &body)?;
        Ok(v["ray_version"].as_str().unwrap_or_default().to_owned())
    }

    /// `GET /api/packages/gcs/<name>`: whether the package is there. This
    /// also pins it on the head for ten minutes.
    pub async fn package_exists(&self, name: &str) -> Result<bool, RayError> {
        let what = format!("checking package {name}");
        let path = format!("/api/packages/gcs/{name}");
        let (status, body) = self
            .send(&what, self.req(reqwest::Method::GET, &path))
            .await?;
        match status {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            s => Err(Self::refused(&what, s, &body)),
        }
    }

    /// `PUT /api/packages/gcs/<name>`.
    pub async fn upload(&self, name: &str, bytes: Vec<u8>) -> Result<(), RayError> {
        let what = format!("uploading package {name}");
        let path = format!("/api/packages/gcs/{name}");
        let (status, body) = self
            .send(&what, self.req(reqwest::Method::PUT, &path).body(bytes))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &body));
        }
        Ok(())
    }

    /// `POST /api/jobs/`.
    pub async fn submit(&self, job: &Submission<'_>) -> Result<(), RayError> {
        let what = format!("submitting job {}", job.id);
        let mut body = json!({
            "entrypoint": job.entrypoint,
            "submission_id": job.id,
            "runtime_env": {"working_dir": job.working_dir, "env_vars": job.env},
            "metadata": {"submitted_by": "orchestrator"},
        });
        if job.cpus > 0.0 {
            body["entrypoint_num_cpus"] = json!(job.cpus);
        }
        let (status, text) = self
            .send(
                &what,
                self.req(reqwest::Method::POST, "/api/jobs/").json(&body),
            )
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &text));
        }
        Ok(())
    }

    /// `GET /api/jobs/<id>`.
    pub async fn job(&self, id: &str) -> Result<JobInfo, RayError> {
        let what = format!("reading job {id}");
        let (status, body) = self
            .send(
                &what,
                self.req(reqwest::Method::GET, &format!("/api/jobs/{id}")),
            )
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &body));
        }
        parse(&what, &body)
    }

    /// `GET /api/jobs/<id>/logs`: the whole log.
    pub async fn logs(&self, id: &str) -> Result<String, RayError> {
        let what = format!("reading the log of job {id}");
        let path = format!("/api/jobs/{id}/logs");
        let (status, body) = self
            .send(&what, self.req(reqwest::Method::GET, &path))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &body));
        }
        let v: Value = parse(&what, &body)?;
        Ok(v["logs"].as_str().unwrap_or_default().to_owned())
    }

    /// `POST /api/jobs/<id>/stop`: whether the head had a job to stop.
    pub async fn stop(&self, id: &str) -> Result<bool, RayError> {
        let what = format!("stopping job {id}");
        let path = format!("/api/jobs/{id}/stop");
        let (status, body) = self
            .send(&what, self.req(reqwest::Method::POST, &path))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &body));
        }
        let v: Value = parse(&what, &body)?;
        Ok(v["stopped"].as_bool().unwrap_or(false))
    }

    /// `DELETE /api/jobs/<id>` of a finished job, so the job list stays
    /// small.
    pub async fn delete(&self, id: &str) -> Result<(), RayError> {
        let what = format!("deleting job {id}");
        let path = format!("/api/jobs/{id}");
        let (status, body) = self
            .send(&what, self.req(reqwest::Method::DELETE, &path))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(&what, status, &body));
        }
        Ok(())
    }

    /// `GET /api/jobs/`: every job the head knows.
    pub async fn jobs(&self) -> Result<Vec<Value>, RayError> {
        let what = "listing jobs";
        let (status, body) = self
            .send(what, self.req(reqwest::Method::GET, "/api/jobs/"))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(what, status, &body));
        }
        parse(what, &body)
    }

    /// `GET /api/v0/nodes`: the cluster's nodes, dead ones included.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, RayError> {
        let what = "listing nodes";
        let (status, body) = self
            .send(what, self.req(reqwest::Method::GET, "/api/v0/nodes"))
            .await?;
        if !status.is_success() {
            return Err(Self::refused(what, status, &body));
        }
        let v: Value = parse(what, &body)?;
        serde_json::from_value(v["data"]["result"]["result"].clone())
            .map_err(|e| RayError::Protocol(format!("{what}: {e}")))
    }

    /// `GET /api/authentication_mode`: whether the head wants a token.
    pub async fn needs_token(&self) -> Result<bool, RayError> {
        let what = "reading the authentication mode";
        let (status, body) = self
            .send(
                what,
                self.req(reqwest::Method::GET, "/api/authentication_mode"),
            )
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(false);
        }
        if !status.is_success() {
            return Err(Self::refused(what, status, &body));
        }
        let v: Value = parse(what, &body)?;
        Ok(v["authentication_mode"].as_str() == Some("token"))
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, body: &str) -> Result<T, RayError> {
    serde_json::from_str(body).map_err(|e| {
        RayError::Protocol(format!(
            "{what}: the answer is not the JSON expected ({e}): {}",
            first_line(body)
        ))
    })
}

/// The last non-empty line of a body (a traceback's last line says what
/// went wrong), at most 500 characters.
fn first_line(body: &str) -> String {
    let line = body
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    line.chars().take(500).collect()
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        cur = inner.source();
    }
    s
}
