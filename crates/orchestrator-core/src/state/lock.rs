//! One session, one engine: an exclusive lock on a state directory.
//!
//! Two engines driving the same session folder would overwrite each other's
//! state files. [`SessionLock::acquire`] takes an exclusive OS lock
//! ([`File::try_lock`]) on `<dir>/.lock`. The kernel releases that lock when
//! the holding process exits *for any reason* — including `kill -9` or a power
//! cut — so a crashed run never leaves a stale lock behind, and there is no
//! "remove the lock file by hand" step.
//!
//! While held, the lock file contains a small JSON object, [`LockHolder`]
//! (`{"pid": …, "started_at": …}`), which only serves the error message a
//! second engine prints. The lock file itself is never deleted: deleting it
//! would let two processes lock two different files of the same name.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StateError;

/// Who holds a session lock, as written into the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Process id of the holder.
    pub pid: u32,
    /// When the holder took the lock (RFC 3339, UTC).
    pub started_at: String,
}

/// An exclusive lock on a state directory, released when dropped.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    dir: PathBuf,
    holder: LockHolder,
}

impl SessionLock {
    /// Name of the lock file inside the locked directory.
    pub const FILE_NAME: &'static str = ".lock";

    /// Locks `dir` (which must exist) for this process.
    ///
    /// Fails with [`StateError::Locked`] — naming the directory and, when the
    /// lock file says, the holder's pid and start time — if another process or
    /// another handle in this process holds the lock.
    pub fn acquire(dir: impl AsRef<Path>) -> Result<SessionLock, StateError> {
        let dir = dir.as_ref();
        let path = dir.join(Self::FILE_NAME);
        // No truncation on open: the file may belong to a live holder.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StateError::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&path);
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                    pid: holder.as_ref().map(|h| h.pid),
                    started_at: holder.map(|h| h.started_at),
                });
            }
            Err(TryLockError::Error(e)) => return Err(StateError::io("lock", &path, e)),
        }
        let holder = LockHolder {
            pid: std::process::id(),
            started_at: jiff::Timestamp::now().to_string(),
        };
        let json = serde_json::to_vec(&holder).map_err(|e| StateError::Serialize {
            path: path.clone(),
            what: "JSON",
            message: e.to_string(),
        })?;
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(&json))
            .and_then(|()| file.sync_data())
            .map_err(|e| StateError::io("write lock file", &path, e))?;
        Ok(SessionLock {
            file,
            dir: dir.to_path_buf(),
            holder,
        })
    }

    /// Who holds the lock in `dir` right now, if anyone says so.
    ///
    /// Reads the lock file without locking; `None` when there is no lock file,
    /// it is empty (nobody holds it, or the holder is just starting) or it does
    /// not parse.
    pub fn holder_of(dir: impl AsRef<Path>) -> Option<LockHolder> {
        read_holder(&dir.as_ref().join(Self::FILE_NAME))
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What this lock wrote into the lock file.
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }

    /// Releases the lock now (same as dropping it).
    pub fn release(self) {}
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Still holding the lock, so clearing the holder info races with nobody.
        // Errors are ignored: closing the file releases the lock regardless.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn read_holder(path: &Path) -> Option<LockHolder> {
    let bytes = fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;
    use std::time::Duration;

    use super::*;
    use crate::state::reexec;

    #[test]
    fn lock_file_records_pid_and_start_time() {
        let dir = tempfile::tempdir().unwrap();
        let lock = SessionLock::acquire(dir.path()).unwrap();
        assert_eq!(lock.holder().pid, std::process::id());
        assert!(lock.holder().started_at.parse::<jiff::Timestamp>().is_ok());
        assert_eq!(lock.dir(), dir.path());
        assert_eq!(
            SessionLock::holder_of(dir.path()).as_ref(),
            Some(lock.holder())
        );
    }

    #[test]
    fn second_handle_in_same_process_is_refused_until_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = SessionLock::acquire(dir.path()).unwrap();
        let err = SessionLock::acquire(dir.path()).unwrap_err();
        let StateError::Locked {
            dir: ref locked,
            pid,
            ref started_at,
        } = err
        else {
            panic!("expected Locked, got {err:?}");
        };
        assert_eq!(locked, dir.path());
        assert_eq!(pid, Some(std::process::id()));
        assert_eq!(
            started_at.as_deref(),
            Some(first.holder().started_at.as_str())
        );
        let text = err.to_string();
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );

        drop(first);
        assert_eq!(
            SessionLock::holder_of(dir.path()),
            None,
            "drop clears the holder info"
        );
        let again = SessionLock::acquire(dir.path()).unwrap();
        again.release();
        assert!(SessionLock::acquire(dir.path()).is_ok());
    }

    #[test]
    fn missing_directory_error_names_the_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-session");
        let err = SessionLock::acquire(&missing).unwrap_err();
        assert_eq!(err.path(), missing.join(".lock"));
        assert!(
            err.to_string().starts_with("failed to open lock file "),
            "{err}"
        );
    }

    const HOLDER_TEST: &str =
        "state::lock::tests::lock_held_by_another_process_and_released_by_sigkill";
    const HOLDER_ENV: &str = "ORCHESTRATOR_CORE_TEST_LOCK_HOLDER";

    #[test]
    fn lock_held_by_another_process_and_released_by_sigkill() {
        if let Some(dir) = std::env::var_os(HOLDER_ENV) {
            // Child mode: hold the lock until killed.
            let dir = PathBuf::from(dir);
            let _lock = SessionLock::acquire(&dir).unwrap();
            fs::write(dir.join("ready"), b"").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }

        let dir = tempfile::tempdir().unwrap();
        let mut child = reexec::spawn_self(HOLDER_TEST, HOLDER_ENV, dir.path().as_os_str())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        reexec::wait_for_file(
            &mut child,
            &dir.path().join("ready"),
            Duration::from_secs(120),
        );

        let err = SessionLock::acquire(dir.path()).unwrap_err();
        let StateError::Locked {
            pid,
            ref started_at,
            ..
        } = err
        else {
            child.kill().unwrap();
            panic!("expected Locked, got {err:?}");
        };
        assert_eq!(pid, Some(child.id()));
        assert!(started_at.is_some());
        let text = err.to_string();
        assert!(
            text.contains(&format!("is locked by pid {} (started ", child.id())),
            "{text}"
        );
        assert!(text.contains(&dir.path().display().to_string()), "{text}");

        // kill -9: no chance to clean up, yet the OS releases the lock.
        child.kill().unwrap();
        child.wait().unwrap();
        let lock = SessionLock::acquire(dir.path()).unwrap();
        assert_eq!(lock.holder().pid, std::process::id());
    }
}
