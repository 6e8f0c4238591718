use std::collections::HashMap;

use orchestrator_core::finding::{FindingId, Severity};
use proptest::prelude::*;

use super::*;

fn batch(id: u32, findings: &[&str]) -> Batch {
    Batch {
        batch_id: id,
        findings: findings.iter().map(|f| FindingId::from(*f)).collect(),
        primary_file: "src/a.rs".into(),
        primary_dimension: "quality".into(),
    }
}

fn group(id: &str, findings: &[&str]) -> Value {
    json!({"group_id": id, "group_name": id, "findings": findings,
           "fix_strategy": {"approach": "fix"}, "risk_assessment": {"level": "low"}})
}

fn stage(n: u32, groups: &[&str], deps: &[u32]) -> Value {
    json!({"stage": n, "groups": groups, "execution_mode": "serial", "depends_on": deps})
}

/// The planning agents' schema is one the validator fully checks:
/// `run_validated` refuses any other before the agent is called.
#[test]
fn partial_plan_schema_passes_check_schema() {
    assert_eq!(
        orchestrator_core::schema::check_schema(&partial_plan_schema()),
        Ok(())
    );
}

/// Validates and returns the problems, or the stage order.
fn check(value: Value, findings: &[&str]) -> Result<Vec<u32>, Vec<String>> {
    validate_partial_plan(&value, &batch(1, findings))
        .map(|p| p.timeline.iter().map(|s| s.stage).collect())
}

#[test]
fn partial_plan_validation() {
    let ok = json!({"batch_id": 1, "groups": [group("G1", &["A"]), group("G2", &["B"])],
                    "timeline": [stage(2, &["G2"], &[1]), stage(1, &["G1"], &[])]});
    assert_eq!(
        check(ok, &["A", "B"]),
        Ok(vec![1, 2]),
        "stages come back in dependency order"
    );

    let missing = json!({"batch_id": 1, "groups": [group("G1", &["A"])], "timeline": [stage(1, &["G1"], &[])]});
    assert_eq!(
        check(missing, &["A", "B"]),
        Err(vec!["finding B is in no group".to_owned()])
    );

    let twice = json!({"batch_id": 1, "groups": [group("G1", &["A"]), group("G2", &["A", "X"])],
                       "timeline": [stage(1, &["G1", "G2"], &[])]});
    assert_eq!(
        check(twice, &["A"]),
        Err(vec![
            "finding A is in more than one group (G1 and G2)".to_owned(),
            "group G2 lists finding X, which is not in batch 1".to_owned()
        ])
    );

    let cycle = json!({"batch_id": 1, "groups": [group("G1", &["A"]), group("G2", &["B"])],
                       "timeline": [stage(1, &["G1"], &[2]), stage(2, &["G2"], &[1])]});
    assert_eq!(
        check(cycle, &["A", "B"]),
        Err(vec![
            "timeline stages depend on each other in a cycle: 1 -> 2".to_owned()
        ])
    );

    let unstaged = json!({"batch_id": 1, "groups": [group("G1", &["A"]), group("G2", &["B"])],
                          "timeline": [stage(1, &["G1", "G9"], &[7])]});
    assert_eq!(
        check(unstaged, &["A", "B"]),
        Err(vec![
            "stage 1 lists unknown group G9".to_owned(),
            "stage 1 depends on unknown stage 7".to_owned(),
            "group G2 is in no timeline stage".to_owned()
        ])
    );

    let schema = check(json!({"batch_id": "one", "groups": []}), &["A"]).unwrap_err();
    assert!(
        schema.iter().any(|e| e.starts_with("$.batch_id")),
        "{schema:?}"
    );
    assert!(schema.iter().any(|e| e.contains("timeline")), "{schema:?}");
}

fn f(id: &str, file: &str) -> Finding {
    Finding::new(id, format!("title {id}"), Severity::Medium)
        .at(file, Some(1))
        .with_dimension("quality")
}

fn options(worktrees: bool) -> AggregateOptions {
    AggregateOptions {
        fix_session_id: "fix-1".into(),
        parallel_limit: 3,
        worktrees,
        fallback_batches: Vec::new(),
    }
}

#[test]
fn aggregation_shares_stages_across_batches_but_never_files() {
    let all = [
        f("A", "a.rs"),
        f("B", "b.rs"),
        f("C", "a.rs"),
        f("D", "c.rs"),
    ];
    let by_id: HashMap<String, &Finding> = all.iter().map(|f| (f.id.to_string(), f)).collect();
    let partials = vec![
        deterministic_plan(&batch(1, &["A"]), &by_id, None),
        deterministic_plan(&batch(2, &["B"]), &by_id, None),
        deterministic_plan(&batch(3, &["C"]), &by_id, None),
        deterministic_plan(&batch(4, &["D"]), &by_id, None),
    ];
    let plan = aggregate(&partials, &by_id, &options(true));
    let stages: Vec<Vec<String>> = plan.timeline.iter().map(|s| s.groups.clone()).collect();
    assert_eq!(stages, [vec!["G1", "G2", "G3"], vec!["G4"]]);
    let files: Vec<Vec<String>> = plan.groups.iter().map(|g| g.files.clone()).collect();
    assert_eq!(
        files,
        [vec!["a.rs"], vec!["b.rs"], vec!["c.rs"], vec!["a.rs"]]
    );
    assert_eq!(plan.groups[3].batch_id, Some(3));
    assert_eq!(
        plan.groups[3].progress_file.as_deref(),
        Some("fix-progress-4.json")
    );
    assert_eq!(plan.timeline[0].execution_mode, ExecutionMode::Parallel);
    assert_eq!(plan.timeline[1].execution_mode, ExecutionMode::Serial);
    assert_eq!(plan.execution_strategy.approach, "hybrid");
    assert_eq!(plan.execution_strategy.total_stages, 2);

    let serial = aggregate(&partials, &by_id, &options(false));
    assert_eq!(serial.timeline.len(), 4);
    assert_eq!(serial.execution_strategy.approach, "serial");
}

