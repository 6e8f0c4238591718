//! Process groups and tree tags: the [`TREE_ENV`] tag each child carries,
//! killing the processes that carry it, and the guard that kills the whole
//! group (and its escaped descendants) when a run ends or is dropped.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

#[cfg(doc)]
use super::run;

/// The environment variable that tags a child's process tree: a
/// `:`-separated list of tags, one per nested [`run`] (a tag is appended, so
/// a process started by a child that itself uses [`run`] carries both).
pub const TREE_ENV: &str = "ORCHESTRATOR_PROCESS_TREE";

/// Counter making each [`run`]'s tag unique within this process.
static TREE_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A new tag: this process's pid, a sequence number and the time, so that
/// it is unique across processes and restarts.
pub(super) fn new_tree_tag() -> String {
    let seq = TREE_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("orch{}x{seq}x{nanos}", std::process::id())
}

/// Whether an environment block (`KEY=VALUE\0…`, as in `/proc/PID/environ`)
/// holds `tag` in its [`TREE_ENV`] entry.
fn environ_has_tag(environ: &[u8], tag: &str) -> bool {
    let prefix = format!("{TREE_ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .any(|value| value.split(|b| *b == b':').any(|t| t == tag.as_bytes()))
}

/// Sends `signal` to every process (but this one) whose environment carries
/// `tag`; returns how many were signalled. Linux only (reads `/proc`);
/// elsewhere nothing is found.
fn kill_tagged(tag: &str, signal: Signal) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let me = std::process::id();
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Unreadable (another user's, or gone): not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ_has_tag(&environ, tag) {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if nix::sys::signal::kill(Pid::from_raw(raw), signal).is_ok() {
            killed += 1;
        }
    }
    killed
}

/// Kills the child's process group (and the processes carrying its tree
/// tag) when dropped, unless disarmed.
pub(super) struct GroupGuard {
    pub(super) pgid: Option<Pid>,
    pub(super) tag: String,
}

impl GroupGuard {
    /// Sends `signal` to the group; SIGTERM and SIGKILL also reach the
    /// processes carrying the tag.
    pub(super) fn signal(&self, signal: Signal) {
        if signal == Signal::SIGTERM && self.pgid.is_some() {
            // Those that left the group get the same warning as the group.
            kill_tagged(&self.tag, Signal::SIGTERM);
        }
        if signal == Signal::SIGKILL && self.pgid.is_some() {
            // Those that left the group: a few sweeps, since one being
            // killed may have been forking.
            for _ in 0..3 {
                let n = kill_tagged(&self.tag, Signal::SIGKILL);
                if n == 0 {
                    break;
                }
                tracing::debug!(killed = n, "killed processes that had left the group");
            }
        }
        if let Some(pgid) = self.pgid {
            // ESRCH (group already gone) is the expected case once everything
            // exited; nothing else can usefully be done with an error here.
            if let Err(err) = killpg(pgid, signal)
                && err != nix::errno::Errno::ESRCH
            {
                tracing::debug!(%pgid, ?signal, %err, "killpg failed");
            }
        }
    }

    /// Stops the guard from killing anything when dropped.
    pub(super) fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_tags_match_whole_entries_only() {
        let env = b"A=1\0ORCHESTRATOR_PROCESS_TREE=orch1x2x3:orch9x8x7\0B=orch5x5x5\0";
        assert!(environ_has_tag(env, "orch1x2x3"));
        assert!(environ_has_tag(env, "orch9x8x7"));
        assert!(!environ_has_tag(env, "orch1x2"), "a prefix is not the tag");
        assert!(
            !environ_has_tag(env, "orch5x5x5"),
            "only the tree variable counts"
        );
        assert!(!environ_has_tag(b"", "orch1x2x3"));
        assert_ne!(new_tree_tag(), new_tree_tag());
    }
}
