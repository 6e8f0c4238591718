//! The README's first command: review-fix with the builtin agent on a
//! temporary git copy of `examples/quickstart/`, no network, no API key.
//!
//! ```sh
//! cargo run -q -p orchestrator-examples --example quickstart
//! ```
//!
//! It copies the quickstart crate (a small crate with seven
//! machine-applicable clippy findings in `clippy.json`) into a new temporary
//! directory, commits it in a fresh git repository, and runs exactly what
//! `orchestrator review-fix --fix clippy.json --agent builtin -y` runs there
//! — the CLI's own code, in process. Six suggestions are good and land as
//! one commit each; one (`len_zero` in `src/ring.rs`) breaks a test, so it is
//! tried, rolled back and reported failed. The repository is kept so that
//! you can look at the commits and the session files.

use std::process::ExitCode;

#[path = "quickstart_support.rs"]
mod support;

fn main() -> ExitCode {
    orchestrator_tool::init_tracing(0, orchestrator_tool::ColorChoice::Auto);
    let repo = match support::prepare(
        "quickstart",
        "orchestrator-quickstart-",
        "quickstart crate with clippy findings",
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let fix = repo.join("clippy.json").display().to_string();
    // Exit 1 is the expected end here: one suggestion breaks a test and is
    // rolled back.
    support::review_fix(&repo, &["--fix", &fix, "--agent", "builtin", "-y"])
}
