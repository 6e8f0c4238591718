//! What a person can do from the page, each written into the session's log
//! (`events.ndjson`, an `action` line) with where it came from:
//!
//! - **approve** a planex plan a stopped session waits at: the same record
//!   `orchestrator planex approve` writes (`approve_plan`), then the run is
//!   continued (`orchestrator planex --continue <id>`, this binary, in its
//!   own process group so it outlives the server; its output goes to
//!   `dashboard-continue.log` in the session folder);
//! - **cancel** a running session: SIGINT to the process holding its lock,
//!   which stops it resumably as Ctrl-C does.

use std::path::Path;
use std::process::Stdio;

use orchestrator_core::state::event_log::append_action;

use super::sessions::{Flow, Found, live_holder};

/// Where the output of a continued run goes, in the session folder.
pub const CONTINUE_LOG: &str = "dashboard-continue.log";

/// Records the approval of the plan `found` waits at and continues the
/// run; returns what was done, for the page.
pub fn approve(found: &Found, origin: &str) -> Result<String, String> {
    if found.flow != Flow::Planex {
        return Err(format!(
            "{} sessions have no plan gate to approve from here",
            found.flow.as_str()
        ));
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
    let pid = continue_run(found)?;
    let started = format!(
        "started `orchestrator planex --continue {}` (pid {pid}); its output is in {CONTINUE_LOG}",
        found.id
    );
    log(&found.dir, origin, "continue", &started)?;
    Ok(format!("{detail}; {started}"))
}

/// Runs `orchestrator planex --continue <id>` for `found`, detached.
fn continue_run(found: &Found) -> Result<u32, String> {
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
        .arg("planex")
        .arg("--continue")
        .arg(&found.id)
        .arg("--repo")
        .arg(&found.repo_dir)
        .current_dir(&found.repo_dir)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("failed to start `orchestrator planex --continue`: {e}"))?;
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
