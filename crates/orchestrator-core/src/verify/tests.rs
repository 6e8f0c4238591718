use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

/// A deterministic test oracle over trees of fix positions. Fix `j` has a few
/// earlier fixes it interacts with (`deps[j]`); whether it breaks the tests
/// is `table[j][mask]`, where `mask` says which of those are present below
/// it. A tree passes iff no fix in it breaks — failures persist once
/// introduced, and may depend on earlier fixes in any way.
#[derive(Debug, Clone)]
struct Oracle {
    deps: Vec<Vec<usize>>,
    table: Vec<Vec<bool>>,
}

impl Oracle {
    /// Fixes failing independently: `breaks[j]` whatever is below.
    fn independent(breaks: &[bool]) -> Self {
        Self {
            deps: vec![Vec::new(); breaks.len()],
            table: breaks.iter().map(|&b| vec![b]).collect(),
        }
    }

    fn len(&self) -> usize {
        self.deps.len()
    }

    fn breaks(&self, fix: usize, below: &[usize]) -> bool {
        let mut mask = 0;
        for (bit, dep) in self.deps[fix].iter().enumerate() {
            if below.contains(dep) {
                mask |= 1 << bit;
            }
        }
        self.table[fix][mask]
    }

    fn passes(&self, tree: &[usize]) -> bool {
        (0..tree.len()).all(|i| !self.breaks(tree[i], &tree[..i]))
    }

    /// The reference: the seed's one-run-per-fix walk, written independently
    /// of the machine. Returns (landed, dropped).
    fn each(&self) -> (Vec<usize>, Vec<usize>) {
        let mut landed = Vec::new();
        let mut dropped = Vec::new();
        for fix in 0..self.len() {
            let mut tree = landed.clone();
            tree.push(fix);
            if self.passes(&tree) {
                landed = tree;
            } else {
                dropped.push(fix);
            }
        }
        (landed, dropped)
    }
}

