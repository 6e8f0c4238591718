//! `orchestrator serve`: a live dashboard of the repositories' sessions in
//! the browser — every review-fix, planex and ci-autofix session, each
//! one's items, timeline, spend, landed diffs and failures, updated as the
//! runs go; a waiting plan approved and a run cancelled from the page.
//!
//! One HTTP/1.1 server (hyper) serves a page embedded in the binary (plain
//! HTML, CSS and JavaScript: `assets/`) and a small JSON API over the
//! session folders ([`routes`]). Sessions are read without taking their
//! locks ([`sessions`], [`flows`]); what happened when comes from each
//! session's `events.ndjson` ([`digest`]), which every flow run writes; a
//! page learns of changes through server-sent events ([`live`]). Access is
//! checked on every request ([`auth`]): loopback only unless `--listen`
//! names another address and `--token` is given, a random token otherwise,
//! `Host` and `Origin` checked.

pub mod actions;
pub mod auth;
pub mod digest;
pub mod flows;
pub mod live;
pub mod model;
pub mod routes;
pub mod sessions;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;

use super::Exit;

const AFTER_HELP: &str = "\
Examples:
  orchestrator serve                                   # this repository, a free port
  orchestrator serve --repo ~/src/api --repo ~/src/web --listen 127.0.0.1:8765

The URL printed at start carries the access token (as Jupyter's does):
open it, and the page keeps the token in a cookie. Without the token no
session data is served. Only loopback addresses are served unless --listen
names another one and --token is given.

From the page: approve the plan a stopped planex session waits at (the
record `orchestrator planex approve` writes; the run is then continued),
and cancel a running session (it stops resumably, as on Ctrl-C). Each
action is written to the session's events.ndjson with where it came from.";

/// Arguments of `orchestrator serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ServeArgs {
    /// A repository whose sessions to show (repeat for several).
    #[arg(long = "repo", value_name = "DIR", default_value = ".")]
    pub repos: Vec<PathBuf>,

    /// The address to listen on; port 0 picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// The access token (default: a random one). Required to listen on an
    /// address other than loopback.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

/// Checks the arguments: repositories that exist, an address allowed with
/// the token given. Returns the repositories, canonical.
pub fn check(args: &ServeArgs) -> Result<Vec<PathBuf>, String> {
    if !args.listen.ip().is_loopback() && args.token.is_none() {
        return Err(format!(
            "--listen {}: only a loopback address is served without --token (the page acts on the repositories with your rights)",
            args.listen
        ));
    }
    if let Some(token) = &args.token
        && (token.len() < 16
            || !token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    {
        return Err(
            "--token: expected at least 16 characters of letters, digits, '-' or '_'".to_owned(),
        );
    }
    let mut repos = Vec::new();
    for repo in &args.repos {
        let canonical =
            std::fs::canonicalize(repo).map_err(|e| format!("--repo {}: {e}", repo.display()))?;
        if !canonical.is_dir() {
            return Err(format!("--repo {}: not a directory", repo.display()));
        }
        if !repos.contains(&canonical) {
            repos.push(canonical);
        }
    }
    Ok(repos)
}

/// Runs the command.
pub fn run(args: &ServeArgs) -> Exit {
    let repos = match check(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let token = match &args.token {
        Some(t) => t.clone(),
        None => match auth::new_token() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: failed to make a token: {e}");
                return Exit::BadInput;
            }
        },
    };
    let runtime = match crate::setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    runtime.block_on(serve(repos, args.listen, token))
}

async fn serve(repos: Vec<PathBuf>, listen: SocketAddr, token: String) -> Exit {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: --listen {listen}: {e}");
            return Exit::BadInput;
        }
    };
    let bound = match listener.local_addr() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: --listen {listen}: {e}");
            return Exit::BadInput;
        }
    };
    let app = Arc::new(routes::App {
        repos: Arc::new(repos),
        guard: auth::Guard::new(bound, token),
        digests: Arc::new(sessions::Digests::default()),
        bound,
    });
    let shown = app
        .repos
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!("orchestrator serve: the sessions of {shown}");
    super::out(&format!("http://{bound}/?token={}\n", app.guard.token()));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
        };
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let app = Arc::clone(&app);
                async move {
                    Ok::<_, std::convert::Infallible>(routes::handle(app, peer, request).await)
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    Exit::Success
}
