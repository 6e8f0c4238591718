//! Which agents a planex run gets: the shell agent for person-written
//! tasks, else the configured one; and what a resumed session needs.

use super::*;
use orchestrator_core::agent::ItemLimits;
use orchestrator_core::command::CommandRunner;

/// What the session `--continue` / `--retry-failed` would open needs. Picks
/// the session the way the library does (the one named, else the newest
/// that is not cancelled and has a plan); when there is none, the failure
/// lists the sessions found.
pub(super) fn session_needs(repo: &Path, id: Option<&str>, retry: bool) -> Result<Needs, Failure> {
    let sessions = list_sessions(repo).map_err(|e| Failure::new(e.to_string()))?;
    let found: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
    let dir = sessions_dir(repo);
    let info = match id {
        Some(id) => sessions.iter().find(|s| s.id == id),
        None => sessions.iter().rev().find(|s| {
            s.meta.status != SessionStatus::Cancelled && s.resume_phase != ResumePhase::Nothing
        }),
    };
    let Some(info) = info else {
        // Leave malformed ids and the like to the library's own message.
        if id.is_some_and(|id| id.is_empty() || id.contains(['/', '\\'])) {
            return Ok(Needs::Execution);
        }
        let error = match id {
            Some(id) => PlanexError::SessionNotFound {
                id: id.to_owned(),
                dir,
                found,
            },
            None => PlanexError::NoSession { dir, found },
        };
        return Err(Failure {
            message: error.to_string(),
            details: render_sessions(repo, &sessions),
        });
    };
    Ok(match (&info.meta.source, info.resume_phase, retry) {
        (SessionSource::Run { .. }, ..) => Needs::TasksFromFile,
        (_, ResumePhase::Explore, false) => Needs::Planning,
        _ => Needs::Execution,
    })
}

/// The agents picked for a run and how tasks are executed.
pub(super) struct Picked {
    pub(super) agents: Agents,
    pub(super) policy: ExecutionPolicy,
    /// What one task may spend (`--item-max-*`, `[budget] item_max_*`);
    /// none for the shell agent, which spends nothing.
    pub(super) item_limits: ItemLimits,
}

impl Picked {
    /// The shell agent: each task's directives run here, or as jobs on the
    /// Ray cluster of `--runner`, whose file changes come back to the
    /// task's tree.
    fn shell(remote: Option<&crate::remote::Remote>) -> Self {
        let runner: Arc<dyn CommandRunner> = match remote {
            Some(remote) => Arc::new(remote.runner.with_changes_back()),
            None => Arc::new(ProcessRunner::default()),
        };
        let agent: Arc<dyn Agent> = Arc::new(ShellTaskAgent::new(runner));
        Picked {
            agents: Agents::all(agent),
            policy: ExecutionPolicy::shell(),
            item_limits: ItemLimits::default(),
        }
    }
}

/// The agents for `--agent spec` and what the session needs; the shell
/// agent runs directives through `remote` when a Ray runner was chosen.
pub(super) fn agents_for(
    repo: &Path,
    spec: Option<&str>,
    budget: &setup::BudgetFlags,
    items: &setup::ItemBudgetFlags,
    needs: Needs,
    files: &ConfigFiles,
    remote: Option<&crate::remote::Remote>,
) -> Result<Picked, Failure> {
    let wants_shell = spec.is_some_and(|s| s.trim().eq_ignore_ascii_case("shell"));
    let needs_llm = || {
        Failure::new(match needs {
            Needs::Execution => {
                "this session's tasks were planned for an LLM agent: pass --agent \
                 claude|codex|gemini|openai|command:<cmd> (or set [agent] in orchestrator.toml), \
                 or --agent shell to run each task's execution_directives as a shell command"
            }
            _ => {
                "a requirement needs an LLM agent to explore and plan: pass --agent \
                 claude|codex|gemini|openai|command:<cmd> (or set [agent] in orchestrator.toml), \
                 or write the tasks yourself and run them with the shell agent: \
                 `orchestrator planex run tasks.csv`"
            }
        })
    };
    if wants_shell || (spec.is_none() && needs == Needs::TasksFromFile) {
        if needs == Needs::Planning {
            return Err(needs_llm());
        }
        return Ok(Picked::shell(remote));
    }
    let config = setup::effective_config_with_items(repo, spec, budget, items, files)
        .map_err(Failure::new)?
        .into_config();
    let item_limits = ItemLimits::new(
        config.budget.item_max_cost_usd,
        config.budget.item_max_tokens,
        config.budget.item_max_agent_calls,
    );
    match build_agent(&config).map_err(|e| Failure::new(e.to_string()))? {
        AgentChoice::Builtin => match needs {
            Needs::Planning | Needs::Execution => Err(needs_llm()),
            Needs::TasksFromFile => Ok(Picked::shell(remote)),
        },
        AgentChoice::Agent(agent) => Ok(Picked {
            agents: Agents::all(agent),
            policy: ExecutionPolicy::agent(),
            item_limits,
        }),
    }
}
