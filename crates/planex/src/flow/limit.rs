//! What planex's agents spend, and the limits on it. Every call of a run
//! goes through [`StopAtLimit`], which
//! - counts what each request id (a row, a planning step) spent in the
//!   run's [`SpendBook`], for `context.md`;
//! - holds each task to [`PlanexOptions::item_limits`](crate::PlanexOptions):
//!   no attempt starts once the task's spend reached one, and the task fails
//!   with it named (the run goes on);
//! - turns a run limit (the agent's own [`AgentError::Budget`]) into a stop
//!   of the whole run, the way Ctrl-C stops it, so the row whose call was
//!   refused stays pending instead of failing, and `planex --continue`
//!   (with a higher limit) goes on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{
    Agent, AgentError, AgentRequest, AgentResponse, AgentSpend, AgentSpent, ItemLimits, Role,
};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::scheduler::CancelHandle;

use super::Planex;
use crate::Stop;
use crate::error::PlanexError;
use crate::session::Session;

/// How long a refused call waits for the run to notice the stop before it
/// answers with the budget error after all (only a caller that does not
/// watch the cancel handle would wait that long).
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Why the run stopped at a limit, once it has; shared by a run's agents.
pub(crate) type LimitSlot = Arc<Mutex<Option<String>>>;

/// What each request id (`E1`, `T3`, `plan-tasks`) spent, over every run
/// of the session (kept in [`SPEND_FILE`] between runs).
pub(crate) type SpendBook = Arc<Mutex<BTreeMap<String, AgentSpend>>>;

/// The session's spend per request id, beside `context.md`.
pub(crate) const SPEND_FILE: &str = "spend.json";

/// The columns `results.csv` gains after the seed's when the agent reported
/// usage: a task's agent calls, tokens and dollars over every run.
pub(crate) const SPEND_COLUMNS: [&str; 3] = ["agent_calls", "agent_tokens", "agent_cost_usd"];

/// An agent whose refusal at a run limit stops the run: it records the
/// reason, warns once, fires the run's cancel handle and does not answer,
/// so the driver abandons the call (its row stays pending) as on Ctrl-C.
#[derive(Debug)]
pub(crate) struct StopAtLimit {
    inner: Arc<dyn Agent>,
    cancel: CancelHandle,
    slot: LimitSlot,
    sink: Arc<dyn EventSink>,
    book: SpendBook,
    item_limits: ItemLimits,
}

#[async_trait]
impl Agent for StopAtLimit {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn spent(&self) -> Option<AgentSpent> {
        self.inner.spent()
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let id = request.id.clone();
        if request.role == Role::Execute {
            let spent = self.spend_of(&id);
            if let Some(reached) = spent.exhausted(&self.item_limits) {
                // The task's own limit: it fails, the run goes on.
                return Err(AgentError::Budget {
                    message: format!("task {id}'s limit: {reached}"),
                });
            }
            // What is left of it goes with the call, so an agent that can
            // stop mid-call stops there (answering `CallLimit`: the task
            // fails, the run goes on).
            request.spend_limits = self.item_limits.left_after(&spent);
        }
        let result = self.inner.run(request).await;
        if !matches!(result, Err(AgentError::Budget { .. })) {
            let usage = result.as_ref().ok().and_then(|r| r.usage.as_ref());
            let mut call = AgentSpend::default();
            call.add_call(usage);
            let total = {
                let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
                let total = book.entry(id.clone()).or_default();
                total.add(&call);
                *total
            };
            self.sink.emit(&Event::AgentCall {
                id,
                spend: call,
                total,
            });
        }
        match result {
            Err(AgentError::Budget { message }) => {
                let first = {
                    let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
                    let first = slot.is_none();
                    if first {
                        *slot = Some(message.clone());
                    }
                    first
                };
                if first {
                    self.sink.emit(&Event::Warning {
                        message: format!(
                            "the run's limit is reached ({message}): no further task starts; \
                             the run stops resumably (planex --continue)"
                        ),
                    });
                }
                self.cancel.cancel();
                tokio::time::sleep(STOP_WAIT).await;
                Err(AgentError::Budget { message })
            }
            other => other,
        }
    }
}

