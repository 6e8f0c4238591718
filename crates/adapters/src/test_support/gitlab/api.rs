//! The REST API v4 routes a GitLab forge client calls, answered from the
//! [`Scenario`] in the shapes GitLab's docs publish (`doc/api/*.md`, the
//! section named at each function; entity fields as in GitLab's
//! `lib/api/entities`).

use serde_json::{Map, Value, json};

use super::scenario::{Discussion, Job, MergeRequest, Note, NotePosition, Scenario};
use crate::test_support::github::rest::Reply;

/// One API request, its path already split into URL-decoded segments
/// after `/api/v4`.
pub(crate) struct ApiRequest<'a> {
    pub(crate) method: &'a str,
    pub(crate) segments: Vec<String>,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl ApiRequest<'_> {
    fn param(&self, name: &str) -> Option<String> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| match &self.body[name] {
                Value::String(s) => Some(s.clone()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
    }
}

/// `{"message": "<status> <what>"}` (REST troubleshooting docs, "Status codes").
pub(crate) fn message(status: u16, text: &str) -> Reply {
    Reply::json(status, &json!({ "message": text }))
}

/// A request over a rate limit (user docs, "Rate limits" and "Rate limits on
/// ... API": `429 Too Many Requests`, the plain-text body Rack::Attack
/// writes, `Retry-After` in seconds and the `RateLimit-*` headers).
fn rate_limited(retry_after: u32) -> Reply {
    let mut reply = Reply::json(429, &Value::Null);
    reply.content_type = "text/plain";
    reply.body = b"Retry later\n".to_vec();
    reply.headers = vec![
        ("Retry-After", retry_after.to_string()),
        ("RateLimit-Limit", "600".to_owned()),
        ("RateLimit-Observed", "601".to_owned()),
        ("RateLimit-Remaining", "0".to_owned()),
        ("RateLimit-Reset", "1714557660".to_owned()),
    ];
    reply
}

const WEB: &str = "http://gitlab.localhost";

/// `2024-05-01T10:00:00.000Z` plus `minutes` (GitLab writes milliseconds).
fn time(minutes: u32) -> String {
    crate::test_support::github::timestamp(minutes).replace('Z', ".000Z")
}

/// Answers one API request.
pub(crate) fn route(s: &mut Scenario, req: &ApiRequest<'_>) -> Reply {
    if s.rate_limited > 0 {
        s.rate_limited -= 1;
        return rate_limited(s.retry_after);
    }
    let seg: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let Some(project) = seg
        .get(1)
        .filter(|_| seg[0] == "projects")
        .and_then(|key| s.find_project(key))
        .map(|p| p.id)
    else {
        return message(404, "404 Project Not Found");
    };
    match (req.method, &seg[2..]) {
        ("GET", []) => project_json(s, project),
        ("GET", ["merge_requests", iid]) => with_mr(s, project, iid, mr_json),
        ("GET", ["merge_requests", iid, "raw_diffs"]) => with_mr(s, project, iid, raw_diffs),
        ("GET", ["merge_requests", iid, "pipelines"]) => {
            with_mr(s, project, iid, |s, m| mr_pipelines(s, m, req))
        }
        ("GET", ["merge_requests", iid, "discussions"]) => {
            let iid = iid.parse().unwrap_or(0);
            let items: Vec<Value> = s
                .discussions
                .iter()
                .filter(|d| d.mr == (project, iid))
                .map(discussion_json)
                .collect();
            page(req, s.max_per_page, items, true)
        }
        ("POST", ["merge_requests", iid, "discussions"]) => new_thread(s, project, iid, req),
        ("POST", ["merge_requests", iid, "notes"]) => new_note(s, project, iid, req),
        ("POST", ["merge_requests", iid, "discussions", id, "notes"]) => {
            reply_note(s, project, iid, id, req)
        }
        ("PUT", ["merge_requests", iid, "discussions", id]) => resolve(s, project, iid, id, req),
        ("GET", ["pipelines", id]) => pipeline(s, project, id),
        ("GET", ["pipelines", id, "jobs"]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let items: Vec<Value> = s
                .jobs
                .iter()
                .rev()
                .filter(|j| j.pipeline == id && !j.retried)
                .map(|j| job_json(s, j))
                .collect();
            // jobs.rb: `paginator_params: { without_count: true }`: no x-total.
            page(req, s.max_per_page, items, false)
        }
        ("GET", ["jobs", id, "trace"]) => trace(s, id),
        ("POST", ["jobs", id, "retry"]) => retry(s, id),
        _ => message(404, "404 Not Found"),
    }
}

