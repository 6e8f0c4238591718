//! The REST endpoints gh calls for ci-autofix's commands, answered from the
//! [`Scenario`]. Each response is the schema GitHub's REST description
//! publishes (github/rest-api-description, `components/schemas/<name>`,
//! named per function) with the fields gh's Go structs read (cli/cli
//! `pkg/cmd/run/shared/shared.go` `Run`, `Job`, `Step`).

use std::io::Write as _;

use serde_json::{Value, json};

use super::scenario::{CheckRun, CheckStatus, Scenario, timestamp};

/// One REST answer: status, content type, extra headers, body.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn json(status: u16, v: &Value) -> Self {
        Self {
            status,
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
            body: v.to_string().into_bytes(),
        }
    }

    fn redirect(to: String) -> Self {
        Self {
            status: 302,
            content_type: "text/plain",
            headers: vec![("Location", to)],
            body: Vec::new(),
        }
    }

    /// `basic-error`: `{"message", "documentation_url"}`.
    pub(crate) fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({"message": message, "documentation_url": "https://docs.github.com/rest"}),
        )
    }
}

/// Where run-log archives are served from: another host, as on GitHub
/// (gh drops the token when it follows the redirect there).
pub(crate) const BLOB_HOST: &str = "results.actions.localhost";
const API: &str = "http://api.github.localhost";

/// Answers `method path` on `api.github.localhost` (`path` without the query).
pub(crate) fn route(s: &mut Scenario, method: &str, path: &str, accept: &str) -> Reply {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["repos", o, r, "actions", "runs", id]) => run(s, &repo(o, r), id),
        ("GET", ["repos", o, r, "actions", "runs", id, "jobs"])
        | ("GET", ["repos", o, r, "actions", "runs", id, "attempts", _, "jobs"]) => {
            jobs(s, &repo(o, r), id)
        }
        ("GET", ["repos", o, r, "actions", "workflows", id]) => workflow(&repo(o, r), id),
        ("GET", ["repos", o, r, "actions", "jobs", id]) => match job_of(s, id) {
            Some(c) => Reply::json(200, &job_json(&repo(o, r), c)),
            None => Reply::error(404, "Not Found"),
        },
        ("GET", ["repos", _, _, "actions", "runs", id, "logs"]) => match latest_attempt(s, id) {
            Some(n) => Reply::redirect(format!("http://{BLOB_HOST}/run-{id}-{n}.zip")),
            None => Reply::error(404, "Not Found"),
        },
        ("GET", ["repos", _, _, "actions", "runs", id, "attempts", n, "logs"]) => {
            Reply::redirect(format!("http://{BLOB_HOST}/run-{id}-{n}.zip"))
        }
        ("GET", ["repos", _, _, "actions", "jobs", id, "logs"]) => {
            Reply::redirect(format!("http://{BLOB_HOST}/job-{id}.txt"))
        }
        ("POST", ["repos", _, _, "actions", "jobs", id, "rerun"]) => {
            let id = id.parse().unwrap_or(0);
            match s.rerun_job(id) {
                Ok(_) => Reply::json(201, &json!({})),
                Err(m) => Reply::error(403, &m),
            }
        }
        ("POST", ["repos", _, _, "actions", "runs", id, "rerun-failed-jobs"]) => {
            let failed: Vec<u64> = latest_jobs(s, id)
                .iter()
                .filter(|c| failed(c))
                .map(|c| c.job_id)
                .collect();
            for job in failed {
                if let Err(m) = s.rerun_job(job) {
                    return Reply::error(403, &m);
                }
            }
            Reply::json(201, &json!({}))
        }
        ("GET", ["repos", o, r, "pulls", n]) => pull(s, &repo(o, r), n, accept),
        (
            "GET",
            [
                "repos",
                o,
                r,
                "branches",
                b,
                "protection",
                "required_status_checks",
            ],
        ) => {
            let full = repo(o, r);
            match s.repos.get(&full).and_then(|x| x.protection.get(*b)) {
                // `status-check-policy`
                Some(contexts) => Reply::json(
                    200,
                    &json!({
                        "url": format!("{API}/repos/{full}/branches/{b}/protection/required_status_checks"),
                        "strict": false,
                        "contexts": contexts,
                        "checks": contexts.iter().map(|c| json!({"context": c, "app_id": null})).collect::<Vec<_>>(),
                        "contexts_url": format!("{API}/repos/{full}/branches/{b}/protection/required_status_checks/contexts"),
                    }),
                ),
                None => Reply::error(404, "Branch not protected"),
            }
        }
        ("GET", ["user"]) => Reply::json(200, &json!({"login": "octo", "id": 1, "type": "User"})),
        _ => Reply::error(404, "Not Found"),
    }
}

