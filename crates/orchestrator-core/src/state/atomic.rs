//! Atomic replacement of state files, and JSON state files on top of it.
//!
//! A state file is never rewritten in place. [`write_atomic`] writes the new
//! content to a temporary file *in the same directory* (so that the final
//! rename never crosses a file system), fsyncs it, renames it over the target
//! and fsyncs the directory so the rename itself is durable. A reader — or the
//! engine resuming after a crash at any instant — therefore sees either the
//! complete old content or the complete new content, never a torn mix.
//!
//! A crash between creating the temporary file and renaming it leaves the
//! temporary file behind. Its name is `.{target}.{random}.tmp`: hidden, with a
//! suffix no state file has, so it is never read in place of the target;
//! [`stale_temp_files`] lists such leftovers and [`remove_stale_temp_files`]
//! deletes them ([`remove_stale_temp_files_in`]: those of every file in a
//! folder; call them while holding the session lock, so no live writer's
//! temporary file is removed).
//!
//! [`write_json_atomic`] and [`read_json`] store serde values as pretty JSON;
//! a file that does not parse yields [`StateError::Json`] naming the file, the
//! line and the column, e.g. `invalid JSON in file fix-plan.json line 7 column 0:
//! EOF while parsing an object`.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tempfile::NamedTempFile;

use super::StateError;

/// Suffix of the temporary files [`write_atomic`] creates.
const TEMP_SUFFIX: &str = ".tmp";

/// Replaces the file at `path` with `bytes`, atomically and durably.
///
/// After this returns `Ok`, the new content survives a crash; if it fails or
/// the process dies part-way, the old content (or no file, if there was none)
/// is still in place. An existing file's permissions are kept.
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), StateError> {
    let path = path.as_ref();
    let tmp = write_temp(path, bytes)?;
    persist(tmp, path)
}

/// Serializes `value` as pretty JSON (with a trailing newline) and writes it
/// to `path` with [`write_atomic`].
pub fn write_json_atomic<T: Serialize + ?Sized>(
    path: impl AsRef<Path>,
    value: &T,
) -> Result<(), StateError> {
    let path = path.as_ref();
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| StateError::Serialize {
        path: path.to_path_buf(),
        what: "JSON",
        message: e.to_string(),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Reads and parses the JSON file at `path`.
///
/// A missing file is a [`StateError::Io`] (see [`StateError::is_not_found`]);
/// a file that does not parse, or parses to the wrong shape, is a
/// [`StateError::Json`] naming the file, line and column.
pub fn read_json<T: DeserializeOwned>(path: impl AsRef<Path>) -> Result<T, StateError> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|e| StateError::io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| json_error(path, &e))
}

/// Like [`read_json`], but a missing file is `Ok(None)`.
pub fn read_json_if_exists<T: DeserializeOwned>(
    path: impl AsRef<Path>,
) -> Result<Option<T>, StateError> {
    match read_json(path) {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Leftover temporary files of interrupted [`write_atomic`] calls for `path`.
///
/// These are never the state file itself: they are only ever renamed onto it
/// once complete. A missing directory yields an empty list.
pub fn stale_temp_files(path: impl AsRef<Path>) -> Result<Vec<PathBuf>, StateError> {
    let path = path.as_ref();
    files_in(target_dir(path), |candidate| {
        is_temp_file_for(candidate, path)
    })
}

/// Deletes the leftovers [`stale_temp_files`] finds and returns their paths.
///
/// Only call this while no other writer can be writing `path` (that is, while
/// holding the session's [`SessionLock`](super::SessionLock)).
pub fn remove_stale_temp_files(path: impl AsRef<Path>) -> Result<Vec<PathBuf>, StateError> {
    remove_all(stale_temp_files(path)?)
}

/// Deletes the leftover temporary files of interrupted [`write_atomic`]
/// calls for *any* file in `dir` (names `.{name}.{random}.tmp`), and returns
/// their paths: for a session folder whose state files are not all known in
/// advance (numbered plans, wave files). A missing directory yields an empty
/// list.
///
/// Only call this while no other writer can be writing in `dir` (that is,
/// while holding the session's [`SessionLock`](super::SessionLock)).
pub fn remove_stale_temp_files_in(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>, StateError> {
    let temp = |candidate: &Path| {
        candidate
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix('.'))
            .and_then(|n| n.strip_suffix(TEMP_SUFFIX))
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(target, random)| !target.is_empty() && !random.is_empty())
            && candidate.is_file()
    };
    remove_all(files_in(dir.as_ref(), temp)?)
}

/// The entries of `dir` that `keep` accepts, sorted; a missing directory
/// has none.
fn files_in(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>, StateError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StateError::io("list directory", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StateError::io("list directory", dir, e))?;
        let candidate = entry.path();
        if keep(&candidate) {
            out.push(candidate);
        }
    }
    out.sort();
    Ok(out)
}