fn with_mr(
    s: &mut Scenario,
    project: u64,
    iid: &str,
    f: impl FnOnce(&mut Scenario, &MergeRequest) -> Reply,
) -> Reply {
    let found = s
        .merge_requests
        .iter()
        .find(|m| m.target_project == project && m.iid.to_string() == iid)
        .cloned();
    match found {
        Some(mr) => f(s, &mr),
        None => message(404, "404 Merge Request Not Found"),
    }
}

/// projects.md "Get a single project": the fields a fork push needs.
fn project_json(s: &Scenario, id: u64) -> Reply {
    let Some(p) = s.projects.get(&id) else {
        return message(404, "404 Project Not Found");
    };
    Reply::json(
        200,
        &json!({
            "id": p.id,
            "path_with_namespace": p.path,
            "default_branch": p.default_branch,
            "web_url": format!("{WEB}/{}", p.path),
            "http_url_to_repo": format!("{WEB}/{}.git", p.path),
            "ssh_url_to_repo": format!("git@gitlab.localhost:{}.git", p.path),
        }),
    )
}

/// `PipelineBasic` (`lib/api/entities/ci/pipeline_basic.rb`).
fn pipeline_basic(s: &Scenario, id: u64) -> Value {
    let Some(p) = s.pipelines.iter().find(|p| p.id == id) else {
        return Value::Null;
    };
    let path = s.projects.get(&p.project).map(|p| p.path.clone());
    json!({
        "id": p.id, "iid": p.id - 1000, "project_id": p.project, "sha": p.sha,
        "ref": p.ref_name, "status": s.pipeline_status(p.id), "source": "merge_request_event",
        "created_at": time(p.created), "updated_at": time(p.created),
        "web_url": format!("{WEB}/{}/-/pipelines/{}", path.unwrap_or_default(), p.id),
    })
}

/// merge_requests.md "Get single MR" (`allow_collaboration` only for a
/// fork: `merge_request_basic.rb`; `head_pipeline`: the source project's
/// newest pipeline on the MR's `sha`).
fn mr_json(s: &mut Scenario, m: &MergeRequest) -> Reply {
    let sha = s.mr_sha(m);
    let head_pipeline = s
        .pipelines
        .iter()
        .rev()
        .find(|p| p.project == m.source_project && Some(&p.sha) == sha.as_ref())
        .map(|p| pipeline_basic(s, p.id));
    let [base, start, head] = s.diff_refs(m.target_project, m.iid);
    let path = s
        .projects
        .get(&m.target_project)
        .map(|p| p.path.clone())
        .unwrap_or_default();
    let mut v = json!({
        "id": 50_000 + m.iid, "iid": m.iid, "project_id": m.target_project,
        "title": format!("MR {}", m.iid), "state": "opened", "draft": false,
        "source_branch": m.source_branch, "target_branch": m.target_branch,
        "source_project_id": m.source_project, "target_project_id": m.target_project,
        "sha": sha, "detailed_merge_status": "mergeable", "has_conflicts": false,
        "head_pipeline": head_pipeline,
        "diff_refs": {"base_sha": base, "head_sha": head, "start_sha": start},
        "web_url": format!("{WEB}/{path}/-/merge_requests/{}", m.iid),
        "references": {"full": format!("{path}!{}", m.iid)},
        "user": {"can_merge": true},
        "changes_count": "1",
    });
    if m.source_project != m.target_project {
        v["allow_collaboration"] = json!(m.allow_collaboration);
        v["allow_maintainer_to_push"] = json!(m.allow_collaboration);
    }
    Reply::json(200, &v)
}

