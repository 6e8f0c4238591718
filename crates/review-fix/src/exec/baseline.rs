//! The tests at the base: one run on the untouched tree before the first
//! fix (it also warms the build), which decides how every fix is judged.
//!
//! - Green: a fix must leave every test passing, as always.
//! - Red, with the failing tests named: the run says so at once, and a
//!   fix is judged by "no test fails that passed at the base"
//!   ([`Baseline::judge`], applied to every run in [`run_tests`]: one by
//!   one, batches and bisection alike); the base's failures are listed in
//!   the summary. `--require-green-base` refuses instead.
//! - Red without named failures (a check that fails until the fix, a
//!   runner whose output is not read): a fix must make the command pass,
//!   as with a green base; the run says so.
//! - The project does not build at the base, or the run times out: the
//!   run stops before any agent call.
//!
//! The run happens where fixes are tested, in a worktree of the run's pool
//! at HEAD (the user's uncommitted files are not the base). Its result is
//! kept in the session's `baseline.json`, so a resume does not run it
//! again.
//!
//! Put off until needed: when every fix applies a linter's exact
//! suggestion (the builtin agent, whose fixes cost nothing to make again),
//! the base is tested only when a run of the fixes fails. A run that passes
//! passes against any base, so the judgement is the same; a pass whose
//! fixes pass saves the base's run (a third of the test runs of a small
//! crate's `--relint`). The first failing run measures the base (in a
//! worktree of its own) before it is judged; a base that cannot be judged
//! then halts the run for a human, its fixes unlanded, where an eager run
//! would have refused before the first fix. `--require-green-base` and a
//! known baseline keep the eager run.

use super::*;

/// The file in a session folder holding the base's test result.
pub(crate) const BASELINE_FILE: &str = "baseline.json";

/// Format version of `baseline.json`.
const BASELINE_VERSION: u32 = 1;

/// `baseline.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct BaselineFile {
    version: u32,
    /// The commit the tests ran on.
    head: String,
    /// What failed there.
    #[serde(flatten)]
    baseline: Baseline,
}

/// Why a run does not start fixing.
#[derive(Debug)]
pub(crate) enum BaseRefusal {
    /// The base is red and `--require-green-base` was given.
    Red(Vec<String>),
    /// The base's run cannot be judged against (see [`BaselineError`]).
    Unjudgeable(String),
    /// The baseline could not be kept.
    Io(String),
}

/// The baseline a session's `baseline.json` keeps, if it has one.
pub(crate) fn kept_baseline(session_dir: &Path) -> Option<Baseline> {
    read_json_if_exists::<BaselineFile>(session_dir.join(BASELINE_FILE))
        .ok()
        .flatten()
        .filter(|f| f.version == BASELINE_VERSION)
        .map(|f| f.baseline)
}

/// Establishes the run's baseline (see the module documentation): read
/// from the session when an earlier run made it, else run once.
pub(crate) async fn establish(shared: &Shared) -> Result<(), BaseRefusal> {
    let path = shared.paths.dir.join(BASELINE_FILE);
    if let Ok(Some(kept)) = read_json_if_exists::<BaselineFile>(&path)
        && kept.version == BASELINE_VERSION
    {
        *lock(&shared.baseline) = kept.baseline;
        return Ok(());
    }
    let head = shared
        .vcs
        .head()
        .await
        .map_err(|e| BaseRefusal::Io(format!("failed to read HEAD: {e}")))?;
    let baseline = match &shared.config.known_baseline {
        // A re-lint pass starts where the previous one ended, which no
        // fix left worse than that pass's base.
        Some(known) => known.clone(),
        None if deferrable(shared) => {
            // Counted for one-by-one testing, which would run it first.
            shared.with_stats(|s| s.each_runs += 1);
            *shared.base_pending.lock().await = Some(head);
            return Ok(());
        }
        None => measure(shared, &head).await?,
    };
    adopt(shared, &head, baseline)
}

/// Whether the base's run can wait for a failing run (module docs).
fn deferrable(shared: &Shared) -> bool {
    shared.applies_exact_suggestions()
        && !shared.config.require_green_base
        && crate::effective_mode(&shared.config) != crate::VerifyMode::Each
}

