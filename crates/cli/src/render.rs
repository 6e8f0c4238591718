//! Reporters: turn the flows' [`Event`] stream into output.
//!
//! - [`JsonLines`]: one JSON object per event on stdout (`--json`), for
//!   scripts and bots.
//! - [`Human`]: short lines on stderr, plus a live counter line (running /
//!   done / failed / skipped) when stderr is a terminal — hidden otherwise, so
//!   logs and CI output stay clean.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use orchestrator_core::event::{Event, EventSink, JobStatus};

/// `--json`: every event as one line on stdout.
#[derive(Debug, Default)]
pub struct JsonLines;

impl EventSink for JsonLines {
    fn emit(&self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    running: usize,
    done: usize,
    failed: usize,
    skipped: usize,
}

/// Human-readable progress on stderr.
#[derive(Debug)]
pub struct Human {
    bar: Option<ProgressBar>,
    counts: Mutex<Counts>,
    /// The run's agent, whose count (its budget's) the live line shows.
    spend: std::sync::OnceLock<Arc<dyn orchestrator_core::Agent>>,
}

impl Default for Human {
    fn default() -> Self {
        Self::new()
    }
}

impl Human {
    /// A reporter; the live line is shown only when stderr is a terminal.
    pub fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            counts: Mutex::new(Counts::default()),
            spend: std::sync::OnceLock::new(),
        }
    }

    /// Shows what `agent` has spent so far (its budget's count) on the
    /// live line; the first agent given stays.
    pub fn watch_spend(&self, agent: Arc<dyn orchestrator_core::Agent>) {
        let _ = self.spend.set(agent);
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }

    fn refresh(&self, c: &Counts) {
        if let Some(bar) = &self.bar {
            let spent = self.spend.get().and_then(|a| a.spent());
            bar.set_message(status_message(c, spent));
        }
    }

    /// Removes the live line (call before printing a summary).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The live line: the jobs by state and, once the agent has been called,
/// what it has spent.
fn status_message(c: &Counts, spent: Option<orchestrator_core::AgentSpent>) -> String {
    let mut message = format!(
        "running {} · done {} · failed {} · skipped {}",
        c.running, c.done, c.failed, c.skipped
    );
    if let Some(spent) = spent.filter(|s| s.calls > 0) {
        message.push_str(&format!(
            " · agent {}, {} tokens, ${:.4}",
            orchestrator_core::text::counted(u64::from(spent.calls), "call", "calls"),
            spent.usage.input_tokens + spent.usage.output_tokens,
            spent.usage.cost_usd
        ));
    }
    message
}

/// The text line for an event, or `None` for events shown only as counts.
pub fn describe(event: &Event) -> Option<String> {
    Some(match event {
        Event::PhaseStarted { flow, phase } => format!("== {flow}: {phase}"),
        Event::PhaseFinished { .. } => return None,
        Event::WaveStarted { wave, jobs } => format!("-- wave {wave}: {}", jobs.join(", ")),
        Event::JobStarted { id, title } => match title {
            Some(t) => format!("   … {id} {t}"),
            None => format!("   … {id}"),
        },
        Event::JobFinished { id, status, detail } => {
            let mark = match status {
                JobStatus::Completed => "✓",
                JobStatus::Failed => "✗",
                JobStatus::Skipped => "↷",
                JobStatus::TimedOut => "⏱",
                JobStatus::Cancelled => "■",
            };
            match detail {
                Some(d) if *status != JobStatus::Completed => {
                    format!("   {mark} {id} {}: {d}", status.as_str())
                }
                _ => format!("   {mark} {id} {}", status.as_str()),
            }
        }
        Event::AttemptFailed {
            id,
            round,
            attempt,
            error,
        } => format!("   ! {id} round {round} attempt {attempt} failed: {error}"),
        Event::GateAsked { question, .. } => format!("?? gate {question}"),
        Event::GateAnswered { question, choice } => match choice {
            Some(c) => format!("   gate {question}: {c}"),
            None => format!("   gate {question}: deferred"),
        },
        Event::TestsRan {
            id,
            passed,
            failing,
        } => {
            let who = id.as_deref().unwrap_or("tests");
            if *passed {
                format!("   tests for {who}: passed")
            } else {
                format!("   tests for {who}: failed {}", failing.join(", "))
            }
        }
        Event::CommitMade {
            id,
            commit,
            summary,
        } => {
            let short = &commit[..commit.len().min(7)];
            if summary.contains(id.as_str()) {
                format!("   ● {short} {summary}")
            } else {
                format!("   ● {short} {summary} [{id}]")
            }
        }
        Event::Escalated { id, reason } => match id {
            Some(id) => format!("!! {id} needs a human: {reason}"),
            None => format!("!! needs a human: {reason}"),
        },
        Event::Warning { message } => format!("warning: {message}"),
        Event::Notice { message } => format!("note: {message}"),
        _ => return None,
    })
}

impl EventSink for Human {
    fn emit(&self, event: &Event) {
        {
            let mut c = match self.counts.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            match event {
                Event::JobStarted { .. } => c.running += 1,
                Event::JobFinished { status, .. } => {
                    match status {
                        JobStatus::Completed => c.done += 1,
                        JobStatus::Skipped => c.skipped += 1,
                        _ => c.failed += 1,
                    }
                    // Skipped jobs never started.
                    if *status != JobStatus::Skipped {
                        c.running = c.running.saturating_sub(1);
                    }
                }
                _ => {}
            }
            self.refresh(&c);
        }
        if let Some(text) = describe(event) {
            self.line(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_line_shows_the_running_spend_once_the_agent_was_called() {
        let counts = Counts {
            running: 2,
            done: 3,
            failed: 1,
            skipped: 0,
        };
        assert_eq!(
            status_message(&counts, None),
            "running 2 · done 3 · failed 1 · skipped 0"
        );
        let mut spent = orchestrator_core::AgentSpent::default();
        assert_eq!(
            status_message(&counts, Some(spent)),
            "running 2 · done 3 · failed 1 · skipped 0"
        );
        spent.calls = 7;
        spent.usage.input_tokens = 1400;
        spent.usage.output_tokens = 280;
        spent.usage.cost_usd = 0.0421;
        assert_eq!(
            status_message(&counts, Some(spent)),
            "running 2 · done 3 · failed 1 · skipped 0 · agent 7 calls, 1680 tokens, $0.0421"
        );
    }

    #[test]
    fn describes_the_common_events() {
        let lines: Vec<String> = [
            Event::PhaseStarted {
                flow: "planex".into(),
                phase: "execute".into(),
            },
            Event::JobFinished {
                id: "T2".into(),
                status: JobStatus::Skipped,
                detail: Some("Dependency failed or skipped".into()),
            },
            Event::CommitMade {
                id: "F1".into(),
                commit: "0123456789abcdef".into(),
                summary: "fix(quality): needless return [F1]".into(),
            },
        ]
        .iter()
        .filter_map(describe)
        .collect();
        assert_eq!(
            lines,
            [
                "== planex: execute",
                "   ↷ T2 skipped: Dependency failed or skipped",
                "   ● 0123456 fix(quality): needless return [F1]",
            ]
        );
    }
}
