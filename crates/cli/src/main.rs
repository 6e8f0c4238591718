//! The `orchestrator` binary: parse arguments, set up tracing, run, exit.
//! Everything else lives in the libraries (see `orchestrator_tool::run`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = orchestrator_tool::Cli::parse();
    orchestrator_tool::init_tracing(cli.verbose, cli.color);
    orchestrator_tool::run(cli)
}
