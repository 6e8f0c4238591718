//! The [`CommandRunner`] conformance suite. It runs `sh` and `sleep`, so the
//! implementation under test must really run processes — except where the
//! harness says otherwise.

use std::path::Path;
use std::time::{Duration, Instant};

use super::must;
use crate::command::{CommandError, CommandRunner, CommandSpec};

/// Runs every check against a real-process runner.
pub async fn run_suite(runner: &dyn CommandRunner, grace: Duration) {
    let dir = must(tempfile::tempdir(), "temp dir");
    let cwd = dir.path();
    output_and_exit_code(runner, cwd).await;
    arguments_are_data(runner, cwd).await;
    stdin_and_cwd(runner, cwd).await;
    env_is_passed(runner, cwd).await;
    missing_program_is_a_spawn_error(runner, cwd).await;
    the_time_limit_stops_it(runner, cwd, grace).await;
    output_is_bounded(runner, cwd).await;
}

/// A failing command is output, with its exit code, stdout and stderr.
async fn output_and_exit_code(runner: &dyn CommandRunner, cwd: &Path) {
    let out = must(
        runner
            .run(CommandSpec::new(
                "sh",
                ["-c", "printf out; printf err >&2; exit 3"],
                cwd,
            ))
            .await,
        "a failing command is Ok(output)",
    );
    assert_eq!(out.exit_code, Some(3), "conformance: exit code captured");
    assert_eq!(out.stdout, "out", "conformance: stdout captured");
    assert_eq!(out.stderr, "err", "conformance: stderr captured");
    assert!(!out.success());
}

/// Arguments reach the program verbatim: no shell sees them.
async fn arguments_are_data(runner: &dyn CommandRunner, cwd: &Path) {
    let hostile = "$(touch pwned) `touch pwned2`; rm -rf nothing";
    let out = must(
        runner
            .run(CommandSpec::new("printf", ["%s", hostile], cwd))
            .await,
        "argv is passed as data",
    );
    assert_eq!(
        out.stdout, hostile,
        "conformance: arguments reach the program verbatim"
    );
    assert!(!cwd.join("pwned").exists() && !cwd.join("pwned2").exists());
}

/// Standard input is delivered and the command runs in its folder.
async fn stdin_and_cwd(runner: &dyn CommandRunner, cwd: &Path) {
    let out = must(
        runner
            .run(CommandSpec::new("sh", ["-c", "cat; pwd"], cwd).with_stdin("piped\n"))
            .await,
        "stdin and cwd",
    );
    assert!(
        out.stdout.starts_with("piped\n"),
        "conformance: stdin delivered"
    );
    let reported = out.stdout.lines().nth(1).unwrap_or_default().to_string();
    let canonical = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    assert!(
        reported == cwd.display().to_string() || reported == canonical.display().to_string(),
        "conformance: runs in cwd, got {reported}"
    );
}

/// The spec's environment reaches the command.
async fn env_is_passed(runner: &dyn CommandRunner, cwd: &Path) {
    let out = must(
        runner
            .run(
                CommandSpec::new("sh", ["-c", "printf %s \"$ORCH_TEST_VAR\""], cwd)
                    .with_env("ORCH_TEST_VAR", "value with spaces"),
            )
            .await,
        "env",
    );
    assert_eq!(out.stdout, "value with spaces", "conformance: env passed");
}

/// A program that does not exist is `CommandError::Spawn`, not an output.
async fn missing_program_is_a_spawn_error(runner: &dyn CommandRunner, cwd: &Path) {
    match runner
        .run(CommandSpec::new(
            "orchestrator-no-such-program-xyz",
            Vec::<String>::new(),
            cwd,
        ))
        .await
    {
        Err(CommandError::Spawn { .. }) => {}
        other => panic!("conformance: a missing program is Err(Spawn), got {other:?}"),
    }
}

/// A command past its time limit is stopped within `grace` and reported timed out.
async fn the_time_limit_stops_it(runner: &dyn CommandRunner, cwd: &Path, grace: Duration) {
    let limit = Duration::from_millis(300);
    let started = Instant::now();
    let out = must(
        runner
            .run(CommandSpec::new("sh", ["-c", "sleep 30"], cwd).with_time_limit(limit))
            .await,
        "timed-out command",
    );
    assert!(out.timed_out, "conformance: the time limit is reported");
    assert!(!out.success());
    assert!(
        started.elapsed() <= limit + grace,
        "conformance: timed out after {:?}",
        started.elapsed()
    );
}

/// Output past the spec's limit is cut, keeping the tail, and reported truncated.
async fn output_is_bounded(runner: &dyn CommandRunner, cwd: &Path) {
    let mut spec = CommandSpec::new("sh", ["-c", "yes 0123456789 | head -c 2999997"], cwd);
    spec.output_limit = 4096;
    let out = must(runner.run(spec).await, "bounded output");
    assert!(out.truncated, "conformance: truncation reported");
    assert!(
        out.stdout.len() <= 4096,
        "conformance: kept {} bytes, bound 4096",
        out.stdout.len()
    );
    assert!(
        out.stdout.ends_with("0123456789\n"),
        "conformance: the tail is kept"
    );
}
