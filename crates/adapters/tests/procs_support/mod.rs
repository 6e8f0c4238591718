//! Helpers shared by the `procs_*` integration tests: fixtures, fake agent
//! CLIs on a private PATH, and process liveness checks.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use orchestrator_adapters::agents::ProcessAgent;

/// A file under `tests/fixtures/procs/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/procs")
        .join(name)
}

/// Fake agent CLIs (copies of `fake_agent.sh`) in a temp `bin` dir, and a
/// record dir where each run leaves its argv, stdin, cwd and pids.
pub struct FakeCli {
    /// Holds `bin/` and `record/`.
    pub root: tempfile::TempDir,
}

impl FakeCli {
    /// Installs the fake under each of `names`.
    pub fn new(names: &[&str]) -> Self {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(root.path().join("record")).unwrap();
        for name in names {
            let target = bin.join(name);
            std::fs::copy(fixture("fake_agent.sh"), &target).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { root }
    }

    /// The bin dir.
    pub fn bin(&self) -> PathBuf {
        self.root.path().join("bin")
    }

    /// The record dir.
    pub fn record(&self) -> PathBuf {
        self.root.path().join("record")
    }

    /// A PATH with the bin dir first.
    pub fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// Configures `agent` to find the fake on its PATH and behave per `mode`.
    pub fn agent(&self, agent: ProcessAgent, mode: &str) -> ProcessAgent {
        agent
            .env("PATH", self.path_var())
            .env("FAKE_DIR", self.record())
            .env("FAKE_MODE", mode)
    }

    /// Like [`Self::agent`] in `fixture` mode, printing `fixture_name` and
    /// exiting with `exit`.
    pub fn printing(&self, agent: ProcessAgent, fixture_name: &str, exit: i32) -> ProcessAgent {
        self.agent(agent, "fixture")
            .env("FAKE_FIXTURE", fixture(fixture_name))
            .env("FAKE_EXIT", exit.to_string())
    }

    /// A recorded file's content.
    pub fn recorded(&self, name: &str) -> String {
        std::fs::read_to_string(self.record().join(name))
            .unwrap_or_else(|e| panic!("no recorded {name}: {e}"))
    }

    /// The recorded argv, one argument per line.
    pub fn argv(&self) -> Vec<String> {
        self.recorded("argv").lines().map(str::to_owned).collect()
    }
}

/// Waits until `path` holds a pid and returns it.
pub fn wait_for_pid(path: &Path, timeout: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            start.elapsed() < timeout,
            "no pid in {} after {timeout:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is a live process (a zombie awaiting its reaper counts as
/// dead: it runs nothing and holds nothing).
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // "pid (comm) S …": the state follows the last ')'.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z" | "X") | None)
        }
        Err(_) => false,
    }
}

/// Whether `pid` is dead within `timeout` (signal delivery and reaping by
/// init are asynchronous, though quick).
pub fn dies_within(pid: i32, timeout: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if !is_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    !is_alive(pid)
}