/// merge_requests.md "Show merge request raw diffs": `git diff` of the
/// target branch and the MR head, as plain text.
fn raw_diffs(s: &mut Scenario, m: &MergeRequest) -> Reply {
    let Some(bare) = s.projects.get(&m.target_project).map(|p| p.bare.clone()) else {
        return message(404, "404 Project Not Found");
    };
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args([
            "diff",
            &format!("refs/heads/{}", m.target_branch),
            &format!("refs/merge-requests/{}/head", m.iid),
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => Reply {
            status: 200,
            content_type: "text/plain",
            headers: Vec::new(),
            body: o.stdout,
        },
        _ => message(500, "500 Internal Server Error"),
    }
}

/// merge_requests.md "List merge request pipelines": newest first.
fn mr_pipelines(s: &Scenario, m: &MergeRequest, req: &ApiRequest<'_>) -> Reply {
    let mr_ref = format!("refs/merge-requests/{}/head", m.iid);
    let items: Vec<Value> = s
        .pipelines
        .iter()
        .rev()
        .filter(|p| {
            p.project == m.source_project && (p.ref_name == mr_ref || p.ref_name == m.source_branch)
        })
        .map(|p| pipeline_basic(s, p.id))
        .collect();
    page(req, s.max_per_page, items, true)
}

/// pipelines.md "Get a single pipeline".
fn pipeline(s: &Scenario, project: u64, id: &str) -> Reply {
    match s
        .pipelines
        .iter()
        .find(|p| p.project == project && p.id.to_string() == id)
    {
        Some(p) => Reply::json(200, &pipeline_basic(s, p.id)),
        None => message(404, "404 Not found"),
    }
}

/// jobs.md "List pipeline jobs" (`JobBasic`; `failure_reason` only when
/// failed: `job_basic.rb`).
fn job_json(s: &Scenario, j: &Job) -> Value {
    let pipeline = s.pipelines.iter().find(|p| p.id == j.pipeline);
    let path = pipeline
        .and_then(|p| s.projects.get(&p.project))
        .map(|p| p.path.clone())
        .unwrap_or_default();
    let mut v = json!({
        "id": j.id, "name": j.name, "stage": j.stage, "status": j.outcome.status,
        "allow_failure": j.allow_failure, "ref": pipeline.map(|p| p.ref_name.clone()),
        "tag": false, "archived": false,
        "pipeline": pipeline_basic(s, j.pipeline),
        "web_url": format!("{WEB}/{path}/-/jobs/{}", j.id),
    });
    if j.outcome.status == "failed" {
        v["failure_reason"] = json!(j.outcome.failure_reason);
    }
    v
}

/// jobs.md "Get a log file": `text/plain`, the raw trace.
fn trace(s: &Scenario, id: &str) -> Reply {
    match s.jobs.iter().find(|j| j.id.to_string() == id) {
        Some(j) => Reply {
            status: 200,
            content_type: "text/plain",
            headers: vec![(
                "Content-Disposition",
                format!("infile; filename=\"{}.log\"", j.id),
            )],
            body: j.outcome.log.clone().into_bytes(),
        },
        None => message(404, "404 Not found"),
    }
}

/// jobs.md "Retry a job": 201 with the new job (`jobs.rb`).
fn retry(s: &mut Scenario, id: &str) -> Reply {
    match s.retry_job(id.parse().unwrap_or(0)) {
        Ok(new) => {
            let job = s.jobs.iter().find(|j| j.id == new).cloned();
            match job {
                Some(j) => Reply::json(201, &job_json(s, &j)),
                None => message(500, "500 Internal Server Error"),
            }
        }
        Err(m) if m.starts_with("404") => message(404, &m),
        Err(m) => message(403, &m),
    }
}

/// A note (`lib/api/entities/note.rb`).
fn note_json(d: &Discussion, n: &Note) -> Value {
    let position = n.position.as_ref().map(|p| {
        json!({
            "base_sha": p.shas[0], "start_sha": p.shas[1], "head_sha": p.shas[2],
            "old_path": p.old_path, "new_path": p.new_path, "position_type": "text",
            "old_line": p.old_line, "new_line": p.new_line,
        })
    });
    let kind = if n.position.is_some() {
        json!("DiffNote")
    } else if d.individual_note {
        Value::Null
    } else {
        json!("DiscussionNote")
    };
    json!({
        "id": n.id, "type": kind, "body": n.body,
        "author": {"id": 2, "username": n.author, "name": n.author, "state": "active"},
        "created_at": time(0), "updated_at": time(0), "system": n.system,
        "noteable_type": "MergeRequest", "noteable_iid": d.mr.1, "project_id": d.mr.0,
        "resolvable": n.resolvable,
        "resolved": n.resolvable.then_some(n.resolved),
        "position": position,
    })
}

/// discussions.md "List project merge request discussion items".
fn discussion_json(d: &Discussion) -> Value {
    json!({
        "id": d.id,
        "individual_note": d.individual_note,
        "notes": d.notes.iter().map(|n| note_json(d, n)).collect::<Vec<_>>(),
    })
}

/// discussions.md "Create new merge request thread": `body`, and a
/// `position` of type `text` on the MR's diff refs; 201 with the discussion.
fn new_thread(s: &mut Scenario, project: u64, iid: &str, req: &ApiRequest<'_>) -> Reply {
    let Some(iid) = known_mr(s, project, iid) else {
        return message(404, "404 Merge Request Not Found");
    };
    let Some(body) = req.param("body") else {
        return message(400, "400 (Bad request) \"body\" not given");
    };
    let position = match &req.body["position"] {
        Value::Null => None,
        p => match position(p) {
            Ok(p) => Some(p),
            Err(reply) => return reply,
        },
    };
    // discussions.md "Create a new thread in the merge request diff": an
    // added line takes `new_line` alone, an unchanged one both lines; any
    // other line gets GitLab's line-code error.
    if let Some(p) = &position
        && let Some(line) = p.new_line
    {
        let (added, context) = s.diff_lines(project, iid, &p.new_path);
        let shown = match p.old_line {
            None => added.contains(&line),
            Some(old) => context.contains(&(line, old)),
        };
        if !shown {
            return message(400, LINE_CODE);
        }
    }
    let note = Note {
        id: s.next(),
        body,
        author: "orchestrator".into(),
        system: false,
        resolvable: true,
        resolved: false,
        position,
    };
    let id = s.discussion(project, iid, false, note);
    let d = s.discussions.iter().find(|d| d.id == id);
    d.map_or_else(
        || message(500, "500"),
        |d| Reply::json(201, &discussion_json(d)),
    )
}

/// GitLab's answer to a position on no line of the diff.
const LINE_CODE: &str =
    "400 Bad request - Note {:line_code=>[\"can't be blank\", \"must be a valid line code\"]}";

/// A `position` hash: `position_type` must be `text`, `image` or `file`
/// (else Grape's `{"error": …}`); the three SHAs and the paths are required.
fn position(p: &Value) -> Result<NotePosition, Reply> {
    let kind = p["position_type"].as_str().unwrap_or_default();
    if !matches!(kind, "text" | "image" | "file") {
        return Err(Reply::json(
            400,
            &json!({"error": "position[position_type] does not have a valid value"}),
        ));
    }
    let text = |k: &str| p[k].as_str().map(str::to_owned);
    let line = |k: &str| {
        p[k].as_u64()
            .or_else(|| p[k].as_str().and_then(|s| s.parse().ok()))
    };
    let (Some(base), Some(start), Some(head), Some(old_path), Some(new_path)) = (
        text("base_sha"),
        text("start_sha"),
        text("head_sha"),
        text("old_path"),
        text("new_path"),
    ) else {
        return Err(message(400, LINE_CODE));
    };
    Ok(NotePosition {
        shas: [base, start, head],
        old_path,
        new_path,
        old_line: line("old_line"),
        new_line: line("new_line"),
    })
}

/// notes.md "Create new merge request note": an individual note.
fn new_note(s: &mut Scenario, project: u64, iid: &str, req: &ApiRequest<'_>) -> Reply {
    let Some(iid) = known_mr(s, project, iid) else {
        return message(404, "404 Merge Request Not Found");
    };
    let Some(body) = req.param("body") else {
        return message(400, "400 (Bad request) \"body\" not given");
    };
    let note = Note {
        id: s.next(),
        body,
        author: "orchestrator".into(),
        system: false,
        resolvable: false,
        resolved: false,
        position: None,
    };
    let id = s.discussion(project, iid, true, note);
    let d = s.discussions.iter().find(|d| d.id == id).cloned();
    d.map_or_else(
        || message(500, "500"),
        |d| Reply::json(201, &note_json(&d, &d.notes[0])),
    )
}

fn known_mr(s: &Scenario, project: u64, iid: &str) -> Option<u64> {
    s.merge_requests
        .iter()
        .find(|m| m.target_project == project && m.iid.to_string() == iid)
        .map(|m| m.iid)
}

/// discussions.md "Add note to existing merge request thread": 201 with the note.
fn reply_note(s: &mut Scenario, project: u64, iid: &str, id: &str, req: &ApiRequest<'_>) -> Reply {
    let Some(body) = req.param("body") else {
        return message(400, "400 (Bad request) \"body\" not given");
    };
    let note_id = s.next();
    let Some(d) = s
        .discussions
        .iter_mut()
        .find(|d| d.mr.0 == project && d.mr.1.to_string() == iid && d.id == id)
    else {
        return message(404, "404 Discussion Not Found");
    };
    let resolvable = d.notes.first().is_some_and(|n| n.resolvable);
    d.individual_note = false;
    d.notes.push(Note {
        id: note_id,
        body,
        author: "orchestrator".into(),
        system: false,
        resolvable,
        resolved: false,
        position: None,
    });
    let d = d.clone();
    Reply::json(201, &note_json(&d, &d.notes[d.notes.len() - 1]))
}

/// discussions.md "Resolve a merge request thread": `resolved` required;
/// 200 with the discussion.
fn resolve(s: &mut Scenario, project: u64, iid: &str, id: &str, req: &ApiRequest<'_>) -> Reply {
    let Some(resolved) = req.param("resolved") else {
        return Reply::json(400, &json!({"error": "resolved is missing"}));
    };
    let Some(d) = s
        .discussions
        .iter_mut()
        .find(|d| d.mr.0 == project && d.mr.1.to_string() == iid && d.id == id)
    else {
        return message(404, "404 Discussion Not Found");
    };
    for n in d.notes.iter_mut().filter(|n| n.resolvable) {
        n.resolved = resolved == "true";
    }
    Reply::json(200, &discussion_json(d))
}

/// REST docs "Pagination": `page`, `per_page` (default 20, at most the
/// scenario's maximum), the `x-*` headers and a `Link` with `rel="next"`;
/// `x-next-page` is empty on the last page; `x-total` left out where
/// GitLab leaves it out.
fn page(req: &ApiRequest<'_>, max: usize, items: Vec<Value>, total: bool) -> Reply {
    let per_page = req
        .param("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(20usize)
        .clamp(1, max.max(1));
    let page = req
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let pages = items.len().div_ceil(per_page).max(1);
    let slice: Vec<Value> = items
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    let next = if page < pages {
        (page + 1).to_string()
    } else {
        String::new()
    };
    let mut reply = Reply::json(200, &Value::Array(slice));
    reply.headers.extend([
        ("x-page", page.to_string()),
        ("x-per-page", per_page.to_string()),
        ("x-next-page", next.clone()),
        (
            "x-prev-page",
            if page > 1 {
                (page - 1).to_string()
            } else {
                String::new()
            },
        ),
    ]);
    if !next.is_empty() {
        reply.headers.push((
            "Link",
            format!("<?page={next}&per_page={per_page}>; rel=\"next\""),
        ));
    }
    if total {
        reply.headers.push(("x-total", items.len().to_string()));
        reply.headers.push(("x-total-pages", pages.to_string()));
    }
    reply
}

/// A form body (`position[new_line]=2&body=…`) as the JSON GitLab's Grape
/// reads it (discussions.md's curl examples send forms).
pub(crate) fn form_to_json(form: &str) -> Value {
    let mut top = Map::new();
    for pair in form.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (decode(&k.replace('+', " ")), decode(&v.replace('+', " ")));
        match k.split_once('[') {
            Some((outer, inner)) => {
                let inner = inner.trim_end_matches(']').to_owned();
                if let Value::Object(m) = top
                    .entry(outer.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    m.insert(inner, Value::String(v));
                }
            }
            None => {
                top.insert(k, Value::String(v));
            }
        }
    }
    Value::Object(top)
}

/// Percent-decodes one URL component.
pub(crate) fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}
