//! Planex's row types: `explore.csv`, `tasks.csv` and `discoveries.ndjson`.
//!
//! These files are our users' existing data (the lite-planex seed's session
//! folder `.workflow/.lite-plan/{session}/`), so the columns here are exactly
//! the seed's, in the seed's order: [`EXPLORE_COLUMNS`] and [`TASK_COLUMNS`].
//!
//! Reading goes through [`CsvTable`], so every error
//! names the file and line. A row is typed on the way in:
//!
//! - `deps`, `context_from`, `key_files`, `files_modified`: `;`-separated
//!   lists, each item trimmed, empty items dropped;
//! - `wave`: a whole number, or empty;
//! - `status`: [`RowStatus`] (`pending`, `completed`, `failed`, `skipped`;
//!   case-insensitive, empty means `pending`);
//! - `tests_passed`: `true`, `false` or empty;
//! - every other known column: text, kept exactly.
//!
//! Columns the seed computes or fills as output (`status` onward) may be
//! absent — the per-wave CSVs only carry the input columns — and read as
//! empty. The input columns and `wave` are required. Unknown columns (a
//! wave CSV's `prev_context`, a user's own notes) are kept, in order, in each
//! row's `extra` and written back after the known columns, so a
//! read-modify-write never loses data.
//!
//! Rows come back in file order, so row `i` of [`ExploreRow::from_table`] is
//! record `i` of the table, whose `line` tells where it came from.

use std::path::Path;
use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use orchestrator_core::state::{CsvRecord, CsvTable, StateError, read_csv};

mod discovery;
pub use discovery::*;

/// Columns of `explore.csv`, in the seed's order.
pub const EXPLORE_COLUMNS: [&str; 10] = [
    "id",
    "angle",
    "description",
    "focus",
    "deps",
    "wave",
    "status",
    "findings",
    "key_files",
    "error",
];

/// How many leading [`EXPLORE_COLUMNS`] a reader requires (`id` … `wave`).
pub const EXPLORE_REQUIRED: usize = 6;

/// Columns of `tasks.csv`, in the seed's order.
pub const TASK_COLUMNS: [&str; 17] = [
    "id",
    "title",
    "description",
    "test",
    "acceptance_criteria",
    "scope",
    "hints",
    "execution_directives",
    "deps",
    "context_from",
    "wave",
    "status",
    "findings",
    "files_modified",
    "tests_passed",
    "acceptance_met",
    "error",
];

/// How many leading [`TASK_COLUMNS`] a reader requires (`id` … `wave`).
pub const TASK_REQUIRED: usize = 11;

/// Status of an explore or task row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Not run yet.
    #[default]
    Pending,
    /// Ran and succeeded.
    Completed,
    /// Ran and failed.
    Failed,
    /// Not run because a dependency failed or was skipped.
    Skipped,
}

impl RowStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RowStatus; 4] = [
        RowStatus::Pending,
        RowStatus::Completed,
        RowStatus::Failed,
        RowStatus::Skipped,
    ];

    /// The name written to the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Pending => "pending",
            RowStatus::Completed => "completed",
            RowStatus::Failed => "failed",
            RowStatus::Skipped => "skipped",
        }
    }
}

impl fmt::Display for RowStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not a [`RowStatus`] name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown row status {0:?}, expected one of pending, completed, failed, skipped")]
pub struct UnknownStatus(pub String);

impl FromStr for RowStatus {
    type Err = UnknownStatus;

    /// Case-insensitive, surrounding whitespace ignored; empty is `Pending`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Ok(RowStatus::Pending);
        }
        RowStatus::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

/// One row of `explore.csv`: an exploration angle and what it found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExploreRow {
    /// Exploration id: `E1`, `E2`, ….
    pub id: String,
    /// Angle name (`architecture`, `testing`, …).
    pub angle: String,
    /// What to explore from this angle.
    pub description: String,
    /// Keywords and focus areas.
    pub focus: String,
    /// Ids of explorations this one waits for.
    pub deps: Vec<String>,
    /// Wave number (1-based), when computed.
    pub wave: Option<u32>,
    /// Lifecycle status.
    pub status: RowStatus,
    /// What the exploration found.
    pub findings: String,
    /// Relevant files it found.
    pub key_files: Vec<String>,
    /// Error message if it failed.
    pub error: String,
    /// Unknown columns, in file order: (column, value).
    pub extra: Vec<(String, String)>,
}

