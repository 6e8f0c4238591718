//! Re-lint passes: run the findings command again after a session and fix
//! what the fixes uncovered.
//!
//! A linter's findings are not independent: applying one suggestion often
//! exposes the next (clippy's `needless_return` fix reveals a
//! `let_and_return`, a removed borrow reveals a redundant clone). `cargo
//! clippy --fix` therefore re-runs the linter until nothing changes. A single
//! review-fix session only sees the findings it was given, so on its own it
//! leaves those second-order findings behind.
//!
//! [`run_with_relint`] closes that gap:
//!
//! ```text
//!  pass 1: run(config) ── commits ──► findings command (e.g. cargo clippy
//!        --message-format=json) ── stdout ──► .review/relint/pass-2-….json
//!        │                                    (format detected by content)
//!        ▼
//!  findings not tried before (by relint_key) ──► pass 2: a new session
//!        │                                        (its own plan, progress,
//!        ▼                                         summary, history entry)
//!  … until no new findings, a pass commits nothing, or max_passes
//! ```
//!
//! Each pass is an ordinary session, so everything a session guarantees
//! (one verified commit per fix, rollback, resume) holds per pass. Findings
//! are matched across passes by [`relint_key`] (file, rule, title and the
//! text the suggestion replaces — not the line, which earlier fixes shift)
//! and counted: after a pass, each key's occurrences that the pass did not
//! fix (failed, not fixable, rejected) are remembered, and the next pass
//! leaves that many occurrences of the key out. A finding deferred because
//! its fix overlapped an earlier fix of the pass (as `cargo fix`, ruff and
//! ESLint skip such a fix within a pass) was not tried on the text the next
//! lint sees, so it is not remembered: the next pass tries it at its new
//! place. A fixed finding is gone from
//! the code, so an identical one the linter reports afterwards is new and is
//! tried. Keys are not kept across a resume or across invocations, and a
//! title that changes from run to run makes a new key: the pass limit bounds
//! the retries either gives. The findings command must not write into the
//! working tree (the next pass would find it dirty); its output is kept in
//! `.review/relint/pass-N-{ms}.json`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::finding::Finding;
use orchestrator_core::state::{read_json, write_atomic};

use crate::error::ReviewFixError;
use crate::session::{SessionPaths, fixes_root};
use crate::{FLOW, FindingsFile, Outcome, ReviewFixConfig, RunReport, Services, input};

/// The key that matches a finding across re-lint passes (it lives with the
/// input readers, which skip findings by it).
pub use crate::input::relint_key;

/// Bytes of findings-command output accepted (a large crate's clippy JSON
/// stream is a few MiB; output beyond this is an error, never a partial
/// parse).
pub const OUTPUT_LIMIT: usize = 64 << 20;

/// Time limit of one run of the findings command when its spec sets none: a
/// linter that hangs (on a lock, a network fetch) must not hang the flow.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Occurrences per [`relint_key`]: the findings a pass left unfixed, to be
/// left out of the next pass (see [`ReviewFixConfig::skip`]).
pub type KeyCounts = BTreeMap<String, usize>;

/// The findings command re-run between passes.
#[derive(Debug, Clone)]
pub struct Relint {
    /// The program and its arguments; the working directory is replaced by
    /// the repository root.
    pub command: CommandSpec,
    /// Runs it.
    pub runner: Arc<dyn CommandRunner>,
    /// Passes in all, the first included (at least 1; 1 means no re-lint).
    pub max_passes: u32,
}

impl Relint {
    /// Re-lints with `command` through `runner`, up to `max_passes` passes.
    pub fn new(command: CommandSpec, runner: Arc<dyn CommandRunner>, max_passes: u32) -> Self {
        Self {
            command,
            runner,
            max_passes,
        }
    }
}

