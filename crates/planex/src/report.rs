//! Text built from the rows: `prev_context`, the synthesis for the planner,
//! the plans shown at the gates, `context.md` and the terminal summary.
//!
//! All of it follows the seed's templates. Where the seed's text lost its
//! formatting (the copy we have flattened template literals), the leading
//! indentation of continuation lines is two spaces and labels in
//! `context.md` are bold; everything else — wording, order, separators,
//! fallbacks such as `N/A`, `none` and `No previous context available` — is
//! the seed's.

use std::collections::BTreeSet;
use std::fmt;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::rows::{ExploreRow, RowStatus, TaskRow};

/// A task that waits for another because their write scopes overlap
/// (computed by [`crate::scope_waits`]; shown in the plans and summaries
/// built here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeWait {
    /// The task that waits.
    pub task: String,
    /// The task it waits for.
    pub waits_for: String,
    /// The waiting task's glob that overlaps.
    pub scope: String,
    /// The other task's glob it overlaps (often the same).
    pub other_scope: String,
}

impl fmt::Display for ScopeWait {
    /// `T2 waits for T3: overlapping scope out/**`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} waits for {}: ", self.task, self.waits_for)?;
        if self.scope == self.other_scope {
            write!(f, "overlapping scope {}", self.scope)
        } else {
            write!(
                f,
                "overlapping scopes {} and {}",
                self.scope, self.other_scope
            )
        }
    }
}

/// What `prev_context` says when no source has findings.
pub const NO_PREVIOUS_CONTEXT: &str = "No previous context available";

/// The seed's `buildPrevContext`: for every id in `context_from`, in order,
/// a **completed** row with findings contributes
///
/// ```text
/// [Explore <angle>] <findings>          (E* ids, looked up in explore.csv)
///   Key files: <key_files>              (when it has key files)
/// [Task <id>: <title>] <findings>       (T* ids, looked up in tasks.csv)
///   Modified: <files_modified>          (when it modified files)
/// ```
///
/// joined with newlines; [`NO_PREVIOUS_CONTEXT`] when nothing contributes.
/// Ids starting with neither `E` nor `T`, unknown ids and rows that are not
/// completed contribute nothing.
pub fn build_prev_context(
    context_from: &[String],
    explore: &[ExploreRow],
    tasks: &[TaskRow],
) -> String {
    let mut entries: Vec<String> = Vec::new();
    for id in context_from.iter().filter(|id| !id.is_empty()) {
        if id.starts_with('E') {
            if let Some(row) = explore.iter().find(|r| &r.id == id)
                && row.status == RowStatus::Completed
                && !row.findings.is_empty()
            {
                entries.push(format!("[Explore {}] {}", row.angle, row.findings));
                if !row.key_files.is_empty() {
                    entries.push(format!("  Key files: {}", row.key_files.join(";")));
                }
            }
        } else if id.starts_with('T')
            && let Some(row) = tasks.iter().find(|r| &r.id == id)
            && row.status == RowStatus::Completed
            && !row.findings.is_empty()
        {
            entries.push(format!("[Task {}: {}] {}", row.id, row.title, row.findings));
            if !row.files_modified.is_empty() {
                entries.push(format!("  Modified: {}", row.files_modified.join(";")));
            }
        }
    }
    if entries.is_empty() {
        NO_PREVIOUS_CONTEXT.to_owned()
    } else {
        entries.join("\n")
    }
}

/// The phase-3 synthesis of the completed explorations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Synthesis {
    /// One block per completed exploration:
    /// `[E1: architecture] <findings>\n  Key files: <files or none>`, blocks
    /// separated by a blank line.
    pub findings: String,
    /// Files named by more than one completed angle, with the angle ids, in
    /// order of first mention.
    pub shared_files: Vec<(String, Vec<String>)>,
    /// How many explorations completed.
    pub completed: usize,
}

impl Synthesis {
    /// The seed's `sharedFilesContext`: empty without shared files, else
    /// `\nShared files (referenced by multiple angles):\n  <file> ← E1, E2` lines.
    pub fn shared_files_text(&self) -> String {
        if self.shared_files.is_empty() {
            return String::new();
        }
        let lines: Vec<String> = self
            .shared_files
            .iter()
            .map(|(f, ids)| format!("  {f} ← {}", ids.join(", ")))
            .collect();
        format!(
            "\nShared files (referenced by multiple angles):\n{}",
            lines.join("\n")
        )
    }
}

