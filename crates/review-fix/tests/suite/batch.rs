//! Batch verification at landing (`--verify batch|auto`) against `each`,
//! with fakes: FakeVcs over a real directory, an agent that rewrites one
//! line of a file in whatever tree it is given, and a test runner that fails
//! while any source file holds `BAD`.
//!
//! The property: given deterministic tests, `batch` and `auto` land exactly
//! the commits `each` lands (message and tree, in order).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::event::{CollectingSink, Event};
use orchestrator_core::fakes::{FakeVcs, ScriptedTestRunner};
use orchestrator_core::gate::AutoYes;
use orchestrator_core::test_runner::{TestReport, TestRequest, TestRunner, TestRunnerError};
use orchestrator_core::vcs::Vcs;
use orchestrator_review_fix::{
    FixProgress, FixResult, Outcome, PlannerMode, ReviewFixConfig, RunReport, Services,
    SharedRunner, VerifyMode, run,
};
use proptest::prelude::*;
use serde_json::json;

/// One finding of a scenario: which file and line it rewrites, and whether
/// its fix breaks the tests.
#[derive(Debug, Clone)]
struct Fix {
    file: usize,
    breaks: bool,
}

/// Rewrites line `line` of `file` in the request's working tree (so the
/// same fix applies on any tree), `BAD` when the fix breaks the tests.
#[derive(Debug, Default)]
struct LineAgent {
    edits: HashMap<String, (String, usize, String)>,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Agent for LineAgent {
    fn name(&self) -> &str {
        "line-agent"
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let Some((file, line, text)) = self.edits.get(&request.id) else {
            return Err(AgentError::Unsupported {
                reason: format!("no edit for {}", request.id),
            });
        };
        let path = request.workdir.join(file);
        let content = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = content.lines().map(str::to_owned).collect();
        lines[*line] = text.clone();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        Ok(AgentResponse::text("edited"))
    }
}

fn failing_when_bad(req: &TestRequest) -> TestReport {
    let bad = (0..4).any(|k| {
        std::fs::read_to_string(req.workdir.join(format!("src/f{k}.rs")))
            .is_ok_and(|t| t.contains("BAD"))
    });
    if bad {
        TestReport::failing(vec!["tests::no_bad".into()], "assertion failed: BAD found")
    } else {
        TestReport::passing(1)
    }
}

/// What a session did, for comparing modes.
struct Ran {
    commits: Vec<(String, String)>,
    report: RunReport,
    test_runs: usize,
    events: Vec<Event>,
    session: PathBuf,
    _dir: tempfile::TempDir,
}

struct Scenario {
    fixes: Vec<Fix>,
}

impl Scenario {
    fn new(fixes: &[(usize, bool)]) -> Self {
        Scenario {
            fixes: fixes
                .iter()
                .map(|&(file, breaks)| Fix { file, breaks })
                .collect(),
        }
    }

    fn agent(&self) -> LineAgent {
        let mut edits = HashMap::new();
        let mut next_line = [0usize; 4];
        for (i, f) in self.fixes.iter().enumerate() {
            let id = format!("F{}", i + 1);
            let line = next_line[f.file];
            next_line[f.file] += 1;
            let text = if f.breaks {
                format!("BAD {id}")
            } else {
                format!("fixed {id}")
            };
            edits.insert(id, (format!("src/f{}.rs", f.file), line, text));
        }
        LineAgent {
            edits,
            calls: AtomicUsize::new(0),
        }
    }

    fn findings(&self) -> serde_json::Value {
        let mut next_line = [0usize; 4];
        let all: Vec<serde_json::Value> = self
            .fixes
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let line = next_line[f.file] + 1;
                next_line[f.file] += 1;
                json!({"id": format!("F{}", i + 1), "title": format!("Fix {}", i + 1),
                       "severity": "medium", "dimension": "quality",
                       "file": format!("src/f{}.rs", f.file), "line": line,
                       "description": "x", "recommendations": ["fix it"]})
            })
            .collect();
        json!({"session_id": "WFS-1", "findings": all})
    }
}

