use super::*;
use proptest::prelude::*;

/// Parses `"T2: T1 | E1;T1"` lines: id, deps after `:`, context after `|`.
fn rows(spec: &str) -> Vec<WaveTask<'_>> {
    spec.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (id, rest) = line.split_once(':').unwrap_or((line, ""));
            let (deps, ctx) = rest.split_once('|').unwrap_or((rest, ""));
            WaveTask::new(id.trim())
                .deps(deps.split(';').map(str::trim).filter(|s| !s.is_empty()))
                .context_from(ctx.split(';').map(str::trim).filter(|s| !s.is_empty()))
        })
        .collect()
}

/// Computes waves and renders them as `id=wave` in input order, or the error.
fn check(spec: &str, lenient: bool, expected: &str) {
    let tasks = rows(spec);
    let got = match compute_waves(&tasks, WaveOptions { lenient }) {
        Ok(w) => {
            let mut s: Vec<String> = w.iter().map(|(id, n)| format!("{id}={n}")).collect();
            s.push(format!("max={}", w.max_wave()));
            for warning in w.warnings() {
                s.push(format!("warning: {warning}"));
            }
            s.join(" ")
        }
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(got, expected);
}

#[test]
fn diamond_layers_like_the_seed() {
    check(
        "A:
         B: A
         C: A
         D: B;C",
        false,
        "A=1 B=2 C=2 D=3 max=3",
    );
}

#[test]
fn wave_is_one_more_than_the_deepest_dependency() {
    check(
        "T1:
         T2: T1
         T3: T2
         T4: T1;T3",
        false,
        "T1=1 T2=2 T3=3 T4=4 max=4",
    );
}

#[test]
fn task_context_orders_but_exploration_context_does_not() {
    check(
        "T1: | E1;E2
         T2: | E1;T1
         T3: | E3",
        false,
        "T1=1 T2=2 T3=1 max=2",
    );
}

#[test]
fn empty_input_has_no_waves() {
    check("", false, "max=0");
}

#[test]
fn cycle_names_the_tasks_in_order() {
    check(
        "T1: T3
         T2: T1
         T3: T2
         T4: T1",
        false,
        "error: dependency cycle: T1 → T3 → T2 → T1",
    );
}

#[test]
fn cycle_downstream_rows_are_not_reported_as_the_cycle() {
    // T0 depends on the cycle T2 ↔ T3 but is not on it.
    check(
        "T0: T2
         T1:
         T2: T3
         T3: T2;T1",
        false,
        "error: dependency cycle: T2 → T3 → T2",
    );
}

#[test]
fn self_dependency_is_a_cycle() {
    check("T1: T1", false, "error: dependency cycle: T1 → T1");
}

#[test]
fn cycle_through_context_from_is_reported() {
    check(
        "T1: | T2
         T2: T1",
        true,
        "error: dependency cycle: T1 → T2 → T1",
    );
}

#[test]
fn unknown_dependency_is_an_error_naming_row_and_id() {
    check(
        "T1:
         T2: T1;T9",
        false,
        r#"error: task "T2" (row 2) depends on unknown task "T9""#,
    );
}

#[test]
fn unknown_dependency_is_a_warning_in_lenient_mode() {
    check(
        "T1:
         T2: T1;T9",
        true,
        r#"T1=1 T2=2 max=2 warning: task "T2" (row 2) depends on unknown task "T9"; ignored"#,
    );
}

#[test]
fn unknown_context_source_is_an_error_or_a_warning() {
    let spec = "T1: | E7;X1";
    check(
        spec,
        false,
        r#"error: task "T1" (row 1) takes context from "X1", which is neither an exploration id (E*) nor a known task"#,
    );
    check(
        spec,
        true,
        r#"T1=1 max=1 warning: task "T1" (row 1) takes context from "X1", which is neither an exploration id (E*) nor a known task; ignored"#,
    );
}

#[test]
fn duplicate_ids_are_rejected_even_when_lenient() {
    check(
        "T1:
         T2:
         T1:",
        true,
        r#"error: duplicate task id "T1" in row 3 (first seen in row 1)"#,
    );
}

#[test]
fn serialises_like_the_cli_json() {
    let tasks = rows("T2: T1\nT1:\nT10: T2");
    let waves = compute_waves(&tasks, WaveOptions::default()).unwrap();
    let json = serde_json::to_string(&waves).unwrap();
    assert_eq!(json, r#"{"waves":{"T1":1,"T10":3,"T2":2},"max_wave":3}"#);
    let report: WavesReport = serde_json::from_str(&json).unwrap();
    assert_eq!(report, waves.to_report());
    assert_eq!(waves.get("T10"), Some(3));
    assert_eq!(waves.get("T3"), None);
    assert_eq!(waves.by_row(), &[2, 1, 3]);
    assert_eq!(waves.layers(), vec![vec![1], vec![0], vec![2]]);
}

fn dag_strategy() -> impl Strategy<Value = Vec<(Vec<usize>, Vec<usize>)>> {
    // Row i may depend on any earlier row; ids are shuffled by naming them in
    // reverse so that input order is not a topological order.
    (1usize..40).prop_flat_map(|n| {
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
                proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
            ),
            n,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, (deps, ctx))| {
                    let pick = |v: Vec<prop::sample::Index>| -> Vec<usize> {
                        if i == 0 {
                            Vec::new()
                        } else {
                            v.into_iter().map(|x| x.index(i)).collect()
                        }
                    };
                    (pick(deps), pick(ctx))
                })
                .collect()
        })
    })
}

