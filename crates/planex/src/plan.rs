//! Plans: reading the planner's answers into rows, and validating a task
//! list (from the planner or a tasks.csv) before anything runs.

use orchestrator_core::waves::{
    WaveError, WaveOptions, WaveTask, compute_waves, is_exploration_id,
};
use serde_json::Value;

use crate::error::PlanexError;
use crate::protocol::{list_field, str_field};
use crate::rows::{ExploreRow, RowStatus, TaskRow};

/// What [`validate_tasks`] found besides errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidatedPlan {
    /// The highest wave (0 without tasks).
    pub max_wave: u32,
    /// Problems that do not stop the run (e.g. `E*` context ids in a session
    /// without `explore.csv`).
    pub warnings: Vec<String>,
}

/// Where the rows came from, for messages: a file with the line of each row,
/// or a description such as `planner answer`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowSource<'a> {
    /// `tasks.csv` path or `planner answer`.
    pub name: &'a str,
    /// 1-based line of each row, when the rows come from a file.
    pub lines: Option<&'a [u64]>,
}

impl RowSource<'_> {
    /// `line 3` or `row 2`, for the 1-based row position `row`.
    fn locate(&self, row: usize) -> String {
        match self.lines.and_then(|l| l.get(row.wrapping_sub(1))) {
            Some(line) => format!("line {line}"),
            None => format!("row {row}"),
        }
    }
}

/// Checks a task list and writes each row's `wave`.
///
/// Problems (all reported together where possible, each naming the row or
/// line and the id): an empty id; a task id starting with `E` (those name
/// exploration rows); a duplicate id; a dependency or task `context_from`
/// id that names no task; an `E*` id that names no row of `explore` (when
/// the session has an explore.csv — without one such ids are ignored with a
/// warning); a scope glob that is absolute, has a `..` segment or does not
/// compile; a dependency cycle (named in order).
pub fn validate_tasks(
    rows: &mut [TaskRow],
    explore: Option<&[ExploreRow]>,
) -> Result<ValidatedPlan, PlanexError> {
    validate_tasks_from(
        rows,
        explore,
        RowSource {
            name: "tasks",
            lines: None,
        },
    )
}

pub(crate) fn validate_tasks_from(
    rows: &mut [TaskRow],
    explore: Option<&[ExploreRow]>,
    source: RowSource<'_>,
) -> Result<ValidatedPlan, PlanexError> {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = source.locate(i + 1);
        if row.id.trim().is_empty() {
            problems.push(format!("{at}: empty task id"));
        } else if is_exploration_id(&row.id) {
            problems.push(format!(
                "{at}: task id {:?} starts with E, which names exploration rows; use T1, T2, …",
                row.id
            ));
        }
        for glob in row.scope_globs() {
            if let Some(problem) = crate::scope_match::scope_problem(&glob) {
                problems.push(format!("{at}: task {:?}: {problem}", row.id));
            }
        }
        for id in row.context_from.iter().filter(|id| is_exploration_id(id)) {
            match explore {
                Some(explore) if !explore.iter().any(|e| &e.id == id) => problems.push(format!(
                    "{at}: task {:?} takes context from {id:?}, which is not a row of explore.csv",
                    row.id
                )),
                Some(_) => {}
                None => warnings.push(format!(
                    "{at}: task {:?} takes context from exploration {id:?}, but this session has no explore.csv; ignored",
                    row.id
                )),
            }
        }
    }
    if !problems.is_empty() {
        return Err(PlanexError::InvalidPlan {
            source_name: source.name.to_owned(),
            problems,
        });
    }
    let tasks: Vec<WaveTask<'_>> = rows
        .iter()
        .map(|r| WaveTask {
            id: &r.id,
            deps: r.deps.iter().map(String::as_str).collect(),
            context_from: r.context_from.iter().map(String::as_str).collect(),
        })
        .collect();
    let waves = compute_waves(&tasks, WaveOptions { lenient: false }).map_err(|e| {
        PlanexError::InvalidPlan {
            source_name: source.name.to_owned(),
            problems: vec![describe_wave_error(&e, &source)],
        }
    })?;
    let by_row = waves.by_row().to_vec();
    let max_wave = waves.max_wave();
    drop(tasks);
    for (row, wave) in rows.iter_mut().zip(by_row) {
        row.wave = Some(wave);
    }
    Ok(ValidatedPlan { max_wave, warnings })
}

fn describe_wave_error(e: &WaveError, source: &RowSource<'_>) -> String {
    match e {
        WaveError::DuplicateId { id, row, first_row } => format!(
            "{}: duplicate task id {id:?} (first used at {})",
            source.locate(*row),
            source.locate(*first_row)
        ),
        WaveError::UnknownDep { row, task, dep } => format!(
            "{}: task {task:?} depends on unknown task {dep:?}",
            source.locate(*row)
        ),
        WaveError::UnknownContext {
            row,
            task,
            source_id,
        } => format!(
            "{}: task {task:?} takes context from {source_id:?}, which is neither an exploration id (E*) nor a known task",
            source.locate(*row)
        ),
        // A cycle, or a kind added later: the error's own message.
        _ => e.to_string(),
    }
}

