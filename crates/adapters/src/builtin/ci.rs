//! [`CiFixAgent`]: the builtin (no-LLM) agent of the ci-autofix flow.
//!
//! It dispatches on the classification the flow puts in the request context
//! (`{"classification", "sub_class", "log"}`): mechanical-trivial failures go
//! to the [`FormatterAgent`], mechanical non-trivial ones to the
//! [`LinterFixAgent`]; anything else is not fixable without intent, so the
//! agent declines and the flow escalates. Asked to diagnose, it says plainly
//! that it cannot and which agents can.

use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::command::CommandRunner;

use super::{FormatterAgent, LinterFixAgent};

/// The builtin ci-autofix agent: formatter for mechanical-trivial failures,
/// linter fixer for mechanical non-trivial ones, declines the rest.
#[derive(Debug)]
pub struct CiFixAgent {
    formatter: FormatterAgent,
    linter: LinterFixAgent,
}

/// What the builtin agent answers when asked for a diagnosis.
pub const NO_DIAGNOSIS: &str = "No automatic diagnosis: the builtin agent only runs formatters and \
linter fixers. The evidence above shows where the log failed; a semantic or unknown failure needs \
a person, or an LLM agent (--agent claude|codex|gemini|openai).";

impl CiFixAgent {
    /// An agent running tools through `runner`.
    pub fn new(runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            formatter: FormatterAgent::new(Arc::clone(&runner)),
            linter: LinterFixAgent::new(runner),
        }
    }
}

#[async_trait]
impl Agent for CiFixAgent {
    fn name(&self) -> &str {
        "builtin-ci"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        if request.role == Role::Diagnose {
            return Ok(AgentResponse::text(NO_DIAGNOSIS));
        }
        let class = request.context["classification"].as_str().unwrap_or("");
        let sub = request.context["sub_class"].as_str().unwrap_or("");
        match (class, sub) {
            ("mechanical", "trivial") => self.formatter.run(request).await,
            ("mechanical", "non-trivial") => self.linter.run(request).await,
            _ => Err(AgentError::Unsupported {
                reason: format!(
                    "the builtin agent fixes only mechanical failures (got classification `{class}`, sub_class `{sub}`)"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::ScriptedCommands;
    use serde_json::json;

    #[tokio::test]
    async fn declines_semantic_failures_and_answers_diagnoses() {
        let agent = CiFixAgent::new(Arc::new(ScriptedCommands::new()));
        let req = AgentRequest::new("x", Role::Fix, "fix", std::env::temp_dir())
            .with_context(json!({"classification": "semantic", "sub_class": "none", "log": ""}));
        assert!(matches!(
            agent.run(req).await,
            Err(AgentError::Unsupported { .. })
        ));
        let req = AgentRequest::new("x", Role::Diagnose, "why?", std::env::temp_dir());
        assert_eq!(agent.run(req).await.unwrap().text, NO_DIAGNOSIS);
    }
}