impl StopAtLimit {
    fn spend_of(&self, id: &str) -> AgentSpend {
        self.book
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied()
            .unwrap_or_default()
    }
}

impl Planex {
    /// `agent`, wrapped so that its spend is counted per row, each task is
    /// held to its item limits, and a run limit stops this run resumably.
    pub(super) fn stopping_at_limit(&self, agent: Arc<dyn Agent>) -> Arc<dyn Agent> {
        Arc::new(StopAtLimit {
            inner: agent,
            cancel: self.cancel.clone(),
            slot: Arc::clone(&self.limit),
            sink: Arc::clone(&self.sink),
            book: Arc::clone(&self.spend),
            item_limits: self.options.item_limits,
        })
    }

    /// Reads what the session's earlier runs spent into the book, so that
    /// item limits and `context.md` count every run; an unreadable file is
    /// a warning, and counting starts afresh.
    pub(super) fn load_spend(&self, session: &Session, warnings: &mut Vec<String>) {
        let path = session.dir().join(SPEND_FILE);
        match orchestrator_core::state::read_json_if_exists::<BTreeMap<String, AgentSpend>>(&path) {
            Ok(Some(book)) => *self.spend.lock().unwrap_or_else(PoisonError::into_inner) = book,
            Ok(None) => {}
            Err(e) => self.warn(
                warnings,
                format!("{e}; the agent spend of earlier runs is not counted"),
            ),
        }
    }

    /// `rows` for `results.csv`: with the agent's spend on each appended as
    /// the extra columns [`SPEND_COLUMNS`] when any call reported usage (a
    /// shell or builtin agent spends nothing, and the file stays the
    /// seed's).
    pub(super) fn with_spend(&self, rows: &[crate::rows::TaskRow]) -> Vec<crate::rows::TaskRow> {
        let book = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rows = rows.to_vec();
        if !book.values().any(|s| s.tokens() > 0 || s.cost_usd > 0.0) {
            return rows;
        }
        for row in &mut rows {
            let spend = book.get(&row.id).copied().unwrap_or_default();
            row.extra
                .retain(|(name, _)| !SPEND_COLUMNS.contains(&name.as_str()));
            row.extra.extend([
                (SPEND_COLUMNS[0].to_owned(), spend.calls.to_string()),
                (SPEND_COLUMNS[1].to_owned(), spend.tokens().to_string()),
                (
                    SPEND_COLUMNS[2].to_owned(),
                    format!("{:.4}", spend.cost_usd),
                ),
            ]);
        }
        rows
    }

    /// Writes the book (atomically), when any call was made.
    pub(super) fn save_spend(&self, session: &Session) -> Result<(), PlanexError> {
        let book = self
            .spend
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if book.is_empty() {
            return Ok(());
        }
        orchestrator_core::state::write_json_atomic(session.dir().join(SPEND_FILE), &book)?;
        Ok(())
    }

    /// The session's agent spend per request id, as `context.md`'s section
    /// (none when no call reported any usage: a shell or builtin agent).
    pub(super) fn spend_section(&self) -> Option<String> {
        let book = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        if !book.values().any(|s| s.tokens() > 0 || s.cost_usd > 0.0) {
            return None;
        }
        let mut total = AgentSpend::default();
        let mut out = String::from(
            "\n## Agent spend\n\nOver every run of this session (`spend.json`).\n\n| Row | Calls | Tokens | Cost |\n|---|---|---|---|\n",
        );
        for (id, spend) in book.iter() {
            total.add(spend);
            out.push_str(&format!(
                "| {id} | {} | {} | ${:.4} |\n",
                spend.calls,
                spend.tokens(),
                spend.cost_usd
            ));
        }
        out.push_str(&format!(
            "| **Total** | {} | {} | ${:.4} |\n",
            total.calls,
            total.tokens(),
            total.cost_usd
        ));
        Some(out)
    }

    /// Why a cancelled run stopped: at a run limit, or interrupted.
    pub(super) fn interruption(&self) -> Stop {
        match self
            .limit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            Some(limit) => Stop::LimitReached { limit },
            None => Stop::Interrupted,
        }
    }
}