#[test]
fn aggregation_keeps_local_stage_order() {
    let all = [f("A", "a.rs"), f("B", "b.rs"), f("C", "c.rs")];
    let by_id: HashMap<String, &Finding> = all.iter().map(|f| (f.id.to_string(), f)).collect();
    let value = json!({"batch_id": 1,
    "groups": [group("G1", &["A"]), group("G2", &["B"]), group("G3", &["C"])],
    "timeline": [
        {"stage": 1, "groups": ["G1", "G2"], "execution_mode": "parallel"},
        {"stage": 2, "groups": ["G3"], "execution_mode": "serial", "depends_on": [1]}
    ]});
    let partial = validate_partial_plan(&value, &batch(1, &["A", "B", "C"])).unwrap();
    let plan = aggregate(&[partial], &by_id, &options(true));
    let stages: Vec<Vec<String>> = plan.timeline.iter().map(|s| s.groups.clone()).collect();
    assert_eq!(stages, [vec!["G1", "G2"], vec!["G3"]]);
    assert_eq!(plan.timeline[1].depends_on, [1]);
}

#[test]
fn the_deterministic_plan_is_one_serial_group() {
    let all = [f("A", "a.rs"), f("B", "a.rs")];
    let by_id: HashMap<String, &Finding> = all.iter().map(|f| (f.id.to_string(), f)).collect();
    let b = batch(7, &["A", "B"]);
    let plan = deterministic_plan(&b, &by_id, Some("bad answer".into()));
    let value = serde_json::to_value(&plan).unwrap();
    let back = validate_partial_plan(&value, &b).unwrap();
    assert_eq!(back.groups.len(), 1);
    assert_eq!(back.groups[0].findings, ["A", "B"]);
    assert_eq!(back.timeline[0].execution_mode, ExecutionMode::Serial);
    assert_eq!(back.metadata.fallback_reason.as_deref(), Some("bad answer"));
}

proptest! {
    /// Every finding lands in exactly one group; groups in one stage never
    /// share a file; a group of a later local stage is in a later global stage.
    #[test]
    fn aggregation_invariants(
        files in proptest::collection::vec(0usize..4, 1..24),
        batch_size in 1usize..5,
        worktrees in any::<bool>(),
    ) {
        let all: Vec<Finding> = files
            .iter()
            .enumerate()
            .map(|(i, file)| f(&format!("F{i}"), &format!("f{file}.rs")))
            .collect();
        let by_id: HashMap<String, &Finding> = all.iter().map(|f| (f.id.to_string(), f)).collect();
        // Batches of consecutive findings, each planned as one group per finding
        // in successive local stages every other finding.
        let mut partials = Vec::new();
        for (n, chunk) in all.chunks(batch_size).enumerate() {
            let ids: Vec<&str> = chunk.iter().map(|f| f.id.as_str()).collect();
            let groups: Vec<Value> = ids.iter().enumerate().map(|(i, id)| group(&format!("G{i}"), &[id])).collect();
            let timeline: Vec<Value> = ids.iter().enumerate().map(|(i, _)| {
                let deps: Vec<u32> = if i > 0 { vec![i as u32] } else { vec![] };
                json!({"stage": i + 1, "groups": [format!("G{i}")], "execution_mode": "parallel", "depends_on": deps})
            }).collect();
            let value = json!({"batch_id": n + 1, "groups": groups, "timeline": timeline});
            partials.push(validate_partial_plan(&value, &batch(n as u32 + 1, &ids)).unwrap());
        }
        let plan = aggregate(&partials, &by_id, &options(worktrees));
        let mut seen: Vec<String> = plan.groups.iter().flat_map(|g| g.findings.clone()).collect();
        seen.sort();
        let mut want: Vec<String> = all.iter().map(|f| f.id.to_string()).collect();
        want.sort();
        prop_assert_eq!(seen, want);
        let stage_of: HashMap<String, u32> = plan.timeline.iter()
            .flat_map(|s| s.groups.iter().map(move |g| (g.clone(), s.stage))).collect();
        prop_assert_eq!(stage_of.len(), plan.groups.len());
        for s in &plan.timeline {
            let groups: Vec<&PlanGroup> = s.groups.iter().filter_map(|g| plan.group(g)).collect();
            for (i, a) in groups.iter().enumerate() {
                for b in &groups[i + 1..] {
                    prop_assert!(a.files.iter().all(|f| !b.files.contains(f)));
                }
            }
            if !worktrees {
                prop_assert_eq!(s.groups.len(), 1);
            }
        }
        // Within a batch, finding order is stage order.
        for chunk in all.chunks(batch_size) {
            let stages: Vec<u32> = chunk.iter().map(|f| {
                let g = plan.groups.iter().find(|g| g.findings.contains(&f.id.to_string())).unwrap();
                stage_of[&g.group_id]
            }).collect();
            prop_assert!(stages.windows(2).all(|w| w[0] < w[1]), "{:?}", stages);
        }
    }
}