/// Why the passes stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// No re-lint was asked for: one pass.
    NotAsked,
    /// The findings command reported nothing that was not tried already.
    NoNewFindings,
    /// The last pass committed nothing, so the code (and the findings) did
    /// not change.
    NothingCommitted,
    /// The pass limit was reached.
    PassLimit,
    /// The last pass did not finish executing (dry run, stopped at the plan,
    /// waiting for a human).
    NotExecuted,
    /// The findings command failed.
    CommandFailed {
        /// How, in one line.
        message: String,
        /// The end of its standard error, when it printed any.
        stderr_tail: String,
    },
    /// A later pass could not run (its session could not be opened, say);
    /// the passes before it are complete and their commits stay.
    PassFailed {
        /// The pass.
        pass: u32,
        /// The error, in one line.
        message: String,
    },
}

impl StopReason {
    /// Whether the passes ended on a failure of their own (the findings
    /// command, or a pass that could not run), which makes the outcome
    /// "some failed" even when every pass fixed everything.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            StopReason::CommandFailed { .. } | StopReason::PassFailed { .. }
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::NotAsked => f.write_str("no re-lint asked for"),
            StopReason::NoNewFindings => f.write_str("the re-lint found nothing new"),
            StopReason::NothingCommitted => f.write_str("the last pass committed nothing"),
            StopReason::PassLimit => f.write_str("the pass limit was reached"),
            StopReason::NotExecuted => f.write_str("the last pass did not execute"),
            StopReason::CommandFailed { message, .. } => {
                write!(f, "the re-lint command failed: {message}")
            }
            StopReason::PassFailed { pass, message } => {
                write!(f, "pass {pass} could not run: {message}")
            }
        }
    }
}

/// What the passes did.
#[derive(Debug, Clone)]
pub struct PassesReport {
    /// One report per pass, in order.
    pub passes: Vec<RunReport>,
    /// Wall time of each pass (its re-lint command included), in order.
    pub walls: Vec<Duration>,
    /// Why no further pass ran.
    pub stop: StopReason,
}

impl PassesReport {
    /// The outcome of all passes: the last pass's when it did not execute
    /// (waiting for a human, stopped, dry run); otherwise every finding fixed
    /// only if every pass fixed all of its findings (a pass that a re-lint
    /// followed may also have deferred some: that lint saw them again) and
    /// the re-lint command and the passes did not end on a failure
    /// ([`StopReason::is_failure`]).
    pub fn outcome(&self) -> Outcome {
        let Some(last) = self.passes.last() else {
            return Outcome::SomeFailed;
        };
        if !matches!(last.outcome, Outcome::AllFixed | Outcome::SomeFailed) {
            return last.outcome.clone();
        }
        let later_pass_saw_them = |p: &RunReport| {
            p.findings
                .iter()
                .all(|f| matches!(f.result.as_str(), "fixed" | "deferred"))
        };
        let n = self.passes.len();
        // A re-lint ran after pass `i`: another pass followed, or the last
        // re-lint found nothing new (a deferred finding it no longer
        // reports is gone from the code).
        let relinted_after = |i: usize| i + 1 < n || self.stop == StopReason::NoNewFindings;
        let all_fixed = self.passes.iter().enumerate().all(|(i, p)| {
            p.outcome == Outcome::AllFixed
                || (relinted_after(i) && p.outcome == Outcome::SomeFailed && later_pass_saw_them(p))
        }) && !self.stop.is_failure();
        if all_fixed {
            Outcome::AllFixed
        } else {
            Outcome::SomeFailed
        }
    }

    /// Findings with `result` over all passes.
    pub fn count(&self, result: &str) -> usize {
        self.passes.iter().map(|p| p.count(result)).sum()
    }

    /// Findings over all passes.
    pub fn findings(&self) -> usize {
        self.passes.iter().map(|p| p.findings.len()).sum()
    }

    /// Commits over all passes.
    pub fn commits(&self) -> usize {
        self.passes.iter().map(|p| p.commits.len()).sum()
    }

    /// Test runs over all passes.
    pub fn test_runs(&self) -> u32 {
        self.passes.iter().map(|p| p.verification.test_runs).sum()
    }
}

/// What the passes after the first share.
struct Passes<'a> {
    config: &'a ReviewFixConfig,
    services: &'a Services,
    relint: &'a Relint,
    repo: &'a Path,
    /// Where the re-lint outputs are written.
    relint_dir: PathBuf,
}

