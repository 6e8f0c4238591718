//! `orchestrator planex` (not wired yet; see issue #7).

use super::{Exit, unavailable};

/// Arguments of `orchestrator planex`.
#[derive(Debug, clap::Args)]
pub struct PlanexArgs {
    /// Arguments for the flow (not available in this build yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command.
pub fn run(_args: &PlanexArgs) -> Exit {
    unavailable("planex", 7)
}