fn write_tree(root: &Path) {
    for k in 0..4 {
        let p = root.join(format!("src/f{k}.rs"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let lines: Vec<String> = (0..12).map(|i| format!("line {i}")).collect();
        std::fs::write(p, lines.join("\n") + "\n").unwrap();
    }
}

/// The four files in a new repository, and the scenario's findings in its
/// `.review/` folder: the folder, its version control and the findings.
fn scenario_repo(scenario: &Scenario) -> (tempfile::TempDir, Arc<FakeVcs>, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
    let review = dir.path().join(".review");
    std::fs::create_dir_all(&review).unwrap();
    let input = review.join("fix-export-1.json");
    std::fs::write(&input, scenario.findings().to_string()).unwrap();
    (dir, vcs, input)
}

async fn run_scenario(
    scenario: &Scenario,
    mode: VerifyMode,
    tests: Arc<dyn TestRunner>,
    counter: impl Fn() -> usize,
) -> Ran {
    let (dir, vcs, input) = scenario_repo(scenario);
    let base = vcs.head().await.unwrap();
    let sink = Arc::new(CollectingSink::new());
    let services = Services {
        agent: Arc::new(scenario.agent()),
        vcs: vcs.clone(),
        tests: Arc::new(SharedRunner(tests)),
        gate: Arc::new(AutoYes),
        sink: sink.clone(),
        provisioner: None,
    };
    let before = counter();
    let report = run(config(input, mode), services).await.unwrap();
    let commits = vcs
        .log_since(&base)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.message, c.tree))
        .collect();
    assert!(vcs.status().await.unwrap().is_clean());
    // Worktrees went outside the repository and are gone. The repository's
    // cache folder itself may stay behind with only the cache's marker and
    // lock: its lease removes it when nothing else holds its lock, and a
    // prune of another run (the tests run at once on one cache) may.
    let worktrees = orchestrator_core::state::worktree_root(dir.path());
    let left: Vec<std::ffi::OsString> = std::fs::read_dir(&worktrees)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.file_name()))
                .filter(|n| !n.to_string_lossy().starts_with(".orchestrator-cache"))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "worktrees left in {}: {left:?}",
        worktrees.display()
    );
    assert!(!report.session_dir.join("worktrees").exists());
    assert!(!report.session_dir.join("verify-state.json").exists());
    Ran {
        commits,
        test_runs: counter() - before,
        events: sink.events(),
        session: report.session_dir.clone(),
        report,
        _dir: dir,
    }
}

fn config(input: PathBuf, mode: VerifyMode) -> ReviewFixConfig {
    ReviewFixConfig::default()
        .with_inputs(vec![input])
        .with_planner(PlannerMode::Deterministic)
        .with_verify(mode)
}

/// Runs the scenario in every mode with deterministic tests; asserts the
/// same commits; returns the runs in order each, batch, auto.
async fn compare(scenario: &Scenario) -> [Ran; 3] {
    let mut out = Vec::new();
    for mode in [VerifyMode::Each, VerifyMode::Batch, VerifyMode::Auto] {
        let tests = Arc::new(ScriptedTestRunner::from_fn(failing_when_bad));
        let t = tests.clone();
        out.push(run_scenario(scenario, mode, tests, move || t.runs()).await);
    }
    let [each, batch, auto]: [Ran; 3] = out.try_into().ok().unwrap();
    assert_eq!(batch.commits, each.commits, "batch lands what each lands");
    assert_eq!(auto.commits, each.commits, "auto lands what each lands");
    let good = scenario.fixes.iter().filter(|f| !f.breaks).count();
    assert_eq!(each.commits.len(), good);
    for ran in [&each, &batch, &auto] {
        let v = &ran.report.verification;
        assert_eq!(v.test_runs as usize, ran.test_runs);
        assert_eq!(
            ran.events
                .iter()
                .filter(|e| matches!(e, Event::TestsRan { .. }))
                .count(),
            ran.test_runs,
            "one TestsRan event per test run"
        );
        assert_eq!(ran.report.count("fixed"), good);
        assert_eq!(
            ran.report.count("failed"),
            scenario.fixes.len() - good,
            "{:#?}",
            ran.report.findings
        );
        for f in ran.report.findings.iter().filter(|f| f.result == "failed") {
            // The scripted agent makes the identical change again: its
            // second attempt stops the finding without a test run.
            assert_eq!(f.attempts, 2, "{f:?}");
            let error = f.error.as_deref().unwrap();
            assert!(error.contains("attempt 2 repeats attempt 1"), "{error}");
            assert!(error.contains("BAD found"), "{error}");
        }
    }
    // `each` needs the run at the base, one run per fix plus a flaky
    // re-run per failing fix, and a parallel stage's combination is tested
    // again at landing.
    let bad = scenario.fixes.len() - good;
    let landing = landing_runs(&each.events);
    assert_eq!(each.test_runs - landing, 1 + good + 2 * bad);
    assert_eq!(each.report.verification.each_runs as usize, each.test_runs);
    // The baseline `batch` and `auto` report is what `each` needed one fix
    // at a time.
    for ran in [&batch, &auto] {
        assert_eq!(
            ran.report.verification.each_runs as usize,
            each.test_runs - landing,
            "{:?}",
            ran.report.verification
        );
    }
    [each, batch, auto]
}

