//! Builds the agent an [`orchestrator.toml`](crate::config) (or the CLI's
//! `--agent` flag, applied with [`Config::apply_agent_spec`]) selects.
//!
//! `openai` builds the [`ToolAgent`]: the tool loop for the roles that
//! change files, a plain completion for the roles that only answer; its
//! transcripts go to `[agent.openai] transcript_dir`, else to the flow's
//! session folder, else (a request that names none) to
//! `<cache>/transcripts` ([`orchestrator_core::state::cache_dir`]).
//!
//! Every agent built here is wrapped in one [`Budget`], with `[budget]`'s
//! limits (when set) and `[prices]`' price of its model (when listed); it
//! counts the run's whole spend (see `with_budget`).
//!
//! The builtin agents are not built here: which builtin agent fits depends on
//! the flow (review-fix applies suggestions, ci-autofix runs formatters and
//! linter fixers, planex runs shell directives), so [`build_agent`] returns
//! [`AgentChoice::Builtin`] and the flow picks its own.

use std::sync::Arc;

use orchestrator_core::Agent;

use crate::agents::{Dialect, InstructionInput as ProcessInput, ProcessAgent};
use crate::config::{
    AgentKind, CliAgentSection, CommandLine, Config, ConfigError, InstructionInput, OutputFormat,
};
use crate::openai::{OpenAiConfig, OpenAiError};
use crate::process::ProcessRunner;
use crate::tool_agent::{ToolAgent, ToolAgentConfig};
use crate::wrappers::{Budget, BudgetLimits};

/// What the configuration selects.
#[derive(Debug, Clone)]
pub enum AgentChoice {
    /// The flow's own builtin (no-LLM) agent.
    Builtin,
    /// A configured agent.
    Agent(Arc<dyn Agent>),
}

/// Why the agent could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// The configuration is incomplete or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The OpenAI section cannot make an agent.
    #[error("invalid [agent.openai] configuration: {0}")]
    OpenAi(#[from] OpenAiError),
}

/// Builds the agent `config` selects.
pub fn build_agent(config: &Config) -> Result<AgentChoice, FactoryError> {
    let section = &config.agent;
    let agent: Arc<dyn Agent> = match section.kind {
        AgentKind::Builtin => return Ok(AgentChoice::Builtin),
        AgentKind::Claude => Arc::new(cli_preset(ProcessAgent::claude(), section.claude.as_ref())),
        AgentKind::Codex => Arc::new(cli_preset(ProcessAgent::codex(), section.codex.as_ref())),
        AgentKind::Gemini => Arc::new(cli_preset(ProcessAgent::gemini(), section.gemini.as_ref())),
        AgentKind::Openai => {
            let openai = section.openai.clone().unwrap_or_default();
            let transcripts = orchestrator_core::state::cache_dir().join("transcripts");
            Arc::new(ToolAgent::new(
                OpenAiConfig::from_section(&openai)?,
                ToolAgentConfig::from_section(&openai, Some(transcripts)),
                Arc::new(ProcessRunner::default()),
            )?)
        }
        AgentKind::Command => {
            let cmd = section.command.clone().unwrap_or_default();
            let (program, args) = match cmd.command_line()? {
                CommandLine::Argv(mut argv) => {
                    if argv.is_empty() {
                        return Err(ConfigError::Command {
                            field: "[agent.command] argv".into(),
                            message: "is empty".into(),
                        }
                        .into());
                    }
                    let program = argv.remove(0);
                    (program, argv)
                }
                CommandLine::Shell(script) => ("sh".to_owned(), vec!["-c".to_owned(), script]),
            };
            let mut agent = ProcessAgent::new("command", program, args);
            if let Some(input) = cmd.input {
                agent = agent.instruction_input(match input {
                    InstructionInput::Stdin => ProcessInput::Stdin,
                    InstructionInput::Arg => ProcessInput::Argument,
                });
            }
            if let Some(output) = cmd.output {
                agent = agent.dialect(match output {
                    OutputFormat::Text => Dialect::Text,
                    OutputFormat::Json => Dialect::Json,
                });
            }
            if let Some(limit) = cmd.timeout() {
                agent = agent.time_limit(limit);
            }
            Arc::new(agent)
        }
    };
    Ok(AgentChoice::Agent(with_budget(config, agent)))
}

