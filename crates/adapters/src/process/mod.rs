//! Running child processes safely: own process group, bounded output, time
//! limit with SIGTERM → grace → SIGKILL to the whole group, and no leftovers.
//!
//! Every adapter that spawns a program (test commands, agent CLIs) goes
//! through [`run`]. The child is started in a new process group whose id is
//! its pid, so that signals reach everything it started (a `cargo test` and
//! its test binaries, an agent CLI and the shell commands it runs).
//!
//! Guarantees:
//! - stdout and stderr are read concurrently, each into a buffer that keeps
//!   only the last [`ProcessSpec::output_limit`] bytes and counts the bytes it
//!   dropped, so a child that prints without end cannot exhaust memory;
//! - on timeout the group receives SIGTERM, then SIGKILL after the grace
//!   period; the child is always reaped;
//! - when the leader exits, whatever it left running in its group is killed,
//!   so background processes cannot hold the pipes open or outlive the call;
//! - when the future returned by [`run`] is dropped before it completes, a
//!   guard sends SIGKILL to the whole group (tokio's `kill_on_drop` alone
//!   would reach only the leader);
//! - on Linux, a descendant that left the group (`setsid`, a daemonising
//!   `nohup … &` in a new session) is found and killed too: every child gets
//!   a unique tag in [`TREE_ENV`], which its descendants inherit, and each
//!   group kill also kills every process whose environment carries the tag
//!   (the "process tree killer" cookie; only a descendant that clears its
//!   environment escapes it). On a time-out they get the group's SIGTERM
//!   too; when the leader exits they are killed at once, like the group. A
//!   daemon meant to outlive the call (a build server a test starts: sccache,
//!   a Gradle or Bazel daemon, watchman) must be started with [`TREE_ENV`]
//!   unset, or it is restarted by every call.
//!
//! [`ProcessRunner`] exposes [`run`] as the core's `CommandRunner` trait.
//!
//! The spec is in `spec`, what a run leaves (and its errors) in `output`,
//! the bounded reading of the streams in `capture`, the process group and
//! tree-tag killing in `tree`, the run itself (spawn, stdin, time limit,
//! reaping) in `exec`, and the `CommandRunner` in `runner`.

mod capture;
mod exec;
mod output;
mod runner;
mod spec;
mod tree;

pub use capture::{MAX_TAPPED_LINE, TailBuffer};
pub use exec::{run, run_streaming};
pub use output::{ExitKind, ProcessError, ProcessOutput};
pub use runner::ProcessRunner;
pub use spec::{DEFAULT_GRACE, DEFAULT_OUTPUT_LIMIT, ProcessSpec, display_command, shell_quote};
pub use tree::TREE_ENV;
