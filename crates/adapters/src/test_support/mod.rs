//! Test support for driving the real agent CLIs (feature `test-support`).
//!
//! The real `codex`, `claude` and `gemini` programs are the standard for
//! agent tests: only the model's answers are scripted. This module holds the
//! two pieces such a test needs, for this crate's tests, the CLI's and any
//! embedder's:
//! - [`cli`] finds a pinned CLI (installed by [`INSTALL`]) and panics with the
//!   install command when it is missing, so a test never skips silently;
//! - [`model_server::ModelServer`] is a scripted model endpoint on 127.0.0.1
//!   that speaks each CLI's wire protocol and records every request.
//!
//! - [`ray::RayHead`] is a real Ray head on 127.0.0.1 (one per test
//!   binary, its own ports and temp dir), stopped with the test process.
//! - [`github::GithubServer`] is a scripted GitHub API (REST, GraphQL, run
//!   logs, a git remote) that the real `gh` and git talk to, and
//!   [`github::gh_binaries`] finds the two gh versions the tests run.
//! - [`gitlab::GitlabServer`] is a scripted GitLab REST API v4 with a git
//!   remote (the real `git http-backend`), for the GitLab forge client.
//! - [`git`] runs the real git in a test's repository and panics with its
//!   stderr when it fails, for the tests of every crate that set one up.
//!
//! Data flow in a test: the test scripts [`model_server::Turn`]s, starts the
//! server, points the CLI at [`model_server::ModelServer::url`] through the
//! CLI's own settings, runs it through an adapter, and asserts on the files
//! the CLI's tools changed and on the recorded requests.

pub mod github;
pub mod gitlab;
pub mod model_server;
pub mod ray;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The command that installs the pinned CLIs where [`cli`] looks for them,
/// run from the workspace root.
pub const INSTALL: &str = "npm install --no-audit --no-fund --prefix target/agent-clis \
     @openai/codex@0.171.0 @anthropic-ai/claude-code@2.1.332 @google/gemini-cli@0.61.0";

/// The path of a pinned agent CLI (`codex`, `claude`, `gemini`): under
/// `$ORCH_AGENT_CLIS` when set (`.ci/run` sets it), else under the
/// workspace's `target/agent-clis/node_modules/.bin`.
///
/// # Panics
/// When the binary is missing, naming the install command: tests that need
/// a real CLI never skip.
pub fn cli(name: &str) -> PathBuf {
    let dir = std::env::var_os("ORCH_AGENT_CLIS").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/agent-clis/node_modules/.bin")
        },
        PathBuf::from,
    );
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "the real `{name}` CLI is missing at {}: install the pinned CLIs from the workspace root with\n    {INSTALL}\n(or point ORCH_AGENT_CLIS at a folder holding codex, claude and gemini)",
        path.display()
    );
    path
}

/// A folder outside `/tmp` for the real CLIs' sandboxes (`name` under the
/// user's cache folder: `$XDG_CACHE_HOME`, else `~/.cache`). Codex's
/// bubblewrap sandbox mounts a fresh `/tmp`, which would hide its own helper
/// (`codex-linux-sandbox`, linked under `CODEX_HOME`); the engine's test
/// cache is no place for them either, since it lives in the checkout and CI
/// may clone into `/tmp`. Tests make temporary folders in it, removed after
/// each test.
///
/// # Panics
/// When neither variable names a folder, or the folder is under `/tmp`.
pub fn sandbox_base(name: &str) -> PathBuf {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let cache = from("XDG_CACHE_HOME")
        .or_else(|| from("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| panic!("neither XDG_CACHE_HOME nor HOME is set: the real CLIs' sandboxes need a folder outside /tmp"));
    let base = cache.join("orchestrator-tests").join(name);
    assert!(
        !base.starts_with("/tmp"),
        "{} is under /tmp, where codex's sandbox cannot run; set XDG_CACHE_HOME elsewhere",
        base.display()
    );
    base
}

/// Runs the real `git` with `args` in `dir` (without the system's git
/// configuration) and returns its stdout.
///
/// # Panics
/// When git cannot be started or exits non-zero, naming the arguments, the
/// folder and git's stderr.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("starting git {args:?} in {}: {e}", dir.display()));
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
