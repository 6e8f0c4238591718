//! Phases 1 and 3 asked of the planner: the exploration angles and the task
//! plan, each validated and asked again once with the problems.

use super::*;

impl Planex {
    /// Phase 1: the planner's angles.
    pub(super) async fn plan_angles(
        &self,
        session: &Session,
    ) -> Result<Vec<crate::rows::ExploreRow>, PlanexError> {
        let requirement = &session.meta().requirement;
        let context = PlanexContext::PlanAngles {
            version: CONTEXT_VERSION,
            requirement: requirement.clone(),
        };
        let request = self.planner_request(
            session.dir(),
            PLAN_ANGLES_ID,
            plan_angles_instruction(requirement),
            angles_schema(),
            context,
        );
        self.ask_planner("selecting exploration angles", request, |value| {
            let rows = angles_from_answer(value);
            if rows.is_empty() {
                Err(vec!["the answer has no exploration angles".to_owned()])
            } else {
                Ok(rows)
            }
        })
        .await
        .map_err(|e| match e {
            PlanexError::InvalidPlan { problems, .. } => PlanexError::InvalidExplorePlan {
                source_name: "planner answer".to_owned(),
                problems,
            },
            other => other,
        })
    }

    /// Phase 3: synthesis and the planner's tasks, validated, with waves.
    pub(super) async fn plan_tasks(&self, run: &mut Run) -> Result<Vec<TaskRow>, PlanexError> {
        let synthesis = synthesize(run.state.explore_rows());
        let without_exploration = synthesis.completed == 0;
        if without_exploration {
            self.warn(
                &mut run.warnings,
                "every exploration failed; planning from the requirement alone".to_owned(),
            );
        }
        let requirement = run.session.meta().requirement.clone();
        let context = PlanexContext::PlanTasks {
            version: CONTEXT_VERSION,
            requirement: requirement.clone(),
            findings: synthesis.findings.clone(),
            shared_files: synthesis.shared_files.clone(),
            without_exploration,
        };
        let instruction = plan_tasks_instruction(
            &requirement,
            &synthesis.findings,
            &synthesis.shared_files_text(),
            without_exploration,
        );
        let explore = run.state.explore.clone();
        let request = self.planner_request(
            run.session.dir(),
            PLAN_TASKS_ID,
            instruction,
            tasks_schema(),
            context,
        );
        self.ask_planner("planning tasks", request, |value| {
            let mut rows = tasks_from_answer(value);
            match validate_tasks_from(
                &mut rows,
                explore.as_deref(),
                RowSource {
                    name: "planner answer",
                    lines: None,
                },
            ) {
                Ok(_) => Ok(rows),
                Err(PlanexError::InvalidPlan { problems, .. }) => Err(problems),
                Err(other) => Err(vec![other.to_string()]),
            }
        })
        .await
    }

    /// The planner's request `id`: its records go to the session folder.
    fn planner_request(
        &self,
        session_dir: &Path,
        id: &str,
        instruction: String,
        schema: Value,
        context: PlanexContext,
    ) -> AgentRequest {
        let context = serde_json::to_value(&context).unwrap_or(Value::Null);
        AgentRequest::new(id, Role::Plan, instruction, self.repo.clone())
            .with_artifacts_dir(session_dir)
            .with_schema(schema)
            .with_time_limit(self.options.planner_time_limit)
            .with_context(context)
    }

    /// Asks the planner, feeding back a schema violation or an invalid plan
    /// once before giving up.
    pub(super) async fn ask_planner<T>(
        &self,
        step: &'static str,
        request: AgentRequest,
        parse: impl Fn(&Value) -> Result<T, Vec<String>>,
    ) -> Result<T, PlanexError> {
        let limit = self.options.planner_time_limit;
        let policy = AskPolicy::new(limit, PLANNER_ATTEMPTS);
        let planner = self.stopping_at_limit(self.agents.planner.clone());
        let answer = ask(
            planner.as_ref(),
            request,
            &policy,
            |response| parse(&response.structured.unwrap_or(Value::Null)),
            |_, failure| match failure {
                AskFailure::Rejected(problems) => NextAttempt::WithFeedback(problems.join("; ")),
                AskFailure::Agent(
                    e @ (AgentError::SchemaViolation { .. } | AgentError::Garbage { .. }),
                ) => NextAttempt::WithFeedback(e.to_string()),
                AskFailure::TimedOut { .. }
                | AskFailure::Agent(AgentError::Timeout { .. } | AgentError::Failed { .. }) => {
                    NextAttempt::Again
                }
                AskFailure::Agent(_) => NextAttempt::Stop,
            },
        )
        .await;
        answer.map_err(|failure| match failure {
            AskFailure::Rejected(problems) => PlanexError::InvalidPlan {
                source_name: "planner answer".to_owned(),
                problems,
            },
            AskFailure::TimedOut { limit } => PlanexError::Planner {
                step,
                source: AgentError::Timeout {
                    seconds: limit.as_secs_f64(),
                },
            },
            AskFailure::Agent(source) => PlanexError::Planner { step, source },
        })
    }
}