/// Test runs made while a stage was verified at landing (between the
/// `verify-stage-N` job's start and finish).
fn landing_runs(events: &[Event]) -> usize {
    let mut inside = false;
    let mut n = 0;
    for e in events {
        match e {
            Event::JobStarted { id, .. } if id.starts_with("verify-stage-") => inside = true,
            Event::JobFinished { id, .. } if id.starts_with("verify-stage-") => inside = false,
            Event::TestsRan { .. } if inside => n += 1,
            _ => {}
        }
    }
    n
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_failure_lands_everything_in_far_fewer_runs() {
    // Eight fixes over three files: three parallel groups.
    let s = Scenario::new(&[
        (0, false),
        (1, false),
        (2, false),
        (0, false),
        (1, false),
        (0, false),
        (2, false),
        (1, false),
    ]);
    let [each, batch, auto] = compare(&s).await;
    // The base, one run per fix, and one for the three groups'
    // combination.
    assert_eq!(each.test_runs, 10);
    assert_eq!(landing_runs(&each.events), 1);
    assert_eq!(batch.test_runs, 2, "the base and one run at the tip");
    assert_eq!(auto.test_runs, 2);
    assert_eq!(batch.report.verification.runs_saved(), 7);
    assert_eq!(batch.report.verification.mode, VerifyMode::Batch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_fix_is_dropped_retried_and_reported_like_each() {
    // F2 breaks; F5 shares its file (a sibling re-applied after the drop).
    let s = Scenario::new(&[
        (0, false),
        (1, true),
        (2, false),
        (0, false),
        (1, false),
        (2, false),
    ]);
    let [each, batch, _auto] = compare(&s).await;
    assert!(
        batch.test_runs < each.test_runs,
        "batch {} vs each {}",
        batch.test_runs,
        each.test_runs
    );
    // The failing output went back to the agent, and into the progress file.
    let progress = progress_of(&batch.session, "F2");
    let f2 = progress
        .findings
        .iter()
        .find(|f| f.finding_id == "F2")
        .unwrap();
    assert_eq!(f2.result, Some(FixResult::Failed));
    assert!(
        progress
            .errors
            .iter()
            .any(|e| e.error_type == "test_failure" && e.message.contains("BAD found"))
    );
    // One stage: every group's progress file has the stage's figures, and
    // the run's are those and the run at the base (which one by one needs
    // too).
    let v = progress.verification.unwrap();
    assert_eq!(v.mode, VerifyMode::Batch);
    assert_eq!(v.test_runs + 1, batch.report.verification.test_runs);
    assert_eq!(v.each_runs + 1, batch.report.verification.each_runs);
    assert_eq!(v.runs_saved, batch.report.verification.runs_saved());
    assert_eq!(progress.phase, "done");
    let summary = std::fs::read_to_string(batch.session.join("fix-summary.md")).unwrap();
    assert!(summary.contains("(verify batch"), "{summary}");
    assert!(summary.contains("one by one: 8"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bad_fixes_in_one_group_and_across_groups() {
    let s = Scenario::new(&[
        (0, false),
        (0, true),
        (0, false),
        (1, false),
        (1, true),
        (2, false),
        (0, false),
    ]);
    compare(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_bad_fixes_land_nothing() {
    let s = Scenario::new(&[(0, true), (1, true), (0, true), (2, true)]);
    let [_each, batch, auto] = compare(&s).await;
    assert!(batch.commits.is_empty());
    assert_eq!(batch.report.outcome, Outcome::SomeFailed);
    // `auto` moves to one by one when everything fails: never much worse.
    assert!(auto.test_runs <= batch.test_runs + 2);
}

/// Fails when both `src/f0.rs` and `src/f1.rs` carry a fix: each fix passes
/// on its own, the two together break the tests.
fn failing_when_combined(req: &TestRequest) -> TestReport {
    let fixed = |k: usize| {
        std::fs::read_to_string(req.workdir.join(format!("src/f{k}.rs")))
            .is_ok_and(|t| t.contains("fixed"))
    };
    if fixed(0) && fixed(1) {
        TestReport::failing(
            vec!["tests::combined".into()],
            "assertion failed: f0 and f1 clash",
        )
    } else {
        TestReport::passing(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mode_tests_the_landed_combination_of_parallel_groups() {
    // Two fixes in two files: two groups of one parallel stage, each fix
    // tested alone in its own worktree, where it passes.
    let s = Scenario::new(&[(0, false), (1, false)]);
    let tests = Arc::new(ScriptedTestRunner::from_fn(failing_when_combined));
    let t = tests.clone();
    let ran = run_scenario(&s, VerifyMode::Each, tests.clone(), move || t.runs()).await;
    // The tip that landed passes the tests.
    let tip = failing_when_combined(&TestRequest::all(ran._dir.path()));
    assert!(tip.is_pass(), "the landed tip fails: {tip:?}");
    assert_eq!(ran.commits.len(), 1, "{:?}", ran.commits);
    assert_eq!(ran.report.count("fixed"), 1, "{:#?}", ran.report.findings);
    let f2 = ran.report.findings.iter().find(|f| f.id == "F2").unwrap();
    assert_eq!(f2.result, "failed", "{f2:?}");
    assert!(
        f2.error.as_deref().unwrap().contains("f0 and f1 clash"),
        "{f2:?}"
    );
    assert_eq!(ran.report.outcome, Outcome::SomeFailed);
}

/// A tool configuration the user has not committed (`lint.toml` at the root
/// of the dirty tree) is not seen by the tests of a fix in a worktree: the
/// worktrees live outside the repository, so no parent folder of theirs is
/// the user's tree (a tool that looks upwards for its config, as cargo,
/// eslint or ruff do, would otherwise test with the user's settings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktree_test_runs_do_not_see_the_users_uncommitted_tool_config() {
    let s = Scenario::new(&[(0, false), (1, false)]);
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path());
    let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
    std::fs::write(dir.path().join("lint.toml"), "deny = [\"everything\"]\n").unwrap();
    let review = dir.path().join(".review");
    std::fs::create_dir_all(&review).unwrap();
    let input = review.join("fix-export-1.json");
    std::fs::write(&input, s.findings().to_string()).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<PathBuf>::new()));
    let seen_by_runner = seen.clone();
    let tests = Arc::new(ScriptedTestRunner::from_fn(move |req: &TestRequest| {
        let found: Vec<PathBuf> = req
            .workdir
            .ancestors()
            .map(|a| a.join("lint.toml"))
            .filter(|p| p.is_file())
            .collect();
        if found.is_empty() {
            TestReport::passing(1)
        } else {
            seen_by_runner.lock().unwrap().extend(found);
            TestReport::failing(vec!["lint".into()], "the user's lint.toml was read")
        }
    }));
    let services = Services {
        agent: Arc::new(s.agent()),
        vcs: vcs.clone(),
        tests: Arc::new(SharedRunner(tests.clone())),
        gate: Arc::new(AutoYes),
        sink: Arc::new(CollectingSink::new()),
        provisioner: None,
    };
    let mut cfg = config(input, VerifyMode::Each);
    cfg.allow_dirty = true;
    let report = run(cfg, services).await.unwrap();
    assert!(tests.runs() >= 2, "the fixes were tested");
    assert!(
        seen.lock().unwrap().is_empty(),
        "seen: {:?}",
        seen.lock().unwrap()
    );
    assert_eq!(report.count("fixed"), 2, "{:#?}", report.findings);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lint.toml")).unwrap(),
        "deny = [\"everything\"]\n",
        "the user's file is untouched"
    );
}

fn progress_of(session: &Path, finding: &str) -> FixProgress {
    for n in 1.. {
        let path = session.join(format!("fix-progress-{n}.json"));
        let p: FixProgress = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if p.findings.iter().any(|f| f.finding_id == finding) {
            return p;
        }
    }
    unreachable!()
}

/// Fails the first test run after the one at the base only, then answers
/// like [`failing_when_bad`].
fn first_run_flaky() -> Arc<ScriptedTestRunner> {
    let count = Arc::new(AtomicUsize::new(0));
    Arc::new(ScriptedTestRunner::from_fn(move |req| {
        if count.fetch_add(1, Ordering::SeqCst) == 1 {
            TestReport::failing(vec!["tests::timing".into()], "timed out waiting for a lock")
        } else {
            failing_when_bad(req)
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_flaky_failure_is_reported_and_the_fix_kept() {
    let s = Scenario::new(&[(0, false), (1, false), (0, false)]);
    for mode in [VerifyMode::Each, VerifyMode::Batch, VerifyMode::Auto] {
        let tests = first_run_flaky();
        let t = tests.clone();
        let ran = run_scenario(&s, mode, tests, move || t.runs()).await;
        assert_eq!(ran.report.outcome, Outcome::AllFixed, "{mode}");
        assert_eq!(ran.commits.len(), 3, "{mode}: every fix kept");
        let v = ran.report.verification;
        assert_eq!(v.flaky, 1, "{mode}: {v:?}");
        assert_eq!(v.reruns, 1, "{mode}: {v:?}");
        // Reported in a progress file, the summary and the events.
        let flaky_errors: Vec<_> = (1..=2)
            .map(|n| {
                serde_json::from_slice::<FixProgress>(
                    &std::fs::read(ran.session.join(format!("fix-progress-{n}.json"))).unwrap(),
                )
                .unwrap()
            })
            .flat_map(|p| p.errors)
            .filter(|e| e.error_type == "flaky_test")
            .collect();
        assert_eq!(flaky_errors.len(), 1, "{mode}: {flaky_errors:#?}");
        assert!(flaky_errors[0].message.contains("tests::timing"), "{mode}");
        let summary = std::fs::read_to_string(ran.session.join("fix-summary.md")).unwrap();
        assert!(summary.contains("- Flaky test failures: 1"), "{summary}");
        assert!(summary.contains("## Flaky tests"), "{summary}");
        if mode == VerifyMode::Batch {
            insta::assert_snapshot!("summary_with_a_flaky_failure_batch", redact(&summary));
        }
        assert!(ran.events.iter().any(
            |e| matches!(e, Event::Warning { message } if message.starts_with("flaky tests"))
        ));
    }
}

/// A runner that never returns from its `hang_at`-th run (the session is
/// then dropped, as if killed), otherwise like [`failing_when_bad`].
#[derive(Debug)]
struct HangsAt {
    inner: ScriptedTestRunner,
    hang_at: usize,
}

#[async_trait::async_trait]
impl TestRunner for HangsAt {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        let report = self.inner.run(request).await;
        if self.inner.runs() == self.hang_at {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        report
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_batch_verification_resumes_without_duplicate_commits() {
    let s = Scenario::new(&[(0, false), (0, true), (0, false), (0, false), (0, false)]);
    let [each, _, _] = compare(&s).await;
    // Run 1 is at the base; the batch verification's runs follow.
    for hang_at in 2..=4 {
        let dir = tempfile::tempdir().unwrap();
        write_tree(dir.path());
        let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
        let base = vcs.head().await.unwrap();
        let review = dir.path().join(".review");
        std::fs::create_dir_all(&review).unwrap();
        let input = review.join("fix-export-1.json");
        std::fs::write(&input, s.findings().to_string()).unwrap();
        let services = |tests: Arc<dyn TestRunner>| Services {
            agent: Arc::new(s.agent()),
            vcs: vcs.clone(),
            tests: Arc::new(SharedRunner(tests)),
            gate: Arc::new(AutoYes),
            sink: Arc::new(CollectingSink::new()),
            provisioner: None,
        };
        let hanging = Arc::new(HangsAt {
            inner: ScriptedTestRunner::from_fn(failing_when_bad),
            hang_at,
        });
        let h = hanging.clone();
        let first = services(hanging);
        let cfg = config(input.clone(), VerifyMode::Batch);
        let handle = tokio::spawn(async move { run(cfg, first).await });
        tokio::time::timeout(Duration::from_secs(10), async {
            while h.inner.runs() < hang_at {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        handle.abort();
        let _ = handle.await;
        // Killed in the middle of the verification.
        let sessions: Vec<PathBuf> = std::fs::read_dir(review.join("fixes"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(sessions.len(), 1);
        assert!(
            sessions[0].join("verify-state.json").is_file(),
            "hang at {hang_at}"
        );
        let mut cfg = config(input, VerifyMode::Batch);
        cfg.resume = true;
        let report = run(
            cfg,
            services(Arc::new(ScriptedTestRunner::from_fn(failing_when_bad))),
        )
        .await
        .unwrap();
        assert_eq!(report.outcome, Outcome::SomeFailed, "hang at {hang_at}");
        let got: Vec<(String, String)> = vcs
            .log_since(&base)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.message, c.tree))
            .collect();
        assert_eq!(got, each.commits, "hang at run {hang_at}");
        assert!(vcs.status().await.unwrap().is_clean());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Random fixes over three files, each breaking the tests or not:
    /// `batch` and `auto` land exactly the commits `each` lands.
    #[test]
    fn batch_and_auto_land_what_each_lands(
        fixes in proptest::collection::vec((0usize..3, proptest::bool::weighted(0.3)), 1..9)
    ) {
        let s = Scenario::new(&fixes);
        rt().block_on(compare(&s));
    }
}

#[tokio::test]
async fn serial_isolation_verifies_each_fix_on_its_own() {
    let s = Scenario::new(&[(0, false), (1, true)]);
    let (dir, vcs, input) = scenario_repo(&s);
    let tests = Arc::new(ScriptedTestRunner::from_fn(failing_when_bad));
    let mut cfg = config(input, VerifyMode::Batch);
    cfg.isolation = orchestrator_review_fix::Isolation::Serial;
    let report = run(
        cfg,
        Services {
            agent: Arc::new(s.agent()),
            vcs,
            tests: Arc::new(SharedRunner(tests.clone())),
            gate: Arc::new(AutoYes),
            sink: Arc::new(CollectingSink::new()),
            provisioner: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(report.verification.mode, VerifyMode::Each);
    assert_eq!(
        report.verification.test_runs, 4,
        "the base, F1, F2 and its re-run"
    );
    // One worktree of the run's pool serves every test run (the base's
    // too); none runs in the user's tree.
    let trees: std::collections::BTreeSet<_> =
        tests.requests().iter().map(|r| r.workdir.clone()).collect();
    assert_eq!(trees.len(), 1, "{trees:?}");
    assert!(
        !trees.iter().any(|t| t.starts_with(dir.path())),
        "{trees:?}"
    );
}

/// The summary with the session id, times and commit ids replaced.
fn redact(summary: &str) -> String {
    summary
        .lines()
        .map(|l| {
            if l.starts_with("# Fix summary: ") {
                "# Fix summary: fix-<session>".to_owned()
            } else if l.starts_with("- Started:") {
                "- Started: <time>; finished: <time>".to_owned()
            } else if l.starts_with("- Worktrees:") {
                crate::redact_worktree_times(l)
            } else if l.starts_with("| F") && !l.starts_with("| Finding") {
                let mut cells: Vec<&str> = l.split(" | ").collect();
                let last = cells.len() - 1;
                if cells[last] != "- |" {
                    cells[last] = "<commit> |";
                }
                cells.join(" | ")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A stage of more groups than run at once needs no more worktrees than
/// run at once: each group's worktree goes back to the pool when the
/// group ends (its commits are read then, and stay readable by id), and
/// the next group moves it to the stage's base. Four groups, one at a
/// time: one worktree, made once and reused, where each group used to
/// keep its own until the stage landed.
#[tokio::test]
async fn four_groups_one_at_a_time_make_one_worktree() {
    let s = Scenario::new(&[(0, false), (1, false), (2, false), (3, false)]);
    let (_dir, vcs, input) = scenario_repo(&s);
    let base = vcs.head().await.unwrap();
    let tests = Arc::new(ScriptedTestRunner::from_fn(failing_when_bad));
    let cfg = config(input, VerifyMode::Batch).with_max_parallel_groups(1);
    let report = run(
        cfg,
        Services {
            agent: Arc::new(s.agent()),
            vcs: vcs.clone(),
            tests: Arc::new(SharedRunner(tests)),
            gate: Arc::new(AutoYes),
            sink: Arc::new(CollectingSink::new()),
            provisioner: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(report.count("fixed"), 4, "{:#?}", report.findings);
    assert_eq!(
        vcs.log_since(&base).await.unwrap().len(),
        4,
        "every fix lands"
    );
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    let line = summary
        .lines()
        .find(|l| l.starts_with("- Worktrees:"))
        .unwrap_or_default();
    assert!(line.starts_with("- Worktrees: 1 made"), "{summary}");
}