/// Cross-references the completed explorations (the seed's phase 3, step 1).
pub fn synthesize(explore: &[ExploreRow]) -> Synthesis {
    let completed: Vec<&ExploreRow> = explore
        .iter()
        .filter(|r| r.status == RowStatus::Completed)
        .collect();
    let mut refs: Vec<(String, Vec<String>)> = Vec::new();
    for row in &completed {
        for file in &row.key_files {
            match refs.iter_mut().find(|(f, _)| f == file) {
                Some((_, ids)) => {
                    if !ids.contains(&row.id) {
                        ids.push(row.id.clone());
                    }
                }
                None => refs.push((file.clone(), vec![row.id.clone()])),
            }
        }
    }
    let findings = completed
        .iter()
        .map(|r| {
            let files = if r.key_files.is_empty() {
                "none".to_owned()
            } else {
                r.key_files.join(";")
            };
            format!(
                "[{}: {}] {}\n  Key files: {files}",
                r.id, r.angle, r.findings
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    Synthesis {
        findings,
        shared_files: refs.into_iter().filter(|(_, ids)| ids.len() > 1).collect(),
        completed: completed.len(),
    }
}

/// The exploration plan shown at the first gate.
pub fn render_explore_plan(rows: &[ExploreRow]) -> String {
    let mut out = format!("## Exploration Plan ({} angles)\n\n", rows.len());
    for r in rows {
        let _ = writeln!(out, "  - [{}] {}: {}", r.id, r.angle, r.focus);
    }
    out
}

/// The execution plan shown at the second gate. A wave whose tasks wait for
/// an overlapping write scope says so instead of "concurrent", and lists
/// each wait (`waits`, from [`scope_waits`](crate::scope_waits)).
pub fn render_execution_plan(
    explore: &[ExploreRow],
    tasks: &[TaskRow],
    waits: &[ScopeWait],
) -> String {
    let synthesis = synthesize(explore);
    let max_wave = tasks.iter().filter_map(|t| t.wave).max().unwrap_or(0);
    let mut out = format!(
        "## Execution Plan\n\nExplore: {} angles completed\nShared files: {}\nTasks: {} across {} waves\n",
        synthesis.completed,
        synthesis.shared_files.len(),
        tasks.len(),
        max_wave
    );
    for w in 1..=max_wave {
        let in_wave: Vec<&TaskRow> = tasks.iter().filter(|t| t.wave == Some(w)).collect();
        let waiting: Vec<&ScopeWait> = waits
            .iter()
            .filter(|x| in_wave.iter().any(|t| t.id == x.task))
            .collect();
        let how = match waiting.len() {
            0 => "concurrent".to_owned(),
            1 => "1 waits for an overlapping scope".to_owned(),
            n => format!("{n} wait for an overlapping scope"),
        };
        let _ = writeln!(out, "\n### Wave {w} ({} tasks, {how})", in_wave.len());
        for t in in_wave {
            let _ = writeln!(
                out,
                "  - [{}] {} (scope: {}, from: {})",
                t.id,
                t.title,
                t.scope,
                t.context_from.join(";")
            );
        }
        for x in waiting {
            let _ = writeln!(out, "  {x}");
        }
    }
    out
}

/// Counts over the rows, for the report and the terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The session id.
    pub session_id: String,
    /// The session folder.
    pub session_dir: PathBuf,
    /// Explore rows.
    pub explore_total: usize,
    /// Explore rows completed.
    pub explore_completed: usize,
    /// Task rows.
    pub tasks_total: usize,
    /// Tasks completed.
    pub completed: usize,
    /// Tasks failed.
    pub failed: usize,
    /// Tasks skipped.
    pub skipped: usize,
    /// Tasks still pending (paused, interrupted or not reached).
    pub pending: usize,
    /// The highest wave.
    pub waves: u32,
    /// Tasks that wait for an overlapping write scope (see
    /// [`scope_waits`](crate::scope_waits)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_waits: Vec<ScopeWait>,
    /// What the run's task worktrees cost (made, reused, setup time), when
    /// tasks ran in worktrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktrees: Option<orchestrator_core::worktree::PoolStats>,
}

impl Summary {
    /// Counts `explore` and `tasks`.
    pub fn new(
        session_id: &str,
        session_dir: PathBuf,
        explore: &[ExploreRow],
        tasks: &[TaskRow],
    ) -> Summary {
        let count = |s: RowStatus| tasks.iter().filter(|t| t.status == s).count();
        Summary {
            session_id: session_id.to_owned(),
            session_dir,
            explore_total: explore.len(),
            explore_completed: explore
                .iter()
                .filter(|r| r.status == RowStatus::Completed)
                .count(),
            tasks_total: tasks.len(),
            completed: count(RowStatus::Completed),
            failed: count(RowStatus::Failed),
            skipped: count(RowStatus::Skipped),
            pending: count(RowStatus::Pending),
            waves: tasks.iter().filter_map(|t| t.wave).max().unwrap_or(0),
            scope_waits: Vec::new(),
            worktrees: None,
        }
    }

    /// Builder: what the task worktrees cost.
    pub fn with_worktrees(
        mut self,
        stats: Option<orchestrator_core::worktree::PoolStats>,
    ) -> Summary {
        self.worktrees = stats;
        self
    }

    /// Builder: the tasks that wait for an overlapping write scope.
    pub fn with_scope_waits(mut self, waits: Vec<ScopeWait>) -> Summary {
        self.scope_waits = waits;
        self
    }

    /// Whether every task completed.
    pub fn all_completed(&self) -> bool {
        self.completed == self.tasks_total
    }
}

impl fmt::Display for Summary {
    /// The seed's closing summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = self.session_dir.display();
        writeln!(f, "## Lite Planex Complete\n")?;
        writeln!(f, "- **Session**: {}", self.session_id)?;
        writeln!(
            f,
            "- **Explore**: {}/{} angles",
            self.explore_completed, self.explore_total
        )?;
        write!(
            f,
            "- **Tasks**: {}/{} completed, {} failed, {} skipped",
            self.completed, self.tasks_total, self.failed, self.skipped
        )?;
        if self.pending > 0 {
            write!(f, ", {} pending", self.pending)?;
        }
        writeln!(f)?;
        writeln!(f, "- **Waves**: {}", self.waves)?;
        if let Some(stats) = &self.worktrees {
            writeln!(f, "- **Worktrees**: {}", worktree_cost(stats))?;
        }
        write_scope_waits(f, &self.scope_waits)?;
        writeln!(f)?;
        writeln!(f, "**Results**: {dir}/results.csv")?;
        writeln!(f, "**Report**: {dir}/context.md")?;
        writeln!(f, "**Discoveries**: {dir}/discoveries.ndjson")
    }
}

/// What a run's worktrees cost, in words: `2 made (setup 1.4s, git 0.3s), 6 reused`.
pub fn worktree_cost(stats: &orchestrator_core::worktree::PoolStats) -> String {
    format!(
        "{} made (setup {:.1}s, git {:.1}s), {} reused",
        stats.made,
        stats.setup_ms as f64 / 1000.0,
        stats.git_ms as f64 / 1000.0,
        stats.reused
    )
}

/// The summary's list of scope waits (nothing when there are none).
pub fn write_scope_waits(f: &mut impl fmt::Write, waits: &[ScopeWait]) -> fmt::Result {
    if waits.is_empty() {
        return Ok(());
    }
    writeln!(
        f,
        "- **Serialized**: {} {} for a task with an overlapping write scope:",
        waits.len(),
        if waits.len() == 1 {
            "task waited"
        } else {
            "tasks waited"
        }
    )?;
    for w in waits {
        writeln!(f, "  - {w}")?;
    }
    Ok(())
}

/// What `context.md` needs besides the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportHeader<'a> {
    /// The session id.
    pub session_id: &'a str,
    /// The requirement.
    pub requirement: &'a str,
    /// When the run completed (the seed writes UTC+8, see
    /// [`crate::session::session_timestamp`]).
    pub completed_at: &'a str,
    /// The concurrency used.
    pub concurrency: usize,
}