fn interacting_oracle(max_fixes: usize) -> impl Strategy<Value = Oracle> {
    (0..=max_fixes)
        .prop_flat_map(|n| {
            let fixes: Vec<_> = (0..n)
                .map(|j| {
                    let deps =
                        proptest::sample::subsequence((0..j).collect::<Vec<_>>(), 0..=j.min(3));
                    (deps, 0.0..0.6_f64, any::<u64>())
                })
                .collect();
            fixes
        })
        .prop_map(|fixes| {
            let mut oracle = Oracle {
                deps: Vec::new(),
                table: Vec::new(),
            };
            for (deps, rate, seed) in fixes {
                let mut state = seed;
                let table = (0..1usize << deps.len())
                    .map(|_| {
                        state = splitmix(state);
                        ((state >> 11) as f64 / (1u64 << 53) as f64) < rate
                    })
                    .collect();
                oracle.deps.push(deps);
                oracle.table.push(table);
            }
            oracle
        })
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn config_strategy() -> impl Strategy<Value = VerifyConfig> {
    (
        proptest::sample::select(vec![VerifyMode::Each, VerifyMode::Batch, VerifyMode::Auto]),
        0u32..=2,
        1usize..=MAX_BATCH,
        0.1..5.0_f64,
        0.1..20.0_f64,
    )
        .prop_map(
            |(mode, flaky_reruns, max_batch, prior_failures, prior_passes)| VerifyConfig {
                mode,
                flaky_reruns,
                max_batch,
                prior_failures,
                prior_passes,
                ..VerifyConfig::default()
            },
        )
}

/// Runs the machine against `oracle`; `flaky_seed` makes the first run of
/// some passing trees fail spuriously (a later run of the same tree passes).
fn run(oracle: &Oracle, config: VerifyConfig, flaky_seed: Option<u64>) -> VerifyReport<usize> {
    let mut seen: HashSet<Vec<usize>> = HashSet::new();
    verify_with((0..oracle.len()).collect(), config, |trial, tree| {
        let tree: Vec<usize> = tree.iter().copied().collect();
        let first_time = seen.insert(tree.clone());
        let spurious = flaky_seed.is_some_and(|seed| {
            let key = tree.iter().fold(seed, |h, &f| splitmix(h ^ f as u64));
            first_time && key % 3 == 0
        });
        if oracle.passes(&tree) && !spurious {
            RunOutcome::Pass
        } else {
            RunOutcome::fail(format!("log-{}", trial.run.0))
        }
    })
    .unwrap()
}

/// The documented worst case.
fn assert_within_bound(report: &VerifyReport<usize>, config: &VerifyConfig) {
    let cycles = (report.dropped.len() + report.flaky.len()) as u32;
    let halvings = 1 + config.max_batch.ilog2();
    assert!(report.reruns <= cycles * config.flaky_reruns, "{report:?}");
    assert!(
        report.runs <= report.landed.len() as u32 + cycles * halvings + report.reruns,
        "{report:?}"
    );
}

fn dropped_positions(report: &VerifyReport<usize>) -> Vec<usize> {
    report.dropped.iter().map(|d| d.fix).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Independent failures: every mode lands exactly what `each` lands, in
    /// the same order, within the documented number of runs.
    #[test]
    fn independent_failures_land_what_each_lands(
        breaks in proptest::collection::vec(proptest::bool::weighted(0.2), 0..80),
        config in config_strategy(),
    ) {
        let oracle = Oracle::independent(&breaks);
        let (landed, dropped) = oracle.each();
        let report = run(&oracle, config.clone(), None);
        prop_assert_eq!(&report.landed, &landed);
        prop_assert_eq!(dropped_positions(&report), dropped);
        prop_assert!(report.flaky.is_empty());
        prop_assert_eq!(report.reruns, report.dropped.len() as u32 * config.flaky_reruns);
        prop_assert_eq!(report.each_runs, breaks.len() as u32 + report.reruns);
        if config.mode == VerifyMode::Each {
            prop_assert_eq!(report.runs, report.each_runs);
        }
        assert_within_bound(&report, &config);
    }

    /// Interacting fixes (a fix breaks the tests only with, or only without,
    /// some earlier fixes): still exactly `each`'s landed set and order.
    #[test]
    fn interacting_fixes_land_what_each_lands(
        oracle in interacting_oracle(40),
        config in config_strategy(),
    ) {
        let (landed, dropped) = oracle.each();
        let report = run(&oracle, config.clone(), None);
        prop_assert_eq!(&report.landed, &landed);
        prop_assert_eq!(dropped_positions(&report), dropped);
        assert_within_bound(&report, &config);
    }

    /// Spurious failures on a tree's first run are caught by one re-run: the
    /// landed set is still `each`'s on the deterministic tests, every flaky
    /// event's fix landed, and no dropped fix was blamed on a flaky run.
    #[test]
    fn flaky_first_runs_are_not_blamed(
        oracle in interacting_oracle(30),
        config in config_strategy(),
        seed in any::<u64>(),
    ) {
        let config = VerifyConfig { flaky_reruns: config.flaky_reruns.max(1), ..config };
        let (landed, dropped) = oracle.each();
        let report = run(&oracle, config.clone(), Some(seed));
        prop_assert_eq!(&report.landed, &landed);
        prop_assert_eq!(dropped_positions(&report), dropped);
        for event in &report.flaky {
            prop_assert!(report.landed.contains(&event.fix));
            prop_assert!(event.failed_run < event.passed_run);
        }
        assert_within_bound(&report, &config);
    }

    /// The machine's own bookkeeping: run ids count up from 1, asking twice
    /// returns the same trial, and every trial's tree is the landed fixes plus
    /// the next undecided ones.
    #[test]
    fn trials_are_landed_plus_a_prefix(
        breaks in proptest::collection::vec(proptest::bool::weighted(0.3), 1..40),
        config in config_strategy(),
    ) {
        let mut verifier = Verifier::new((0..breaks.len()).collect::<Vec<_>>(), config).unwrap();
        let mut expected_run = 1;
        while let Step::Test(trial) = verifier.next_step() {
            prop_assert_eq!(verifier.next_step(), Step::Test(trial.clone()));
            prop_assert_eq!(trial.run, RunId(expected_run));
            prop_assert_eq!(trial.landed, verifier.landed().count());
            prop_assert_eq!(trial.candidates.start, breaks.len() - verifier.undecided().len());
            prop_assert!(!trial.candidates.is_empty());
            let tree = verifier.tree(&trial);
            prop_assert_eq!(tree.len(), trial.landed + trial.candidates.len());
            let pass = tree.candidates().iter().all(|&f| !breaks[f]);
            let outcome = if pass { RunOutcome::Pass } else { RunOutcome::fail("x") };
            verifier.record(trial.run, outcome).unwrap();
            expected_run += 1;
        }
        prop_assert!(verifier.is_done());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Stopping after any number of runs and resuming from the persisted
    /// outcomes ends in the same report as an uninterrupted session.
    #[test]
    fn resuming_from_recorded_outcomes_continues_the_same_session(
        breaks in proptest::collection::vec(proptest::bool::weighted(0.25), 0..40),
        config in config_strategy(),
        stop_after in 0usize..60,
    ) {
        let fixes: Vec<usize> = (0..breaks.len()).collect();
        let oracle = |tree: Tree<'_, usize>| {
            if tree.candidates().iter().any(|&f| breaks[f]) {
                RunOutcome::fail("log")
            } else {
                RunOutcome::Pass
            }
        };
        let whole = verify_with(fixes.clone(), config.clone(), |_, tree| oracle(tree)).unwrap();

        let mut first = Verifier::new(fixes.clone(), config.clone()).unwrap();
        let mut persisted = Vec::new();
        while persisted.len() < stop_after {
            let Step::Test(trial) = first.next_step() else { break };
            let outcome = oracle(first.tree(&trial));
            persisted.push(serde_json::to_string(&outcome).unwrap());
            first.record(trial.run, outcome).unwrap();
        }
        let outcomes = persisted.iter().map(|line| serde_json::from_str::<RunOutcome>(line).unwrap());
        let mut resumed = Verifier::resume(fixes, config, outcomes).unwrap();
        prop_assert_eq!(resumed.trace(), first.trace());
        while let Step::Test(trial) = resumed.next_step() {
            let outcome = oracle(resumed.tree(&trial));
            resumed.record(trial.run, outcome).unwrap();
        }
        prop_assert_eq!(resumed.report(), whole);
    }
}

#[test]
fn resuming_with_too_many_outcomes_is_refused() {
    let outcomes = vec![RunOutcome::Pass, RunOutcome::Pass];
    let err =
        Verifier::resume(vec!["a"], VerifyConfig::new(VerifyMode::Each), outcomes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot resume verification: outcome 1 was recorded after every fix was decided"
    );
    assert_eq!(
        serde_json::to_string(&RunOutcome::fail("logs/3.txt")).unwrap(),
        r#"{"outcome":"fail","log_ref":"logs/3.txt"}"#
    );
}

/// A failure on the very first run that passes on the identical re-run.
fn first_run_flaky(mode: VerifyMode) -> VerifyReport<&'static str> {
    let fixes = vec!["a", "b", "c", "d"];
    let mut runs = 0;
    verify_with(fixes, VerifyConfig::new(mode), |_, _| {
        runs += 1;
        if runs == 1 {
            RunOutcome::fail("first.log")
        } else {
            RunOutcome::Pass
        }
    })
    .unwrap()
}

