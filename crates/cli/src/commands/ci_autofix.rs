//! `orchestrator ci-autofix` (not wired yet; see issue #8).

use super::{Exit, unavailable};

/// Arguments of `orchestrator ci-autofix`.
#[derive(Debug, clap::Args)]
pub struct CiAutofixArgs {
    /// Arguments for the flow (not available in this build yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command.
pub fn run(_args: &CiAutofixArgs) -> Exit {
    unavailable("ci-autofix", 8)
}