/// `context.md`: the seed's execution report, every field it lists.
///
/// Where tasks waited for an overlapping write scope (`waits`), a section
/// `## Serialized by Scope` before the modified files lists them.
pub fn render_context_md(
    header: &ReportHeader<'_>,
    explore: &[ExploreRow],
    tasks: &[TaskRow],
    waits: &[ScopeWait],
) -> String {
    let max_wave = tasks.iter().filter_map(|t| t.wave).max().unwrap_or(0);
    let count = |s: RowStatus| tasks.iter().filter(|t| t.status == s).count();
    let mut out = String::new();
    let _ = write!(
        out,
        "# Lite Planex Execution Report\n\n\
         **Session**: {}\n\
         **Requirement**: {}\n\
         **Completed**: {}\n\
         **Waves**: {max_wave} | **Concurrency**: {}\n\n\
         ---\n\n\
         ## Summary\n\n\
         | Metric | Count |\n\
         |--------|-------|\n\
         | Explore Angles | {} |\n\
         | Total Tasks | {} |\n\
         | Completed | {} |\n\
         | Failed | {} |\n\
         | Skipped | {} |\n\
         | Waves | {max_wave} |\n\n\
         ---\n\n\
         ## Exploration Results\n\n",
        header.session_id,
        header.requirement,
        header.completed_at,
        header.concurrency,
        explore.len(),
        tasks.len(),
        count(RowStatus::Completed),
        count(RowStatus::Failed),
        count(RowStatus::Skipped),
    );
    let explore_blocks: Vec<String> = explore.iter().map(explore_block).collect();
    out.push_str(&explore_blocks.join("\n\n"));
    out.push_str("\n\n---\n\n## Task Results\n\n");
    let task_blocks: Vec<String> = tasks.iter().map(task_block).collect();
    out.push_str(&task_blocks.join("\n\n---\n\n"));
    if !waits.is_empty() {
        out.push_str(
            "\n\n---\n\n## Serialized by Scope\n\n\
             Tasks whose write scopes overlap never run at the same time:\n\n",
        );
        let lines: Vec<String> = waits.iter().map(|w| format!("- {w}")).collect();
        out.push_str(&lines.join("\n"));
    }
    out.push_str("\n\n---\n\n## All Modified Files\n\n");
    let mut seen = BTreeSet::new();
    let files: Vec<String> = tasks
        .iter()
        .flat_map(|t| t.files_modified.iter())
        .filter(|f| !f.is_empty() && seen.insert(f.as_str()))
        .map(|f| format!("- {f}"))
        .collect();
    if files.is_empty() {
        out.push_str("None");
    } else {
        out.push_str(&files.join("\n"));
    }
    out.push('\n');
    out
}