/// One row of `tasks.csv`: an execution task and its result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskRow {
    /// Task id: `T1`, `T2`, ….
    pub id: String,
    /// Short title.
    pub title: String,
    /// Self-contained description of what to implement.
    pub description: String,
    /// Test cases to write and how to verify.
    pub test: String,
    /// Measurable conditions that define "done".
    pub acceptance_criteria: String,
    /// Glob the task may write to.
    pub scope: String,
    /// Tips and reference files: `tips || file1;file2` (see [`TaskRow::hint_parts`]).
    pub hints: String,
    /// Commands to run for verification, tool restrictions.
    pub execution_directives: String,
    /// Ids of tasks this one depends on.
    pub deps: Vec<String>,
    /// Ids whose findings feed this task's context (`E*` and `T*`).
    pub context_from: Vec<String>,
    /// Wave number (1-based), when computed.
    pub wave: Option<u32>,
    /// Lifecycle status.
    pub status: RowStatus,
    /// Execution findings.
    pub findings: String,
    /// Files the task modified.
    pub files_modified: Vec<String>,
    /// Whether all its tests passed; `None` when not reported.
    pub tests_passed: Option<bool>,
    /// Which acceptance criteria were met or unmet.
    pub acceptance_met: String,
    /// Error message if it failed.
    pub error: String,
    /// Unknown columns, in file order: (column, value).
    pub extra: Vec<(String, String)>,
}

impl ExploreRow {
    /// A pending row with no dependencies or results.
    pub fn new(
        id: impl Into<String>,
        angle: impl Into<String>,
        description: impl Into<String>,
        focus: impl Into<String>,
    ) -> ExploreRow {
        ExploreRow {
            id: id.into(),
            angle: angle.into(),
            description: description.into(),
            focus: focus.into(),
            ..ExploreRow::default()
        }
    }

    /// Types every record of `table`; `path` names the file in errors.
    pub fn from_table(path: &Path, table: &CsvTable) -> Result<Vec<ExploreRow>, StateError> {
        let cols = Columns::resolve(path, table, &EXPLORE_COLUMNS, EXPLORE_REQUIRED)?;
        table
            .rows
            .iter()
            .map(|r| {
                Ok(ExploreRow {
                    id: cols.text(r, "id"),
                    angle: cols.text(r, "angle"),
                    description: cols.text(r, "description"),
                    focus: cols.text(r, "focus"),
                    deps: cols.list(r, "deps"),
                    wave: cols.wave(r, "wave")?,
                    status: cols.status(r, "status")?,
                    findings: cols.text(r, "findings"),
                    key_files: cols.list(r, "key_files"),
                    error: cols.text(r, "error"),
                    extra: cols.extra(r),
                })
            })
            .collect()
    }

    /// The table for `rows`: [`EXPLORE_COLUMNS`], then every extra column in
    /// order of first appearance (empty where a row lacks it).
    pub fn to_table(rows: &[ExploreRow]) -> CsvTable {
        build_table(
            &EXPLORE_COLUMNS,
            rows.iter().map(|r| {
                let known = vec![
                    r.id.clone(),
                    r.angle.clone(),
                    r.description.clone(),
                    r.focus.clone(),
                    join_list(&r.deps),
                    wave_text(r.wave),
                    r.status.as_str().to_owned(),
                    r.findings.clone(),
                    join_list(&r.key_files),
                    r.error.clone(),
                ];
                (known, r.extra.as_slice())
            }),
        )
    }
}

