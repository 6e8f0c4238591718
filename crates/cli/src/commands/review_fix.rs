//! `orchestrator review-fix` (not wired yet; see issue #5).

use super::{Exit, unavailable};

/// Arguments of `orchestrator review-fix`.
#[derive(Debug, clap::Args)]
pub struct ReviewFixArgs {
    /// Arguments for the flow (not available in this build yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command.
pub fn run(_args: &ReviewFixArgs) -> Exit {
    unavailable("review-fix", 5)
}