/// Wraps `agent` in one [`Budget`] with `[budget]`'s limits (none: it
/// only counts) and the `[prices]` entry of its model: the single place
/// where limits meet every configured backend, and where a run's whole
/// spend is counted ([`Agent::spent`]).
fn with_budget(config: &Config, agent: Arc<dyn Agent>) -> Arc<dyn Agent> {
    let price = model_of(config).and_then(|model| config.prices.get(model).copied());
    let limits = BudgetLimits {
        max_turns: None,
        max_tokens: config.budget.max_tokens,
        max_cost_usd: config.budget.max_cost_usd,
        max_calls: config.budget.max_agent_calls,
        max_wall: config
            .budget
            .max_wall_secs
            .map(std::time::Duration::from_secs),
    };
    let budget = Budget::new(agent, limits);
    Arc::new(match price {
        Some(price) => budget.with_price(price),
        None => budget,
    })
}

/// The model the configured agent is set to, for `[prices]`.
fn model_of(config: &Config) -> Option<&str> {
    let agent = &config.agent;
    match agent.kind {
        AgentKind::Openai => agent.openai.as_ref()?.model.as_deref(),
        AgentKind::Claude => agent.claude.as_ref()?.model.as_deref(),
        AgentKind::Codex => agent.codex.as_ref()?.model.as_deref(),
        AgentKind::Gemini => agent.gemini.as_ref()?.model.as_deref(),
        AgentKind::Builtin | AgentKind::Command => None,
    }
}

fn cli_preset(mut agent: ProcessAgent, section: Option<&CliAgentSection>) -> ProcessAgent {
    let Some(section) = section else {
        return agent;
    };
    if let Some(bin) = &section.bin {
        agent = agent.program(bin);
    }
    if let Some(model) = &section.model {
        agent = agent.arg("--model").arg(model.clone());
    }
    for arg in &section.args {
        agent = agent.arg(arg.clone());
    }
    if let Some(limit) = section.timeout() {
        agent = agent.time_limit(limit);
    }
    agent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentSpec;

    fn choose(spec: &str) -> AgentChoice {
        let mut config = Config::parse_str("version = 1\n[agent.openai]\nmodel = \"m\"\n").unwrap();
        config.apply_agent_spec(&AgentSpec::parse(spec).unwrap());
        build_agent(&config).unwrap()
    }

    #[test]
    fn every_spec_builds_the_matching_agent() {
        assert!(matches!(choose("builtin"), AgentChoice::Builtin));
        for (spec, name) in [
            ("claude", "claude"),
            ("codex", "codex"),
            ("gemini", "gemini"),
            ("openai", "openai"),
            ("command:my-agent --flag", "command"),
        ] {
            match choose(spec) {
                AgentChoice::Agent(a) => assert_eq!(a.name(), name, "{spec}"),
                AgentChoice::Builtin => panic!("{spec} built the builtin agent"),
            }
        }
    }

    #[test]
    fn openai_with_a_model_builds_the_tool_agent_for_that_model() {
        match choose("openai:other-model") {
            AgentChoice::Agent(a) => {
                assert_eq!(a.name(), "openai");
                assert!(format!("{a:?}").contains("other-model"), "{a:?}");
            }
            AgentChoice::Builtin => panic!("openai:other-model built the builtin agent"),
        }
    }

    #[test]
    fn openai_without_a_model_is_an_error() {
        let mut config = Config::parse_str("version = 1\n").unwrap();
        config.apply_agent_spec(&AgentSpec::OpenAi);
        let err = build_agent(&config).unwrap_err();
        assert!(err.to_string().contains("[agent.openai]"), "{err}");
    }
}