/// A blob of `results.actions.localhost`: a run's log archive or a job's log.
pub(crate) fn blob(s: &Scenario, path: &str) -> Reply {
    let name = path.trim_start_matches('/');
    if let Some(rest) = name
        .strip_prefix("run-")
        .and_then(|r| r.strip_suffix(".zip"))
        && let Some((id, attempt)) = rest.split_once('-')
    {
        let attempt: u32 = attempt.parse().unwrap_or(1);
        let jobs: Vec<&CheckRun> = jobs_at(s, id, attempt);
        return Reply {
            status: 200,
            content_type: "application/zip",
            headers: Vec::new(),
            body: logs_zip(&jobs),
        };
    }
    if let Some(id) = name
        .strip_prefix("job-")
        .and_then(|r| r.strip_suffix(".txt"))
        && let Some(c) = job_of(s, id)
    {
        return Reply {
            status: 200,
            content_type: "text/plain",
            headers: Vec::new(),
            body: whole_log(c).into_bytes(),
        };
    }
    Reply::error(404, "The specified blob does not exist.")
}

fn repo(o: &str, r: &str) -> String {
    format!("{o}/{r}")
}

fn job_of<'s>(s: &'s Scenario, id: &str) -> Option<&'s CheckRun> {
    s.job(id.parse().ok()?)
}

fn failed(c: &CheckRun) -> bool {
    matches!(c.status, CheckStatus::Completed(k) if k != super::scenario::Conclusion::Success && k != super::scenario::Conclusion::Skipped)
}

fn latest_attempt(s: &Scenario, run: &str) -> Option<u32> {
    let run: u64 = run.parse().ok()?;
    s.checks
        .iter()
        .filter(|c| c.run_id == run)
        .map(|c| c.attempt)
        .max()
}

/// The jobs of `run` at `attempt`: per job name, its latest attempt up to
/// that one (a job not re-run is carried over into later attempts).
fn jobs_at<'s>(s: &'s Scenario, run: &str, attempt: u32) -> Vec<&'s CheckRun> {
    let run: u64 = run.parse().unwrap_or(0);
    let mut out: Vec<&CheckRun> = Vec::new();
    for c in s
        .checks
        .iter()
        .filter(|c| c.run_id == run && c.attempt <= attempt)
    {
        match out.iter_mut().find(|o| o.name == c.name) {
            Some(o) if o.attempt <= c.attempt => *o = c,
            Some(_) => {}
            None => out.push(c),
        }
    }
    out
}

fn latest_jobs<'s>(s: &'s Scenario, run: &str) -> Vec<&'s CheckRun> {
    jobs_at(s, run, latest_attempt(s, run).unwrap_or(1))
}

fn status_str(c: &CheckRun) -> (&'static str, Value) {
    match c.status {
        CheckStatus::Queued => ("queued", Value::Null),
        CheckStatus::InProgress => ("in_progress", Value::Null),
        CheckStatus::Completed(k) => ("completed", json!(k.graphql().to_ascii_lowercase())),
    }
}

