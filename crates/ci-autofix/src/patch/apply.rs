//! Applying a parsed patch strictly: every path checked on disk (no symlink
//! out of the repository, no protected file), every hunk at its place or within
//! [`MAX_OFFSET`] lines, all files or none, each written atomically.

use super::*;

/// Applies `patch` under `root`, refusing any path for which `protected`
/// is true. Returns the repository-relative paths written or deleted,
/// sorted. Nothing is written unless every file section applies.
pub fn apply(
    root: &Path,
    patch: &Patch,
    protected: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, PatchError> {
    if patch.files.is_empty() {
        return Err(PatchError::Empty);
    }
    for f in &patch.files {
        if protected(&f.path) {
            return Err(PatchError::Protected {
                path: f.path.clone(),
            });
        }
    }
    let canonical_root = root.canonicalize().map_err(|source| PatchError::Io {
        action: "resolve the repository root",
        path: root.to_path_buf(),
        source,
    })?;
    for f in &patch.files {
        check_on_disk(&canonical_root, &f.path)?;
    }

    // Plan: the final content of every file (None: deleted).
    let mut plan: BTreeMap<String, Option<String>> = BTreeMap::new();
    for f in &patch.files {
        let current = match plan.get(&f.path) {
            Some(planned) => planned.clone(),
            None => read_current(&canonical_root, &f.path)?,
        };
        let state_err = |reason: &str| PatchError::FileState {
            path: f.path.clone(),
            reason: reason.to_owned(),
        };
        let base = match (f.change, current) {
            (FileChange::Add, Some(_)) => {
                return Err(state_err("the diff creates it, but it already exists"));
            }
            (FileChange::Add, None) => String::new(),
            (_, None) => return Err(state_err("the diff changes it, but it does not exist")),
            (_, Some(text)) => text,
        };
        let result = apply_hunks(&f.path, &base, &f.hunks)?;
        let planned = if f.change == FileChange::Delete {
            if !result.is_empty() {
                return Err(state_err(
                    "the diff deletes it, but lines remain after removing the hunks",
                ));
            }
            None
        } else {
            Some(result)
        };
        plan.insert(f.path.clone(), planned);
    }

    // Write.
    for (path, content) in &plan {
        let full = canonical_root.join(path);
        match content {
            Some(text) => write_atomically(&full, text)?,
            None => std::fs::remove_file(&full).map_err(|source| PatchError::Io {
                action: "delete",
                path: full.clone(),
                source,
            })?,
        }
    }
    Ok(plan.into_keys().collect())
}

/// Refuses a symlinked file and a folder that resolves outside the root.
pub(super) fn check_on_disk(canonical_root: &Path, path: &str) -> Result<(), PatchError> {
    let full = canonical_root.join(path);
    let bad = |reason: String| PatchError::BadPath {
        path: path.to_owned(),
        reason,
    };
    if let Ok(meta) = std::fs::symlink_metadata(&full)
        && meta.file_type().is_symlink()
    {
        return Err(bad("it is a symlink".into()));
    }
    let mut dir = full.parent();
    while let Some(d) = dir {
        if std::fs::symlink_metadata(d).is_ok() {
            let resolved = d.canonicalize().map_err(|source| PatchError::Io {
                action: "resolve",
                path: d.to_path_buf(),
                source,
            })?;
            if !resolved.starts_with(canonical_root) {
                return Err(bad(format!(
                    "its folder resolves to {} outside the repository",
                    resolved.display()
                )));
            }
            return Ok(());
        }
        dir = d.parent();
    }
    Ok(())
}

pub(super) fn read_current(root: &Path, path: &str) -> Result<Option<String>, PatchError> {
    let full = root.join(path);
    match std::fs::read(&full) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| PatchError::FileState {
                path: path.to_owned(),
                reason: "it is not UTF-8 text".into(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PatchError::Io {
            action: "read",
            path: full,
            source,
        }),
    }
}

pub(super) fn write_atomically(full: &Path, text: &str) -> Result<(), PatchError> {
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| PatchError::Io {
            action,
            path: p,
            source,
        }
    };
    let dir = full.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create the folder", dir))?;
    let permissions = std::fs::metadata(full).ok().map(|m| m.permissions());
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(io("create a temporary file in", dir))?;
    tmp.write_all(text.as_bytes())
        .map_err(io("write a temporary file for", full))?;
    if let Some(p) = permissions {
        tmp.as_file()
            .set_permissions(p)
            .map_err(io("copy the permissions of", full))?;
    }
    tmp.persist(full).map_err(|e| PatchError::Io {
        action: "replace",
        path: full.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

/// Applies the hunks of one file to its text (pure).
pub fn apply_hunks(path: &str, text: &str, hunks: &[Hunk]) -> Result<String, PatchError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0usize;
    let mut delta: isize = 0;
    for (k, h) in hunks.iter().enumerate() {
        let mismatch = |reason: String| PatchError::HunkMismatch {
            path: path.to_owned(),
            hunk: k + 1,
            header: h.header(),
            reason,
        };
        let old = h.old_side();
        let new = h.new_side();
        let nominal = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let expected = nominal as isize + delta;
        let fits = |p: isize| -> bool {
            p >= cursor as isize
                && (p as usize) + old.len() <= lines.len()
                && lines[p as usize..p as usize + old.len()]
                    .iter()
                    .zip(&old)
                    .all(|(a, b)| a == b)
        };
        let pos = if old.is_empty() {
            // Nothing to match: only the expected position is acceptable.
            fits(expected).then_some(expected as usize)
        } else {
            let max = MAX_OFFSET as isize;
            (0..=max)
                .flat_map(|d| if d == 0 { vec![0] } else { vec![-d, d] })
                .map(|d| expected + d)
                .find(|&p| fits(p))
                .map(|p| p as usize)
        };
        let Some(pos) = pos else {
            return Err(mismatch(describe_mismatch(
                &lines,
                &old,
                expected.max(cursor as isize) as usize,
                cursor,
            )));
        };
        let end = pos + old.len();
        if new.last().is_some_and(|l| !l.ends_with('\n')) && end < lines.len() {
            return Err(mismatch(
                "its last line has no newline at the end of the file, but the file goes on".into(),
            ));
        }
        if old.is_empty()
            && !new.is_empty()
            && pos > 0
            && lines.get(pos - 1).is_some_and(|l| !l.ends_with('\n'))
        {
            return Err(mismatch(format!(
                "it adds lines after line {pos}, which has no newline at the end of the file"
            )));
        }
        for l in &lines[cursor..pos] {
            out.push_str(l);
        }
        for l in &new {
            out.push_str(l);
        }
        cursor = end;
        delta = pos as isize - nominal as isize;
    }
    for l in &lines[cursor..] {
        out.push_str(l);
    }
    Ok(out)
}

/// Where the old side stops matching at its expected position.
pub(super) fn describe_mismatch(lines: &[&str], old: &[&str], at: usize, cursor: usize) -> String {
    let window = format!(
        "not found at line {} nor within {MAX_OFFSET} lines of it",
        at + 1
    );
    if at < cursor {
        return format!("{window} (it would overlap the previous hunk)");
    }
    for (i, want) in old.iter().enumerate() {
        match lines.get(at + i) {
            None => {
                return format!(
                    "{window}; the file ends at line {} where the hunk expects {}",
                    lines.len(),
                    Shown(want)
                );
            }
            Some(got) if got != want => {
                return format!(
                    "{window}; line {} is {} where the hunk expects {}",
                    at + i + 1,
                    Shown(got),
                    Shown(want)
                );
            }
            Some(_) => {}
        }
    }
    window
}

/// A line for an error message, in backticks: no line ending, a carriage
/// return shown as `\r`, long lines shortened, a missing final newline said.
pub(super) struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let body = self.0.strip_suffix('\n');
        let text = body.unwrap_or(self.0);
        let (text, cr) = match text.strip_suffix('\r') {
            Some(t) => (t, "\\r"),
            None => (text, ""),
        };
        write!(f, "`{}{cr}`", truncate(text, 80))?;
        if body.is_none() {
            write!(f, " (no newline at end of file)")?;
        }
        Ok(())
    }
}