impl Passes<'_> {
    /// Pass `pass`: re-lints, and runs a session over the findings when
    /// some are new beyond `unfixed` (what the earlier passes left, updated
    /// with what this one leaves). `Err`: why the passes stop.
    async fn run_pass(
        &self,
        report: &mut PassesReport,
        pass: u32,
        unfixed: &mut KeyCounts,
    ) -> Result<(), StopReason> {
        let started = Instant::now();
        let sink = self.services.sink.as_ref();
        let (file, findings, counts) =
            relint_phase(sink, self.relint, self.repo, &self.relint_dir, pass).await?;
        if new_occurrences(&findings, unfixed) == 0 {
            return Err(StopReason::NoNewFindings);
        }
        let next = ReviewFixConfig {
            inputs: vec![file],
            resume: false,
            dry_run: false,
            skip: unfixed.clone(),
            known_baseline: self
                .config
                .known_baseline
                .clone()
                .or_else(|| crate::exec::kept_baseline(&report.passes[0].session_dir)),
            ..self.config.clone()
        };
        let done = crate::run_locked(next, self.services.clone())
            .await
            .map_err(|e| StopReason::PassFailed {
                pass,
                message: e.to_string(),
            })?;
        let after = unfixed_after(Some(counts), &done.session_dir, &done);
        report.passes.push(done);
        report.walls.push(started.elapsed());
        *unfixed = after.map_err(|e| StopReason::PassFailed {
            pass: pass + 1,
            message: e.to_string(),
        })?;
        Ok(())
    }
}

/// Runs a session, then re-lints and runs further sessions as the module
/// docs describe. Without `relint` this is [`crate::run`] with one pass.
///
/// # Errors
/// The first pass's errors, as [`crate::run`] gives them. An error of a later pass
/// (its session could not be created, say) stops the passes with that error;
/// the commits of earlier passes stay on the branch and their sessions are
/// complete.
pub async fn run_with_relint(
    config: ReviewFixConfig,
    services: Services,
    relint: Option<&Relint>,
) -> Result<PassesReport, ReviewFixError> {
    // One lock for every pass: no other run slips in between two of them.
    let _lock = crate::lock_repository(services.vcs.root())?;
    let _cache = crate::upkeep_cache(&config, &services);
    let started = Instant::now();
    let repo = services.vcs.root().to_path_buf();
    // What pass 1 is given: its inputs, read before its fixes change the
    // files that SARIF and rdjson edits take their replaced text from (the
    // key covers that text); on a resume, the session's own findings.
    let given = if config.inputs.is_empty() || config.resume || relint.is_none() {
        None
    } else {
        let inputs: Vec<PathBuf> = config.inputs.iter().map(|p| absolute(&repo, p)).collect();
        input::load_inputs(&repo, &inputs)
            .ok()
            .map(|l| key_counts(&l))
    };
    let first = crate::run_locked(config.clone(), services.clone()).await?;
    let mut report = PassesReport {
        passes: vec![first],
        walls: vec![started.elapsed()],
        stop: StopReason::NotAsked,
    };
    let Some(relint) = relint else {
        return Ok(report);
    };
    let first_session = report.passes[0].session_dir.clone();
    let mut unfixed = match unfixed_after(given, &first_session, &report.passes[0]) {
        Ok(counts) => counts,
        Err(e) => {
            report.stop = StopReason::PassFailed {
                pass: 2,
                message: e.to_string(),
            };
            return Ok(report);
        }
    };
    let first_input = config.inputs.first().map(|p| absolute(&repo, p));
    let passes = Passes {
        config: &config,
        services: &services,
        relint,
        repo: &repo,
        relint_dir: fixes_root(&repo, first_input.as_deref())
            .parent()
            .map_or_else(|| repo.join(".review"), Path::to_path_buf)
            .join("relint"),
    };
    while let Some(last) = report.passes.last() {
        let pass = u32::try_from(report.passes.len()).unwrap_or(u32::MAX) + 1;
        let next = match stop_before(last, pass, relint.max_passes) {
            Some(stop) => Err(stop),
            None => passes.run_pass(&mut report, pass, &mut unfixed).await,
        };
        if let Err(stop) = next {
            report.stop = stop;
            break;
        }
    }
    Ok(report)
}

