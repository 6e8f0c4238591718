//! The git remote of the scripted GitHub: smart HTTP
//! (`github.localhost/<owner>/<name>.git/info/refs`, `git-upload-pack`,
//! `git-receive-pack`) answered by the real `git http-backend` (CGI) on the
//! scenario's bare repositories. git reaches it through the lower-case
//! `http_proxy` (libcurl ignores `HTTP_PROXY`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use super::rest::Reply;
use super::scenario::Scenario;

/// One request to the git remote.
pub(crate) struct GitRequest<'a> {
    pub(crate) method: &'a str,
    /// `/<owner>/<name>.git/…`
    pub(crate) path: &'a str,
    pub(crate) query: &'a str,
    pub(crate) content_type: &'a str,
    pub(crate) content_encoding: &'a str,
    pub(crate) git_protocol: &'a str,
    pub(crate) body: &'a [u8],
}

/// Runs `git http-backend` for `req`; after a receive-pack that moved
/// branches, tells the scenario ([`Scenario::pushed`]).
pub(crate) fn serve(s: &mut Scenario, req: &GitRequest<'_>) -> Reply {
    let repo = req
        .path
        .trim_start_matches('/')
        .split(".git/")
        .next()
        .unwrap_or_default()
        .to_owned();
    if !s.repos.contains_key(&repo) {
        return Reply::error(404, "Repository not found.");
    }
    let pushing = req.path.ends_with("/git-receive-pack");
    let before = if pushing {
        heads(s, &repo)
    } else {
        BTreeMap::new()
    };
    let reply = http_backend(&s.root, req, "octo");
    if pushing {
        let after = heads(s, &repo);
        for (branch, sha) in &after {
            if before.get(branch) != Some(sha) {
                s.pushed(&repo, branch, sha);
            }
        }
    }
    reply
}

/// Runs the real `git http-backend` (CGI) for `req` on the bare
/// repositories under `root`, as user `user`.
pub(crate) fn http_backend(root: &std::path::Path, req: &GitRequest<'_>, user: &str) -> Reply {
    let out = Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", req.method)
        .env("PATH_INFO", req.path)
        .env("QUERY_STRING", req.query)
        .env("CONTENT_TYPE", req.content_type)
        .env("CONTENT_LENGTH", req.body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", req.content_encoding)
        .env("GIT_PROTOCOL", req.git_protocol)
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(req.body)?;
            }
            child.wait_with_output()
        });
    let out = match out {
        Ok(o) => o,
        Err(e) => return Reply::error(500, &format!("git http-backend: {e}")),
    };
    cgi_reply(&out.stdout)
}

/// The branches of `repo` and their commits.
fn heads(s: &Scenario, repo: &str) -> BTreeMap<String, String> {
    match s.repos.get(repo) {
        Some(r) => branch_heads(&r.bare),
        None => BTreeMap::new(),
    }
}

/// The branches of the bare repository `bare` and their commits.
pub(crate) fn branch_heads(bare: &std::path::Path) -> BTreeMap<String, String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args([
            "for-each-ref",
            "--format=%(refname:strip=2) %(objectname)",
            "refs/heads/",
        ])
        .output();
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(b, s)| (b.to_owned(), s.to_owned()))
            .collect()
    })
    .unwrap_or_default()
}

/// A CGI response (`Status:` and other headers, a blank line, the body) as
/// a [`Reply`].
fn cgi_reply(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            raw.windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        });
    let Some((end, body_start)) = split else {
        return Reply::error(500, "git http-backend wrote no headers");
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut reply = Reply {
        status: 200,
        content_type: "application/octet-stream",
        headers: Vec::new(),
        body: raw[body_start..].to_vec(),
    };
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.to_ascii_lowercase().as_str() {
            "status" => {
                reply.status = v
                    .split(' ')
                    .next()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(500)
            }
            "content-type" => reply.headers.push(("Content-Type", v.to_owned())),
            "cache-control" => reply.headers.push(("Cache-Control", v.to_owned())),
            _ => {}
        }
    }
    reply
}
