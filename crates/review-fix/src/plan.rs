//! Planning: partial plans per batch (agent or deterministic), their
//! validation, and the aggregation into `fix-plan.json`.
//!
//! The pure parts — [`validate_partial_plan`], [`deterministic_plan`] and
//! [`aggregate`] — take data and return data. [`plan_batches`] runs up to
//! `max_parallel` planning agents at once, each with a time limit; an answer
//! that fails validation (or a timeout) gets one retry with the error, then
//! the deterministic fallback, so a session never dead-ends on a bad planner.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::agent::{Agent, AgentRequest, Role};
use orchestrator_core::ask::{AskFailure, AskPolicy, NextAttempt, ask};
use orchestrator_core::batching::Batch;
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::finding::Finding;
use serde_json::{Value, json};

use crate::files::{
    ExecutionMode, ExecutionStrategy, FixPlan, FixPlanMetadata, FixStrategy, PartialPlan,
    PartialPlanMetadata, PlanGroup, RiskAssessment, TimelineStage, now,
};

mod planning;
pub use planning::*;

/// The JSON schema a planning agent's answer must satisfy.
pub fn partial_plan_schema() -> Value {
    json!({
        "type": "object",
        "required": ["batch_id", "groups", "timeline"],
        "properties": {
            "batch_id": {"type": "integer"},
            "groups": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["group_id", "group_name", "findings", "fix_strategy", "risk_assessment"],
                    "properties": {
                        "group_id": {"type": "string", "minLength": 1},
                        "group_name": {"type": "string"},
                        "findings": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                        "fix_strategy": {
                            "type": "object",
                            "required": ["approach"],
                            "properties": {
                                "approach": {"type": "string"},
                                "rationale": {"type": "string"},
                                "complexity": {"type": "string", "enum": ["low", "medium", "high"]},
                                "estimated_duration_minutes": {"type": "integer", "minimum": 0},
                                "test_pattern": {"type": "string"},
                                "rollback_plan": {"type": "string"}
                            }
                        },
                        "risk_assessment": {
                            "type": "object",
                            "required": ["level"],
                            "properties": {
                                "level": {"type": "string", "enum": ["low", "medium", "high"]},
                                "concerns": {"type": "array", "items": {"type": "string"}},
                                "mitigation": {"type": "string"}
                            }
                        }
                    }
                }
            },
            "timeline": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["stage", "groups", "execution_mode"],
                    "properties": {
                        "stage": {"type": "integer", "minimum": 1},
                        "groups": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                        "execution_mode": {"type": "string", "enum": ["parallel", "serial"]},
                        "depends_on": {"type": "array", "items": {"type": "integer"}},
                        "rationale": {"type": "string"}
                    }
                }
            },
            "metadata": {"type": "object"}
        }
    })
}

/// Checks a planning agent's answer for `batch`: the schema, every finding of
/// the batch in exactly one group (and no other finding), unique group ids,
/// every group in exactly one stage, stage dependencies on known stages and
/// acyclic. Returns the plan with its stages in dependency order, or every
/// problem found.
pub fn validate_partial_plan(value: &Value, batch: &Batch) -> Result<PartialPlan, Vec<String>> {
    if let Err(violations) = orchestrator_core::schema::validate(&partial_plan_schema(), value) {
        return Err(violations.iter().map(ToString::to_string).collect());
    }
    let mut value = value.clone();
    if value
        .get("metadata")
        .is_none_or(|m| m.get("created_at").is_none())
        && let Some(obj) = value.as_object_mut()
    {
        obj.insert(
            "metadata".to_owned(),
            json!({"findings_count": batch.findings.len(), "groups_count": 0, "created_at": now()}),
        );
    }
    let mut plan: PartialPlan =
        serde_json::from_value(value).map_err(|e| vec![format!("$: {e}")])?;
    let mut problems = Vec::new();
    if plan.batch_id != batch.batch_id {
        problems.push(format!(
            "$.batch_id: expected {}, found {}",
            batch.batch_id, plan.batch_id
        ));
    }
    let group_ids = check_groups(&plan, batch, &mut problems);
    check_timeline(&plan, &group_ids, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    match order_stages(&plan.timeline) {
        Ok(order) => {
            let mut by_id: HashMap<u32, TimelineStage> =
                plan.timeline.drain(..).map(|s| (s.stage, s)).collect();
            plan.timeline = order.iter().filter_map(|id| by_id.remove(id)).collect();
        }
        Err(cycle) => {
            return Err(vec![format!(
                "timeline stages depend on each other in a cycle: {}",
                cycle
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" -> ")
            )]);
        }
    }
    plan.metadata.findings_count = batch.findings.len();
    plan.metadata.groups_count = plan.groups.len();
    Ok(plan)
}

