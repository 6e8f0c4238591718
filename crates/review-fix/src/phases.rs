//! The phases of a run before executing its plan: the settings checked,
//! the session opened (discovery), the plan made, the plan approved.

use crate::*;

/// Keeps the engine's folders out of version control.
pub(crate) async fn exclude_engine_folders(vcs: &dyn Vcs) -> Result<(), ReviewFixError> {
    for folder in ENGINE_FOLDERS {
        vcs.exclude(folder)
            .await
            .map_err(|e| ReviewFixError::vcs(format!("excluding {folder}"), e))?;
    }
    Ok(())
}

/// Discovery: opens a new session over the configured inputs, or the one
/// to resume (which keeps the layout its plan was made for: where groups
/// run and how many run at once). Returns the configuration the run goes on
/// with.
pub(crate) async fn discover(
    config: ReviewFixConfig,
    services: &Services,
    sink: &Arc<dyn EventSink>,
    repo: &Path,
) -> Result<(ReviewFixConfig, Opened), ReviewFixError> {
    emit_phase(sink.as_ref(), "discovery", true);
    let first_input = config.inputs.first().map(|p| absolute(repo, p));
    let root = session::fixes_root(repo, first_input.as_deref());
    let mut opened = if config.resume {
        open_for_resume(&config, services, &root).await?
    } else {
        open_new(&config, services, &root).await?
    };
    sink.emit(&Event::SessionOpened {
        flow: FLOW.to_owned(),
        session: opened.paths.id(),
        dir: opened.paths.dir.clone(),
    });
    let config = if config.resume {
        keep_session_layout(config, &opened.active.options, &mut opened.notes)
    } else {
        config
    };
    emit_phase(sink.as_ref(), "discovery", false);
    Ok((config, opened))
}

/// Refuses settings a run cannot start with: nothing to fix, a zero limit,
/// an agent that cannot change files (unless the run is dry).
pub(crate) fn check_config(
    config: &ReviewFixConfig,
    services: &Services,
) -> Result<(), ReviewFixError> {
    if config.inputs.is_empty() && !config.resume {
        return Err(ReviewFixError::Usage(
            "give at least one findings file or review directory (--fix), or --resume".to_owned(),
        ));
    }
    if config.max_iterations == 0 || config.batch_size == 0 || config.max_parallel == 0 {
        return Err(ReviewFixError::Usage(
            "max iterations, batch size and max parallel must be at least 1".to_owned(),
        ));
    }
    if !config.dry_run && !services.agent.changes_files() {
        return Err(ReviewFixError::AgentCannotChangeFiles {
            agent: services.agent.name().to_owned(),
        });
    }
    Ok(())
}

/// What making the plan needs.
pub(crate) struct Planning<'a> {
    pub(crate) config: &'a ReviewFixConfig,
    pub(crate) services: &'a Services,
    pub(crate) sink: &'a Arc<dyn EventSink>,
    pub(crate) paths: &'a session::SessionPaths,
    pub(crate) repo: &'a Path,
}

