//! What a person can do from the page, each written into the session's log
//! (`events.ndjson`, an `action` line) with where it came from:
//!
//! - **approve** a planex plan a stopped session waits at: the same record
//!   `orchestrator planex approve` writes (`approve_plan`), then the run is
//!   continued (`orchestrator planex --continue <id>`, this binary, in its
//!   own process group so it outlives the server; its output goes to
//!   `dashboard-continue.log` in the session folder);
//! - **approve** or **decline** the patch a ci-autofix session waits to
//!   have confirmed: the record `orchestrator ci-autofix approve|decline`
//!   writes (`confirm::answer`, by `dashboard`); an approval then continues
//!   the run (`orchestrator ci-autofix --continue <key>`, started as
//!   planex's is), a decline drops the kept commit and escalates;
//! - **cancel** a running session: SIGINT to the process holding its lock,
//!   which stops it resumably as Ctrl-C does.

use std::path::Path;
use std::process::Stdio;

use orchestrator_adapters::git::GitVcs;
use orchestrator_ci_autofix::confirm;
use orchestrator_ci_autofix::{AnsweredBy, GateDecision};
use orchestrator_core::state::event_log::append_action;

use super::sessions::{Flow, Found, live_holder};

/// Where the output of a continued run goes, in the session folder.
pub const CONTINUE_LOG: &str = "dashboard-continue.log";

/// Records the approval of the plan `found` waits at and continues the
/// run; returns what was done, for the page.
pub fn approve(found: &Found, origin: &str) -> Result<String, String> {
    match found.flow {
        Flow::Planex => {}
        Flow::CiAutofix => return answer_ci(found, origin, GateDecision::Approve),
        Flow::ReviewFix => {
            return Err(format!(
                "{} sessions have no plan gate to approve from here",
                found.flow.as_str()
            ));
        }
    }
    if let Some(pid) = live_holder(&found.dir) {
        return Err(format!(
            "session {} is running (pid {pid}); its gate is asked on its terminal",
            found.id
        ));
    }
    let approved = orchestrator_planex::approve_plan(&found.repo_dir, Some(&found.id))
        .map_err(|e| e.to_string())?;
    let detail = format!(
        "approved {} ({}), as `orchestrator planex approve {}` does",
        approved.gate.plan_name(),
        approved.gate.file_name(),
        found.id
    );
    log(&found.dir, origin, "approve", &detail)?;
    let pid = continue_run(found, &["planex", "--continue", &found.id])?;
    let started = format!(
        "started `orchestrator planex --continue {}` (pid {pid}); its output is in {CONTINUE_LOG}",
        found.id
    );
    log(&found.dir, origin, "continue", &started)?;
    Ok(format!("{detail}; {started}"))
}

/// Declines the patch a ci-autofix session waits to have confirmed.
pub fn decline(found: &Found, origin: &str) -> Result<String, String> {
    if found.flow != Flow::CiAutofix {
        return Err(format!(
            "{} sessions have no patch to decline from here",
            found.flow.as_str()
        ));
    }
    answer_ci(found, origin, GateDecision::Decline)
}

/// Answers a ci-autofix confirmation gate as `orchestrator ci-autofix
/// approve|decline` does, logs it, and continues an approved run.
fn answer_ci(found: &Found, origin: &str, decision: GateDecision) -> Result<String, String> {
    if let Some(pid) = live_holder(&found.dir) {
        return Err(format!(
            "session {} is running (pid {pid}); its gate is asked on its terminal",
            found.id
        ));
    }
    let answered = tokio::runtime::Handle::current().block_on(async {
        let vcs = GitVcs::open(&found.repo_dir)
            .await
            .map_err(|e| e.to_string())?;
        confirm::answer(
            &vcs,
            Some(&found.id),
            decision,
            AnsweredBy::Dashboard,
            origin,
            jiff::Timestamp::now(),
        )
        .await
        .map_err(|e| e.to_string())
    })?;
    let short = &answered.commit[..answered.commit.len().min(7)];
    let (verb, then) = match decision {
        GateDecision::Approve => ("approved", ""),
        GateDecision::Decline => (
            "declined",
            "; the kept commit is dropped and the failure escalated",
        ),
    };
    let detail = format!(
        "{verb} the patch of iteration {} ({short}), as `orchestrator ci-autofix {} {}` does{then}",
        answered.iteration,
        decision.as_str(),
        answered.key
    );
    log(&found.dir, origin, decision.as_str(), &detail)?;
    if decision == GateDecision::Decline {
        return Ok(detail);
    }
    let pid = continue_run(found, &["ci-autofix", "--continue", &answered.key])?;
    let started = format!(
        "started `orchestrator ci-autofix --continue {}` (pid {pid}); its output is in {CONTINUE_LOG}",
        answered.key
    );
    log(&found.dir, origin, "continue", &started)?;
    Ok(format!("{detail}; {started}"))
}

/// Runs `orchestrator <args> --repo <repo>` for `found`, detached.
fn continue_run(found: &Found, args: &[&str]) -> Result<u32, String> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let log_path = found.dir.join(CONTINUE_LOG);
    let output = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("failed to open {}: {e}", log_path.display()))?;
    let errors = output
        .try_clone()
        .map_err(|e| format!("failed to open {}: {e}", log_path.display()))?;
    let mut child = std::process::Command::new(exe)
        .args(args)
        .arg("--repo")
        .arg(&found.repo_dir)
        .current_dir(&found.repo_dir)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("failed to start `orchestrator {}`: {e}", args.join(" ")))?;
    let pid = child.id();
    // Reap it when it ends, so no zombie is left.
    std::thread::spawn(move || child.wait());
    Ok(pid)
}

/// Stops the run of `found` resumably: SIGINT to the holder of its lock.
pub fn cancel(found: &Found, origin: &str) -> Result<String, String> {
    let Some(pid) = live_holder(&found.dir) else {
        return Err(format!("session {} is not running", found.id));
    };
    let raw = i32::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGINT,
    )
    .map_err(|e| format!("failed to signal pid {pid}: {e}"))?;
    let detail = format!("SIGINT sent to pid {pid}: the run stops resumably, as on Ctrl-C");
    log(&found.dir, origin, "cancel", &detail)?;
    Ok(detail)
}

fn log(dir: &Path, origin: &str, action: &str, detail: &str) -> Result<(), String> {
    append_action(dir, origin, action, detail).map_err(|e| e.to_string())
}
