//! The end of a run as the user sees it: the final line or JSON object, and
//! the exit code.

use orchestrator_core::cadence::{Action, Classification};

use super::*;

/// Prints the end of a run: a final line (or JSON object) and the exit code.
pub(super) struct Summary<'a> {
    pub(super) json: bool,
    pub(super) yes: bool,
    pub(super) root: &'a Path,
    pub(super) target: &'a Target,
}

impl Summary<'_> {
    pub(super) fn audit_log(&self) -> Option<PathBuf> {
        let path = audit_log_path(self.root, self.target, Timestamp::now());
        path.exists().then_some(path)
    }

    pub(super) fn state_file(&self) -> Option<PathBuf> {
        let path = StateFile::path_for(self.root, self.target);
        path.exists().then_some(path)
    }

    pub(super) fn emit_json(&self, outcome: &str, exit: Exit, extra: serde_json::Value) {
        let mut v = json!({
            "event": "outcome",
            "outcome": outcome,
            "exit_code": exit as u8,
            "target": self.target.label(),
            "audit_log": self.audit_log().map(|p| p.display().to_string()),
            "state_file": self.state_file().map(|p| p.display().to_string()),
        });
        if let (Some(obj), serde_json::Value::Object(more)) = (v.as_object_mut(), extra) {
            obj.extend(more);
        }
        out(&format!("{v}\n"));
    }

    pub(super) fn audit_suffix(&self) -> String {
        self.audit_log()
            .map(|p| format!(" (audit log: {})", p.display()))
            .unwrap_or_default()
    }

    pub(super) fn outcome(&self, outcome: &AutofixOutcome) -> Exit {
        let exit = match outcome.exit_code() {
            0 => Exit::Success,
            3 => Exit::NeedsHuman,
            _ => Exit::SomeFailed,
        };
        match outcome {
            AutofixOutcome::Green { commits } => self.green(exit, commits),
            AutofixOutcome::PassedOnRerun {
                class,
                checks,
                tests,
                runs,
                wall,
            } => self.passed_on_rerun(exit, *class, checks, tests, *runs, wall.as_secs_f64()),
            AutofixOutcome::NoChecks { head } => {
                let short = &head[..head.len().min(12)];
                if self.json {
                    self.emit_json("no_checks", exit, json!({ "head": head }));
                } else {
                    out(&format!(
                        "ci-autofix: no checks on {short} ({}) — nothing ran, so nothing to fix; is CI set up for this branch?\n",
                        self.target.label()
                    ));
                }
            }
            AutofixOutcome::StillFailing { reason } => {
                if self.json {
                    self.emit_json("still_failing", exit, json!({ "reason": reason }));
                } else {
                    out(&format!(
                        "ci-autofix: still failing on {} — {reason}{}\n",
                        self.target.label(),
                        self.audit_suffix()
                    ));
                }
            }
            AutofixOutcome::LimitReached { reason } => {
                if self.json {
                    self.emit_json("limit_reached", exit, json!({ "reason": reason }));
                } else {
                    let state = self
                        .state_file()
                        .map(|p| format!("; state kept in {}", p.display()))
                        .unwrap_or_default();
                    out(&format!(
                        "ci-autofix: stopped at the run's limit on {} ({reason}){state}; run again, with a higher limit if need be, to go on{}\n",
                        self.target.label(),
                        self.audit_suffix()
                    ));
                }
            }
            AutofixOutcome::AwaitingConfirmation {
                key,
                iteration,
                commit,
                branch,
                write_set,
            } => self.awaiting(exit, key, *iteration, commit, branch, write_set),
            AutofixOutcome::Escalated {
                action,
                reason,
                report,
                choice,
            } => self.escalated(exit, *action, reason, report, choice.as_deref()),
        }
        exit
    }

    /// Green: the fix commits, or none needed.
    fn green(&self, exit: Exit, commits: &[String]) {
        if self.json {
            self.emit_json("green", exit, json!({ "commits": commits }));
        } else {
            let shorts: Vec<&str> = commits.iter().map(|c| &c[..c.len().min(7)]).collect();
            let what = match commits.len() {
                0 => "no fix needed".to_owned(),
                1 => format!("1 fix commit ({})", shorts.join(", ")),
                n => format!("{n} fix commits ({})", shorts.join(", ")),
            };
            out(&format!(
                "ci-autofix: green on {} — {what}{}\n",
                self.target.label(),
                self.audit_suffix()
            ));
        }
    }

    /// The failure passed on a re-run at the same commit: flaky, or an
    /// infrastructure failure that cleared; nothing committed.
    fn passed_on_rerun(
        &self,
        exit: Exit,
        class: Classification,
        checks: &[String],
        tests: &[String],
        runs: u32,
        wall: f64,
    ) {
        if self.json {
            self.emit_json(
                "passed_on_rerun",
                exit,
                json!({ "class": class.as_str(), "checks": checks, "tests": tests,
                        "reruns": runs, "rerun_seconds": wall, "flaky_count": checks.len() }),
            );
        } else {
            let named = if tests.is_empty() {
                String::new()
            } else {
                format!(" (test {})", tests.join(", "))
            };
            let what = match class {
                Classification::Flaky => "flaky",
                _ => "an infrastructure failure, cleared",
            };
            out(&format!(
                "ci-autofix: {what} on {} — {} failed and passed on a re-run at the same commit{named}; no commit; {} flaky, {}, {wall:.1} s{}\n",
                self.target.label(),
                checks.join(", "),
                checks.len(),
                orchestrator_core::text::counted(u64::from(runs), "re-run", "re-runs"),
                self.audit_suffix()
            ));
        }
    }

    /// Stopped at the confirmation gate, the patch kept.
    fn awaiting(
        &self,
        exit: Exit,
        key: &str,
        iteration: u32,
        commit: &str,
        branch: &str,
        write_set: &[String],
    ) {
        if self.json {
            self.emit_json(
                "awaiting_confirmation",
                exit,
                json!({ "key": key, "iteration": iteration, "commit": commit,
                        "branch": branch, "files": write_set,
                        "answer_hint": format!("orchestrator ci-autofix approve {key} --repo {}", self.root.display()),
                        "resume_hint": format!("orchestrator ci-autofix --continue {key} --repo {}", self.root.display()) }),
            );
        } else {
            out(&super::confirm::awaiting_text(
                self.target,
                self.root,
                iteration,
                commit,
                branch,
                write_set,
            ));
        }
    }

    /// Escalated: the report, the choice made if any, and the hint when
    /// nobody could be asked.
    fn escalated(
        &self,
        exit: Exit,
        action: Action,
        reason: &str,
        report: &str,
        choice: Option<&str>,
    ) {
        if self.json {
            self.emit_json(
                "escalated",
                exit,
                json!({
                    "action": action.as_str(),
                    "reason": reason,
                    "choice": choice,
                    "report": report,
                }),
            );
        } else {
            let mut text = report.trim_end().to_owned();
            text.push_str("\n\n");
            if let Some(c) = choice {
                text.push_str(&format!("chosen: {c}\n"));
            }
            text.push_str(&format!(
                "ci-autofix: escalated on {} — {reason}; a person must decide{}\n",
                self.target.label(),
                self.audit_suffix()
            ));
            out(&text);
        }
        if choice.is_none() && !self.yes && !std::io::stdin().is_terminal() {
            eprintln!(
                "hint: no terminal to ask on, so the question was deferred; run in a terminal, or pass -y to take the recommended option"
            );
        }
    }

    pub(super) fn interrupted(&self) -> Exit {
        let state = self
            .state_file()
            .map(|p| format!("; state kept in {}", p.display()))
            .unwrap_or_default();
        if self.json {
            self.emit_json("interrupted", Exit::NeedsHuman, json!({}));
        } else {
            out(&format!(
                "ci-autofix: interrupted on {}{state}; run again to resume\n",
                self.target.label()
            ));
        }
        Exit::NeedsHuman
    }

    pub(super) fn error(&self, e: &AutofixError) -> Exit {
        let state_is_bad_input = |s: &StateFileError| match s {
            // Another run holds the target: refused, like a usage error.
            StateFileError::Busy { .. } => true,
            // A state file that does not parse is bad input like any file
            // the run cannot read (the message names the line and column).
            StateFileError::State(e) => matches!(**e, StateError::Json { .. }),
            _ => false,
        };
        let exit = match e {
            AutofixError::DirtyTree { .. } | AutofixError::PrHead { .. } => Exit::BadInput,
            AutofixError::State(s) if state_is_bad_input(s) => Exit::BadInput,
            _ => Exit::SomeFailed,
        };
        eprintln!("error: {e}");
        if matches!(e, AutofixError::Provider(_)) && self.target.pr_number().is_some() {
            eprintln!(
                "hint: check `gh auth status` and the network; or fetch the log yourself and run `orchestrator ci-autofix classify`"
            );
        }
        if self.json {
            self.emit_json("error", exit, json!({ "error": e.to_string() }));
        }
        exit
    }
}