/// The base's result for a failing run's judgement: measured now when it
/// was put off ([`establish`]), once for the run. `Err` when the base
/// cannot be judged: the run is halted for a human (with why), and the
/// failing run is not blamed on its fixes.
pub(crate) async fn base_for_judging(shared: &Shared) -> Result<(), String> {
    let mut pending = shared.base_pending.lock().await;
    let Some(head) = pending.take() else {
        return Ok(());
    };
    let adopted = match measure_counted(shared, &head, false).await {
        Ok(baseline) => adopt(shared, &head, baseline),
        Err(refusal) => Err(refusal),
    };
    adopted.map_err(|refusal| {
        let why = match refusal {
            BaseRefusal::Red(tests) => format!("the tests fail at the base: {}", tests.join(", ")),
            BaseRefusal::Unjudgeable(message) | BaseRefusal::Io(message) => message,
        };
        let reason = format!(
            "a run of the fixes failed and the base cannot be judged against ({why}); no fix is landed on that run"
        );
        shared.halt_for_human(reason.clone());
        reason
    })
}

/// Takes `baseline` as the run's: says how a red base is judged, refuses
/// one under `--require-green-base`, keeps it in `baseline.json`.
fn adopt(shared: &Shared, head: &CommitId, baseline: Baseline) -> Result<(), BaseRefusal> {
    let path = shared.paths.dir.join(BASELINE_FILE);
    if let Some(how) = &baseline.unnamed_failure {
        if shared.config.require_green_base {
            return Err(BaseRefusal::Red(vec![format!("the test command {how}")]));
        }
        shared.warn(format!(
            "the test command fails before any fix ({how}) and names no failing test: each fix must make it pass"
        ));
    } else if !baseline.is_green() {
        let names: Vec<String> = baseline.failing_tests.iter().cloned().collect();
        if shared.config.require_green_base {
            return Err(BaseRefusal::Red(names));
        }
        shared.warn(format!(
            "the tests already fail before any fix: {} ({}); each fix is judged by no new failure, and these are listed in the summary",
            names.join(", "),
            counted(names.len() as u64, "test", "tests")
        ));
    }
    write_json_atomic(
        &path,
        &BaselineFile {
            version: BASELINE_VERSION,
            head: head.to_string(),
            baseline: baseline.clone(),
        },
    )
    .map_err(|e| BaseRefusal::Io(format!("failed to keep the baseline: {e}")))?;
    *lock(&shared.baseline) = baseline;
    Ok(())
}

/// Runs the tests at `head` once (counted, and counted for one-by-one
/// testing too, which needs the same run). A failure is not re-run: a
/// flaky test that fails here is then a base failure, blamed on no fix,
/// which is what a re-run passing would have given too.
async fn measure(shared: &Shared, head: &CommitId) -> Result<Baseline, BaseRefusal> {
    measure_counted(shared, head, true).await
}

/// [`measure`], counted for one-by-one testing when `each` (a put-off run
/// was counted when it was put off).
async fn measure_counted(
    shared: &Shared,
    head: &CommitId,
    each: bool,
) -> Result<Baseline, BaseRefusal> {
    let report = run_at_base(shared, head)
        .await
        .map_err(BaseRefusal::Unjudgeable)?;
    if each {
        shared.with_stats(|s| s.each_runs += 1);
    }
    Baseline::of(&report).map_err(|e| BaseRefusal::Unjudgeable(e.to_string()))
}

/// Runs the tests once at `head`, unjudged, in a worktree of the pool
/// (where fixes are tested: it warms that slot's build; the user's
/// uncommitted files are not the base).
async fn run_at_base(shared: &Shared, head: &CommitId) -> Result<TestReport, String> {
    let lease = shared
        .pool
        .acquire(head)
        .await
        .map_err(|e| format!("the base could not be checked out to test: {e}"))?;
    let env = lease_env(shared, &lease).await;
    let report = run_unjudged(shared, &env).await;
    shared.pool.release(lease);
    report
}

/// One counted test run, reported as the base's, not judged.
async fn run_unjudged(shared: &Shared, env: &TreeEnv) -> Result<TestReport, String> {
    let runner: Arc<dyn TestRunner> = shared.tests.runner(env);
    shared.test_runs.fetch_add(1, Ordering::SeqCst);
    let report = runner
        .run(TestRequest {
            workdir: env.root.clone(),
            pattern: None,
            time_limit: shared.config.test_time_limit,
        })
        .await
        .map_err(|e| format!("the tests could not run at the base: {e}"));
    shared.sink.emit(&Event::TestsRan {
        id: Some("base".to_owned()),
        passed: report.as_ref().is_ok_and(TestReport::is_pass),
        failing: report
            .as_ref()
            .map(|r| r.failing_tests.clone())
            .unwrap_or_default(),
    });
    report
}