/// Why no pass `pass` follows `last`: it did not run to its end, it
/// committed nothing (so the linter has nothing new to say), or the pass
/// limit is reached.
fn stop_before(last: &RunReport, pass: u32, max_passes: u32) -> Option<StopReason> {
    if !matches!(last.outcome, Outcome::AllFixed | Outcome::SomeFailed) {
        Some(StopReason::NotExecuted)
    } else if last.commits.is_empty() {
        Some(StopReason::NothingCommitted)
    } else if pass > max_passes {
        Some(StopReason::PassLimit)
    } else {
        None
    }
}

/// Runs the linter before pass `pass`, as its own phase: the findings file
/// it wrote, its findings and their counts; a failed run is the reason to
/// stop, said as a warning.
async fn relint_phase(
    sink: &dyn EventSink,
    relint: &Relint,
    repo: &Path,
    relint_dir: &Path,
    pass: u32,
) -> Result<(PathBuf, Vec<Finding>, KeyCounts), StopReason> {
    sink.emit(&Event::PhaseStarted {
        flow: FLOW.to_owned(),
        phase: format!("relint {pass}"),
    });
    let found = relint_once(relint, repo, relint_dir, pass).await;
    sink.emit(&Event::PhaseFinished {
        flow: FLOW.to_owned(),
        phase: format!("relint {pass}"),
    });
    found.map_err(|failure| {
        sink.emit(&Event::Warning {
            message: format!("re-lint before pass {pass}: {}", failure.message),
        });
        StopReason::CommandFailed {
            message: failure.message,
            stderr_tail: failure.stderr_tail,
        }
    })
}

