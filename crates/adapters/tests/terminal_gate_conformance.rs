//! `TerminalGate` passes the core `Gate` conformance suite on a real
//! standard input: the test binary runs itself again as a child process with
//! stdin piped from the test, and the child runs the suite against
//! `TerminalGate` (an interactive gate: `automatic` is false).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use orchestrator_adapters::terminal_gate::TerminalGate;
use orchestrator_core::conformance::gate::run_suite;

/// Set in the child: run the suite instead of spawning.
const CHILD: &str = "ORCH_TERMINAL_GATE_SUITE_CHILD";
/// The name of the test, which the child runs alone.
const TEST: &str = "terminal_gate_passes_the_gate_suite_on_piped_stdin";

/// Runs this test binary's [`TEST`] in a child whose stdin is `input`;
/// returns (success, stdout, stderr).
fn child(input: &str) -> (bool, String, String) {
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    proc.stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = proc.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn terminal_gate_passes_the_gate_suite_on_piped_stdin() {
    if std::env::var_os(CHILD).is_some() {
        run_suite(&TerminalGate, false).await;
        return;
    }
    // Answers by number; by label after an unknown word and, for the
    // blocking question, after an empty line (which has no default there);
    // and end of input, which defers both questions.
    let cases = [("2\n1\n", 0), ("maybe\ncancel\n\nmodify\n", 2), ("", 0)];
    for (input, complaints) in cases {
        let (ok, stdout, stderr) = child(input);
        assert!(ok, "input {input:?}:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 passed"),
            "input {input:?}: the child ran the suite:\n{stdout}"
        );
        assert!(
            stderr.matches("? Approve the plan?").count() >= 2,
            "input {input:?}: both questions were shown:\n{stderr}"
        );
        assert_eq!(
            stderr.matches("is not one of the options").count(),
            complaints,
            "input {input:?}:\n{stderr}"
        );
    }
}