proptest! {
    #[test]
    fn waves_respect_every_dependency(dag in dag_strategy()) {
        let n = dag.len();
        let ids: Vec<String> = (0..n).map(|i| format!("T{}", n - i)).collect();
        let tasks: Vec<WaveTask<'_>> = dag
            .iter()
            .enumerate()
            .map(|(i, (deps, ctx))| {
                WaveTask::new(&ids[i])
                    .deps(deps.iter().map(|&d| ids[d].as_str()))
                    .context_from(ctx.iter().map(|&d| ids[d].as_str()).chain(["E1"]))
            })
            .collect();
        // Reverse the rows so dependencies come after their dependents.
        let reversed: Vec<WaveTask<'_>> = tasks.iter().rev().cloned().collect();
        let waves = compute_waves(&reversed, WaveOptions::default()).unwrap();
        for task in &reversed {
            let w = waves.get(task.id).unwrap();
            prop_assert!(w >= 1);
            let preds: Vec<&str> = task.deps.iter().chain(&task.context_from).copied()
                .filter(|id| !is_exploration_id(id)).collect();
            for p in &preds {
                prop_assert!(waves.get(p).unwrap() < w, "{} in wave {} not before {}", p, w, task.id);
            }
            // Tight: some predecessor is exactly one wave earlier.
            let expected = preds.iter().map(|p| waves.get(p).unwrap() + 1).max().unwrap_or(1);
            prop_assert_eq!(w, expected);
        }
        prop_assert_eq!(waves.max_wave(), waves.by_row().iter().copied().max().unwrap_or(0));
    }

    #[test]
    fn adding_a_back_edge_makes_a_reported_cycle(dag in dag_strategy(), a in any::<prop::sample::Index>()) {
        // Chain every row to the previous one, then make row 0 depend on row k:
        // the cycle is 0 → k → k-1 → … → 1 → 0 in "depends on" order.
        let n = dag.len();
        prop_assume!(n >= 2);
        let k = 1 + a.index(n - 1);
        let ids: Vec<String> = (0..n).map(|i| format!("T{i}")).collect();
        let tasks: Vec<WaveTask<'_>> = (0..n)
            .map(|i| {
                let deps = if i == 0 { vec![ids[k].as_str()] } else { vec![ids[i - 1].as_str()] };
                WaveTask::new(&ids[i]).deps(deps)
            })
            .collect();
        let err = compute_waves(&tasks, WaveOptions::default()).unwrap_err();
        let mut expected = vec![ids[0].clone()];
        expected.extend((1..=k).rev().map(|i| ids[i].clone()));
        expected.push(ids[0].clone());
        prop_assert_eq!(err, WaveError::Cycle { path: expected });
    }
}