fn absolute(repo: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

/// The occurrences of each key a pass left unfixed: those of its input
/// (`given`, or the session's planned findings when unknown) minus those it
/// fixed or deferred. What the session left out (already tried, rejected)
/// counts as unfixed; keys the input no longer holds are gone.
fn unfixed_after(
    given: Option<KeyCounts>,
    session_dir: &Path,
    report: &RunReport,
) -> Result<KeyCounts, ReviewFixError> {
    let path = SessionPaths::new(session_dir).findings();
    let (planned, rejected_keys) = if path.is_file() {
        let file: FindingsFile = read_json(&path)?;
        (file.findings, file.rejected_keys)
    } else {
        (Vec::new(), Vec::new())
    };
    let result: HashMap<&str, &str> = report
        .findings
        .iter()
        .map(|f| (f.id.as_str(), f.result.as_str()))
        .collect();
    let mut counts = KeyCounts::new();
    match given {
        Some(given) => counts = given,
        // The session's own input: what it planned and what it rejected.
        None => {
            for f in &planned {
                *counts.entry(relint_key(f)).or_default() += 1;
            }
            for key in rejected_keys {
                *counts.entry(key).or_default() += 1;
            }
        }
    }
    // A fixed finding is gone; a deferred one (its fix overlapped an
    // earlier fix of the pass) was not tried on the text the next lint
    // sees: neither counts as tried.
    for f in &planned {
        if matches!(result.get(f.id.as_str()), Some(&("fixed" | "deferred")))
            && let Some(n) = counts.get_mut(&relint_key(f))
        {
            *n = n.saturating_sub(1);
        }
    }
    counts.retain(|_, n| *n > 0);
    Ok(counts)
}

/// How many of `findings` are not covered by `unfixed`: per key, the
/// occurrences beyond those already tried.
fn new_occurrences(findings: &[Finding], unfixed: &KeyCounts) -> usize {
    let mut seen = KeyCounts::new();
    for f in findings {
        *seen.entry(relint_key(f)).or_default() += 1;
    }
    seen.iter()
        .map(|(k, n)| n.saturating_sub(unfixed.get(k).copied().unwrap_or(0)))
        .sum()
}

/// Why the findings command gave nothing to read.
struct RelintFailure {
    message: String,
    stderr_tail: String,
}

impl RelintFailure {
    fn new(message: String) -> Self {
        Self {
            message,
            stderr_tail: String::new(),
        }
    }
}

/// Runs the findings command once, keeps its output as the next pass's
/// input file, and reads the findings in it.
async fn relint_once(
    relint: &Relint,
    repo: &Path,
    dir: &Path,
    pass: u32,
) -> Result<(PathBuf, Vec<Finding>, KeyCounts), RelintFailure> {
    let mut spec = relint.command.clone();
    spec.cwd = repo.to_path_buf();
    spec.output_limit = OUTPUT_LIMIT;
    spec.time_limit = spec.time_limit.or(Some(DEFAULT_TIME_LIMIT));
    let shown = spec.display();
    let out = relint
        .runner
        .run(spec)
        .await
        .map_err(|e| RelintFailure::new(format!("`{shown}`: {e}")))?;
    let tail: String = {
        let lines: Vec<&str> = out.stderr.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    let fail = |message: String| RelintFailure {
        message,
        stderr_tail: tail.clone(),
    };
    if out.timed_out {
        return Err(fail(format!(
            "`{shown}` timed out after {:.1}s",
            Duration::from_millis(out.duration_ms).as_secs_f64()
        )));
    }
    if out.truncated {
        return Err(fail(format!(
            "`{shown}` printed more than {OUTPUT_LIMIT} bytes; its findings cannot be read whole"
        )));
    }
    let Some(code) = out.exit_code else {
        return Err(fail(format!(
            "`{shown}` was killed by a signal; its findings may be cut short"
        )));
    };
    if out.stdout.trim().is_empty() {
        if code == 0 {
            return Ok((PathBuf::new(), Vec::new(), KeyCounts::new()));
        }
        return Err(fail(format!(
            "`{shown}` exited with {code} and printed no findings"
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("failed to create {}: {e}", dir.display())))?;
    let stamp = jiff::Timestamp::now().as_millisecond();
    let file = dir.join(format!("pass-{pass}-{stamp}.json"));
    write_atomic(&file, out.stdout.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let loaded = input::load_inputs(repo, std::slice::from_ref(&file))
        .map_err(|e| fail(format!("`{shown}` printed no readable findings: {e}")))?;
    let counts = key_counts(&loaded);
    Ok((file, loaded.findings, counts))
}

/// The occurrences of each key in what the inputs gave: the findings and
/// those rejected (outside the repository, say), which a later pass leaves
/// out as well.
fn key_counts(loaded: &input::LoadedInputs) -> KeyCounts {
    let mut counts = KeyCounts::new();
    for f in &loaded.findings {
        *counts.entry(relint_key(f)).or_default() += 1;
    }
    for key in loaded.rejected_keys.values() {
        *counts.entry(key.clone()).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::finding::{Severity, Suggestion, TextEdit};

    fn finding(line: u32, original: &str) -> Finding {
        let mut f = Finding::new("F1", "needless return", Severity::Low)
            .with_category("clippy::needless_return")
            .at("src/lib.rs", Some(line));
        f.suggestions.push(Suggestion {
            message: None,
            edits: vec![TextEdit {
                file: "src/lib.rs".into(),
                start_line: line,
                start_column: 5,
                end_line: line,
                end_column: 5 + u32::try_from(original.len()).unwrap_or(0),
                byte_range: Some((100, 100 + original.len())),
                original: original.into(),
                replacement: "x".into(),
            }],
        });
        f
    }

    #[test]
    fn the_key_ignores_positions_but_not_the_text() {
        assert_eq!(
            relint_key(&finding(10, "return x;")),
            relint_key(&finding(42, "return x;")),
            "a fix above shifts the line; the finding is the same"
        );
        assert_ne!(
            relint_key(&finding(10, "return x;")),
            relint_key(&finding(10, "return y;"))
        );
        let other_file = finding(10, "return x;").at("src/main.rs", Some(10));
        assert_ne!(
            relint_key(&other_file),
            relint_key(&finding(10, "return x;"))
        );
    }
}
