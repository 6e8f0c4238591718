//! The fix loop's run: what it needs first (the repository, the agent,
//! the plan), its config from the flags and `orchestrator.toml`, the run
//! under Ctrl-C, and how its end reads in the session's log.

use super::*;

/// Runs the fix loop on the repository of `args` (from `handoff` when one
/// is given), stops it on Ctrl-C, and prints how it ended.
pub(super) async fn fix_loop(args: &FixArgs, handoff: Option<Handoff>, config: &Config) -> Exit {
    let Prepared {
        root,
        vcs,
        agent,
        plan,
    } = match prepare(args, handoff, config).await {
        Ok(prepared) => prepared,
        Err(exit) => return exit,
    };
    let target = plan.target.clone();
    let cfg = autofix_config(args, config, plan.target, plan.handoff, &root);
    let reporter = setup::reporter(args.json);
    let (sink, human) = (reporter.sink(), reporter.human.clone());
    if let Some(h) = &human {
        h.watch_spend(Arc::clone(&agent));
    }
    let ctx = AutofixContext {
        vcs,
        agent,
        gate: match args.confirm {
            Some(ConfirmMode::Gate) => Arc::new(AlwaysDefer),
            _ => setup::gate(args.yes),
        },
        provider: plan.provider,
        sink,
        config: cfg,
    };
    let result = tokio::select! {
        r = orchestrator_ci_autofix::run_autofix(ctx) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    if let Some(h) = &human {
        h.finish();
    }
    let summary = Summary {
        json: args.json,
        yes: args.yes,
        root: &root,
        target: &target,
    };
    let (code, state, reason) = match &result {
        None => (3, RunState::Interrupted, None),
        Some(Ok(outcome)) => run_end(outcome),
        Some(Err(e)) => (2, RunState::Error, Some(e.to_string())),
    };
    reporter.finish(code, state, reason);
    match result {
        None => summary.interrupted(),
        Some(Ok(outcome)) => summary.outcome(&outcome),
        Some(Err(e)) => summary.error(&e),
    }
}

/// What a run needs before its flow config: the repository (and its
/// root), the agent, and the run's plan (target and check provider).
struct Prepared {
    root: PathBuf,
    vcs: Arc<dyn Vcs>,
    agent: Arc<dyn Agent>,
    plan: orchestrator_ci_autofix::RunPlan,
}

/// Opens the repository, reads its branch and GitLab forge, builds the
/// agent and plans the run; an error is printed and is the exit.
async fn prepare(
    args: &FixArgs,
    handoff: Option<Handoff>,
    config: &Config,
) -> Result<Prepared, Exit> {
    let vcs = GitVcs::open(&args.repo)
        .await
        .map_err(|e| printed(e, Exit::BadInput))?;
    let branch = vcs
        .current_branch()
        .await
        .map_err(|e| printed(e, Exit::SomeFailed))?;
    let gitlab = forge::gitlab_forge(args, &vcs)
        .await
        .map_err(|e| printed(e, Exit::BadInput))?;
    let root = vcs.root().to_path_buf();
    let vcs: Arc<dyn Vcs> = Arc::new(vcs);
    let runner: Arc<dyn CommandRunner> = Arc::new(ProcessRunner::default());
    let agent: Arc<dyn Agent> = match build_agent(config) {
        Ok(AgentChoice::Builtin) => Arc::new(CiFixAgent::new(Arc::clone(&runner))),
        Ok(AgentChoice::Agent(a)) => a,
        Err(e) => return Err(printed(e, Exit::BadInput)),
    };
    let plan = plan_run(
        run_source(args, handoff, gitlab),
        branch,
        Arc::clone(&vcs),
        Arc::clone(&runner),
    )
    .map_err(|e| printed(e, Exit::BadInput))?;
    Ok(Prepared {
        root,
        vcs,
        agent,
        plan,
    })
}

/// Prints the error `e` and gives `code`.
fn printed(e: impl std::fmt::Display, code: Exit) -> Exit {
    eprintln!("error: {e}");
    code
}

/// The flow's config for `target`, from the flags and `orchestrator.toml`.
fn autofix_config(
    args: &FixArgs,
    config: &Config,
    target: Target,
    handoff: Option<Handoff>,
    root: &Path,
) -> AutofixConfig {
    let resume_command = confirm::resume_args(args, &target, root);
    let mut cfg = AutofixConfig::new(target);
    cfg.max_iterations = args.max_iterations;
    cfg.allow_dirty = args.allow_dirty;
    cfg.remote = args.remote.clone();
    cfg.initial_failures = handoff.map(|h| h.failed_checks);
    // `[budget] item_max_agent_calls` is the other flows' (an iteration is
    // one call); the dollars and tokens hold each iteration's call.
    cfg.iteration_limits = ItemLimits::new(
        config.budget.item_max_cost_usd,
        config.budget.item_max_tokens,
        None,
    );
    cfg.provisioner = setup::provisioner(config);
    cfg.rerun_before_fix = args.rerun_before_fix.unwrap_or(!args.local);
    cfg.resume_command = resume_command;
    cfg
}

/// How an outcome reads in the session's log: exit code, state, reason.
fn run_end(outcome: &AutofixOutcome) -> (i32, RunState, Option<String>) {
    let state = match outcome {
        AutofixOutcome::Green { .. } | AutofixOutcome::PassedOnRerun { .. } => RunState::Done,
        AutofixOutcome::StillFailing { .. } => RunState::Failed,
        AutofixOutcome::LimitReached { .. } => RunState::Limit,
        _ => RunState::Waiting,
    };
    let reason = match outcome {
        AutofixOutcome::Green { .. } => None,
        AutofixOutcome::PassedOnRerun { class, checks, .. } => Some(format!(
            "{} passed on a re-run at the same commit ({class})",
            checks.join(", ")
        )),
        AutofixOutcome::NoChecks { head } => Some(format!(
            "no checks on {}: nothing ran, so nothing to fix",
            &head[..head.len().min(12)]
        )),
        AutofixOutcome::AwaitingConfirmation { iteration, .. } => Some(format!(
            "iteration {iteration}'s patch waits for confirmation"
        )),
        AutofixOutcome::StillFailing { reason }
        | AutofixOutcome::LimitReached { reason }
        | AutofixOutcome::Escalated { reason, .. } => Some(reason.clone()),
    };
    (outcome.exit_code(), state, reason)
}