/// Removes `files` (one already gone is fine) and gives them back.
fn remove_all(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, StateError> {
    for file in &files {
        match fs::remove_file(file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StateError::io("remove stale temporary file", file, e)),
        }
    }
    Ok(files)
}

/// True when `candidate` is named like a temporary file [`write_atomic`]
/// creates for `target` (`.{target name}.{random}.tmp` in the same directory).
pub fn is_temp_file_for(candidate: &Path, target: &Path) -> bool {
    let (Some(name), Some(target_name)) = (candidate.file_name(), target.file_name()) else {
        return false;
    };
    let (Some(name), Some(target_name)) = (name.to_str(), target_name.to_str()) else {
        return false;
    };
    let prefix = format!(".{target_name}.");
    target_dir(candidate) == target_dir(target)
        && name.len() > prefix.len() + TEMP_SUFFIX.len()
        && name.starts_with(&prefix)
        && name.ends_with(TEMP_SUFFIX)
}

/// The directory a file lives in (`.` for a bare file name).
fn target_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// First half of [`write_atomic`]: the complete new content in a fsynced
/// temporary file next to `path`, not yet renamed. Split out so tests can
/// simulate a crash between the two halves.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<NamedTempFile, StateError> {
    let dir = target_dir(path);
    let Some(name) = path.file_name() else {
        return Err(StateError::io(
            "write",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"),
        ));
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");

    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(TEMP_SUFFIX);
    #[cfg(unix)]
    {
        // A fresh state file gets the usual 0666 & !umask, not tempfile's 0600.
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder
        .tempfile_in(dir)
        .map_err(|e| StateError::io("create temporary file in", dir, e))?;
    if let Ok(meta) = fs::metadata(path) {
        tmp.as_file()
            .set_permissions(meta.permissions())
            .map_err(|e| StateError::io("set permissions of", tmp.path(), e))?;
    }
    tmp.write_all(bytes)
        .map_err(|e| StateError::io("write temporary file", tmp.path(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| StateError::io("fsync temporary file", tmp.path(), e))?;
    Ok(tmp)
}

/// Second half of [`write_atomic`]: rename over the target, fsync the directory.
fn persist(tmp: NamedTempFile, path: &Path) -> Result<(), StateError> {
    // On failure the returned file is dropped, which deletes the temporary file.
    tmp.persist(path)
        .map_err(|e| StateError::io("rename temporary file onto", path, e.error))?;
    sync_dir(target_dir(path))
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), StateError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StateError::io("fsync directory", dir, e))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), StateError> {
    // Directories cannot be opened for fsync here; the rename is still atomic.
    Ok(())
}

/// Converts a serde_json error into [`StateError::Json`] for `path`.
pub(crate) fn json_error(path: &Path, err: &serde_json::Error) -> StateError {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
    StateError::Json {
        path: path.to_path_buf(),
        line: err.line(),
        column: err.column(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::state::reexec;

    fn tmpdir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn json_round_trip_is_pretty_with_trailing_newline() {
        let dir = tmpdir();
        let path = dir.path().join("state.json");
        let value: BTreeMap<&str, Vec<u32>> = [("a", vec![1, 2]), ("b", vec![])].into();
        write_json_atomic(&path, &value).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": []\n}\n");
        let back: BTreeMap<String, Vec<u32>> = read_json(&path).unwrap();
        assert_eq!(back.get("a"), Some(&vec![1, 2]));
        assert_eq!(names_in(dir.path()), ["state.json"]);
    }

    #[test]
    fn rewrite_replaces_content_and_leaves_no_temp_files() {
        let dir = tmpdir();
        let path = dir.path().join("tasks.csv");
        write_atomic(&path, b"old content that is longer").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(names_in(dir.path()), ["tasks.csv"]);
        assert!(stale_temp_files(&path).unwrap().is_empty());
    }

    #[test]
    fn truncated_json_error_names_file_and_line() {
        let dir = tmpdir();
        let path = dir.path().join("fix-plan.json");
        fs::write(&path, "{\n  \"groups\": [\n    {\"id\": \"G1\",\n").unwrap();
        let err = read_json::<serde_json::Value>(&path).unwrap_err();
        let StateError::Json {
            line,
            column,
            ref message,
            ..
        } = err
        else {
            panic!("expected a JSON error, got {err:?}");
        };
        assert_eq!((line, column), (4, 0));
        assert_eq!(message, "EOF while parsing a value");
        assert_eq!(
            err.to_string(),
            format!(
                "invalid JSON in file {} line 4 column 0: EOF while parsing a value",
                path.display()
            )
        );
    }

    #[test]
    fn wrong_shape_json_error_names_file_line_and_column() {
        let dir = tmpdir();
        let path = dir.path().join("progress.json");
        fs::write(&path, "{\n  \"done\": \"yes\"\n}\n").unwrap();
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Progress {
            done: u32,
        }
        let err = read_json::<Progress>(&path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "invalid JSON in file {} line 2 column 15: ",
                path.display()
            )),
            "{text}"
        );
        assert!(
            text.contains("invalid type: string \"yes\", expected u32"),
            "{text}"
        );
    }

    #[test]
    fn missing_file_is_not_found_and_optional_read_gives_none() {
        let dir = tmpdir();
        let path = dir.path().join("absent.json");
        let err = read_json::<serde_json::Value>(&path).unwrap_err();
        assert!(err.is_not_found());
        assert!(
            err.to_string()
                .starts_with(&format!("failed to read {}: ", path.display()))
        );
        assert_eq!(
            read_json_if_exists::<serde_json::Value>(&path).unwrap(),
            None
        );
    }

    #[test]
    fn write_into_missing_directory_names_the_directory() {
        let dir = tmpdir();
        let path = dir.path().join("nope").join("state.json");
        let err = write_atomic(&path, b"x").unwrap_err();
        assert_eq!(err.path(), dir.path().join("nope"));
        assert!(
            err.to_string()
                .starts_with("failed to create temporary file in "),
            "{err}"
        );
    }

    #[test]
    fn bare_file_name_lives_in_current_directory() {
        assert_eq!(target_dir(Path::new("state.json")), Path::new("."));
        assert_eq!(target_dir(Path::new("a/state.json")), Path::new("a"));
        assert!(is_temp_file_for(
            Path::new(".state.json.ab12Cd.tmp"),
            Path::new("state.json")
        ));
        assert!(is_temp_file_for(
            Path::new("a/.state.json.ab12Cd.tmp"),
            Path::new("a/state.json")
        ));
        assert!(!is_temp_file_for(
            Path::new("b/.state.json.ab12Cd.tmp"),
            Path::new("a/state.json")
        ));
        assert!(!is_temp_file_for(
            Path::new("a/state.json"),
            Path::new("a/state.json")
        ));
        assert!(!is_temp_file_for(
            Path::new("a/.state.json..tmp"),
            Path::new("a/state.json")
        ));
        assert!(!is_temp_file_for(
            Path::new("a/.other.json.x.tmp"),
            Path::new("a/state.json")
        ));
    }

    #[cfg(unix)]
    #[test]
    fn rewrite_keeps_existing_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tmpdir();
        let path = dir.path().join("secret.json");
        fs::write(&path, b"{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"[]").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn simulated_crash_before_rename_keeps_old_content() {
        let dir = tmpdir();
        let path = dir.path().join("tasks.csv");
        write_atomic(&path, b"old,complete\n").unwrap();

        // Crash after the temporary file is complete and fsynced but before the
        // rename: keep the temporary file on disk, as a killed process would.
        let tmp = write_temp(&path, b"new,complete,but,never,renamed\n").unwrap();
        let leftover = tmp.into_temp_path().keep().unwrap();

        assert_eq!(fs::read(&path).unwrap(), b"old,complete\n");
        assert_eq!(
            stale_temp_files(&path).unwrap(),
            std::slice::from_ref(&leftover)
        );
        // The leftover is hidden and cannot be taken for the state file.
        let leftover_name = leftover.file_name().unwrap().to_string_lossy().into_owned();
        assert!(leftover_name.starts_with(".tasks.csv.") && leftover_name.ends_with(".tmp"));

        // Crash while the temporary file is still being written: a partial temp.
        let partial = write_temp(&path, b"new,partial")
            .unwrap()
            .into_temp_path()
            .keep()
            .unwrap();
        fs::write(&partial, b"new,par").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"old,complete\n");

        // Recovery: the next writer cleans up and writes normally.
        assert_eq!(remove_stale_temp_files(&path).unwrap().len(), 2);
        write_atomic(&path, b"after,recovery\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"after,recovery\n");
        assert_eq!(names_in(dir.path()), ["tasks.csv"]);
    }

    #[test]
    fn every_leftover_in_a_folder_is_removed_and_nothing_else() {
        let dir = tmpdir();
        let plan = dir.path().join("partial-plan-3.json");
        let wave = dir.path().join("task-wave-2.csv");
        for path in [&plan, &wave] {
            write_atomic(path, b"complete\n").unwrap();
            write_temp(path, b"never renamed")
                .unwrap()
                .into_temp_path()
                .keep()
                .unwrap();
        }
        for other in [".lock", "notes.tmp", ".tmp", "..tmp", ".x.tmp.bak"] {
            fs::write(dir.path().join(other), b"kept").unwrap();
        }
        fs::create_dir(dir.path().join(".worktree.abc.tmp")).unwrap();
        assert_eq!(remove_stale_temp_files_in(dir.path()).unwrap().len(), 2);
        assert_eq!(
            names_in(dir.path()),
            [
                "..tmp",
                ".lock",
                ".tmp",
                ".worktree.abc.tmp",
                ".x.tmp.bak",
                "notes.tmp",
                "partial-plan-3.json",
                "task-wave-2.csv"
            ]
        );
        assert!(
            remove_stale_temp_files_in(dir.path().join("missing"))
                .unwrap()
                .is_empty()
        );
    }

    /// The two complete versions the killed writer alternates between. They
    /// differ in length and in every byte, so any torn mix or prefix shows.
    fn kill_test_versions() -> [Vec<u8>; 2] {
        let a = [
            b"version A\n".as_slice(),
            &vec![b'a'; 3 << 20],
            b"\nend A\n",
        ]
        .concat();
        let b = [
            b"version B\n".as_slice(),
            &vec![b'b'; (2 << 20) + 4099],
            b"\nend B\n",
        ]
        .concat();
        [a, b]
    }

    const KILL_TEST: &str =
        "state::atomic::tests::sigkill_during_rewrites_never_leaves_a_torn_file";
    const WRITER_ENV: &str = "ORCHESTRATOR_CORE_TEST_ATOMIC_WRITER";

    #[test]
    fn sigkill_during_rewrites_never_leaves_a_torn_file() {
        let [a, b] = kill_test_versions();
        if let Some(target) = std::env::var_os(WRITER_ENV) {
            // Child mode: rewrite the file forever, until the parent kills us.
            let target = PathBuf::from(target);
            let ready = target.with_file_name("ready");
            for n in 0u64.. {
                write_atomic(&target, if n % 2 == 0 { &b } else { &a }).unwrap();
                if n == 0 {
                    fs::write(&ready, b"").unwrap();
                }
            }
            unreachable!("the writer loop only ends when the process is killed");
        }

        let dir = tmpdir();
        let target = dir.path().join("state.bin");
        let ready = dir.path().join("ready");
        write_atomic(&target, &a).unwrap();
        let mut outcomes = BTreeMap::<&str, u32>::new();
        let mut leftovers = 0;
        for round in 0..8u64 {
            let mut child = reexec::spawn_self(KILL_TEST, WRITER_ENV, target.as_os_str())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            reexec::wait_for_file(&mut child, &ready, Duration::from_secs(120));
            // Kill at a different instant each round, mid-way through some rewrite.
            let started = Instant::now();
            while started.elapsed() < Duration::from_micros(round * 2_300 + 150) {
                std::hint::spin_loop();
            }
            child.kill().unwrap();
            child.wait().unwrap();

            let content = fs::read(&target).unwrap();
            assert!(
                content == a || content == b,
                "round {round}: torn state file after SIGKILL ({} bytes, starts {:?})",
                content.len(),
                String::from_utf8_lossy(&content[..content.len().min(12)])
            );
            *outcomes
                .entry(if content == a { "A" } else { "B" })
                .or_default() += 1;

            // Whatever else the kill left behind is a recognisable temp file.
            for name in names_in(dir.path()) {
                let entry = dir.path().join(&name);
                assert!(
                    name == "state.bin" || name == "ready" || is_temp_file_for(&entry, &target),
                    "round {round}: unexpected file {name}"
                );
            }
            leftovers += remove_stale_temp_files(&target).unwrap().len();
            fs::remove_file(&ready).unwrap();
        }
        assert_eq!(outcomes.values().sum::<u32>(), 8);
        eprintln!(
            "kill test: final versions {outcomes:?}, {leftovers} leftover temp files removed"
        );
    }
}
