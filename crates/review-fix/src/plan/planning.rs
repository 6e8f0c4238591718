//! Planning by agent: the prompt for one batch, every batch asked at once
//! (validated, one retry with the errors, then the deterministic plan), and
//! the events that report it.

use super::*;

/// How batches are planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannerMode {
    /// Ask the agent (role `plan`), with validation, one retry and fallback.
    Agent,
    /// Use [`deterministic_plan`] directly (the builtin agent).
    Deterministic,
}

/// The planning prompt for a batch.
pub fn planning_prompt(batch: &Batch, findings: &[&Finding], session_id: &str) -> String {
    let listed = serde_json::to_string_pretty(findings).unwrap_or_default();
    format!(
        "Analyze the code review findings of batch {batch} (fix session {session_id}) and answer with a partial execution plan as JSON.\n\n\
         Findings ({n}):\n{listed}\n\n\
         Answer with one JSON object: {{\"batch_id\": {batch}, \"groups\": [{{\"group_id\": \"G1\", \"group_name\": \"…\", \"findings\": [ids], \
         \"fix_strategy\": {{\"approach\", \"rationale\", \"complexity\": \"low|medium|high\", \"estimated_duration_minutes\", \"test_pattern\", \"rollback_plan\"}}, \
         \"risk_assessment\": {{\"level\": \"low|medium|high\", \"concerns\": [], \"mitigation\"}}}}], \
         \"timeline\": [{{\"stage\": 1, \"groups\": [\"G1\"], \"execution_mode\": \"parallel|serial\", \"depends_on\": [], \"rationale\"}}]}}.\n\
         Rules: every finding of the batch in exactly one group; group findings by file, dimension and root cause (2-5 per group); \
         groups that share files or depend on each other go in different stages; stage dependencies must not form a cycle; \
         test_pattern selects the affected tests (empty for the whole suite). Do not change any file.",
        batch = batch.batch_id,
        n = findings.len(),
    )
}

/// Options of [`plan_batches`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanningOptions {
    /// Agent or deterministic planning.
    pub mode: PlannerMode,
    /// Where the planning agents run (the repository).
    pub workdir: std::path::PathBuf,
    /// The fix session id, for the prompt.
    pub session_id: String,
    /// The session folder, where an agent keeps its records of the calls
    /// ([`AgentRequest::artifacts_dir`]).
    pub session_dir: std::path::PathBuf,
    /// Planning agents at once.
    pub max_parallel: usize,
    /// Time limit of one planning agent.
    pub time_limit: Duration,
}

/// Plans every batch: deterministically, or with up to `max_parallel`
/// planning agents at once (validated, one retry, then fallback). Returns the
/// partial plans in batch order.
pub async fn plan_batches(
    agent: Arc<dyn Agent>,
    sink: Arc<dyn EventSink>,
    batches: &[Batch],
    findings: &[Finding],
    options: &PlanningOptions,
) -> Vec<PartialPlan> {
    let (mode, time_limit) = (options.mode, options.time_limit);
    let by_id: HashMap<String, &Finding> = findings.iter().map(|f| (f.id.to_string(), f)).collect();
    if mode == PlannerMode::Deterministic {
        return batches
            .iter()
            .map(|b| deterministic_plan(b, &by_id, None))
            .collect();
    }
    let semaphore = Arc::new(tokio::sync::Semaphore::new(options.max_parallel.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for batch in batches {
        let request = planning_request(batch, &by_id, options);
        let agent = Arc::clone(&agent);
        let sink = Arc::clone(&sink);
        let semaphore = Arc::clone(&semaphore);
        let batch = batch.clone();
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.ok();
            let outcome =
                plan_one(agent.as_ref(), sink.as_ref(), &batch, request, time_limit).await;
            (batch.batch_id, outcome)
        });
    }
    let mut answers: HashMap<u32, Result<PartialPlan, String>> = HashMap::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((id, outcome)) => {
                answers.insert(id, outcome);
            }
            Err(e) => sink.emit(&Event::Warning {
                message: format!("a planning task stopped: {e}"),
            }),
        }
    }
    batches
        .iter()
        .map(|b| match answers.remove(&b.batch_id) {
            Some(Ok(plan)) => plan,
            Some(Err(reason)) => {
                sink.emit(&Event::Warning {
                    message: format!(
                        "batch {}: planning failed twice ({reason}); using the deterministic plan",
                        b.batch_id
                    ),
                });
                deterministic_plan(b, &by_id, Some(reason))
            }
            None => deterministic_plan(
                b,
                &by_id,
                Some("the planning task did not finish".to_owned()),
            ),
        })
        .collect()
}

/// The request to the planning agent of `batch`: the prompt, the batch's
/// findings as context, the partial-plan schema for its answer.
fn planning_request(
    batch: &Batch,
    by_id: &HashMap<String, &Finding>,
    options: &PlanningOptions,
) -> AgentRequest {
    let listed: Vec<&Finding> = batch
        .findings
        .iter()
        .filter_map(|id| by_id.get(id.as_str()).copied())
        .collect();
    let prompt = planning_prompt(batch, &listed, &options.session_id);
    let context = json!({"batch_id": batch.batch_id, "findings": listed});
    AgentRequest::new(
        format!("plan-batch-{}", batch.batch_id),
        Role::Plan,
        prompt,
        &options.workdir,
    )
    .with_artifacts_dir(&options.session_dir)
    .with_schema(partial_plan_schema())
    .with_time_limit(options.time_limit)
    .with_context(context)
}

/// One batch: ask, validate, retry once with the error.
pub(super) async fn plan_one(
    agent: &dyn Agent,
    sink: &dyn EventSink,
    batch: &Batch,
    request: AgentRequest,
    time_limit: Duration,
) -> Result<PartialPlan, String> {
    let job = request.id.clone();
    sink.emit(&Event::JobStarted {
        id: job.clone(),
        title: Some(format!("plan batch {}", batch.batch_id)),
    });
    // A grace over the agent's own limit, for agents that do not honour it.
    let policy = AskPolicy::new(time_limit, 2)
        .with_grace(Duration::from_secs(5))
        .with_retry_note("Answer again with a corrected plan.");
    let failure_text = |failure: &AskFailure| match failure {
        AskFailure::TimedOut { limit } => format!(
            "the planning agent did not answer within {}s",
            limit.as_secs()
        ),
        AskFailure::Agent(e) => e.to_string(),
        AskFailure::Rejected(problems) => problems.join("; "),
    };
    let answer = ask(
        agent,
        request,
        &policy,
        |resp| match resp.structured {
            Some(v) => validate_partial_plan(&v, batch),
            None => Err(vec!["the answer holds no JSON plan".to_owned()]),
        },
        |attempt, failure| {
            let error = failure_text(failure);
            sink.emit(&Event::AttemptFailed {
                id: job.clone(),
                round: 1,
                attempt,
                error: error.clone(),
            });
            NextAttempt::WithFeedback(error)
        },
    )
    .await;
    match answer {
        Ok(mut plan) => {
            plan.metadata.planner = Some(agent.name().to_owned());
            sink.emit(&Event::JobFinished {
                id: job,
                status: orchestrator_core::JobStatus::Completed,
                detail: None,
            });
            Ok(plan)
        }
        Err(failure) => {
            let last_error = failure_text(&failure);
            sink.emit(&Event::JobFinished {
                id: job,
                status: orchestrator_core::JobStatus::Failed,
                detail: Some(last_error.clone()),
            });
            Err(last_error)
        }
    }
}