/// The problems of a plan's groups: a group id used twice, a finding not
/// in `batch`, in more than one group or in none. Returns the group ids.
fn check_groups<'a>(
    plan: &'a PartialPlan,
    batch: &'a Batch,
    problems: &mut Vec<String>,
) -> BTreeSet<&'a str> {
    let wanted: BTreeSet<&str> = batch.findings.iter().map(|f| f.as_str()).collect();
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut group_ids = BTreeSet::new();
    for g in &plan.groups {
        if !group_ids.insert(g.group_id.as_str()) {
            problems.push(format!("group id {} is used twice", g.group_id));
        }
        for f in &g.findings {
            if !wanted.contains(f.as_str()) {
                problems.push(format!(
                    "group {} lists finding {f}, which is not in batch {}",
                    g.group_id, batch.batch_id
                ));
            } else if let Some(other) = seen.insert(f.as_str(), g.group_id.as_str()) {
                problems.push(format!(
                    "finding {f} is in more than one group ({other} and {})",
                    g.group_id
                ));
            }
        }
    }
    for f in &wanted {
        if !seen.contains_key(f) {
            problems.push(format!("finding {f} is in no group"));
        }
    }
    group_ids
}

/// The problems of a plan's timeline: a stage number used twice, an
/// unknown group, a group in more than one stage or in none, a dependency
/// on an unknown stage.
fn check_timeline(plan: &PartialPlan, group_ids: &BTreeSet<&str>, problems: &mut Vec<String>) {
    let mut staged: BTreeMap<&str, u32> = BTreeMap::new();
    let stage_ids: BTreeSet<u32> = plan.timeline.iter().map(|s| s.stage).collect();
    if stage_ids.len() != plan.timeline.len() {
        problems.push("two timeline stages share a stage number".to_owned());
    }
    for s in &plan.timeline {
        for g in &s.groups {
            if !group_ids.contains(g.as_str()) {
                problems.push(format!("stage {} lists unknown group {g}", s.stage));
            } else if let Some(other) = staged.insert(g.as_str(), s.stage) {
                problems.push(format!(
                    "group {g} is in more than one stage ({other} and {})",
                    s.stage
                ));
            }
        }
        for d in &s.depends_on {
            if !stage_ids.contains(d) {
                problems.push(format!("stage {} depends on unknown stage {d}", s.stage));
            }
        }
    }
    for g in group_ids {
        if !staged.contains_key(g) {
            problems.push(format!("group {g} is in no timeline stage"));
        }
    }
}