/// `s`, or `fallback` when it is empty.
fn or(s: &str, fallback: &str) -> String {
    if s.is_empty() {
        fallback.to_owned()
    } else {
        s.to_owned()
    }
}

/// One exploration angle's block of the report.
fn explore_block(e: &ExploreRow) -> String {
    format!(
        "### {}: {} ({})\n{}\nKey files: {}",
        e.id,
        e.angle,
        e.status,
        or(&e.findings, "N/A"),
        or(&e.key_files.join(";"), "none")
    )
}

/// One task's block of the report: its fields table, then its texts.
fn task_block(t: &TaskRow) -> String {
    let cell = |s: &str, fallback: &str| table_cell(&or(s, fallback));
    let tests = t.tests_passed.map(|b| b.to_string()).unwrap_or_default();
    format!(
        "### {}: {} ({})\n\n\
         | Field | Value |\n\
         |-------|-------|\n\
         | Wave | {} |\n\
         | Scope | {} |\n\
         | Dependencies | {} |\n\
         | Context From | {} |\n\
         | Tests Passed | {} |\n\
         | Acceptance Met | {} |\n\
         | Error | {} |\n\n\
         **Description**: {}\n\n\
         **Test Cases**: {}\n\n\
         **Acceptance Criteria**: {}\n\n\
         **Hints**: {}\n\n\
         **Execution Directives**: {}\n\n\
         **Findings**: {}\n\n\
         **Files Modified**: {}",
        t.id,
        t.title,
        t.status,
        t.wave.map(|w| w.to_string()).unwrap_or_default(),
        cell(&t.scope, "none"),
        cell(&t.deps.join(";"), "none"),
        cell(&t.context_from.join(";"), "none"),
        cell(&tests, "N/A"),
        cell(&t.acceptance_met, "N/A"),
        cell(&t.error, "none"),
        t.description,
        or(&t.test, "N/A"),
        or(&t.acceptance_criteria, "N/A"),
        or(&t.hints, "N/A"),
        or(&t.execution_directives, "N/A"),
        or(&t.findings, "N/A"),
        or(&t.files_modified.join(";"), "none"),
    )
}

