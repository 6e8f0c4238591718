//! Inputs: findings files read by content, confined to the repository and
//! de-duplicated.
//!
//! `--fix` takes a findings file or a review directory (then the newest
//! export in it is used). The format is detected from the content, never the
//! file name. Each finding must point at an existing file inside the
//! repository once `..` and symlinks are resolved; one that does not is
//! rejected on its own (the session goes on with the rest). Findings from
//! several inputs are de-duplicated by fingerprint.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use orchestrator_core::finding::{Finding, FindingId, dedup_by_fingerprint};

use crate::error::ReviewFixError;
use crate::files::RejectedFinding;

/// What the inputs gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedInputs {
    /// Findings to plan, paths made repository-relative.
    pub findings: Vec<Finding>,
    /// Findings (or entries) left out, with the reason.
    pub rejected: Vec<RejectedFinding>,
    /// The re-lint key ([`relint_key`]) of each rejected
    /// finding, by finding id, so that a later pass can leave out what an
    /// earlier one rejected.
    pub rejected_keys: HashMap<String, String>,
    /// Duplicates dropped: (dropped id, kept id).
    pub duplicates: Vec<(FindingId, FindingId)>,
    /// Notes from the readers and the detected formats, for the user.
    pub notes: Vec<String>,
}

/// Resolves a `--fix` argument: a file is used as is; a directory gives its
/// newest export (`*fix-export*.json` first, else the newest `.json`,
/// `.jsonl` or `.sarif` file).
pub fn resolve_input(path: &Path) -> Result<PathBuf, ReviewFixError> {
    let meta = std::fs::metadata(path).map_err(|e| ReviewFixError::InputRead {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Ok(path.to_path_buf());
    }
    let entries = std::fs::read_dir(path).map_err(|e| ReviewFixError::InputRead {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut candidates: Vec<(bool, std::time::SystemTime, String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            let meta = e.metadata().ok()?;
            if !meta.is_file() {
                return None;
            }
            let name = p.file_name()?.to_str()?.to_owned();
            let ext_ok = [".json", ".jsonl", ".sarif"]
                .iter()
                .any(|x| name.ends_with(x));
            if !ext_ok {
                return None;
            }
            let export = name.contains("fix-export");
            Some((export, meta.modified().ok()?, name, p))
        })
        .collect();
    candidates.sort();
    candidates
        .pop()
        .map(|(_, _, _, p)| p)
        .ok_or_else(|| ReviewFixError::InputRead {
            path: path.to_path_buf(),
            message: "the directory holds no findings export (*fix-export*.json, *.json, *.jsonl or *.sarif)".to_owned(),
        })
}

/// One findings input as `--fix` reads it: a file, or a review directory's
/// newest export ([`resolve_input`]), its format detected from the content
/// by the same readers, before the repository checks of [`load_inputs`].
/// `orchestrator batch` reads its input with this, so that both accept the
/// same files with the same messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadInput {
    /// The file read.
    pub path: PathBuf,
    /// The detected format (`review-cycle`, `sarif`, `rdjson`, `rdjsonl`,
    /// `cargo-json`).
    pub format: String,
    /// The findings read, in the order their tool applies fixes
    /// (`ParseOutcome::fix_order`: rustfix, ruff and ESLint each have their
    /// own), which the builtin agent's deterministic plan follows.
    pub findings: Vec<Finding>,
    /// Entries left out: (where, why).
    pub rejected: Vec<(String, String)>,
    /// Duplicates dropped within the input: (dropped id, kept id).
    pub duplicates: Vec<(FindingId, FindingId)>,
    /// Notes from the reader.
    pub notes: Vec<String>,
}

/// Reads one `--fix` input (a file or a review directory). An unreadable
/// file, a file that is not UTF-8 text and one no reader understands are
/// errors naming the file.
pub fn read_findings(input: &Path) -> Result<ReadInput, ReviewFixError> {
    let path = resolve_input(input)?;
    let text = read_text(&path)?;
    parse_findings(&text, &path, None)
}

/// Reads the text of one input (read from `path`, or from standard input
/// under that name) by content. `sources` gives the files the findings point
/// at, for the text that SARIF and rdjson edits replace; without it such
/// edits are noted as unanchored.
pub fn parse_findings(
    text: &str,
    path: &Path,
    sources: Option<&dyn orchestrator_findings::formats::SourceReader>,
) -> Result<ReadInput, ReviewFixError> {
    use orchestrator_findings::formats::{self, ParseOptions};
    let name = path.display().to_string();
    let outcome =
        formats::detect_and_parse_with(text, &name, &ParseOptions { sources }).map_err(|e| {
            ReviewFixError::InputParse {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
    Ok(ReadInput {
        path: path.to_path_buf(),
        format: outcome.format.as_str().to_owned(),
        findings: outcome.findings_in_fix_order(),
        rejected: outcome
            .rejected
            .into_iter()
            .map(|r| (r.location, r.message))
            .collect(),
        duplicates: outcome.duplicates,
        notes: outcome.notes,
    })
}

/// The repository-relative form of `file` if it resolves (after `..` and
/// symlinks) to an existing file inside `repo`.
pub fn confine(repo: &Path, file: &str) -> Result<PathBuf, String> {
    let root = repo
        .canonicalize()
        .map_err(|e| format!("cannot resolve the repository {}: {e}", repo.display()))?;
    let given = Path::new(file);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    };
    let real = joined.canonicalize().map_err(|_| {
        if lexically_outside(&root, &joined) {
            format!("`{file}` points outside the repository")
        } else {
            format!("`{file}` points at nothing (no such file in the repository)")
        }
    })?;
    if !real.starts_with(&root) {
        return Err(format!(
            "`{file}` points outside the repository (it resolves to {})",
            real.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("`{file}` is not a file"));
    }
    Ok(real)
}

fn lexically_outside(root: &Path, path: &Path) -> bool {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    !out.starts_with(root)
}

/// The path of `real` relative to the canonical repository root, with `/`.
fn relative_to(repo: &Path, real: &Path) -> Option<String> {
    let root = repo.canonicalize().ok()?;
    let rel = real.strip_prefix(&root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// Checks one finding: its file and every suggestion edit's file must be an
/// existing file inside the repository. Returns the finding with
/// repository-relative paths, or the rejection.
pub fn check_finding(repo: &Path, mut finding: Finding) -> Result<Finding, RejectedFinding> {
    let reject = |f: &Finding, reason: String| RejectedFinding {
        finding_id: f.id.to_string(),
        file: f.file.clone(),
        reason,
    };
    let Some(file) = finding.file.clone() else {
        return Err(reject(&finding, "the finding points at no file".to_owned()));
    };
    let real = confine(repo, &file).map_err(|r| reject(&finding, r))?;
    let Some(rel) = relative_to(repo, &real) else {
        return Err(reject(
            &finding,
            format!("`{file}` points outside the repository"),
        ));
    };
    finding.id = rebase_id(&finding.id, &file, &rel);
    finding.file = Some(rel);
    for suggestion in &mut finding.suggestions {
        for edit in &mut suggestion.edits {
            let real = match confine(repo, &edit.file) {
                Ok(r) => r,
                Err(r) => {
                    return Err(RejectedFinding {
                        finding_id: finding.id.to_string(),
                        file: finding.file.clone(),
                        reason: format!("its suggestion edits a file it must not: {r}"),
                    });
                }
            };
            if let Some(rel) = relative_to(repo, &real) {
                edit.file = rel;
            }
        }
    }
    Ok(finding)
}

/// The id a reader built from the file as the tool spelled it
/// (`<rule>@<file>:<line>:<column>`, the file absolute for ruff, ESLint and
/// a `file://` SARIF URI) with the repository-relative path instead, so
/// that ids and the commit subjects that carry them name no absolute path
/// and stay the same wherever the repository is. An id that does not embed
/// the file (a SARIF `guid`, a review export's own id) is kept.
pub fn rebase_id(id: &FindingId, spelled: &str, relative: &str) -> FindingId {
    if spelled == relative {
        return id.clone();
    }
    let marker = format!("@{spelled}:");
    match id.as_str().find(&marker) {
        Some(at) => FindingId(format!(
            "{}@{relative}:{}",
            &id.as_str()[..at],
            &id.as_str()[at + marker.len()..]
        )),
        None => id.clone(),
    }
}

/// Reads every input, rejects findings outside the repository and
/// de-duplicates by fingerprint. An unreadable or unparsable input is an
/// error (exit 2); a bad entry or finding is a per-finding rejection.
pub fn load_inputs(repo: &Path, inputs: &[PathBuf]) -> Result<LoadedInputs, ReviewFixError> {
    let mut out = LoadedInputs::default();
    let mut all = Vec::new();
    let mut seen_ids: HashMap<FindingId, u32> = HashMap::new();
    for input in inputs {
        let path = resolve_input(input)?;
        let text = read_text(&path)?;
        let name = path.display().to_string();
        let reader = |rel: &str| -> Option<String> {
            let path = confine(repo, rel).ok()?;
            std::fs::read_to_string(path).ok()
        };
        let parsed = parse_findings(&text, &path, Some(&reader))?;
        out.notes.push(format!(
            "{name}: read as {} ({} findings)",
            parsed.format,
            parsed.findings.len()
        ));
        out.notes.extend(parsed.notes);
        out.duplicates.extend(parsed.duplicates);
        for (location, message) in parsed.rejected {
            out.rejected.push(RejectedFinding {
                finding_id: location,
                file: None,
                reason: message,
            });
        }
        for mut f in parsed.findings {
            // Ids must be unique across inputs too.
            let n = seen_ids.entry(f.id.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                f.id = FindingId(format!("{}#{}", f.id, n));
            }
            all.push(f);
        }
    }
    let (kept, dropped) = dedup_by_fingerprint(all);
    out.duplicates.extend(dropped);
    let mut taken: std::collections::HashSet<FindingId> = std::collections::HashSet::new();
    for f in kept {
        let key = relint_key(&f);
        match check_finding(repo, f) {
            Ok(mut f) => {
                // Two spellings of one path (absolute and relative) may
                // give one id once rebased: keep ids unique.
                let base = f.id.clone();
                let mut n = 1;
                while !taken.insert(f.id.clone()) {
                    n += 1;
                    f.id = FindingId(format!("{base}#{n}"));
                }
                out.findings.push(f);
            }
            Err(r) => {
                out.rejected_keys.insert(r.finding_id.clone(), key);
                out.rejected.push(r);
            }
        }
    }
    Ok(out)
}

/// The text of an input file; a file that is not UTF-8 is an error naming
/// the byte offset of the first invalid byte.
fn read_text(path: &Path) -> Result<String, ReviewFixError> {
    let bytes = orchestrator_core::limits::read_input_file(
        path,
        orchestrator_core::limits::MAX_INPUT_FILE_BYTES,
    )
    .map_err(|e| ReviewFixError::InputRead {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    String::from_utf8(bytes).map_err(|e| ReviewFixError::InputRead {
        path: path.to_path_buf(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// A test command inferred from the project's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferredTestCommand {
    /// The command as an argv.
    pub argv: Vec<String>,
    /// Why (which file implied it), for the user.
    pub reason: String,
}

/// Infers the test command from the project: `Cargo.toml` → `cargo test`,
/// a `package.json` with a `test` script → `npm test`, pytest configuration
/// → `pytest`, `go.mod` → `go test ./...`. `None` when nothing implies one.
pub fn infer_test_command(repo: &Path) -> Option<InferredTestCommand> {
    let make = |argv: &[&str], reason: &str| InferredTestCommand {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        reason: reason.to_owned(),
    };
    if repo.join("Cargo.toml").is_file() {
        // Every test binary runs even when one fails: with a red base,
        // cargo's default stop at the first failing binary would leave a
        // fix's breakage in a later one unseen.
        return Some(make(
            &["cargo", "test", "--no-fail-fast"],
            "Cargo.toml found",
        ));
    }
    if let Ok(text) = std::fs::read_to_string(repo.join("package.json"))
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
        && value
            .pointer("/scripts/test")
            .is_some_and(|t| t.is_string())
    {
        return Some(make(&["npm", "test"], "package.json has a test script"));
    }
    let pytest_ini = repo.join("pytest.ini").is_file() || repo.join("conftest.py").is_file();
    let pyproject = std::fs::read_to_string(repo.join("pyproject.toml"))
        .is_ok_and(|t| t.contains("[tool.pytest"));
    let setup_cfg =
        std::fs::read_to_string(repo.join("setup.cfg")).is_ok_and(|t| t.contains("[tool:pytest]"));
    if pytest_ini || pyproject || setup_cfg {
        // The project's own virtualenv, when it has one (worktrees get it
        // too, relocated): not whichever pytest is first on PATH.
        for venv in [".venv", "venv"] {
            if repo.join(venv).join("bin/python").exists() {
                let python = format!("{venv}/bin/python");
                return Some(make(
                    &[python.as_str(), "-m", "pytest"],
                    &format!("pytest configuration and {venv}/ found"),
                ));
            }
        }
        return Some(make(&["pytest"], "pytest configuration found"));
    }
    if repo.join("go.mod").is_file() {
        return Some(make(&["go", "test", "./..."], "go.mod found"));
    }
    None
}

/// The key that matches a finding across re-lint passes: its file, rule,
/// title and the edits of its suggestions (original and replacement text) —
/// everything that identifies it except positions, which earlier fixes
/// shift.
pub fn relint_key(f: &Finding) -> String {
    let mut key = String::new();
    for part in [
        f.file.as_deref().unwrap_or(""),
        f.category.as_deref().unwrap_or(""),
        f.title.trim(),
    ] {
        key.push_str(part);
        key.push('\u{1f}');
    }
    for s in &f.suggestions {
        for e in &s.edits {
            key.push_str(&e.file);
            key.push('\u{1e}');
            key.push_str(&e.original);
            key.push('\u{1e}');
            key.push_str(&e.replacement);
            key.push('\u{1f}');
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::finding::Severity;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}\n").unwrap();
        dir
    }

    #[test]
    fn confinement_rejects_traversal_absolute_symlinks_and_missing_files() {
        let dir = repo();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("src/link"))
            .unwrap();
        let check = |file: &str| {
            let f = Finding::new("F", "t", Severity::Low).at(file, Some(1));
            check_finding(dir.path(), f).map(|f| f.file.unwrap())
        };
        assert_eq!(check("src/lib.rs").unwrap(), "src/lib.rs");
        assert_eq!(check("./src/../src/lib.rs").unwrap(), "src/lib.rs");
        let abs = dir.path().join("src/lib.rs").display().to_string();
        assert_eq!(check(&abs).unwrap(), "src/lib.rs");
        let err = check("../../../../etc/passwd").unwrap_err();
        assert!(
            err.reason.contains("outside the repository"),
            "{}",
            err.reason
        );
        let err = check(&outside.path().join("secret").display().to_string()).unwrap_err();
        assert!(
            err.reason.contains("outside the repository"),
            "{}",
            err.reason
        );
        #[cfg(unix)]
        {
            let err = check("src/link").unwrap_err();
            assert!(
                err.reason.contains("outside the repository"),
                "{}",
                err.reason
            );
        }
        let err = check("src/missing.rs").unwrap_err();
        assert!(err.reason.contains("points at nothing"), "{}", err.reason);
        let err = check_finding(dir.path(), Finding::new("G", "t", Severity::Low)).unwrap_err();
        assert_eq!(err.reason, "the finding points at no file");
    }

    #[test]
    fn a_directory_input_uses_its_newest_export() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.json"), "[]").unwrap();
        std::fs::write(dir.path().join("fix-export-1.json"), "[]").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("fix-export-2.json"), "[]").unwrap();
        std::fs::write(dir.path().join("README.md"), "x").unwrap();
        assert_eq!(
            resolve_input(dir.path()).unwrap(),
            dir.path().join("fix-export-2.json")
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            resolve_input(empty.path()),
            Err(ReviewFixError::InputRead { .. })
        ));
    }

    #[test]
    fn review_cycle_inputs_are_deduplicated_and_checked() {
        let dir = repo();
        let export = serde_json::json!({
            "session_id": "WFS-1",
            "findings": [
                {"id": "A", "title": "t", "severity": "high", "dimension": "quality", "file": "src/lib.rs", "line": "1", "description": "d"},
                {"id": "B", "title": "t", "severity": "high", "dimension": "quality", "file": "src/lib.rs", "line": 1, "description": "d"},
                {"id": "C", "title": "u", "severity": "low", "dimension": "security", "file": "../outside.rs", "line": 2, "description": "d"}
            ]
        });
        let input = dir.path().join("export.json");
        std::fs::write(&input, export.to_string()).unwrap();
        let loaded = load_inputs(dir.path(), &[input]).unwrap();
        let ids: Vec<_> = loaded.findings.iter().map(|f| f.id.to_string()).collect();
        assert_eq!(ids, ["A"]);
        assert_eq!(
            loaded.duplicates,
            vec![(FindingId::from("B"), FindingId::from("A"))]
        );
        assert_eq!(loaded.rejected.len(), 1);
        assert_eq!(loaded.rejected[0].finding_id, "C");
    }

    #[test]
    fn unreadable_and_unparsable_inputs_are_errors() {
        let dir = repo();
        let missing = load_inputs(dir.path(), &[dir.path().join("nope.json")]).unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{ not json").unwrap();
        let err = load_inputs(dir.path(), std::slice::from_ref(&bad)).unwrap_err();
        assert!(matches!(err, ReviewFixError::InputParse { .. }), "{err}");
        assert_eq!(err.exit_code(), 2);
        // The reader's message names the file; it is not named again.
        let shown = bad.display().to_string();
        assert_eq!(
            err.to_string(),
            format!(
                "failed to read json findings from {shown}: invalid JSON at line 1, column 3: key must be a string"
            )
        );
        assert_eq!(err.to_string().matches(&shown).count(), 1, "{err}");
    }

    /// A finding with a field over its size limit is rejected on its own,
    /// naming the file, its index, id, field and sizes, and the rest is kept.
    #[test]
    fn an_oversized_finding_is_rejected_on_its_own_naming_the_file_once() {
        let dir = repo();
        let export = serde_json::json!([
            {"id": "BIG", "title": "t", "severity": "high", "file": "src/lib.rs", "line": 1,
             "description": "x".repeat(orchestrator_core::limits::MAX_TEXT_BYTES + 1)},
            {"id": "OK", "title": "u", "severity": "high", "file": "src/lib.rs", "line": 1}
        ]);
        let input = dir.path().join("export.json");
        std::fs::write(&input, export.to_string()).unwrap();
        let loaded = load_inputs(dir.path(), std::slice::from_ref(&input)).unwrap();
        let ids: Vec<_> = loaded.findings.iter().map(|f| f.id.to_string()).collect();
        assert_eq!(ids, ["OK"]);
        assert_eq!(loaded.rejected.len(), 1);
        let shown = input.display().to_string();
        assert_eq!(
            loaded.rejected[0].finding_id,
            format!("{shown}: findings[0]")
        );
        assert_eq!(
            loaded.rejected[0].reason,
            "finding `BIG`: field `description`: is 65537 bytes, over the limit of 65536 bytes (64 KiB)"
        );
    }

    #[test]
    fn test_commands_are_inferred_from_project_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(infer_test_command(dir.path()), None);
        std::fs::write(dir.path().join("go.mod"), "module x").unwrap();
        assert_eq!(
            infer_test_command(dir.path()).unwrap().argv,
            ["go", "test", "./..."]
        );
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts":{"test":"jest"}}"#,
        )
        .unwrap();
        assert_eq!(
            infer_test_command(dir.path()).unwrap().argv,
            ["npm", "test"]
        );
        std::fs::write(dir.path().join("Cargo.toml"), "[package]").unwrap();
        assert_eq!(
            infer_test_command(dir.path()).unwrap().argv,
            ["cargo", "test", "--no-fail-fast"]
        );
    }

    #[test]
    fn pytest_runs_in_the_projects_own_virtualenv() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pytest.ini"), "[pytest]\n").unwrap();
        assert_eq!(infer_test_command(dir.path()).unwrap().argv, ["pytest"]);
        std::fs::create_dir_all(dir.path().join(".venv/bin")).unwrap();
        std::fs::write(dir.path().join(".venv/bin/python"), "").unwrap();
        let inferred = infer_test_command(dir.path()).unwrap();
        assert_eq!(inferred.argv, [".venv/bin/python", "-m", "pytest"]);
        assert_eq!(inferred.reason, "pytest configuration and .venv/ found");
    }
}
