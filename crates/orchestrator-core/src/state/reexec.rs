//! Test support: re-run this very test binary as a child process.
//!
//! Crash and lock tests need a second *process* (to SIGKILL it, or to hold an
//! OS lock). The child is the test binary itself, started with `--exact` on
//! the calling test's name and an environment variable that switches that
//! test into its child role.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A command that runs only the test `test_name` (full path without the crate
/// name) of this binary, with `env` set to `value`.
pub(crate) fn spawn_self(test_name: &str, env: &str, value: &OsStr) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test_name, "--test-threads=1", "--nocapture"])
        .env(env, value);
    cmd
}

/// Waits until the child creates `path`; panics if it exits first or the
/// timeout passes.
pub(crate) fn wait_for_file(child: &mut Child, path: &Path, timeout: Duration) {
    let started = Instant::now();
    while !path.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "child exited with {status} before creating {}",
                path.display()
            );
        }
        if started.elapsed() > timeout {
            child.kill().unwrap();
            panic!("child did not create {} within {timeout:?}", path.display());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
