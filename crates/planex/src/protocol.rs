//! What planex sends to agents and what it accepts back.
//!
//! Every request planex makes carries, in [`AgentRequest::context`], a
//! [`PlanexContext`] as JSON (`{"kind": "planex.task", "version": 1, …}`).
//! LLM agents read the instruction (the seed's templates, rendered here);
//! builtin agents such as [`ShellTaskAgent`](crate::ShellTaskAgent) read the
//! context. Request ids: `plan-angles` and `plan-tasks` for the planner, the
//! row id (`E1`, `T3`) for explore and task rows.
//!
//! Answers are JSON, validated against the schemas below before planex looks
//! at them ([`orchestrator_core::agent::AgentExt::run_validated`]). List
//! fields (`key_files`, `files_modified`, `deps`, `context_from`) may be a
//! JSON array or a `;`-separated string.
//!
//! [`AgentRequest::context`]: orchestrator_core::agent::AgentRequest::context

use crate::rows::{ExploreRow, RowStatus, TaskRow};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Version of the [`PlanexContext`] contract.
pub const CONTEXT_VERSION: u32 = 1;

/// Request id of the planner call that picks exploration angles.
pub const PLAN_ANGLES_ID: &str = "plan-angles";
/// Request id of the planner call that decomposes the requirement into tasks.
pub const PLAN_TASKS_ID: &str = "plan-tasks";

/// Longest `findings` kept for an explore row (the seed's limit), in characters.
pub const EXPLORE_FINDINGS_MAX: usize = 800;
/// Longest `findings` kept for a task row (the seed's limit), in characters.
pub const TASK_FINDINGS_MAX: usize = 500;

/// The machine-readable context of a planex agent request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum PlanexContext {
    /// Phase 1: pick 1–4 exploration angles for the requirement.
    #[serde(rename = "planex.plan_angles")]
    PlanAngles {
        /// Contract version ([`CONTEXT_VERSION`]).
        version: u32,
        /// The requirement.
        requirement: String,
    },
    /// Phase 2: explore one angle.
    #[serde(rename = "planex.explore")]
    Explore {
        /// Contract version.
        version: u32,
        /// The session folder.
        session_dir: String,
        /// The shared discovery board (append-only NDJSON).
        discoveries: String,
        /// The row, every column as text.
        row: WireExploreRow,
    },
    /// Phase 3: decompose the requirement into 3–10 tasks.
    #[serde(rename = "planex.plan_tasks")]
    PlanTasks {
        /// Contract version.
        version: u32,
        /// The requirement.
        requirement: String,
        /// The synthesis of the explorations (empty when all failed).
        findings: String,
        /// Files named by several angles: `[file, [ids]]`.
        shared_files: Vec<(String, Vec<String>)>,
        /// Whether every exploration failed and the plan must come from the
        /// requirement alone.
        without_exploration: bool,
    },
    /// Phase 4: execute one task.
    #[serde(rename = "planex.task")]
    Task {
        /// Contract version.
        version: u32,
        /// The session folder.
        session_dir: String,
        /// The shared discovery board.
        discoveries: String,
        /// The row, every column as text, plus `prev_context`.
        row: WireTaskRow,
    },
}

/// An explore row as agents see it: every column as CSV text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct WireExploreRow {
    pub id: String,
    pub angle: String,
    pub description: String,
    pub focus: String,
    pub deps: String,
    pub wave: String,
}

impl From<&ExploreRow> for WireExploreRow {
    fn from(r: &ExploreRow) -> Self {
        WireExploreRow {
            id: r.id.clone(),
            angle: r.angle.clone(),
            description: r.description.clone(),
            focus: r.focus.clone(),
            deps: r.deps.join(";"),
            wave: r.wave.map(|w| w.to_string()).unwrap_or_default(),
        }
    }
}

/// A task row as agents see it: the input columns of the seed's per-wave CSV
/// (`id` … `wave`, then `prev_context`), every value as CSV text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct WireTaskRow {
    pub id: String,
    pub title: String,
    pub description: String,
    pub test: String,
    pub acceptance_criteria: String,
    pub scope: String,
    pub hints: String,
    pub execution_directives: String,
    pub deps: String,
    pub context_from: String,
    pub wave: String,
    pub prev_context: String,
}