/// Kahn order of stages by `depends_on` (ties by stage number); the stages of
/// a cycle on error.
fn order_stages(stages: &[TimelineStage]) -> Result<Vec<u32>, Vec<u32>> {
    let mut indegree: BTreeMap<u32, usize> = stages
        .iter()
        .map(|s| (s.stage, s.depends_on.iter().collect::<BTreeSet<_>>().len()))
        .collect();
    let mut order = Vec::new();
    loop {
        let ready: Option<u32> = indegree.iter().find(|&(_, &d)| d == 0).map(|(&s, _)| s);
        let Some(next) = ready else { break };
        indegree.remove(&next);
        order.push(next);
        for s in stages {
            if s.depends_on.iter().collect::<BTreeSet<_>>().contains(&next)
                && let Some(d) = indegree.get_mut(&s.stage)
            {
                *d -= 1;
            }
        }
    }
    if indegree.is_empty() {
        Ok(order)
    } else {
        Err(indegree.keys().copied().collect())
    }
}

/// The deterministic plan of a batch: one group with every finding, in one
/// serial stage. Used directly with the builtin agent and as the fallback
/// when a planning agent fails twice.
pub fn deterministic_plan(
    batch: &Batch,
    findings: &HashMap<String, &Finding>,
    fallback_reason: Option<String>,
) -> PartialPlan {
    let with_suggestion = batch
        .findings
        .iter()
        .filter(|id| {
            findings
                .get(id.as_str())
                .is_some_and(|f| !f.suggestions.is_empty())
        })
        .count();
    let worst = batch
        .findings
        .iter()
        .filter_map(|id| findings.get(id.as_str()).map(|f| f.severity))
        .min();
    let level = match worst {
        Some(s) if s.is_high_or_worse() => "high",
        Some(orchestrator_core::finding::Severity::Medium) => "medium",
        _ => "low",
    };
    let approach = if with_suggestion == batch.findings.len() {
        "Apply each finding's machine-applicable suggestion, one commit per finding".to_owned()
    } else {
        "Fix each finding in turn as its recommendation says, one commit per finding".to_owned()
    };
    PartialPlan {
        batch_id: batch.batch_id,
        groups: vec![PlanGroup {
            group_id: "G1".to_owned(),
            group_name: format!("{} in {}", batch.primary_dimension, batch.primary_file),
            findings: batch.findings.iter().map(|f| f.to_string()).collect(),
            fix_strategy: FixStrategy {
                approach,
                rationale: format!(
                    "deterministic plan: the batch's findings share {} and dimension {}",
                    batch.primary_file, batch.primary_dimension
                ),
                complexity: "low".to_owned(),
                estimated_duration_minutes: (batch.findings.len() as u32).max(1),
                test_pattern: String::new(),
                rollback_plan: "Restore exactly the fix's write-set and retry with the test output"
                    .to_owned(),
            },
            risk_assessment: RiskAssessment {
                level: level.to_owned(),
                concerns: Vec::new(),
                mitigation: "Every fix is verified by the test suite before it is committed"
                    .to_owned(),
            },
            progress_file: None,
            batch_id: None,
            files: Vec::new(),
        }],
        timeline: vec![TimelineStage {
            stage: 1,
            groups: vec!["G1".to_owned()],
            execution_mode: ExecutionMode::Serial,
            depends_on: Vec::new(),
            rationale: "one group per batch, fixed serially".to_owned(),
        }],
        metadata: PartialPlanMetadata {
            findings_count: batch.findings.len(),
            groups_count: 1,
            created_at: now(),
            planner: Some("deterministic".to_owned()),
            fallback_reason,
        },
    }
}

/// The batches of the deterministic plan (the builtin agent): per file, its
/// findings in the order given, which is their tool's fix order (see
/// [`crate::input::ReadInput::findings`]), cut into consecutive batches of
/// at most `batch_size`; files in name order. [`aggregate`] keeps a file's
/// batches in that order (each touches the file, so each goes into a later
/// stage than the one before), so the fixes of a file are applied one at a
/// time exactly in the tool's order and an overlap is won by the fix the
/// tool itself would apply. Similarity batching (the agents' plan) groups
/// by cause instead, which is what a planning agent reads best.
pub fn batches_in_fix_order(findings: &[Finding], batch_size: usize) -> Vec<Batch> {
    let mut by_file: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for f in findings {
        by_file.entry(f.file_or_unknown()).or_default().push(f);
    }
    let mut batches = Vec::new();
    for (file, members) in by_file {
        for chunk in members.chunks(batch_size.max(1)) {
            batches.push(Batch {
                batch_id: u32::try_from(batches.len() + 1).unwrap_or(u32::MAX),
                findings: chunk.iter().map(|f| f.id.clone()).collect(),
                primary_file: file.to_owned(),
                primary_dimension: chunk[0].dimension_or_general().to_owned(),
            });
        }
    }
    batches
}

