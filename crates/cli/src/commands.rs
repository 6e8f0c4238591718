//! Command implementations: each turns parsed arguments into library calls
//! and an [`Exit`] code. Errors are printed to stderr, results to stdout.

use std::process::ExitCode;

use crate::{Cli, Command};

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Success = 0,
    /// The job ran and some items failed.
    SomeFailed = 1,
    /// Bad input or usage.
    BadInput = 2,
    /// Interrupted, or a human is needed; the session can be resumed.
    NeedsHuman = 3,
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let exit = match cli.command {
        Command::Planex(_) => unavailable("planex", 7),
        Command::ReviewFix(_) => unavailable("review-fix", 5),
        Command::CiAutofix(_) => unavailable("ci-autofix", 8),
        Command::Batch(_) | Command::Waves(_) => unavailable("this inspector", 3),
    };
    exit.into()
}

fn unavailable(what: &str, issue: u32) -> Exit {
    eprintln!(
        "error: `orchestrator {what}` is not available in this build yet (tracked in issue #{issue})"
    );
    Exit::BadInput
}