/// `workflow-run` (`actions/get-workflow-run`).
fn run(s: &Scenario, full: &str, id: &str) -> Reply {
    let jobs = latest_jobs(s, id);
    let Some(first) = jobs.first() else {
        return Reply::error(404, "Not Found");
    };
    let done = jobs
        .iter()
        .all(|c| matches!(c.status, CheckStatus::Completed(_)));
    let conclusion = if !done {
        Value::Null
    } else if jobs.iter().any(|c| failed(c)) {
        json!("failure")
    } else {
        json!("success")
    };
    let attempt = latest_attempt(s, id).unwrap_or(1);
    // The latest attempt's start: gh keys its run-log cache on it.
    let started = jobs
        .iter()
        .filter(|c| c.attempt == attempt)
        .filter_map(|c| c.started)
        .min()
        .or(first.started)
        .unwrap_or(0);
    let updated = jobs
        .iter()
        .filter_map(|c| c.completed.or(c.started))
        .max()
        .unwrap_or(started);
    let branch = s
        .pulls
        .iter()
        .find(|p| s.pull_head(p.number).as_deref() == Some(first.head_sha.as_str()))
        .map(|p| p.head_ref.clone())
        .unwrap_or_default();
    let (owner, name) = full.split_once('/').unwrap_or((full, full));
    Reply::json(
        200,
        &json!({
            "id": first.run_id,                                  // workflow-run.id
            "name": first.workflow,                              // workflow-run.name
            "display_title": format!("{} on {branch}", first.workflow), // workflow-run.display_title
            "head_branch": branch,                               // workflow-run.head_branch
            "head_sha": first.head_sha,                          // workflow-run.head_sha
            "run_number": first.run_id - 5000,                   // workflow-run.run_number
            "run_attempt": attempt,                              // workflow-run.run_attempt
            "event": "pull_request",                             // workflow-run.event
            "status": if done { "completed" } else { "in_progress" }, // workflow-run.status
            "conclusion": conclusion,                            // workflow-run.conclusion
            "workflow_id": 9001,                                 // workflow-run.workflow_id
            "html_url": format!("http://{}/{full}/actions/runs/{id}", super::scenario::HOST),
            "jobs_url": format!("{API}/repos/{full}/actions/runs/{id}/jobs"), // workflow-run.jobs_url
            "logs_url": format!("{API}/repos/{full}/actions/runs/{id}/logs"), // workflow-run.logs_url
            "created_at": timestamp(first.started.unwrap_or(0)), // workflow-run.created_at
            "updated_at": timestamp(updated),                    // workflow-run.updated_at
            "run_started_at": timestamp(started),                // workflow-run.run_started_at
            "head_commit": {"message": "the PR head"},           // workflow-run.head_commit (simple-commit)
            "head_repository": {"name": name, "owner": {"login": owner}}, // workflow-run.head_repository
            "pull_requests": [],                                 // workflow-run.pull_requests
        }),
    )
}

/// `workflow` (`actions/get-workflow`).
fn workflow(full: &str, id: &str) -> Reply {
    Reply::json(
        200,
        &json!({
            "id": id.parse::<u64>().unwrap_or(9001),             // workflow.id
            "node_id": "W_kwDOAAAAAc4AACMp",                     // workflow.node_id
            "name": "CI",                                        // workflow.name
            "path": ".github/workflows/ci.yml",                  // workflow.path
            "state": "active",                                   // workflow.state
            "created_at": timestamp(0),
            "updated_at": timestamp(0),
            "url": format!("{API}/repos/{full}/actions/workflows/{id}"),
            "html_url": format!("http://{}/{full}/actions/workflows/ci.yml", super::scenario::HOST),
            "badge_url": format!("http://{}/{full}/workflows/CI/badge.svg", super::scenario::HOST),
        }),
    )
}

/// The steps of a job: set-up, checkout, the check's own step (which has
/// the job's result), completion.
fn steps(c: &CheckRun) -> Vec<(String, &'static str, Value)> {
    let (status, conclusion) = status_str(c);
    let ok = || ("completed", json!("success"));
    let own = (status, conclusion);
    vec![
        ("Set up job".to_owned(), ok().0, ok().1),
        ("Run actions/checkout@v4".to_owned(), ok().0, ok().1),
        (c.step.clone(), own.0, own.1),
        ("Complete job".to_owned(), ok().0, ok().1),
    ]
}

