//! The session reports of the repository's flows as MCP resources, so a
//! host can read what a tool call left: review-fix's `fix-summary.md`,
//! planex's `context.md` and `results.csv`, ci-autofix's audit logs.

use std::path::{Path, PathBuf};

use rmcp::model::{Resource, ResourceContents};

/// The report files the engine writes, as (folder under the repository,
/// file name pattern, MIME type): every file directly inside one of the
/// folder's session folders (or, for the audit logs, the folder itself)
/// whose name matches.
const REPORTS: [(&str, Pattern, &str); 4] = [
    (
        ".review/fixes",
        Pattern::InSession("fix-summary.md"),
        "text/markdown",
    ),
    (
        ".workflow/.lite-plan",
        Pattern::InSession("context.md"),
        "text/markdown",
    ),
    (
        ".workflow/.lite-plan",
        Pattern::InSession("results.csv"),
        "text/csv",
    ),
    (
        ".moai/reports/ci-autofix",
        Pattern::Extension("md"),
        "text/markdown",
    ),
];

#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// `<folder>/<session>/<name>`.
    InSession(&'static str),
    /// `<folder>/*.<ext>`.
    Extension(&'static str),
}

/// Every report present in `repo`, newest first, as a resource whose URI
/// is `file://` and the absolute path.
pub fn list(repo: &Path) -> Vec<Resource> {
    let mut found: Vec<(std::time::SystemTime, PathBuf, &str)> = Vec::new();
    for (folder, pattern, mime) in REPORTS {
        let Ok(entries) = std::fs::read_dir(repo.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = match pattern {
                Pattern::InSession(name) => entry.path().join(name),
                Pattern::Extension(_) => entry.path(),
            };
            let matches = match pattern {
                Pattern::InSession(_) => path.is_file(),
                Pattern::Extension(ext) => {
                    path.is_file() && path.extension().is_some_and(|e| e == ext)
                }
            };
            if matches {
                let modified = path
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                found.push((modified, path, mime));
            }
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found
        .into_iter()
        .map(|(_, path, mime)| {
            let name = path
                .strip_prefix(repo)
                .unwrap_or(&path)
                .display()
                .to_string();
            Resource::new(format!("file://{}", path.display()), name).with_mime_type(mime)
        })
        .collect()
}

/// The text of the report `uri`, when it is one that [`list`] offers (no
/// other file of the machine is readable through the server).
pub fn read(repo: &Path, uri: &str) -> Result<ResourceContents, String> {
    let offered = list(repo);
    let Some(resource) = offered.iter().find(|r| r.uri == uri) else {
        return Err(format!(
            "{uri} is not one of this repository's session reports"
        ));
    };
    let path = uri.trim_start_matches("file://");
    let text = std::fs::read_to_string(path).map_err(|e| format!("failed to read {path}: {e}"))?;
    let mut contents = ResourceContents::text(text, uri);
    if let Some(mime) = &resource.mime_type {
        contents = contents.with_mime_type(mime.clone());
    }
    Ok(contents)
}