impl TaskRow {
    /// A pending row with only its id, title and description set.
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        description: impl Into<String>,
    ) -> TaskRow {
        TaskRow {
            id: id.into(),
            title: title.into(),
            description: description.into(),
            ..TaskRow::default()
        }
    }

    /// Types every record of `table`; `path` names the file in errors.
    pub fn from_table(path: &Path, table: &CsvTable) -> Result<Vec<TaskRow>, StateError> {
        let cols = Columns::resolve(path, table, &TASK_COLUMNS, TASK_REQUIRED)?;
        table
            .rows
            .iter()
            .map(|r| {
                Ok(TaskRow {
                    id: cols.text(r, "id"),
                    title: cols.text(r, "title"),
                    description: cols.text(r, "description"),
                    test: cols.text(r, "test"),
                    acceptance_criteria: cols.text(r, "acceptance_criteria"),
                    scope: cols.text(r, "scope"),
                    hints: cols.text(r, "hints"),
                    execution_directives: cols.text(r, "execution_directives"),
                    deps: cols.list(r, "deps"),
                    context_from: cols.list(r, "context_from"),
                    wave: cols.wave(r, "wave")?,
                    status: cols.status(r, "status")?,
                    findings: cols.text(r, "findings"),
                    files_modified: cols.list(r, "files_modified"),
                    tests_passed: cols.flag(r, "tests_passed")?,
                    acceptance_met: cols.text(r, "acceptance_met"),
                    error: cols.text(r, "error"),
                    extra: cols.extra(r),
                })
            })
            .collect()
    }

    /// The table for `rows`: [`TASK_COLUMNS`], then every extra column in
    /// order of first appearance (empty where a row lacks it).
    pub fn to_table(rows: &[TaskRow]) -> CsvTable {
        build_table(
            &TASK_COLUMNS,
            rows.iter().map(|r| {
                let known = vec![
                    r.id.clone(),
                    r.title.clone(),
                    r.description.clone(),
                    r.test.clone(),
                    r.acceptance_criteria.clone(),
                    r.scope.clone(),
                    r.hints.clone(),
                    r.execution_directives.clone(),
                    join_list(&r.deps),
                    join_list(&r.context_from),
                    wave_text(r.wave),
                    r.status.as_str().to_owned(),
                    r.findings.clone(),
                    join_list(&r.files_modified),
                    r.tests_passed.map_or_else(String::new, |b| b.to_string()),
                    r.acceptance_met.clone(),
                    r.error.clone(),
                ];
                (known, r.extra.as_slice())
            }),
        )
    }

    /// The globs of `scope` (`;`-separated, trimmed, blanks dropped): where
    /// the task may write.
    pub fn scope_globs(&self) -> Vec<String> {
        split_list(&self.scope)
    }

    /// The two parts of `hints` (`tips || file1;file2`): the tips text and the
    /// reference files. Either may be empty; without `||` it is all tips.
    pub fn hint_parts(&self) -> (&str, Vec<&str>) {
        match self.hints.split_once("||") {
            Some((tips, files)) => (
                tips.trim(),
                files
                    .split(';')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .collect(),
            ),
            None => (self.hints.trim(), Vec::new()),
        }
    }
}

/// Reads `explore.csv` (or an explore wave CSV) at `path`.
pub fn read_explore_csv(path: impl AsRef<Path>) -> Result<Vec<ExploreRow>, StateError> {
    let path = path.as_ref();
    ExploreRow::from_table(path, &read_csv(path)?)
}

/// Reads `tasks.csv` (or a task wave CSV) at `path`.
pub fn read_tasks_csv(path: impl AsRef<Path>) -> Result<Vec<TaskRow>, StateError> {
    let path = path.as_ref();
    TaskRow::from_table(path, &read_csv(path)?)
}

/// Writes `rows` to `path` atomically, in the seed's format.
pub fn write_explore_csv(path: impl AsRef<Path>, rows: &[ExploreRow]) -> Result<(), StateError> {
    ExploreRow::to_table(rows).write_atomic(path)
}

/// Writes `rows` to `path` atomically, in the seed's format.
pub fn write_tasks_csv(path: impl AsRef<Path>, rows: &[TaskRow]) -> Result<(), StateError> {
    TaskRow::to_table(rows).write_atomic(path)
}

/// Column positions of a table, resolved once against a list of known columns.
struct Columns<'a> {
    path: &'a Path,
    headers: &'a [String],
    known: &'a [&'a str],
    /// For each known column, its index in the table, if present.
    index: Vec<Option<usize>>,
    /// Indices of the table's unknown columns, in table order.
    extra: Vec<usize>,
}

