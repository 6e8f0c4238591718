//! `process::run` on real processes: capture, stdin, env and cwd, the output
//! bound, timeouts, leftovers, and error messages.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod procs_support;

use std::time::{Duration, Instant};

use orchestrator_adapters::process::{self, ExitKind, ProcessError, ProcessSpec};
use procs_support::{dies_within, wait_for_pid};

fn sh(script: &str) -> ProcessSpec {
    ProcessSpec::new("sh").args(["-c", script])
}

#[tokio::test]
async fn captures_status_streams_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let out = process::run(
        &sh(r#"echo out; echo err >&2; echo "$GREETING"; pwd; exit 7"#)
            .env("GREETING", "hello there")
            .cwd(dir.path()),
    )
    .await
    .unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        out.stdout_text(),
        format!("out\nhello there\n{}\n", cwd.display())
    );
    assert_eq!(out.stderr_text(), "err\n");
    assert_eq!(out.exit, ExitKind::Code(7));
    assert_eq!((out.code(), out.signal()), (Some(7), None));
    assert!(!out.timed_out && !out.success());
    assert_eq!((out.stdout_dropped, out.stderr_dropped), (0, 0));
}

#[tokio::test]
async fn stdin_larger_than_a_pipe_buffer_is_written_then_closed() {
    let input: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let out = process::run(&ProcessSpec::new("cat").stdin(input.clone()))
        .await
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, input);
}

#[tokio::test]
async fn without_stdin_the_child_reads_end_of_file() {
    let out = process::run(&ProcessSpec::new("cat").time_limit(Some(Duration::from_secs(10))))
        .await
        .unwrap();
    assert!(out.success());
    assert!(out.stdout.is_empty());
}

/// Peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn fifty_megabytes_of_output_keep_only_the_tail_in_bounded_memory() {
    const TOTAL: u64 = 50 * 1024 * 1024;
    const LIMIT: usize = 1024 * 1024;
    let before = peak_rss_kib();
    let out = process::run(
        &sh(&format!(
            "head -c {TOTAL} /dev/zero | tr '\\0' x; printf END"
        ))
        .output_limit(LIMIT)
        .time_limit(Some(Duration::from_secs(60))),
    )
    .await
    .unwrap();
    let grown_kib = peak_rss_kib().saturating_sub(before);

    assert!(out.success());
    assert_eq!(out.stdout.len(), LIMIT);
    assert!(out.stdout.ends_with(b"xxxEND"));
    assert_eq!(out.stdout_dropped, TOTAL + 3 - LIMIT as u64);
    // Kept: at most twice the bound plus a read chunk; 50 MiB would show.
    assert!(grown_kib < 20 * 1024, "peak memory grew by {grown_kib} KiB");
}

#[tokio::test]
async fn background_processes_left_by_the_leader_are_killed_and_do_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let started = Instant::now();
    // The background sleep holds stdout open: without the cleanup, reading
    // to end of file would wait for it.
    let out = process::run(
        &sh(&format!(
            "sleep 1000 & echo $! > '{}'; echo leader done",
            pid_file.display()
        ))
        .grace(Duration::from_millis(500)),
    )
    .await
    .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout_text(), "leader done\n");
    assert!(started.elapsed() < Duration::from_secs(3));
    let bg = wait_for_pid(&pid_file, Duration::from_secs(1));
    assert!(
        dies_within(bg, Duration::from_secs(2)),
        "background pid {bg} survived"
    );
}

#[tokio::test]
async fn timeout_terminates_the_group_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("gc.pid");
    let started = Instant::now();
    let out = process::run(
        &sh(&format!(
            "sleep 1000 & echo $! > '{}'; echo started; sleep 1000",
            pid_file.display()
        ))
        .time_limit(Some(Duration::from_millis(300)))
        .grace(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    // SIGTERM sufficed: the grace period was not waited out.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out);
    assert_eq!(out.exit, ExitKind::Signal(15));
    assert_eq!(out.stdout_text(), "started\n");
    let gc = wait_for_pid(&pid_file, Duration::from_secs(1));
    assert!(
        dies_within(gc, Duration::from_secs(2)),
        "grandchild {gc} survived"
    );

    let err = out.check().unwrap_err();
    assert!(matches!(err, ProcessError::TimedOut { .. }));
    assert!(
        err.to_string()
            .starts_with("`sh -c 'sleep 1000 & echo $! > "),
        "{err}"
    );
}

#[tokio::test]
async fn error_messages_carry_command_status_and_stderr() {
    let out = process::run(&sh(
        "echo 'first line' >&2; echo 'no such ref: main' >&2; exit 3",
    ))
    .await
    .unwrap();
    let err = out.check().unwrap_err();
    insta::assert_snapshot!(err.to_string(), @r"
    `sh -c 'echo '\''first line'\'' >&2; echo '\''no such ref: main'\'' >&2; exit 3'` failed with exit status 3: first line
    no such ref: main
    ");

    let out = process::run(&sh("kill -9 $$")).await.unwrap();
    let err = out.check().unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"`sh -c 'kill -9 $$'` failed with signal 9 (SIGKILL)");

    let err = process::run(&ProcessSpec::new("orchestrator-no-such-program").arg("--flag"))
        .await
        .unwrap_err();
    assert!(err.is_not_found());
    insta::assert_snapshot!(err.to_string(), @"failed to start `orchestrator-no-such-program --flag`: No such file or directory (os error 2)");
}

#[tokio::test]
async fn program_is_looked_up_on_the_childs_path() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("my-tool");
    std::fs::write(&tool, "#!/bin/sh\necho found me\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let out = process::run(&ProcessSpec::new("my-tool").env("PATH", path))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "found me\n");
}

#[tokio::test]
async fn env_remove_hides_an_inherited_variable() {
    let out = process::run(&sh("echo \"[${HOME-unset}]\"").env_remove("HOME"))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "[unset]\n");
}
