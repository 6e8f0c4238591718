//! The confirmation gates: asking, recording an approval before going on, and
//! what an answer stops.

use super::*;

impl Planex {
    /// [`Self::confirm`], interruptible; an approval is recorded in
    /// `session.json` before the run goes on, so that a crash after it
    /// never asks again and a crash before it never skips the question.
    pub(super) async fn gate(
        &self,
        point: GatePoint,
        run: &mut Run,
    ) -> Result<Option<Stop>, PlanexError> {
        let stop = self
            .interruptible(self.confirm(point, run))
            .await
            .unwrap_or_else(|| Some(self.interruption()));
        match &stop {
            None => {
                let by = if self.options.auto_yes {
                    ApprovedBy::AutoYes
                } else {
                    ApprovedBy::Gate
                };
                run.session.approve(point, by, Timestamp::now())?;
            }
            Some(Stop::Modify { .. }) => run.session.revoke(point)?,
            Some(_) => {}
        }
        Ok(stop)
    }

    /// Asks the gate at `point` again when its plan was never approved.
    pub(super) async fn ensure_approved(
        &self,
        point: GatePoint,
        run: &mut Run,
    ) -> Result<Option<Stop>, PlanexError> {
        if run.session.approval(point).is_some() {
            return Ok(None);
        }
        self.gate(point, run).await
    }

    /// Asks the gate at `point`; `None` means go on.
    pub(super) async fn confirm(&self, point: GatePoint, run: &Run) -> Option<Stop> {
        if self.options.auto_yes {
            return None;
        }
        let (question, file) = match point {
            GatePoint::ExplorePlan => {
                let file = run.session.explore_csv();
                let q = Question::new(
                    EXPLORE_GATE_ID,
                    "Approve exploration angles?",
                    vec![
                        GateOption::new("Approve", "Proceed with wave exploration"),
                        GateOption::new(
                            "Modify",
                            format!("Edit {} manually, then --continue", file.display()),
                        ),
                        GateOption::new("Cancel", "Abort"),
                    ],
                )
                .with_details(render_explore_plan(run.state.explore_rows()));
                (q, file)
            }
            GatePoint::ExecutionPlan => {
                let file = run.session.tasks_csv();
                let tasks = run.state.task_rows();
                let waves = tasks.iter().filter_map(|t| t.wave).max().unwrap_or(0);
                let q = Question::new(
                    EXECUTE_GATE_ID,
                    format!("Proceed with {} tasks across {waves} waves?", tasks.len()),
                    vec![
                        GateOption::new("Execute", "Proceed with wave execution"),
                        GateOption::new(
                            "Modify",
                            format!("Edit {} then --continue", file.display()),
                        ),
                        GateOption::new("Cancel", "Abort"),
                    ],
                )
                .with_details(render_execution_plan(
                    run.state.explore_rows(),
                    tasks,
                    &scope_waits(tasks, &self.options),
                ));
                (q, file)
            }
        };
        self.sink.emit(&Event::GateAsked {
            question: question.id.clone(),
            prompt: question.prompt.clone(),
        });
        let answer = match self
            .gate
            .ask(&question)
            .await
            .and_then(|a| check_answer(&question, a))
        {
            Ok(a) => a,
            Err(e) => {
                self.sink.emit(&Event::Warning {
                    message: e.to_string(),
                });
                Answer::Deferred
            }
        };
        self.sink.emit(&Event::GateAnswered {
            question: question.id.clone(),
            choice: answer
                .index()
                .and_then(|i| question.label(i))
                .map(str::to_owned),
        });
        match answer {
            Answer::Chosen { index: 0, .. } => None,
            Answer::Chosen { index: 1, .. } => Some(Stop::Modify { gate: point, file }),
            Answer::Chosen { .. } => Some(Stop::Cancelled { gate: point }),
            Answer::Deferred => Some(Stop::Deferred { gate: point }),
        }
    }
}

/// A gate that plans without executing: it approves the exploration plan
/// and defers the execution plan, so a run explores, plans its tasks, writes
/// `tasks.csv` and stops there ([`Stop::Deferred`], resumable: approve with
/// [`approve_plan`] or resume with `-y` to execute). Use it with
/// `auto_yes` off, which would skip the gates.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanOnly;

#[async_trait::async_trait]
impl Gate for PlanOnly {
    async fn ask(&self, question: &Question) -> Result<Answer, orchestrator_core::gate::GateError> {
        Ok(if question.id == crate::EXPLORE_GATE_ID {
            Answer::chose(0)
        } else {
            Answer::Deferred
        })
    }
}
