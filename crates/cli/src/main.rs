//! The `orchestrator` binary: parse arguments, set up tracing, run, exit.
//! Everything else lives in the libraries (see `orchestrator_cli::run`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = orchestrator_cli::Cli::parse();
    orchestrator_cli::init_tracing(cli.verbose);
    orchestrator_cli::run(cli)
}
