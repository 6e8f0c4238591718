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
//! (one verified commit per fix, rollback, resume) holds per pass. A finding
//! is tried at most once per invocation: findings are matched across passes
//! by [`relint_key`] (file, rule, title and the text the suggestion replaces
//! — not the line, which earlier fixes shift), and a key seen in an earlier
//! pass is left out of later ones. After a resume, the keys of the passes
//! before the resumed session are not known, so a finding that failed there
//! can be tried once more; the pass limit bounds that.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::event::Event;
use orchestrator_core::finding::Finding;
use orchestrator_core::state::{read_json, write_atomic};

use crate::error::ReviewFixError;
use crate::session::{SessionPaths, fixes_root};
use crate::{FLOW, FindingsFile, Outcome, ReviewFixConfig, RunReport, Services, input, run};

/// Bytes of findings-command output accepted (a large crate's clippy JSON
/// stream is a few MiB; output beyond this is an error, never a partial
/// parse).
pub const OUTPUT_LIMIT: usize = 256 << 20;

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
    /// The findings command failed; the message says how.
    CommandFailed(String),
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::NotAsked => f.write_str("no re-lint asked for"),
            StopReason::NoNewFindings => f.write_str("the re-lint found nothing new"),
            StopReason::NothingCommitted => f.write_str("the last pass committed nothing"),
            StopReason::PassLimit => f.write_str("the pass limit was reached"),
            StopReason::NotExecuted => f.write_str("the last pass did not execute"),
            StopReason::CommandFailed(m) => write!(f, "the re-lint command failed: {m}"),
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
    /// only if every pass fixed all of its findings and the re-lint command
    /// did not fail.
    pub fn outcome(&self) -> Outcome {
        let Some(last) = self.passes.last() else {
            return Outcome::SomeFailed;
        };
        if !matches!(last.outcome, Outcome::AllFixed | Outcome::SomeFailed) {
            return last.outcome.clone();
        }
        let all_fixed = self.passes.iter().all(|p| p.outcome == Outcome::AllFixed)
            && !matches!(self.stop, StopReason::CommandFailed(_));
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

/// The key that matches a finding across re-lint passes: its file, rule,
/// title and the edits of its suggestions (original and replacement text) —
/// everything that identifies it except positions, which earlier fixes
/// shift.
pub fn relint_key(f: &Finding) -> String {
    let mut key = String::new();
    for part in [
        f.file.as_deref().unwrap_or(""),
        f.category.as_deref().unwrap_or(""),
        f.title.trim(),
    ] {
        key.push_str(part);
        key.push('\u{1f}');
    }
    for s in &f.suggestions {
        for e in &s.edits {
            key.push_str(&e.file);
            key.push('\u{1e}');
            key.push_str(&e.original);
            key.push('\u{1e}');
            key.push_str(&e.replacement);
            key.push('\u{1f}');
        }
    }
    key
}

/// Runs a session, then re-lints and runs further sessions as the module
/// docs describe. Without `relint` this is [`run`] with one pass.
///
/// # Errors
/// The first pass's errors, as [`run`] gives them. An error of a later pass
/// (its session could not be created, say) stops the passes with that error;
/// the commits of earlier passes stay on the branch and their sessions are
/// complete.
pub async fn run_with_relint(
    config: ReviewFixConfig,
    services: Services,
    relint: Option<&Relint>,
) -> Result<PassesReport, ReviewFixError> {
    let started = Instant::now();
    let first = run(config.clone(), services.clone()).await?;
    let mut seen: BTreeSet<String> = config.skip.clone();
    seen.extend(session_keys(&first.session_dir)?);
    let mut report = PassesReport {
        passes: vec![first],
        walls: vec![started.elapsed()],
        stop: StopReason::NotAsked,
    };
    let Some(relint) = relint else {
        return Ok(report);
    };
    let repo = services.vcs.root().to_path_buf();
    let first_input = config.inputs.first().map(|p| {
        if p.is_absolute() {
            p.clone()
        } else {
            repo.join(p)
        }
    });
    let relint_dir = fixes_root(&repo, first_input.as_deref())
        .parent()
        .map_or_else(|| repo.join(".review"), Path::to_path_buf)
        .join("relint");
    while let Some(last) = report.passes.last() {
        if !matches!(last.outcome, Outcome::AllFixed | Outcome::SomeFailed) {
            report.stop = StopReason::NotExecuted;
            break;
        }
        if last.commits.is_empty() {
            report.stop = StopReason::NothingCommitted;
            break;
        }
        let pass = u32::try_from(report.passes.len()).unwrap_or(u32::MAX) + 1;
        if pass > relint.max_passes {
            report.stop = StopReason::PassLimit;
            break;
        }
        let started = Instant::now();
        services.sink.emit(&Event::PhaseStarted {
            flow: FLOW.to_owned(),
            phase: format!("relint {pass}"),
        });
        let found = relint_once(relint, &repo, &relint_dir, pass).await;
        services.sink.emit(&Event::PhaseFinished {
            flow: FLOW.to_owned(),
            phase: format!("relint {pass}"),
        });
        let (file, findings) = match found {
            Ok(found) => found,
            Err(message) => {
                services.sink.emit(&Event::Warning {
                    message: format!("re-lint before pass {pass}: {message}"),
                });
                report.stop = StopReason::CommandFailed(message);
                break;
            }
        };
        let new = findings
            .iter()
            .filter(|f| !seen.contains(&relint_key(f)))
            .count();
        if new == 0 {
            report.stop = StopReason::NoNewFindings;
            break;
        }
        let next = ReviewFixConfig {
            inputs: vec![file],
            resume: false,
            dry_run: false,
            skip: seen.clone(),
            ..config.clone()
        };
        let done = run(next, services.clone()).await?;
        seen.extend(session_keys(&done.session_dir)?);
        report.passes.push(done);
        report.walls.push(started.elapsed());
    }
    Ok(report)
}

/// The keys of a session's findings (`findings.json`).
fn session_keys(session_dir: &Path) -> Result<BTreeSet<String>, ReviewFixError> {
    let path = SessionPaths::new(session_dir).findings();
    if !path.is_file() {
        return Ok(BTreeSet::new());
    }
    let file: FindingsFile = read_json(&path)?;
    Ok(file.findings.iter().map(relint_key).collect())
}

/// Runs the findings command once, keeps its output as the next pass's
/// input file, and reads the findings in it. `Err` says what went wrong.
async fn relint_once(
    relint: &Relint,
    repo: &Path,
    dir: &Path,
    pass: u32,
) -> Result<(PathBuf, Vec<Finding>), String> {
    let mut spec = relint.command.clone();
    spec.cwd = repo.to_path_buf();
    spec.output_limit = spec.output_limit.max(OUTPUT_LIMIT);
    let shown = spec.display();
    let out = relint
        .runner
        .run(spec)
        .await
        .map_err(|e| format!("`{shown}`: {e}"))?;
    if out.timed_out {
        return Err(format!(
            "`{shown}` timed out after {:.1}s",
            Duration::from_millis(out.duration_ms).as_secs_f64()
        ));
    }
    if out.truncated {
        return Err(format!(
            "`{shown}` printed more than {OUTPUT_LIMIT} bytes; its findings cannot be read whole"
        ));
    }
    if out.stdout.trim().is_empty() {
        if out.success() {
            return Ok((PathBuf::new(), Vec::new()));
        }
        let tail: String = out
            .stderr
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(format!(
            "`{shown}` exited with {} and printed no findings; stderr ends:\n{tail}",
            out.exit_code
                .map_or_else(|| "a signal".to_owned(), |c| c.to_string())
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
    let stamp = jiff::Timestamp::now().as_millisecond();
    let file = dir.join(format!("pass-{pass}-{stamp}.json"));
    write_atomic(&file, out.stdout.as_bytes()).map_err(|e| e.to_string())?;
    let loaded = input::load_inputs(repo, std::slice::from_ref(&file))
        .map_err(|e| format!("`{shown}` printed no readable findings: {e}"))?;
    Ok((file, loaded.findings))
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
