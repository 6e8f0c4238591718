//! Command implementations: each turns parsed arguments into library calls
//! and an [`Exit`] code. Errors are printed to stderr, results to stdout.

mod batch;
pub mod cache;
pub mod ci_autofix;
mod config;
pub mod findings;
mod gitlab;
pub mod mcp;
pub mod planex;
pub mod review_fix;
pub mod serve;
pub mod trash;
mod waves;

use std::path::Path;
use std::process::ExitCode;

use crate::setup::ConfigFiles;
use crate::{Cli, Command, ConfigCommand};

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
    /// Interrupted, a human is needed or a run limit reached; the session
    /// can be resumed.
    NeedsHuman = 3,
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let files = ConfigFiles::from_env(cli.config);
    let exit = match cli.command {
        Command::Planex(args) => planex::run(&args, &files),
        Command::ReviewFix(args) => review_fix::run(&args, &files),
        Command::CiAutofix(args) => ci_autofix::run(&args, &files),
        Command::Batch(args) => batch::run(&args),
        Command::Waves(args) => waves::run(&args),
        Command::Trash(command) => trash::run(&command),
        Command::Cache(command) => cache::run(&command, &files),
        Command::Findings(command) => findings::run(&command),
        Command::Mcp(args) => mcp::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Config(ConfigCommand::Show(args)) => config::show(&args, &files),
        Command::Completions(args) => {
            let mut script = Vec::new();
            crate::completions(args.shell, &mut script);
            out(&String::from_utf8_lossy(&script));
            Exit::Success
        }
        Command::Man => match crate::man_page() {
            Ok(page) => {
                out(&String::from_utf8_lossy(&page));
                Exit::Success
            }
            Err(e) => {
                eprintln!("error: failed to render the man page: {e}");
                Exit::BadInput
            }
        },
    };
    exit.into()
}

/// Reads an input file (or standard input for `-`) as UTF-8 text; returns the
/// text and the name to use in messages. Errors are printed and mapped to
/// exit code 2.
pub(crate) fn read_input(path: &Path) -> Result<(String, String), Exit> {
    use std::io::Read as _;
    if path.as_os_str() == "-" {
        let mut text = String::new();
        return match std::io::stdin().read_to_string(&mut text) {
            Ok(_) => Ok((text, "<stdin>".to_owned())),
            Err(e) => {
                eprintln!("error: failed to read standard input: {e}");
                Err(Exit::BadInput)
            }
        };
    }
    let name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Ok((text, name)),
            Err(e) => {
                eprintln!(
                    "error: {name} is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                );
                Err(Exit::BadInput)
            }
        },
        Err(e) => {
            eprintln!("error: failed to read {name}: {e}");
            Err(Exit::BadInput)
        }
    }
}

/// Writes `text` to standard output. A closed pipe (`orchestrator … | head`)
/// is not an error: the reader has what it wanted.
pub(crate) fn out(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