impl WireTaskRow {
    /// The row with its `prev_context`.
    pub fn new(r: &TaskRow, prev_context: &str) -> Self {
        WireTaskRow {
            id: r.id.clone(),
            title: r.title.clone(),
            description: r.description.clone(),
            test: r.test.clone(),
            acceptance_criteria: r.acceptance_criteria.clone(),
            scope: r.scope.clone(),
            hints: r.hints.clone(),
            execution_directives: r.execution_directives.clone(),
            deps: r.deps.join(";"),
            context_from: r.context_from.join(";"),
            wave: r.wave.map(|w| w.to_string()).unwrap_or_default(),
            prev_context: prev_context.to_owned(),
        }
    }
}

fn list_schema() -> Value {
    json!({"type": ["array", "string"], "items": {"type": "string"}})
}

/// Schema of the planner's exploration plan:
/// `{type, complexity, angles: [1..4 × {id, angle, description, focus}]}`.
pub fn angles_schema() -> Value {
    json!({
        "type": "object",
        "required": ["type", "complexity", "angles"],
        "properties": {
            "type": {"type": "string"},
            "complexity": {"type": "string"},
            "angles": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "required": ["id", "angle", "description", "focus"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "angle": {"type": "string", "minLength": 1},
                        "description": {"type": "string"},
                        "focus": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// Schema of an explore answer: `{id, status, findings, key_files, error}`.
pub fn explore_schema() -> Value {
    json!({
        "type": "object",
        "required": ["id", "status", "findings"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["completed", "failed"]},
            "findings": {"type": "string"},
            "key_files": list_schema(),
            "error": {"type": "string"}
        }
    })
}

/// Schema of the planner's task list: `{tasks: [3..10 × task]}`.
pub fn tasks_schema() -> Value {
    json!({
        "type": "object",
        "required": ["tasks"],
        "properties": {
            "tasks": {
                "type": "array",
                "minItems": 3,
                "maxItems": 10,
                "items": {
                    "type": "object",
                    "required": ["id", "title", "description"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "test": {"type": "string"},
                        "acceptance_criteria": {"type": "string"},
                        "scope": {"type": "string"},
                        "hints": {"type": "string"},
                        "execution_directives": {"type": "string"},
                        "deps": list_schema(),
                        "context_from": list_schema()
                    }
                }
            }
        }
    })
}

/// Schema of a task report: the seed's
/// `{id, status, findings, files_modified, tests_passed, acceptance_met, error}`
/// plus `criteria: [{criterion, status: PASS|FAIL, explanation}]`.
pub fn task_report_schema() -> Value {
    json!({
        "type": "object",
        "required": ["id", "status", "findings", "tests_passed"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["completed", "failed"]},
            "findings": {"type": "string"},
            "files_modified": list_schema(),
            "tests_passed": {"type": "boolean"},
            "acceptance_met": {"type": "string"},
            "error": {"type": "string"},
            "criteria": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["criterion", "status"],
                    "properties": {
                        "criterion": {"type": "string"},
                        "status": {"type": "string"},
                        "explanation": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// Reads a list field: an array of strings, or a `;`-separated string.
pub fn list_field(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads a string field (missing or not a string: empty).
pub fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Reads a `status` field: `completed` or `failed` (anything else: failed).
pub fn status_field(value: &Value) -> RowStatus {
    match value.get("status").and_then(Value::as_str) {
        Some(s) if s.trim().eq_ignore_ascii_case("completed") => RowStatus::Completed,
        _ => RowStatus::Failed,
    }
}

/// `text` cut to `max` characters (an ellipsis marks the cut).
pub fn truncate_chars(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) if max > 0 => {
            let cut = text[..i].char_indices().nth(max - 1).map_or(i, |(j, _)| j);
            format!("{}…", &text[..cut])
        }
        Some(_) => String::new(),
        None => text.to_owned(),
    }
}

/// The planner instruction for phase 1 (the seed's analysis prompt).
pub fn plan_angles_instruction(requirement: &str) -> String {
    format!(
        "PURPOSE: Analyze requirement complexity and select 1-4 exploration angles for codebase discovery before implementation.\n\
         TASK:\n\
         • Classify requirement type (feature/bugfix/refactor/security/performance)\n\
         • Assess complexity (Low: 1 angle, Medium: 2-3, High: 3-4)\n\
         • Select exploration angles from: architecture, dependencies, integration-points, testing, patterns, security, performance, state-management, error-handling, edge-cases\n\
         • For each angle, define focus keywords and what to discover\n\
         MODE: analysis\n\
         CONTEXT: @**/*\n\
         EXPECTED: JSON object: {{type: string, complexity: string, angles: [{{id: string, angle: string, description: string, focus: string}}]}}. Each angle id = E1, E2, etc.\n\
         CONSTRAINTS: 1-4 angles | Angles must be distinct | Each angle must have clear focus\n\n\
         REQUIREMENT: {requirement}\n"
    )
}

/// The explore instruction for one row (the seed's template).
pub fn explore_instruction(row: &ExploreRow, session_dir: &str, discoveries: &str) -> String {
    format!(
        "## EXPLORATION ASSIGNMENT\n\n\
         ### MANDATORY FIRST STEPS\n\
         1. Read shared discoveries: {discoveries} (if exists, skip if not)\n\
         2. Read project context: .workflow/project-tech.json (if exists)\n\n\
         ---\n\n\
         ## Your Exploration\n\n\
         **Exploration ID**: {id}\n\
         **Angle**: {angle}\n\
         **Description**: {description}\n\
         **Focus**: {focus}\n\n\
         ---\n\n\
         ## Exploration Protocol\n\n\
         1. **Read discoveries**: Load {discoveries} for shared findings\n\
         2. **Explore**: Search the codebase from the {angle} perspective\n\
         3. **Discover**: Find relevant files, patterns, integration points, constraints\n\
         4. **Share discoveries**: Append findings to shared board:\n\
         ```bash\n\
         echo '{{\"ts\":\"<ISO8601>\",\"worker\":\"{id}\",\"type\":\"<type>\",\"data\":{{...}}}}' >> {discoveries}\n\
         ```\n\
         5. **Report result**: Return JSON as described below\n\n\
         ---\n\n\
         ## What to Look For\n\n\
         - Existing patterns and conventions to follow\n\
         - Integration points and module boundaries\n\
         - Dependencies and constraints\n\
         - Test infrastructure and coverage\n\
         - Risks and potential blockers\n\n\
         ## Discovery Types to Share\n\n\
         - `code_pattern`: {{name, file, description}} — reusable patterns found\n\
         - `integration_point`: {{file, description, exports[]}} — module connection points\n\
         - `convention`: {{naming, imports, formatting}} — code style conventions\n\
         - `tech_stack`: {{framework, version, config}} — technology stack details\n\n\
         ---\n\n\
         ## Output\n\n\
         Return JSON:\n\
         {{\n  \"id\": \"{id}\",\n  \"status\": \"completed\" | \"failed\",\n  \"findings\": \"Concise summary of {angle} discoveries (max 800 chars)\",\n  \"key_files\": [\"relevant/file1.ts\", \"relevant/file2.ts\"],\n  \"error\": \"\"\n}}\n\n\
         (Session folder: {session_dir})\n",
        id = row.id,
        angle = row.angle,
        description = row.description,
        focus = row.focus,
    )
}

/// The planner instruction for phase 3 (the seed's decomposition prompt).
pub fn plan_tasks_instruction(
    requirement: &str,
    findings: &str,
    shared_files: &str,
    without_exploration: bool,
) -> String {
    let findings = if without_exploration {
        "(none: every exploration failed — plan directly from the requirement, without exploration findings)"
    } else {
        findings
    };
    format!(
        "PURPOSE: Based on exploration findings, decompose requirement into 3-10 atomic execution tasks. Each task must include test cases, acceptance criteria, and link to relevant exploration findings.\n\
         TASK:\n\
         • Use exploration findings to inform task decomposition\n\
         • Each task must be self-contained with specific implementation instructions\n\
         • Link tasks to exploration rows via context_from (E1, E2, etc.)\n\
         • Define dependencies between tasks (T1 must finish before T2, etc.)\n\
         • For each task: define test cases, acceptance criteria, scope, hints, and execution directives\n\
         • Ensure same-wave tasks have non-overlapping scopes\n\
         MODE: analysis\n\
         CONTEXT: @**/*\n\
         EXPECTED: JSON object with tasks array. Each task: {{id: string, title: string, description: string, test: string, acceptance_criteria: string, scope: string, hints: string, execution_directives: string, deps: string[], context_from: string[]}}.\n\
         - id: T1, T2, etc.\n\
         - description: what to implement (specific enough for an agent)\n\
         - test: what tests to write (e.g. 'Unit test: X returns Y')\n\
         - acceptance_criteria: what defines done (e.g. 'API returns 200'); several criteria separated by ';'\n\
         - scope: target glob (e.g. 'src/auth/**') — non-overlapping within same wave\n\
         - hints: tips + ref files (format: 'tips || file1;file2')\n\
         - execution_directives: verification commands (e.g. 'npm test --bail')\n\
         - deps: task IDs that must complete first (T*)\n\
         - context_from: explore (E*) and task (T*) IDs whose findings are needed\n\
         CONSTRAINTS: 3-10 tasks | Atomic | No circular deps | Concrete test/acceptance_criteria | Non-overlapping scopes per wave\n\n\
         EXPLORATION FINDINGS:\n{findings}\n{shared_files}\n\n\
         REQUIREMENT: {requirement}\n"
    )
}

/// The execute instruction for one task row (the seed's template); the retry
/// executor appends the exit criteria and how to report them.
pub fn execute_instruction(row: &WireTaskRow, session_dir: &str, discoveries: &str) -> String {
    format!(
        "## TASK ASSIGNMENT\n\n\
         ### MANDATORY FIRST STEPS\n\
         1. Read shared discoveries: {discoveries} (if exists, skip if not)\n\
         2. Read project context: .workflow/project-tech.json (if exists)\n\n\
         ---\n\n\
         ## Your Task\n\n\
         **Task ID**: {id}\n\
         **Title**: {title}\n\
         **Description**: {description}\n\
         **Scope**: {scope}\n\n\
         ### Implementation Hints & Reference Files\n\
         {hints}\n\n\
         > Format: `tips text || file1;file2`. Read ALL reference files (after ||) before starting. Apply tips (before ||) as guidance.\n\n\
         ### Execution Directives\n\
         {directives}\n\n\
         > Commands to run for verification, tool restrictions, or environment requirements.\n\n\
         ### Test Cases\n\
         {test}\n\n\
         ### Acceptance Criteria\n\
         {acceptance}\n\n\
         ### Previous Context (from exploration and predecessor tasks)\n\
         {prev}\n\n\
         ---\n\n\
         ## Execution Protocol\n\n\
         1. **Read references**: Parse {{hints}} — read all files listed after `||` to understand existing patterns\n\
         2. **Read discoveries**: Load {discoveries} for shared exploration findings\n\
         3. **Use context**: Apply previous tasks' findings from prev_context above\n\
         4. **Stay in scope**: ONLY create/modify files within {scope} — do NOT touch files outside this boundary\n\
         5. **Apply hints**: Follow implementation tips from {{hints}} (before `||`)\n\
         6. **Execute**: Implement the task as described\n\
         7. **Write tests**: Implement the test cases defined above\n\
         8. **Run directives**: Execute commands from {{execution_directives}} to verify your work\n\
         9. **Verify acceptance**: Ensure all acceptance criteria are met before reporting completion\n\
         10. **Share discoveries**: Append exploration findings to shared board:\n\
         ```bash\n\
         echo '{{\"ts\":\"<ISO8601>\",\"worker\":\"{id}\",\"type\":\"<type>\",\"data\":{{...}}}}' >> {discoveries}\n\
         ```\n\
         11. **Report result**: Return JSON as described below\n\n\
         ## Discovery Types to Share\n\n\
         - `code_pattern`: {{name, file, description}} — reusable patterns found\n\
         - `integration_point`: {{file, description, exports[]}} — module connection points\n\
         - `convention`: {{naming, imports, formatting}} — code style conventions\n\
         - `blocker`: {{issue, severity, impact}} — blocking issues encountered\n\n\
         ---\n\n\
         ## Output\n\n\
         Return JSON:\n\
         {{\n  \"id\": \"{id}\",\n  \"status\": \"completed\" | \"failed\",\n  \"findings\": \"Key discoveries and implementation notes (max 500 chars)\",\n  \"files_modified\": [\"path1\", \"path2\"],\n  \"tests_passed\": true | false,\n  \"acceptance_met\": \"Summary of which acceptance criteria were met/unmet\",\n  \"error\": \"\",\n  \"criteria\": [{{\"criterion\": \"<each acceptance criterion>\", \"status\": \"PASS\" | \"FAIL\", \"explanation\": \"…\"}}]\n}}\n\n\
         **IMPORTANT**: Set status to \"completed\" ONLY if:\n\
         - All test cases pass\n\
         - All acceptance criteria are met\n\n\
         Otherwise set status to \"failed\" with details in error field.\n\n\
         (Session folder: {session_dir})\n",
        id = row.id,
        title = row.title,
        description = row.description,
        scope = row.scope,
        hints = row.hints,
        directives = row.execution_directives,
        test = row.test,
        acceptance = row.acceptance_criteria,
        prev = row.prev_context,
    )
}

/// Splits a task's `acceptance_criteria` into exit criteria: one per line
/// and per `;`-separated item, bullets (`-`, `*`, `•`) stripped, blanks
/// dropped.
pub fn split_criteria(text: &str) -> Vec<String> {
    text.lines()
        .flat_map(|l| l.split(';'))
        .map(|c| c.trim().trim_start_matches(['-', '*', '•']).trim())
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::schema::validate;

    #[test]
    fn list_fields_accept_arrays_and_strings() {
        assert_eq!(list_field(Some(&json!(["a", " b ", ""]))), ["a", "b"]);
        assert_eq!(list_field(Some(&json!("a; b;;"))), ["a", "b"]);
        assert!(list_field(Some(&json!(3))).is_empty());
        assert!(list_field(None).is_empty());
    }

    /// Every schema planex hands an agent is one the validator fully checks:
    /// `run_validated` refuses any other before the agent is called.
    #[test]
    fn every_agent_schema_passes_check_schema() {
        let schemas = [
            ("angles", angles_schema()),
            ("explore", explore_schema()),
            ("tasks", tasks_schema()),
            ("task report", task_report_schema()),
        ];
        for (name, schema) in schemas {
            assert_eq!(
                orchestrator_core::schema::check_schema(&schema),
                Ok(()),
                "{name}"
            );
        }
    }

    #[test]
    fn schemas_accept_the_seed_answers() {
        let report = json!({"id": "T1", "status": "completed", "findings": "ok",
            "files_modified": ["a"], "tests_passed": true, "acceptance_met": "all", "error": ""});
        assert!(validate(&task_report_schema(), &report).is_ok());
        let bad = json!({"id": "T1", "status": "done", "findings": "ok"});
        let errors = validate(&task_report_schema(), &bad).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        let angles = json!({"type": "feature", "complexity": "Low", "angles": []});
        assert!(validate(&angles_schema(), &angles).is_err());
        let explore =
            json!({"id": "E1", "status": "completed", "findings": "x", "key_files": "a;b"});
        assert!(validate(&explore_schema(), &explore).is_ok());
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("héllo", 10), "héllo");
        assert_eq!(truncate_chars("héllo", 3), "hé…");
        assert_eq!(truncate_chars(" abc ", 3), "abc");
        assert_eq!(truncate_chars("abc", 0), "");
    }

    #[test]
    fn criteria_split_on_lines_and_semicolons() {
        assert_eq!(
            split_criteria("- Login works; token expires\n* 2FA enforced\n\n"),
            ["Login works", "token expires", "2FA enforced"]
        );
        assert!(split_criteria("  ").is_empty());
    }

    #[test]
    fn context_is_tagged_with_its_kind() {
        let c = PlanexContext::PlanAngles {
            version: CONTEXT_VERSION,
            requirement: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"kind": "planex.plan_angles", "version": 1, "requirement": "r"})
        );
    }
}
