//! Agent faults through the real `ProcessAgent` and `ProcessRunner`, with
//! fake agent scripts in a temporary directory: an agent that hangs (also
//! one that ignores SIGTERM, and one that never reads its stdin), dies
//! (SIGKILLs itself, also halfway through its JSON answer), spawns children
//! and exits, prints unbounded output, or answers garbage. Every case ends
//! in a typed failure within its time limit plus the grace period (plus
//! slack for a loaded machine), leaves no process of its group alive
//! (checked by pid), and keeps memory bounded (checked by the captured size
//! and the test process's peak RSS).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use orchestrator_adapters::agents::{Dialect, ProcessAgent};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::agent::{Agent, AgentError, AgentExt, AgentRequest, Role};
use orchestrator_core::command::{CommandRunner, CommandSpec};

const LIMIT: Duration = Duration::from_millis(1500);
const GRACE: Duration = Duration::from_millis(300);
/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);

/// A fake agent: `body` as a shell script in a fresh directory, which is
/// also where it records pids (`$REC`).
struct Fake {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Fake {
    fn new(body: &str) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent.sh");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fake { dir, script }
    }

    fn agent(&self, dialect: Dialect) -> ProcessAgent {
        ProcessAgent::new("fake", &self.script, Vec::<String>::new())
            .dialect(dialect)
            .env("REC", self.dir.path())
            .time_limit(LIMIT)
            .grace(GRACE)
    }

    fn request(&self) -> AgentRequest {
        AgentRequest::new("fault", Role::Fix, "fix it", self.dir.path())
    }

    /// Pids the script wrote to `$REC/<name>` (one per line).
    fn pids(&self, name: &str) -> Vec<i32> {
        let path = self.dir.path().join(name);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(text) = std::fs::read_to_string(&path)
                && text.ends_with('\n')
            {
                return text.lines().map(|l| l.trim().parse().unwrap()).collect();
            }
            assert!(
                Instant::now() < deadline,
                "{} was never written",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is dead).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            state != Some("Z")
        }
    }
}

/// Asserts every pid is gone (allowing the kernel a moment to deliver the
/// SIGKILL and init to reap).
fn assert_all_dead(pids: &[i32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        survivors.is_empty(),
        "{what}: processes {survivors:?} outlived the call"
    );
}