/// The files a finding's fix may touch: its file and its suggestions' files.
pub fn finding_files(f: &Finding) -> BTreeSet<String> {
    let mut files: BTreeSet<String> = f.file.iter().cloned().collect();
    for s in &f.suggestions {
        for e in &s.edits {
            files.insert(e.file.clone());
        }
    }
    files
}

/// Options of [`aggregate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateOptions {
    /// The fix session id.
    pub fix_session_id: String,
    /// Groups of a parallel stage that run at once.
    pub parallel_limit: usize,
    /// Whether parallel stages are possible (`false` for `--isolation serial`).
    pub worktrees: bool,
    /// Batches whose plan is the deterministic fallback.
    pub fallback_batches: Vec<u32>,
}

/// Merges partial plans into the session's plan.
///
/// Inside a batch, a group runs after every group of the batch's earlier
/// stages (and after the previous group of a serial stage). Across batches
/// groups are independent, so a group goes into the first stage at or after
/// its dependencies in which no group touches any of its files: independent
/// groups from different batches share a stage; groups that touch the same
/// files never do. Groups are renumbered `G1..Gn` in stage order, each with
/// its `fix-progress-N.json`.
pub fn aggregate(
    partials: &[PartialPlan],
    findings: &HashMap<String, &Finding>,
    options: &AggregateOptions,
) -> FixPlan {
    let (placed, stages) = place_groups(partials, findings, options.worktrees);
    // Renumber in stage order.
    let mut number: HashMap<usize, usize> = HashMap::new();
    let mut groups = Vec::new();
    for stage in &stages {
        for &p in stage {
            let n = number.len() + 1;
            number.insert(p, n);
            let mut g = placed[p].group.clone();
            g.group_id = format!("G{n}");
            g.progress_file = Some(format!("fix-progress-{n}.json"));
            groups.push(g);
        }
    }
    let timeline = timeline_of(&placed, &stages, &number, options.worktrees);
    let any_parallel = timeline
        .iter()
        .any(|s| s.execution_mode == ExecutionMode::Parallel);
    let approach = match (any_parallel, timeline.len()) {
        (true, 1) => "parallel",
        (true, _) => "hybrid",
        (false, _) => "serial",
    };
    let total_findings = groups.iter().map(|g| g.findings.len()).sum();
    FixPlan {
        fix_session_id: options.fix_session_id.clone(),
        execution_strategy: ExecutionStrategy {
            approach: approach.to_owned(),
            parallel_limit: options.parallel_limit,
            total_stages: timeline.len(),
            rationale: match approach {
                "parallel" => "every group is independent of the others".to_owned(),
                "hybrid" => "independent groups share stages; groups on the same files or with dependencies are in later stages".to_owned(),
                _ => "groups run one after another".to_owned(),
            },
        },
        metadata: FixPlanMetadata {
            total_findings,
            total_groups: groups.len(),
            total_batches: partials.len(),
            fallback_batches: options.fallback_batches.clone(),
            isolation: if options.worktrees { "worktree" } else { "serial" }.to_owned(),
            created_at: now(),
        },
        groups,
        timeline,
    }
}

/// A group placed in the merged plan: its files, its stage and the groups
/// it must follow.
struct Placed {
    group: PlanGroup,
    files: BTreeSet<String>,
    stage: usize,
    preds: Vec<usize>,
}

