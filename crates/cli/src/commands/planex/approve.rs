//! `planex approve`: records the approval a gate waits for.

use super::*;

/// `planex approve [SESSION_ID]`: records the approval of the plan the
/// session waits at and says how to run it (exit 0); with `--json` one line
/// `{"event":"approved",…}`.
pub(super) fn approve(json: bool, repo: &Path, session: Option<&str>) -> Exit {
    let repo = match std::fs::canonicalize(repo) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                json,
                Failure::new(format!(
                    "the repository directory {} cannot be used: {e}",
                    repo.display()
                )),
            );
        }
    };
    match orchestrator_planex::approve_plan(&repo, session) {
        Ok(approved) => {
            if json {
                let line = json!({
                    "event": "approved",
                    "exit_code": 0,
                    "session_id": approved.session_id,
                    "gate": approved.gate,
                    "file": approved.file,
                    "already": approved.already,
                    "resume_hint": format!("orchestrator planex --continue {}", approved.session_id),
                });
                out(&format!("{line}\n"));
            } else {
                out(&format!("{}\n", approved.message()));
            }
            Exit::Success
        }
        Err(e) => fail(json, flow_failure(&repo, &e)),
    }
}
