//! A run limit stops planex resumably: [`StopAtLimit`] turns the agent's
//! [`AgentError::Budget`] into a stop of the whole run, the way Ctrl-C
//! stops it, so the row whose call was refused stays pending instead of
//! failing, and `planex --continue` (with a higher limit) goes on.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, AgentSpent};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::scheduler::CancelHandle;

use super::Planex;
use crate::Stop;

/// How long a refused call waits for the run to notice the stop before it
/// answers with the budget error after all (only a caller that does not
/// watch the cancel handle would wait that long).
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Why the run stopped at a limit, once it has; shared by a run's agents.
pub(crate) type LimitSlot = Arc<Mutex<Option<String>>>;

/// An agent whose refusal at a run limit stops the run: it records the
/// reason, warns once, fires the run's cancel handle and does not answer,
/// so the driver abandons the call (its row stays pending) as on Ctrl-C.
#[derive(Debug)]
pub(crate) struct StopAtLimit {
    inner: Arc<dyn Agent>,
    cancel: CancelHandle,
    slot: LimitSlot,
    sink: Arc<dyn EventSink>,
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

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        match self.inner.run(request).await {
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

impl Planex {
    /// `agent`, wrapped so that a run limit stops this run resumably.
    pub(super) fn stopping_at_limit(&self, agent: Arc<dyn Agent>) -> Arc<dyn Agent> {
        Arc::new(StopAtLimit {
            inner: agent,
            cancel: self.cancel.clone(),
            slot: Arc::clone(&self.limit),
            sink: Arc::clone(&self.sink),
        })
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