/// Runs the agent and checks the time bound; returns the error.
async fn run_failing(agent: &ProcessAgent, request: AgentRequest, what: &str) -> AgentError {
    let started = Instant::now();
    let result = agent.run_validated(request).await;
    let took = started.elapsed();
    assert!(took <= LIMIT + GRACE + SLACK, "{what}: took {took:?}");
    match result {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e
        }
        Ok(answer) => panic!("{what}: answered {answer:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_agent_times_out_and_its_group_is_killed() {
    for (what, body) in [
        ("sleeps", "echo $$ > \"$REC/pids\"\nsleep 300"),
        ("busy loop", "echo $$ > \"$REC/pids\"\nwhile :; do :; done"),
        (
            "ignores SIGTERM",
            "trap '' TERM\nsleep 300 &\nprintf '%s\\n%s\\n' $$ $! > \"$REC/pids\"\nwait",
        ),
        (
            "a child holds the pipes",
            "sleep 300 &\nprintf '%s\\n%s\\n' $$ $! > \"$REC/pids\"\nsleep 300",
        ),
    ] {
        let fake = Fake::new(body);
        let err = run_failing(&fake.agent(Dialect::Text), fake.request(), what).await;
        assert!(matches!(err, AgentError::Timeout { .. }), "{what}: {err:?}");
        assert_all_dead(&fake.pids("pids"), what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_never_reads_a_large_instruction_still_times_out() {
    let fake = Fake::new("echo $$ > \"$REC/pids\"\nsleep 300");
    let mut request = fake.request();
    // Far more than a pipe buffer: the write blocks until the child dies.
    request.instruction = "x".repeat(4 << 20);
    let err = run_failing(&fake.agent(Dialect::Text), request, "never reads").await;
    assert!(matches!(err, AgentError::Timeout { .. }), "{err:?}");
    assert_all_dead(&fake.pids("pids"), "never reads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_kills_itself_is_a_failure_naming_the_signal() {
    for (dialect, body) in [
        (Dialect::Text, "echo partial answer\nkill -9 $$"),
        (Dialect::Json, "printf '{\"answer\": '\nkill -9 $$"),
        (
            Dialect::Claude,
            "printf '{\"type\":\"result\",\"result\":\"hal'\nkill -9 $$",
        ),
        (
            Dialect::Codex,
            "echo '{\"type\":\"thread.started\",\"thread_id\":\"t\"}'\nkill -9 $$",
        ),
        (Dialect::Gemini, "printf '{\"response\": \"hal'\nkill -9 $$"),
    ] {
        let fake = Fake::new(body);
        let err = run_failing(
            &fake.agent(dialect),
            fake.request(),
            &format!("{dialect:?}"),
        )
        .await;
        match &err {
            AgentError::Failed { exit_code, message } => {
                assert_eq!(*exit_code, None, "{dialect:?}: {err}");
                assert!(message.contains("signal"), "{dialect:?}: {message}");
            }
            AgentError::Garbage { .. } => {}
            other => panic!("{dialect:?}: unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_left_behind_by_an_agent_do_not_survive_the_call() {
    let fake = Fake::new(concat!(
        "sleep 300 &\n",
        "c=$!\n",
        "(sleep 300 & echo $! > \"$REC/grandchild\"; wait) &\n",
        "g=$!\n",
        "nohup sleep 300 >/dev/null 2>&1 &\n",
        "n=$!\n",
        "until [ -s \"$REC/grandchild\" ]; do sleep 0.01; done\n",
        "printf '%s\\n%s\\n%s\\n%s\\n' $$ $c $g $n > \"$REC/pids\"\n",
        "cat \"$REC/grandchild\" >> \"$REC/pids\"\n",
        "echo done\n",
    ));
    let started = Instant::now();
    let answer = fake.agent(Dialect::Text).run(fake.request()).await.unwrap();
    assert_eq!(answer.text, "done");
    assert!(
        started.elapsed() <= LIMIT + GRACE + SLACK,
        "took {:?}",
        started.elapsed()
    );
    let pids = fake.pids("pids");
    assert_eq!(pids.len(), 5, "{pids:?}");
    assert_all_dead(&pids, "children of an agent that exited");
}

/// A child that leaves the process group (`setsid`) is out of reach of the
/// group kill, but it carries the call's tree tag in its environment: the
/// call ends in time although it holds the output pipe open, and the
/// escaped process is killed — whether the agent exits or hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_leaves_the_group_is_killed_with_it() {
    if std::process::Command::new("setsid")
        .arg("--version")
        .output()
        .is_err()
    {
        return;
    }
    let escape = concat!(
        "setsid sh -c 'echo $$ > \"$REC/escaped.tmp\"; mv \"$REC/escaped.tmp\" \"$REC/escaped\"; exec sleep 300' &\n",
        "until [ -s \"$REC/escaped\" ]; do sleep 0.01; done\n",
    );
    let escaped_pid = |fake: &Fake| -> i32 {
        std::fs::read_to_string(fake.dir.path().join("escaped"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };

    // The agent answers and exits, leaving the escaped process behind.
    let fake = Fake::new(&format!("{escape}echo done\n"));
    let started = Instant::now();
    let answer = fake.agent(Dialect::Text).run(fake.request()).await.unwrap();
    assert_eq!(answer.text, "done");
    assert!(
        started.elapsed() <= GRACE + SLACK,
        "took {:?}",
        started.elapsed()
    );
    let pid = escaped_pid(&fake);
    assert_all_dead(&[pid], "a setsid child of an agent that exited");

    // The agent hangs after the escape: the time limit ends it, and the
    // escaped process goes with the group.
    let fake = Fake::new(&format!("{escape}sleep 300\n"));
    let err = run_failing(&fake.agent(Dialect::Text), fake.request(), "setsid + hang").await;
    assert!(matches!(err, AgentError::Timeout { .. }), "{err:?}");
    assert_all_dead(
        &[escaped_pid(&fake)],
        "a setsid child of an agent that timed out",
    );
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_output_keeps_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 1 << 20;
    let before = peak_rss_kib();

    // Finite but far over the bound: the tail is kept, the rest dropped.
    let mut spec = CommandSpec::new("sh", ["-c", "head -c 96000000 /dev/zero"], dir.path());
    spec.output_limit = limit;
    let out = ProcessRunner::default().run(spec).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(out.truncated);
    assert!(
        out.stdout.len() <= limit,
        "captured {} bytes",
        out.stdout.len()
    );

    // Never ending: the time limit ends it.
    let mut spec = CommandSpec::new("yes", ["an endless line"], dir.path());
    spec.output_limit = limit;
    spec.time_limit = Some(LIMIT);
    let started = Instant::now();
    let out = ProcessRunner { grace: GRACE }.run(spec).await.unwrap();
    assert!(out.timed_out);
    assert!(started.elapsed() <= LIMIT + GRACE + SLACK);
    assert!(out.stdout.len() <= limit);

    // Through an agent: a timeout, or garbage for a JSON dialect.
    let fake = Fake::new("echo $$ > \"$REC/pids\"\nyes '{\"never\": \"ends\"'");
    let agent = fake.agent(Dialect::Json).output_limit(limit);
    let err = run_failing(&agent, fake.request(), "endless JSON").await;
    assert!(matches!(err, AgentError::Timeout { .. }), "{err:?}");
    assert_all_dead(&fake.pids("pids"), "endless JSON");
    let fake = Fake::new("head -c 50000000 /dev/urandom");
    let agent = fake.agent(Dialect::Json).output_limit(limit);
    let err = run_failing(&agent, fake.request(), "50 MB of noise").await;
    match err {
        AgentError::Garbage { snippet, .. } => assert!(snippet.chars().count() <= 201),
        other => panic!("50 MB of noise: {other:?}"),
    }

    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "peak RSS grew by {grown_mib} MiB for ~150 MB of output"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_answers_are_typed_failures() {
    let noise = "head -c 3000 /dev/urandom";
    let cases: Vec<(Dialect, &str, bool)> = vec![
        (Dialect::Json, noise, false),
        (
            Dialect::Json,
            "echo 'Sure! Here is the answer: {\"a\": '",
            false,
        ),
        (Dialect::Claude, noise, false),
        (Dialect::Claude, "echo '{\"type\": \"result\"}'", false),
        (Dialect::Codex, noise, false),
        (
            Dialect::Codex,
            "echo 'not an event'; echo '{\"type\": 42}'",
            false,
        ),
        (Dialect::Gemini, noise, false),
        (Dialect::Gemini, "echo '[1, 2, 3]'", false),
        // A text answer is text; with a schema it must hold matching JSON.
        (Dialect::Text, noise, true),
        (
            Dialect::Text,
            "echo 'I could not decide. {\"fixed\": maybe}'",
            true,
        ),
        (
            Dialect::Text,
            "printf '\\033[31m{\"fixed\": \"yes\"}\\033[0m'",
            true,
        ),
    ];
    for (dialect, body, with_schema) in cases {
        let fake = Fake::new(body);
        let mut request = fake.request();
        if with_schema {
            request.schema = Some(serde_json::json!({
                "type": "object",
                "required": ["fixed"],
                "properties": {"fixed": {"type": "boolean"}}
            }));
        }
        let what = format!("{dialect:?} / {body}");
        let err = run_failing(&fake.agent(dialect), request, &what).await;
        assert!(
            matches!(
                err,
                AgentError::Garbage { .. }
                    | AgentError::SchemaViolation { .. }
                    | AgentError::Failed { .. }
            ),
            "{what}: {err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_runner_reports_each_fault() {
    let dir = tempfile::tempdir().unwrap();
    let runner = ProcessRunner { grace: GRACE };
    let sh = |script: &str| {
        let mut spec = CommandSpec::new("sh", ["-c", script], dir.path());
        spec.time_limit = Some(LIMIT);
        spec
    };
    // Dies.
    let out = runner.run(sh("echo partial; kill -9 $$")).await.unwrap();
    assert_eq!((out.exit_code, out.timed_out), (None, false));
    assert_eq!(out.stdout, "partial\n");
    // Hangs.
    let started = Instant::now();
    let out = runner.run(sh("trap '' TERM; sleep 300")).await.unwrap();
    assert!(out.timed_out && out.exit_code.is_none());
    assert!(started.elapsed() <= LIMIT + GRACE + SLACK);
    // Leaves children.
    let pid_file = dir.path().join("pids");
    let script = format!(
        "sleep 300 & echo $! > {f}.tmp; (sleep 300 & echo $! >> {f}.tmp; wait) & sleep 0.1; mv {f}.tmp {f}; echo ok",
        f = pid_file.display()
    );
    let out = runner.run(sh(&script)).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert_all_dead(&pids, "children of a command");
    // Not there.
    let err = runner
        .run(CommandSpec::new(
            dir.path().join("missing").display().to_string(),
            Vec::<String>::new(),
            dir.path(),
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}