/// The planner's angles as explore rows, numbered `E1`, `E2`, … in order
/// (whatever ids the planner used: nothing refers to them yet, and
/// `prev_context` only looks up `E*` ids), wave 1, pending.
pub(crate) fn angles_from_answer(answer: &Value) -> Vec<ExploreRow> {
    answer
        .get("angles")
        .and_then(Value::as_array)
        .map(|angles| {
            angles
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let mut row = ExploreRow::new(
                        format!("E{}", i + 1),
                        str_field(a, "angle"),
                        str_field(a, "description"),
                        str_field(a, "focus"),
                    );
                    row.wave = Some(1);
                    row
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The planner's tasks as pending task rows (waves not computed yet).
pub(crate) fn tasks_from_answer(answer: &Value) -> Vec<TaskRow> {
    answer
        .get("tasks")
        .and_then(Value::as_array)
        .map(|tasks| {
            tasks
                .iter()
                .map(|t| TaskRow {
                    id: str_field(t, "id").trim().to_owned(),
                    title: str_field(t, "title"),
                    description: str_field(t, "description"),
                    test: str_field(t, "test"),
                    acceptance_criteria: str_field(t, "acceptance_criteria"),
                    scope: str_field(t, "scope"),
                    hints: str_field(t, "hints"),
                    execution_directives: str_field(t, "execution_directives"),
                    deps: list_field(t.get("deps")),
                    context_from: list_field(t.get("context_from")),
                    status: RowStatus::Pending,
                    ..TaskRow::default()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(id: &str, deps: &[&str], context_from: &[&str]) -> TaskRow {
        let mut t = TaskRow::new(id, id, "d");
        t.deps = deps.iter().map(|s| (*s).to_owned()).collect();
        t.context_from = context_from.iter().map(|s| (*s).to_owned()).collect();
        t
    }

    fn explore_rows() -> Vec<ExploreRow> {
        vec![ExploreRow::new("E1", "a", "d", "f")]
    }

    /// Validates and returns the waves, or the error message.
    fn check(rows: &mut [TaskRow], lines: Option<&[u64]>) -> Result<Vec<u32>, String> {
        let explore = explore_rows();
        validate_tasks_from(
            rows,
            Some(&explore),
            RowSource {
                name: "s/tasks.csv",
                lines,
            },
        )
        .map(|_| rows.iter().map(|r| r.wave.unwrap_or(0)).collect())
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_diamond_gets_three_waves() {
        let mut rows = vec![
            task("T1", &[], &["E1"]),
            task("T2", &["T1"], &[]),
            task("T3", &["T1"], &[]),
            task("T4", &["T2"], &["T3"]),
        ];
        assert_eq!(check(&mut rows, None), Ok(vec![1, 2, 2, 3]));
    }

    #[test]
    fn problems_name_the_line_and_id() {
        let lines = [2u64, 3, 5];
        assert_eq!(
            check(&mut [task("T1", &[], &[]), task("T2", &["T9"], &[])], Some(&lines)),
            Err("invalid task plan in s/tasks.csv: line 3: task \"T2\" depends on unknown task \"T9\"".into())
        );
        assert_eq!(
            check(&mut [task("T1", &[], &[]), task("T1", &[], &[])], Some(&lines)),
            Err("invalid task plan in s/tasks.csv: line 3: duplicate task id \"T1\" (first used at line 2)".into())
        );
        assert_eq!(
            check(&mut [task("T1", &[], &["E7"]), task("Export", &[], &[]), task("", &[], &[])], None),
            Err("invalid task plan in s/tasks.csv: row 1: task \"T1\" takes context from \"E7\", which is not a row of explore.csv; row 2: task id \"Export\" starts with E, which names exploration rows; use T1, T2, …; row 3: empty task id".into())
        );
        assert_eq!(
            check(
                &mut [
                    task("T1", &["T3"], &[]),
                    task("T2", &["T1"], &[]),
                    task("T3", &[], &["T2"])
                ],
                None
            ),
            Err("invalid task plan in s/tasks.csv: dependency cycle: T1 → T3 → T2 → T1".into())
        );
    }

    #[test]
    fn exploration_ids_without_explore_csv_are_a_warning() {
        let mut rows = vec![task("T1", &[], &["E1"])];
        let plan = validate_tasks(&mut rows, None).unwrap();
        assert_eq!(plan.max_wave, 1);
        assert_eq!(plan.warnings.len(), 1);
        assert!(plan.warnings[0].contains("no explore.csv"));
    }

    #[test]
    fn planner_answers_become_rows() {
        let angles = angles_from_answer(&json!({"type": "feature", "complexity": "Low",
            "angles": [{"id": "A", "angle": "architecture", "description": "d", "focus": "f"},
                       {"id": "B", "angle": "testing", "description": "d2", "focus": "f2"}]}));
        assert_eq!(
            angles
                .iter()
                .map(|a| (a.id.as_str(), a.angle.as_str(), a.wave))
                .collect::<Vec<_>>(),
            [("E1", "architecture", Some(1)), ("E2", "testing", Some(1))]
        );
        let tasks = tasks_from_answer(&json!({"tasks": [
            {"id": " T1 ", "title": "t", "description": "d", "deps": [], "context_from": "E1;E2"},
            {"id": "T2", "title": "u", "description": "e", "deps": ["T1"], "context_from": ["T1"]}]}));
        assert_eq!(tasks[0].id, "T1");
        assert_eq!(tasks[0].context_from, ["E1", "E2"]);
        assert_eq!(tasks[1].deps, ["T1"]);
    }
}