impl<'a> Columns<'a> {
    fn resolve(
        path: &'a Path,
        table: &'a CsvTable,
        known: &'a [&'a str],
        required: usize,
    ) -> Result<Columns<'a>, StateError> {
        let index: Vec<Option<usize>> = known.iter().map(|k| table.column(k)).collect();
        if let Some(missing) = known[..required]
            .iter()
            .zip(&index)
            .find(|(_, i)| i.is_none())
        {
            return Err(StateError::MissingColumn {
                path: path.to_path_buf(),
                column: (*missing.0).to_owned(),
            });
        }
        let extra = (0..table.headers.len())
            .filter(|i| !known.contains(&table.headers[*i].as_str()))
            .collect();
        Ok(Columns {
            path,
            headers: &table.headers,
            known,
            index,
            extra,
        })
    }

    fn cell<'r>(&self, record: &'r CsvRecord, column: &str) -> &'r str {
        self.known
            .iter()
            .position(|k| *k == column)
            .and_then(|k| self.index[k])
            .map_or("", |i| record.get(i))
    }

    fn text(&self, record: &CsvRecord, column: &str) -> String {
        self.cell(record, column).to_owned()
    }

    fn list(&self, record: &CsvRecord, column: &str) -> Vec<String> {
        split_list(self.cell(record, column))
    }

    fn invalid(&self, record: &CsvRecord, column: &str, expected: &str) -> StateError {
        StateError::InvalidValue {
            path: self.path.to_path_buf(),
            line: record.line,
            column: column.to_owned(),
            value: self.cell(record, column).to_owned(),
            expected: expected.to_owned(),
        }
    }

    fn wave(&self, record: &CsvRecord, column: &str) -> Result<Option<u32>, StateError> {
        let t = self.cell(record, column).trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse().map(Some).map_err(|_| {
            self.invalid(
                record,
                column,
                "a whole number (the wave, 1-based) or empty",
            )
        })
    }

    fn status(&self, record: &CsvRecord, column: &str) -> Result<RowStatus, StateError> {
        self.cell(record, column).parse().map_err(|_| {
            self.invalid(
                record,
                column,
                "one of pending, completed, failed, skipped (or empty)",
            )
        })
    }

    fn flag(&self, record: &CsvRecord, column: &str) -> Result<Option<bool>, StateError> {
        let t = self.cell(record, column).trim();
        if t.is_empty() {
            Ok(None)
        } else if t.eq_ignore_ascii_case("true") {
            Ok(Some(true))
        } else if t.eq_ignore_ascii_case("false") {
            Ok(Some(false))
        } else {
            Err(self.invalid(record, column, "true, false or empty"))
        }
    }

    fn extra(&self, record: &CsvRecord) -> Vec<(String, String)> {
        self.extra
            .iter()
            .map(|&i| (self.headers[i].clone(), record.get(i).to_owned()))
            .collect()
    }
}

/// Splits a `;`-separated list: items trimmed, empty items dropped.
fn split_list(cell: &str) -> Vec<String> {
    cell.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn join_list(items: &[String]) -> String {
    items.join(";")
}

fn wave_text(wave: Option<u32>) -> String {
    wave.map_or_else(String::new, |w| w.to_string())
}

/// Builds a table from each row's known cells and extra pairs. Extra columns
/// follow the known ones in order of first appearance; an extra named like a
/// known column is dropped (the known field wins).
fn build_table<'r>(
    known: &[&str],
    rows: impl Iterator<Item = (Vec<String>, &'r [(String, String)])>,
) -> CsvTable {
    let rows: Vec<_> = rows.collect();
    let mut extra_names: Vec<&str> = Vec::new();
    for (_, extra) in &rows {
        for (name, _) in extra.iter() {
            if !known.contains(&name.as_str()) && !extra_names.contains(&name.as_str()) {
                extra_names.push(name);
            }
        }
    }
    let headers = known
        .iter()
        .copied()
        .chain(extra_names.iter().copied())
        .map(str::to_owned)
        .collect();
    let records = rows
        .iter()
        .map(|(cells, extra)| {
            let mut fields = cells.clone();
            fields.extend(extra_names.iter().map(|name| {
                extra
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or_else(String::new, |(_, v)| v.clone())
            }));
            CsvRecord::new(fields)
        })
        .collect();
    CsvTable {
        headers,
        rows: records,
    }
}

#[cfg(test)]
mod tests;
