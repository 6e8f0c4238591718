//! [`ShellTaskAgent`] passes the core contract-only `Agent` conformance
//! suite with real processes: the adapters' `ProcessRunner` (own process
//! group, time limit, SIGTERM → SIGKILL) runs the task rows' shell lines in
//! real temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::agent::{Agent, AgentRequest, Role};
use orchestrator_core::conformance::agent_contract::{Case, ContractHarness, SlowCase, run_suite};
use orchestrator_planex::ShellTaskAgent;
use orchestrator_planex::protocol::{CONTEXT_VERSION, PlanexContext, WireTaskRow};

/// Fresh working directories, all holding the same `input.txt`.
struct Harness {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

impl Harness {
    fn agent() -> Arc<dyn Agent> {
        Arc::new(ShellTaskAgent::new(Arc::new(ProcessRunner::default())))
    }
}

/// A task request running `directives` in `workdir`.
fn task(workdir: &Path, directives: &str) -> AgentRequest {
    let row = WireTaskRow {
        id: "T1".into(),
        title: "conformance".into(),
        execution_directives: directives.into(),
        ..WireTaskRow::default()
    };
    let session = workdir.join(".workflow/.lite-plan/s");
    AgentRequest::new("T1", Role::Execute, "run the task", workdir)
        .with_time_limit(Duration::from_secs(30))
        .with_context(
            serde_json::to_value(PlanexContext::Task {
                version: CONTEXT_VERSION,
                session_dir: session.display().to_string(),
                discoveries: session.join("discoveries.ndjson").display().to_string(),
                row,
            })
            .unwrap(),
        )
}

#[async_trait]
impl ContractHarness for Harness {
    async fn agent(&self) -> Arc<dyn Agent> {
        Self::agent()
    }

    async fn workdir(&self) -> PathBuf {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("input.txt"), "hello\n").unwrap();
        let path = dir.path().to_path_buf();
        self.dirs.lock().unwrap().push(dir);
        path
    }

    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        task(
            workdir,
            "tr a-z A-Z < input.txt > output.txt && echo \"wrote output.txt for $ORCH_TASK_ID\"",
        )
    }

    /// A shell line changes what it changes: the agent does not know which
    /// files, so it lists none.
    fn reports_files_changed(&self) -> bool {
        false
    }

    async fn failing(&self) -> Case {
        let dir = self.workdir().await;
        Case::new(
            Self::agent(),
            task(&dir, "echo 'no such target: deploy' >&2; exit 7"),
        )
        .mentioning("exited with status 7")
        .mentioning("no such target: deploy")
    }

    async fn slow(&self) -> SlowCase {
        let dir = self.workdir().await;
        SlowCase::Slow(Case::new(Self::agent(), task(&dir, "sleep 30")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_task_agent_passes_the_contract_suite() {
    run_suite(&Harness {
        dirs: Mutex::new(Vec::new()),
    })
    .await;
}