impl Planning<'_> {
    /// The session's plan: the one a resumed session has already, else a
    /// new one ([`Planning::make_plan`]).
    pub(crate) async fn plan_unless_planned(
        &self,
        active: &mut ActiveSession,
        findings: &[Finding],
    ) -> Result<FixPlan, ReviewFixError> {
        match read_json_if_exists::<FixPlan>(self.paths.plan())? {
            Some(plan) => Ok(plan),
            None => self.make_plan(active, findings).await,
        }
    }

    /// Batches the findings, plans each batch (the agents, or the
    /// deterministic planner), merges the partial plans and writes the plan
    /// and each group's first progress file.
    pub(crate) async fn make_plan(
        &self,
        active: &mut ActiveSession,
        findings: &[Finding],
    ) -> Result<FixPlan, ReviewFixError> {
        active.phase = SessionPhase::Planning;
        active.last_update = now();
        session::write_active(self.paths, active)?;
        emit_phase(self.sink.as_ref(), "planning", true);
        let batches = if self.config.planner == PlannerMode::Deterministic {
            plan::batches_in_fix_order(findings, self.config.batch_size)
        } else {
            batch_findings(
                findings,
                &BatchConfig {
                    batch_size: self.config.batch_size,
                    ..BatchConfig::default()
                },
            )
        };
        let partials = plan::plan_batches(
            Arc::clone(&self.services.agent),
            Arc::clone(self.sink),
            &batches,
            findings,
            &plan::PlanningOptions {
                mode: self.config.planner,
                workdir: self.repo.to_path_buf(),
                session_id: self.paths.id(),
                session_dir: self.paths.dir.clone(),
                max_parallel: self.config.max_parallel,
                time_limit: self.config.planning_time_limit,
            },
        )
        .await;
        for p in &partials {
            write_json_atomic(self.paths.partial_plan(p.batch_id), p)?;
        }
        let by_id: HashMap<String, &Finding> =
            findings.iter().map(|f| (f.id.to_string(), f)).collect();
        let fallback_batches = if self.config.planner == PlannerMode::Agent {
            partials
                .iter()
                .filter(|p| p.metadata.fallback_reason.is_some())
                .map(|p| p.batch_id)
                .collect()
        } else {
            Vec::new()
        };
        let plan = plan::aggregate(
            &partials,
            &by_id,
            &plan::AggregateOptions {
                fix_session_id: self.paths.id(),
                parallel_limit: self.config.max_parallel_groups,
                worktrees: self.config.isolation == Isolation::Worktree,
                fallback_batches,
            },
        );
        write_json_atomic(self.paths.plan(), &plan)?;
        let by_id: HashMap<String, Finding> = findings
            .iter()
            .map(|f| (f.id.to_string(), f.clone()))
            .collect();
        for (i, g) in plan.groups.iter().enumerate() {
            write_json_atomic(
                self.paths.progress(i + 1),
                &exec::init_progress(g, i + 1, &by_id),
            )?;
        }
        emit_phase(self.sink.as_ref(), "planning", false);
        Ok(plan)
    }
}

/// Asks the gate to run the plan: `None` to go on; else the report of a
/// run stopped there (declined, or nobody could answer: resumable).
pub(crate) async fn ask_approval(
    services: &Services,
    sink: &dyn EventSink,
    paths: &session::SessionPaths,
    active: &mut ActiveSession,
    plan: &FixPlan,
    notes: &[String],
) -> Result<Option<RunReport>, ReviewFixError> {
    active.phase = SessionPhase::AwaitingApproval;
    active.last_update = now();
    session::write_active(paths, active)?;
    let question = Question::new(
        PLAN_QUESTION_ID,
        format!(
            "Fix {} in {} over {} ({} isolation)?",
            counted(plan.metadata.total_findings as u64, "finding", "findings"),
            counted(plan.groups.len() as u64, "group", "groups"),
            counted(plan.timeline.len() as u64, "stage", "stages"),
            plan.metadata.isolation
        ),
        vec![
            GateOption::new("Proceed", "Run the plan and commit the verified fixes"),
            GateOption::new("Stop", "Keep the plan; resume later with --resume"),
        ],
    )
    .with_details(format!("Plan: {}", paths.plan().display()));
    sink.emit(&Event::GateAsked {
        question: question.id.clone(),
        prompt: question.prompt.clone(),
    });
    let answer = services.gate.ask(&question).await;
    let choice = match &answer {
        Ok(Answer::Chosen { index, .. }) => question.label(*index).map(str::to_owned),
        _ => None,
    };
    sink.emit(&Event::GateAnswered {
        question: question.id.clone(),
        choice,
    });
    match answer {
        Ok(Answer::Chosen { index: 0, .. }) => Ok(None),
        Ok(Answer::Chosen { .. }) => Ok(Some(stopped_report(
            paths,
            Outcome::Stopped,
            Some(plan.clone()),
            notes.to_vec(),
        ))),
        Ok(Answer::Deferred) | Err(_) => {
            let reason = match answer {
                Err(e) => format!("the plan approval could not be asked: {e}"),
                _ => "the plan waits for approval; run again with --resume".to_owned(),
            };
            sink.emit(&Event::Escalated {
                id: None,
                reason: reason.clone(),
            });
            Ok(Some(stopped_report(
                paths,
                Outcome::NeedsHuman { reason },
                Some(plan.clone()),
                notes.to_vec(),
            )))
        }
    }
}