/// A value safe inside a markdown table cell: `|` escaped, line breaks as `<br>`.
fn table_cell(s: &str) -> String {
    s.replace('|', "\\|")
        .replace("\r\n", "<br>")
        .replace('\n', "<br>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explore(
        id: &str,
        angle: &str,
        status: RowStatus,
        findings: &str,
        files: &[&str],
    ) -> ExploreRow {
        let mut r = ExploreRow::new(id, angle, "d", "f");
        r.status = status;
        r.findings = findings.into();
        r.key_files = files.iter().map(|s| (*s).to_owned()).collect();
        r
    }

    fn task(id: &str, title: &str, status: RowStatus, findings: &str, files: &[&str]) -> TaskRow {
        let mut r = TaskRow::new(id, title, "d");
        r.status = status;
        r.findings = findings.into();
        r.files_modified = files.iter().map(|s| (*s).to_owned()).collect();
        r
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// One case: context_from, expected prev_context.
    fn check(context_from: &[&str], expected: &str) {
        let e = vec![
            explore(
                "E1",
                "architecture",
                RowStatus::Completed,
                "BaseService in src/services/",
                &["src/services/Base.ts", "src/app.ts"],
            ),
            explore("E2", "dependencies", RowStatus::Completed, "uses jose", &[]),
            explore("E3", "testing", RowStatus::Failed, "half", &["x"]),
            explore("E4", "security", RowStatus::Completed, "", &["y"]),
        ];
        let t = vec![
            task(
                "T1",
                "Setup types",
                RowStatus::Completed,
                "Created types at src/types/auth.ts",
                &["src/types/auth.ts"],
            ),
            task("T2", "Core", RowStatus::Completed, "core done", &[]),
            task("T3", "Broken", RowStatus::Failed, "nope", &["z"]),
            task("T4", "Waiting", RowStatus::Pending, "", &[]),
        ];
        assert_eq!(
            build_prev_context(&ids(context_from), &e, &t),
            expected,
            "context_from {context_from:?}"
        );
    }

    #[test]
    fn prev_context_follows_the_seed_exactly() {
        check(&[], NO_PREVIOUS_CONTEXT);
        check(&["E3", "E4", "T3", "T4", "X1", "E9"], NO_PREVIOUS_CONTEXT);
        check(
            &["E1", "E2", "T1"],
            "[Explore architecture] BaseService in src/services/\n  Key files: src/services/Base.ts;src/app.ts\n[Explore dependencies] uses jose\n[Task T1: Setup types] Created types at src/types/auth.ts\n  Modified: src/types/auth.ts",
        );
        check(
            &["T2", "E2"],
            "[Task T2: Core] core done\n[Explore dependencies] uses jose",
        );
    }

    #[test]
    fn synthesis_names_files_shared_by_several_angles() {
        let rows = vec![
            explore(
                "E1",
                "architecture",
                RowStatus::Completed,
                "a",
                &["src/a.rs", "src/b.rs"],
            ),
            explore("E2", "testing", RowStatus::Completed, "b", &["src/b.rs"]),
            explore("E3", "security", RowStatus::Failed, "c", &["src/a.rs"]),
            explore(
                "E4",
                "patterns",
                RowStatus::Completed,
                "d",
                &["src/b.rs", "src/b.rs"],
            ),
        ];
        let s = synthesize(&rows);
        assert_eq!(s.completed, 3);
        assert_eq!(
            s.shared_files,
            vec![("src/b.rs".to_owned(), ids(&["E1", "E2", "E4"]))]
        );
        assert_eq!(
            s.shared_files_text(),
            "\nShared files (referenced by multiple angles):\n  src/b.rs ← E1, E2, E4"
        );
        assert_eq!(
            s.findings,
            "[E1: architecture] a\n  Key files: src/a.rs;src/b.rs\n\n[E2: testing] b\n  Key files: src/b.rs\n\n[E4: patterns] d\n  Key files: src/b.rs;src/b.rs"
        );
        assert_eq!(synthesize(&[]).shared_files_text(), "");
    }

    #[test]
    fn summary_counts_and_renders() {
        let t = vec![
            task("T1", "a", RowStatus::Completed, "", &[]),
            task("T2", "b", RowStatus::Failed, "", &[]),
            task("T3", "c", RowStatus::Skipped, "", &[]),
            task("T4", "d", RowStatus::Pending, "", &[]),
        ];
        let e = vec![explore("E1", "a", RowStatus::Completed, "x", &[])];
        let s = Summary::new("wpp-1", PathBuf::from("/r/s"), &e, &t);
        assert!(!s.all_completed());
        assert_eq!(
            s.to_string(),
            "## Lite Planex Complete\n\n- **Session**: wpp-1\n- **Explore**: 1/1 angles\n- **Tasks**: 1/4 completed, 1 failed, 1 skipped, 1 pending\n- **Waves**: 0\n\n**Results**: /r/s/results.csv\n**Report**: /r/s/context.md\n**Discoveries**: /r/s/discoveries.ndjson\n"
        );
    }

    #[test]
    fn table_cells_escape_pipes_and_newlines() {
        assert_eq!(table_cell("a|b\nc"), "a\\|b<br>c");
    }
}
