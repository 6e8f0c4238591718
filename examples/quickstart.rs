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

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser as _;
use orchestrator_tool::commands::Exit;
use orchestrator_tool::{Cli, Command as CliCommand};

/// Copies `from` into `to`, leaving out build output.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Runs git in `dir` with a fixed identity (a fresh machine may have none).
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=quickstart",
            "-c",
            "user.email=quickstart@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| {
            format!(
                "failed to run git {}: {e} (is git installed?)",
                args.join(" ")
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A new git repository holding a copy of the quickstart crate.
fn prepare() -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("quickstart");
    let repo = tempfile::Builder::new()
        .prefix("orchestrator-quickstart-")
        .tempdir()
        .map_err(|e| format!("failed to create a temporary directory: {e}"))?
        .keep();
    copy_tree(&source, &repo).map_err(|e| format!("failed to copy {}: {e}", source.display()))?;
    git(&repo, &["init", "-q"])?;
    // The fix commits use the repository's identity.
    git(&repo, &["config", "user.name", "quickstart"])?;
    git(
        &repo,
        &["config", "user.email", "quickstart@example.invalid"],
    )?;
    git(&repo, &["add", "-A"])?;
    git(
        &repo,
        &[
            "commit",
            "-q",
            "-m",
            "quickstart crate with clippy findings",
        ],
    )?;
    Ok(repo)
}

fn main() -> ExitCode {
    orchestrator_tool::init_tracing(0, orchestrator_tool::ColorChoice::Auto);
    let repo = match prepare() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (repo_arg, fix_arg) = (
        repo.display().to_string(),
        repo.join("clippy.json").display().to_string(),
    );
    let argv = [
        "orchestrator",
        "review-fix",
        "--repo",
        &repo_arg,
        "--fix",
        &fix_arg,
        "--agent",
        "builtin",
        "-y",
    ];
    eprintln!("$ {}\n", argv.join(" "));
    let args = match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: CliCommand::ReviewFix(args),
            ..
        }) => args,
        Ok(_) => return ExitCode::from(2),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // No user configuration file: the example runs the same everywhere.
    let files = orchestrator_tool::setup::ConfigFiles::default();
    let exit = orchestrator_tool::commands::review_fix::run(&args, &files);
    println!();
    match git(&repo, &["log", "--oneline"]) {
        Ok(log) => println!("git log --oneline ({}):\n{log}", repo.display()),
        Err(e) => eprintln!("error: {e}"),
    }
    match exit {
        // Exit 1 is the expected end here: one suggestion breaks a test and
        // was rolled back.
        Exit::SomeFailed => {
            println!(
                "orchestrator exited with 1: the fixes that pass the tests were committed one by one; \
                 the rest were rolled back and reported (see the summary above)."
            );
            ExitCode::SUCCESS
        }
        Exit::Success => {
            println!("orchestrator exited with 0: every finding was fixed.");
            ExitCode::SUCCESS
        }
        other => ExitCode::from(other as u8),
    }
}
