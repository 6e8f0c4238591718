//! The quickstart for a Python project: review-fix with the builtin agent
//! on a temporary git copy of `examples/quickstart-python/`, no network, no
//! API key; it needs `python3` (the project's tests are `unittest`).
//!
//! ```sh
//! cargo run -q -p orchestrator-examples --example quickstart_python
//! ```
//!
//! The project is a small module (`stats.py`) with its tests and ruff's
//! JSON output on it (`ruff.json`: `ruff check --output-format json`, the
//! paths made relative so that it reads in any copy). It runs what
//! `orchestrator review-fix --fix ruff.json --agent builtin --test-cmd
//! "python3 -m unittest -q" -y` runs there. ruff marks four fixes safe and
//! one unsafe: like `ruff check --fix`, the builtin agent applies only the
//! safe ones. Three pass the tests and land as one commit each; one (the
//! unused-looking `import sys`, which callers reach as `stats.sys`) breaks a
//! test, so it is tried, rolled back and reported failed; the unsafe one
//! (`dict()` → `{}`) is reported as not fixable by this agent.

use std::process::{Command, ExitCode};

#[path = "quickstart_support.rs"]
mod support;

fn main() -> ExitCode {
    orchestrator_tool::init_tracing(0, orchestrator_tool::ColorChoice::Auto);
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!(
            "error: the Python quickstart runs the project's tests with python3, which is not on PATH"
        );
        return ExitCode::from(2);
    }
    let repo = match support::prepare(
        "quickstart-python",
        "orchestrator-quickstart-python-",
        "python project with ruff findings",
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let fix = repo.join("ruff.json").display().to_string();
    support::review_fix(
        &repo,
        &[
            "--fix",
            &fix,
            "--agent",
            "builtin",
            "--test-cmd",
            "python3 -m unittest -q",
            "-y",
        ],
    )
}
