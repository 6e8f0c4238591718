//! What the two quickstart examples share: a temporary git copy of an
//! example project, and `orchestrator review-fix` run in process on it.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser as _;
use orchestrator_tool::commands::Exit;
use orchestrator_tool::{Cli, Command as CliCommand};

/// Copies `from` into `to`, leaving out build output and caches.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" || name == "__pycache__" {
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
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
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

/// A new git repository (under a kept temporary directory named after
/// `prefix`) holding a copy of `examples/<project>`, committed with
/// `message`.
pub fn prepare(project: &str, prefix: &str, message: &str) -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(project);
    let repo = tempfile::Builder::new()
        .prefix(prefix)
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
    git(&repo, &["commit", "-q", "-m", message])?;
    Ok(repo)
}

/// Runs `orchestrator review-fix ARGS` (the CLI's own code, in process) in
/// `repo`, prints its `git log` after, and maps the exit: 1 ("some findings
/// were not fixed") is the expected end of both quickstarts.
pub fn review_fix(repo: &Path, args: &[&str]) -> ExitCode {
    let repo_arg = repo.display().to_string();
    let mut argv = vec!["orchestrator", "review-fix", "--repo", &repo_arg];
    argv.extend_from_slice(args);
    eprintln!("$ {}\n", argv.join(" "));
    let args = match Cli::try_parse_from(&argv) {
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
    match git(repo, &["log", "--oneline"]) {
        Ok(log) => println!("git log --oneline ({}):\n{log}", repo.display()),
        Err(e) => eprintln!("error: {e}"),
    }
    match exit {
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
