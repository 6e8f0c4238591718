//! `orchestrator mcp`: the engine's flows as tools for agent hosts, over the
//! Model Context Protocol on stdio, or streamable HTTP on a loopback
//! address with `--listen` (`http.rs`), built on the official SDK, `rmcp`.
//!
//! Each tool call runs this same binary as a child process with `--json`
//! in the repository the server was started for, and answers with the
//! child's JSON result: the flows keep exactly the CLI's guarantees (the
//! repository lock, the dirty-tree rules, atomic session files, exit
//! codes), and a call that is cancelled stops its child with the whole
//! process group, which leaves the session as a `kill -9` would — resumable
//! (`--resume` / `--continue`), nothing verified lost.
//!
//! `planex_status` is the one tool answered in process: it reads a
//! session's folder without its lock (see `status.rs`).
//!
//! Resources: the session reports the flows write (review-fix's
//! `fix-summary.md`, planex's `context.md` and `results.csv`, ci-autofix's
//! audit logs) are listed and readable, and nothing else.
//!
//! Safety: every path argument is resolved against the repository and
//! refused when it leaves it (through `..` or a symlink); a flow that
//! changes the repository (`review_fix`, `planex_run`, `ci_autofix_local`)
//! runs only with `yes: true` in the call or, where the client declared
//! form elicitation, once its user approved it when asked (`gate.rs`) — the
//! server never approves on the host's behalf.

mod gate;
mod http;
mod inputs;
mod resources;
mod status;
mod tools;

use std::path::{Path, PathBuf};

use rmcp::ServiceExt;

use super::Exit;

pub use tools::{Orchestrator, ToolOutcome};

/// Arguments of `orchestrator mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The repository the tools act on; paths in tool arguments are
    /// relative to it and may not leave it.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,

    /// Serve MCP's streamable HTTP transport on this loopback address
    /// (e.g. 127.0.0.1:8765, or port 0 for a free one; the URL is printed
    /// on stderr) instead of stdio, until Ctrl-C.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
}

/// Runs the server on stdin/stdout until the client closes the connection,
/// or with `--listen` over HTTP until Ctrl-C.
pub fn run(args: &McpArgs) -> Exit {
    if let Some(addr) = args.listen
        && let Err(e) = http::check_loopback(addr)
    {
        eprintln!("error: {e}");
        return Exit::BadInput;
    }
    let repo = match std::fs::canonicalize(&args.repo) {
        Ok(repo) if repo.is_dir() => repo,
        Ok(repo) => {
            eprintln!("error: --repo {} is not a folder", repo.display());
            return Exit::BadInput;
        }
        Err(e) => {
            eprintln!("error: --repo {}: {e}", args.repo.display());
            return Exit::BadInput;
        }
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            eprintln!("error: cannot find the orchestrator binary to run the flows: {e}");
            return Exit::BadInput;
        }
    };
    let runtime = match crate::setup::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let server = Orchestrator::new(program, repo);
    match args.listen {
        Some(addr) => runtime.block_on(http::serve(server, addr)),
        None => runtime.block_on(serve(server)),
    }
}

async fn serve(server: Orchestrator) -> Exit {
    let service = match server.serve(rmcp::transport::stdio()).await {
        Ok(service) => service,
        Err(e) => {
            eprintln!("error: the MCP session did not start: {e}");
            return Exit::BadInput;
        }
    };
    match service.waiting().await {
        Ok(_) => Exit::Success,
        Err(e) => {
            eprintln!("error: the MCP session ended with an error: {e}");
            Exit::BadInput
        }
    }
}

/// `path` (relative to `repo`, or absolute) as an absolute path inside
/// `repo`, or why not: it must exist, and neither `..` nor a symlink may
/// take it out of the repository.
pub fn confined(repo: &Path, path: &str) -> Result<PathBuf, String> {
    if path.trim().is_empty() {
        return Err("`path` is empty".to_owned());
    }
    let joined = repo.join(path);
    let real = std::fs::canonicalize(&joined).map_err(|e| format!("`path` {path:?}: {e}"))?;
    if real.starts_with(repo) {
        Ok(real)
    } else {
        Err(format!(
            "`path` {path:?} is outside the repository {} (it resolves to {})",
            repo.display(),
            real.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(dir.path()).unwrap().join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/a.json"), "[]").unwrap();
        std::fs::write(dir.path().join("secret.json"), "[]").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.json"), repo.join("link.json")).unwrap();
        assert_eq!(
            confined(&repo, "src/a.json").unwrap(),
            repo.join("src/a.json")
        );
        let absolute = repo.join("src/a.json");
        assert_eq!(
            confined(&repo, absolute.to_str().unwrap()).unwrap(),
            absolute
        );
        for bad in [
            "../secret.json",
            "link.json",
            "/etc/passwd",
            "missing.json",
            " ",
        ] {
            let err = confined(&repo, bad).unwrap_err();
            assert!(err.contains("path"), "{bad}: {err}");
        }
        assert!(
            confined(&repo, "link.json")
                .unwrap_err()
                .contains("outside the repository")
        );
    }
}