/// `job` (`actions/get-job-for-workflow-run`).
fn job_json(full: &str, c: &CheckRun) -> Value {
    let (status, conclusion) = status_str(c);
    json!({
        "id": c.job_id,                                      // job.id
        "run_id": c.run_id,                                  // job.run_id
        "run_attempt": c.attempt,                            // job.run_attempt
        "head_sha": c.head_sha,                              // job.head_sha
        "name": c.name,                                      // job.name
        "workflow_name": c.workflow,                         // job.workflow_name
        "status": status,                                    // job.status
        "conclusion": conclusion,                            // job.conclusion
        "started_at": c.started.map(timestamp),              // job.started_at
        "completed_at": c.completed.map(timestamp),          // job.completed_at
        "html_url": format!("http://{}/{full}/actions/runs/{}/job/{}", super::scenario::HOST, c.run_id, c.job_id),
        "run_url": format!("{API}/repos/{full}/actions/runs/{}", c.run_id),
        "steps": steps(c).into_iter().enumerate().map(|(i, (name, status, conclusion))| json!({
            "name": name,                                    // job.steps[].name
            "status": status,                                // job.steps[].status
            "conclusion": conclusion,                        // job.steps[].conclusion
            "number": i + 1,                                 // job.steps[].number
            "started_at": c.started.map(timestamp),          // job.steps[].started_at
            "completed_at": c.completed.map(timestamp),      // job.steps[].completed_at
        })).collect::<Vec<_>>(),
    })
}

/// `GET …/runs/{id}/jobs`: `{"total_count", "jobs": [job]}` of the latest attempt.
fn jobs(s: &Scenario, full: &str, id: &str) -> Reply {
    let jobs = latest_jobs(s, id);
    Reply::json(
        200,
        &json!({
            "total_count": jobs.len(),
            "jobs": jobs.iter().map(|c| job_json(full, c)).collect::<Vec<_>>(),
        }),
    )
}

/// `pull-request` JSON, or the diff for `Accept: application/vnd.github.v3.diff`
/// (GitHub's documented diff media type): `git diff base...head`.
fn pull(s: &Scenario, full: &str, n: &str, accept: &str) -> Reply {
    let Some(p) = s
        .pulls
        .iter()
        .find(|p| p.base == full && p.number.to_string() == *n)
    else {
        return Reply::error(404, "Not Found");
    };
    let head = s.pull_head(p.number).unwrap_or_default();
    if accept.contains("diff") {
        let bare = &s.repos[full].bare;
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare)
            .args([
                "diff",
                &format!("refs/heads/{}...refs/pull/{n}/head", p.base_ref),
            ])
            .output();
        let body = out.map(|o| o.stdout).unwrap_or_default();
        return Reply {
            status: 200,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body,
        };
    }
    Reply::json(
        200,
        &json!({
            "number": p.number,                                  // pull-request.number
            "state": "open",                                     // pull-request.state
            "head": {"ref": p.head_ref, "sha": head, "repo": {"full_name": p.head}}, // pull-request.head
            "base": {"ref": p.base_ref, "repo": {"full_name": p.base}},             // pull-request.base
            "maintainer_can_modify": p.maintainer_can_modify,    // pull-request.maintainer_can_modify
        }),
    )
}

/// A log line as GitHub writes it: a timestamp, a space, the text.
fn stamped(c: &CheckRun, text: &str) -> String {
    let ts = timestamp(c.started.unwrap_or(0)).replace('Z', ".0000000Z");
    text.lines().map(|l| format!("{ts} {l}\n")).collect()
}

fn whole_log(c: &CheckRun) -> String {
    steps(c)
        .iter()
        .map(|(name, _, _)| {
            let text = if *name == c.step {
                c.log.clone()
            } else {
                format!("{name}\n")
            };
            stamped(c, &text)
        })
        .collect()
}

/// A run's log archive in the layout both gh versions read: per job a
/// folder of `<n>_<step>.txt` files (gh 2.23 reads only these) and a
/// top-level `<i>_<job>.txt` with the whole job (newer gh falls back to
/// it). GitHub drops `/` and `:` from the names.
fn logs_zip(jobs: &[&CheckRun]) -> Vec<u8> {
    let clean = |s: &str| s.replace(['/', ':'], "");
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut add = |name: String, text: String| {
        if zip.start_file(name, options).is_ok() {
            let _ = zip.write_all(text.as_bytes());
        }
    };
    for (i, c) in jobs.iter().enumerate() {
        for (n, (step, _, _)) in steps(c).iter().enumerate() {
            let text = if *step == c.step {
                c.log.clone()
            } else {
                format!("{step}\n")
            };
            add(
                format!("{}/{}_{}.txt", clean(&c.name), n + 1, clean(step)),
                stamped(c, &text),
            );
        }
        add(format!("{i}_{}.txt", clean(&c.name)), whole_log(c));
    }
    zip.finish().map(|c| c.into_inner()).unwrap_or_default()
}
