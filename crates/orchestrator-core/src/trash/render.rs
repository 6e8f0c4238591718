//! The text users read about a trash: `orchestrator trash list`'s table and
//! the section a run's report gets when it saved something.

use std::fmt::Write as _;
use std::path::Path;

use super::{EntryKind, TrashEntry};
pub use crate::text::human_size;

/// The entries of the trash of session `session`, one line each (number,
/// size, time saved in UTC, path) and the reason under it.
pub fn render_entries(session: &str, dir: &Path, entries: &[TrashEntry]) -> String {
    let total: u64 = entries.iter().map(|e| e.size).sum();
    let mut out = format!(
        "{session}: {} in {} ({})\n",
        count(entries.len()),
        dir.display(),
        human_size(total)
    );
    for entry in entries {
        let _ = writeln!(
            out,
            "  {session}:{:<4} {:>9}  {}  {}",
            entry.id,
            human_size(entry.size),
            when(entry.at_ms),
            describe(entry)
        );
        let _ = writeln!(out, "      {}", entry.reason);
    }
    out
}

/// The report section of a run that saved `entries` into the trash of
/// session `session`; empty when it saved nothing.
pub fn render_saved(session: &str, dir: &Path, entries: &[TrashEntry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let total: u64 = entries.iter().map(|e| e.size).sum();
    let mut out = format!(
        "Saved to trash before the engine reverted them: {} ({}) in {}\n",
        count(entries.len()),
        human_size(total),
        dir.display()
    );
    for entry in entries {
        let _ = writeln!(
            out,
            "  {session}:{}  {}  ({})",
            entry.id,
            describe(entry),
            entry.reason
        );
    }
    let _ = writeln!(
        out,
        "Bring one back: orchestrator trash restore {session}:<N> [--to DIR]; list them: orchestrator trash list {session}"
    );
    out
}

/// [`render_saved`] as a Markdown section (`## Trash`) for a report kept
/// in the session's folder; empty when nothing was saved.
pub fn render_saved_markdown(session: &str, entries: &[TrashEntry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let total: u64 = entries.iter().map(|e| e.size).sum();
    let mut out = format!(
        "\n## Trash\n\nSaved to this session's `trash/` before the engine reverted them: {} ({}). Bring one back with `orchestrator trash restore <entry> [--to DIR]`; list them with `orchestrator trash list {session}`.\n\n",
        count(entries.len()),
        human_size(total)
    );
    for entry in entries {
        let _ = writeln!(
            out,
            "- `{session}:{}` `{}` — {}",
            entry.id,
            describe(entry),
            entry.reason
        );
    }
    out
}

fn count(n: usize) -> String {
    if n == 1 {
        "1 file".to_owned()
    } else {
        format!("{n} files")
    }
}

fn describe(entry: &TrashEntry) -> String {
    match &entry.kind {
        EntryKind::File { mode } => format!("{} (mode {mode:o})", entry.path),
        EntryKind::Symlink { target } => format!("{} -> {target}", entry.path),
    }
}

fn when(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| format!("{ms} ms"),
        |t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}