#[test]
fn a_seeded_flaky_failure_is_reported_and_the_fix_kept() {
    for mode in [VerifyMode::Each, VerifyMode::Batch, VerifyMode::Auto] {
        let report = first_run_flaky(mode);
        assert_eq!(report.landed, vec!["a", "b", "c", "d"], "{mode}");
        assert!(report.dropped.is_empty(), "{mode}");
        assert_eq!(report.flaky.len(), 1, "{mode}");
        let event = &report.flaky[0];
        assert_eq!(event.failed_run, RunId(1), "{mode}");
        assert_eq!(event.log_ref, "first.log", "{mode}");
        assert_eq!(report.reruns, 1, "{mode}");
    }
    // In `each` the suspect is the first fix, re-run at once.
    let each = first_run_flaky(VerifyMode::Each);
    assert_eq!(each.flaky[0].fix, "a");
    assert_eq!(each.flaky[0].passed_run, RunId(2));
    assert_eq!(each.runs, 5);
    assert_eq!(each.runs_saved, 0);
}

#[test]
fn without_reruns_a_flaky_failure_is_blamed() {
    let mut runs = 0;
    let config = VerifyConfig {
        flaky_reruns: 0,
        ..VerifyConfig::new(VerifyMode::Each)
    };
    let report = verify_with(vec!["a", "b"], config, |_, _| {
        runs += 1;
        if runs == 1 {
            RunOutcome::fail("first.log")
        } else {
            RunOutcome::Pass
        }
    })
    .unwrap();
    assert_eq!(report.landed, vec!["b"]);
    assert_eq!(
        report.dropped,
        vec![Dropped {
            fix: "a",
            position: 0,
            run: RunId(1),
            log_ref: "first.log".to_owned(),
        }]
    );
}

/// Runs a named sequence where the fixes in `failing` break the tests, and
/// returns the trace and the report as one text.
fn check(mode: VerifyMode, count: usize, failing: &[usize]) -> String {
    let fixes: Vec<String> = (1..=count).map(|i| format!("f{i}")).collect();
    let mut verifier = Verifier::new(fixes, VerifyConfig::new(mode)).unwrap();
    while let Step::Test(trial) = verifier.next_step() {
        let pass = trial
            .candidates
            .clone()
            .all(|p| !failing.contains(&(p + 1)));
        let outcome = if pass {
            RunOutcome::Pass
        } else {
            RunOutcome::fail(format!("logs/run-{}.txt", trial.run.0))
        };
        verifier.record(trial.run, outcome).unwrap();
    }
    let report = verifier.report();
    format!(
        "{}\nlanded: {}\ndropped: {}\nruns: {} (re-runs {}), each: {}, saved: {}\n",
        verifier.render_trace(),
        report.landed.join(" "),
        report
            .dropped
            .iter()
            .map(|d| format!("{} ({})", d.fix, d.log_ref))
            .collect::<Vec<_>>()
            .join(", "),
        report.runs,
        report.reruns,
        report.each_runs,
        report.runs_saved,
    )
}