/// Places every partial plan's groups, batch by batch, in the earliest
/// stage after their predecessors where no group shares a file with them
/// (and, without worktrees, where the stage is empty). Returns the placed
/// groups and the stages as lists of their indices.
fn place_groups(
    partials: &[PartialPlan],
    findings: &HashMap<String, &Finding>,
    worktrees: bool,
) -> (Vec<Placed>, Vec<Vec<usize>>) {
    let mut placed: Vec<Placed> = Vec::new();
    let mut stages: Vec<Vec<usize>> = Vec::new();
    let mut sorted: Vec<&PartialPlan> = partials.iter().collect();
    sorted.sort_by_key(|p| p.batch_id);
    for partial in sorted {
        let local: HashMap<&str, &PlanGroup> = partial
            .groups
            .iter()
            .map(|g| (g.group_id.as_str(), g))
            .collect();
        let mut earlier: Vec<usize> = Vec::new();
        for stage in &partial.timeline {
            let mut this_stage = Vec::new();
            let mut prev_in_serial: Option<usize> = None;
            for gid in &stage.groups {
                let Some(g) = local.get(gid.as_str()) else {
                    continue;
                };
                let files: BTreeSet<String> = g
                    .findings
                    .iter()
                    .filter_map(|id| findings.get(id.as_str()))
                    .flat_map(|f| finding_files(f))
                    .collect();
                let mut preds = earlier.clone();
                if stage.execution_mode == ExecutionMode::Serial
                    && let Some(p) = prev_in_serial
                {
                    preds.push(p);
                }
                let min_stage = preds
                    .iter()
                    .map(|&p| placed[p].stage + 1)
                    .max()
                    .unwrap_or(0);
                let fits = |s: usize, stages: &Vec<Vec<usize>>| {
                    let groups: &Vec<usize> = &stages[s];
                    let conflict = groups.iter().any(|&o| !placed[o].files.is_disjoint(&files));
                    !conflict && (worktrees || groups.is_empty())
                };
                let index = (min_stage..stages.len())
                    .find(|&s| fits(s, &stages))
                    .unwrap_or_else(|| {
                        stages.push(Vec::new());
                        stages.len() - 1
                    });
                let id = placed.len();
                stages[index].push(id);
                let mut group = (*g).clone();
                group.batch_id = Some(partial.batch_id);
                group.files = files.iter().cloned().collect();
                placed.push(Placed {
                    group,
                    files,
                    stage: index,
                    preds,
                });
                this_stage.push(id);
                prev_in_serial = Some(id);
            }
            earlier.extend(this_stage);
        }
    }
    (placed, stages)
}

/// The timeline of the placed stages: each stage's groups by their new
/// numbers, parallel when it has several and worktrees are used, the
/// stages it depends on and why.
fn timeline_of(
    placed: &[Placed],
    stages: &[Vec<usize>],
    number: &HashMap<usize, usize>,
    worktrees: bool,
) -> Vec<TimelineStage> {
    stages
        .iter()
        .enumerate()
        .map(|(i, members)| {
            let depends_on: BTreeSet<u32> = members
                .iter()
                .flat_map(|&p| placed[p].preds.iter().map(|&q| placed[q].stage as u32 + 1))
                .collect();
            let parallel = members.len() > 1 && worktrees;
            let rationale = if parallel {
                format!(
                    "{} independent groups touching disjoint files, each in its own worktree",
                    members.len()
                )
            } else if depends_on.is_empty() {
                "a single group".to_owned()
            } else {
                "runs after the groups it depends on".to_owned()
            };
            TimelineStage {
                stage: i as u32 + 1,
                groups: members.iter().map(|p| format!("G{}", number[p])).collect(),
                execution_mode: if parallel {
                    ExecutionMode::Parallel
                } else {
                    ExecutionMode::Serial
                },
                depends_on: depends_on.into_iter().collect(),
                rationale,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