#[test]
fn batch_trace_of_sixteen_fixes_with_two_failures() {
    let text = check(VerifyMode::Batch, 16, &[4, 11]);
    insta::assert_snapshot!(text);
}

#[test]
fn auto_switches_to_one_by_one_when_most_fixes_fail() {
    let text = check(VerifyMode::Auto, 10, &[1, 2, 3, 5, 6, 8]);
    assert!(text.contains("switch to each"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn auto_switches_back_when_failures_stop() {
    let failing: Vec<usize> = (1..=6).collect();
    let text = check(VerifyMode::Auto, 60, &failing);
    let to_each = text.find("switch to each").unwrap();
    let to_batch = text.find("switch to batch").unwrap();
    assert!(to_each < to_batch, "{text}");
}

#[test]
fn report_serializes_with_named_fields() {
    let report = first_run_flaky(VerifyMode::Batch);
    insta::assert_json_snapshot!(report);
}

#[test]
fn an_empty_sequence_needs_no_run() {
    let report = verify_with(Vec::<u8>::new(), VerifyConfig::default(), |_, _| {
        RunOutcome::Pass
    })
    .unwrap();
    assert_eq!(report.runs, 0);
    assert_eq!(report.each_runs, 0);
    assert!(report.landed.is_empty());
}

#[test]
fn results_for_the_wrong_run_are_refused() {
    let mut verifier = Verifier::new(vec![1, 2, 3], VerifyConfig::default()).unwrap();
    assert_eq!(
        verifier.record(RunId(1), RunOutcome::Pass),
        Err(VerifyError::NoRunOutstanding { run: RunId(1) })
    );
    let Step::Test(trial) = verifier.next_step() else {
        panic!("expected a trial");
    };
    let err = verifier.record(RunId(7), RunOutcome::Pass).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the outstanding test run is run 1, but a result for run 7 was recorded"
    );
    // The outstanding trial is kept.
    assert_eq!(verifier.next_step(), Step::Test(trial.clone()));
    verifier.record(trial.run, RunOutcome::Pass).unwrap();
}

#[test]
fn modes_parse_and_print() {
    for mode in [VerifyMode::Each, VerifyMode::Batch, VerifyMode::Auto] {
        assert_eq!(mode.as_str().parse::<VerifyMode>().unwrap(), mode);
        assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{mode}\""));
    }
    assert_eq!(
        "bisect".parse::<VerifyMode>().unwrap_err().to_string(),
        "unknown verify mode `bisect` (expected each, batch or auto)"
    );
    assert_eq!(VerifyMode::default(), VerifyMode::Auto);
}

#[test]
fn bad_configurations_are_refused_with_the_field() {
    let cases = [
        (
            VerifyConfig {
                max_batch: 0,
                ..VerifyConfig::default()
            },
            "`max_batch` is 0, expected 1 to 128",
        ),
        (
            VerifyConfig {
                max_batch: 129,
                ..VerifyConfig::default()
            },
            "`max_batch` is 129, expected 1 to 128",
        ),
        (
            VerifyConfig {
                prior_passes: f64::NAN,
                ..VerifyConfig::default()
            },
            "`prior_passes` is NaN, expected a positive number",
        ),
        (
            VerifyConfig {
                to_each_rate: 1.5,
                ..VerifyConfig::default()
            },
            "`to_each_rate` is 1.5, expected a rate in (0, 1]",
        ),
        (
            VerifyConfig {
                to_batch_rate: 0.5,
                ..VerifyConfig::default()
            },
            "`to_batch_rate` is 0.5, expected at most to_each_rate",
        ),
    ];
    for (config, message) in cases {
        let err = Verifier::new(vec![1], config).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid verify configuration: {message}")
        );
    }
    assert_eq!(VerifyConfig::default().validate(), Ok(()));
}

#[test]
fn each_optimal_rate_is_the_golden_section_threshold() {
    assert!((EACH_OPTIMAL_RATE - (3.0 - 5.0_f64.sqrt()) / 2.0).abs() < 1e-15);
}
