//! [`RoutedAgent`]: a finding with a machine-applicable suggestion goes to
//! the builtin agent, which applies it exactly; anything else (planning,
//! prose findings) to the configured LLM agent.

use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, AgentSpent, Role};

/// Why a prose finding is declined when no LLM agent is configured.
const PROSE_NEEDS_LLM: &str = "a review comment without a suggestion block needs an LLM agent \
     (--agent claude, codex, gemini, openai or command:…); the builtin agent applies only \
     suggestions";

/// The agent of a run on a request's threads; see the module docs.
#[derive(Debug, Clone)]
pub struct RoutedAgent {
    builtin: Arc<dyn Agent>,
    llm: Option<Arc<dyn Agent>>,
}

impl RoutedAgent {
    /// `builtin` applies suggestions; `llm` (when one is configured) does
    /// the rest. Without it a prose finding is declined, saying why.
    pub fn new(builtin: Arc<dyn Agent>, llm: Option<Arc<dyn Agent>>) -> Self {
        Self { builtin, llm }
    }

    /// Whether `request` is a fix of a finding that carries a suggestion.
    fn machine_applicable(request: &AgentRequest) -> bool {
        request.role == Role::Fix
            && request.context["finding"]["suggestions"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
    }
}

#[async_trait]
impl Agent for RoutedAgent {
    fn name(&self) -> &str {
        self.llm
            .as_ref()
            .map_or_else(|| self.builtin.name(), |l| l.name())
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        if Self::machine_applicable(&request) {
            return self.builtin.run(request).await;
        }
        match &self.llm {
            Some(llm) => llm.run(request).await,
            None if request.role == Role::Fix => Err(AgentError::Unsupported {
                reason: PROSE_NEEDS_LLM.to_owned(),
            }),
            None => self.builtin.run(request).await,
        }
    }

    fn spent(&self) -> Option<AgentSpent> {
        self.llm.as_ref().and_then(|l| l.spent())
    }

    fn declines(&self, finding: &orchestrator_core::finding::Finding) -> Option<String> {
        if !finding.suggestions.is_empty() {
            return self.builtin.declines(finding);
        }
        match &self.llm {
            Some(llm) => llm.declines(finding),
            None => Some(PROSE_NEEDS_LLM.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::FakeAgent;

    #[tokio::test]
    async fn suggestions_go_to_the_builtin_agent_and_prose_to_the_llm() {
        let builtin = Arc::new(FakeAgent::new("builtin"));
        let llm = Arc::new(FakeAgent::new("llm"));
        let routed = RoutedAgent::new(builtin.clone(), Some(llm.clone()));
        let fix = |suggestions: serde_json::Value| {
            AgentRequest::new("f", Role::Fix, "", std::env::temp_dir())
                .with_context(serde_json::json!({"finding": {"suggestions": suggestions}}))
        };
        // The fakes have no script: each answers "unsupported" but records the call.
        let _ = routed.run(fix(serde_json::json!([{"edits": []}]))).await;
        let _ = routed.run(fix(serde_json::json!([]))).await;
        let _ = routed
            .run(AgentRequest::new("p", Role::Plan, "", std::env::temp_dir()))
            .await;
        assert_eq!((builtin.calls().len(), llm.calls().len()), (1, 2));
        assert_eq!(routed.name(), "llm");

        let alone = RoutedAgent::new(builtin.clone(), None);
        let err = alone.run(fix(serde_json::json!([]))).await.unwrap_err();
        assert!(err.to_string().contains("needs an LLM agent"), "{err:?}");
        assert_eq!(
            builtin.calls().len(),
            1,
            "a declined prose finding reaches no agent"
        );
    }

    /// Without an LLM agent a prose finding is declined up front, with the
    /// words `run` would give; with one, it is the LLM's to decide.
    #[tokio::test]
    async fn a_prose_finding_is_declined_up_front_only_without_an_llm() {
        let finding = orchestrator_core::finding::Finding::new(
            "T1@a.rs:1",
            "prose",
            orchestrator_core::finding::Severity::Low,
        );
        let alone = RoutedAgent::new(Arc::new(FakeAgent::new("builtin")), None);
        let reason = alone.declines(&finding).unwrap();
        let fix = AgentRequest::new("f", Role::Fix, "", std::env::temp_dir())
            .with_context(serde_json::json!({"finding": {"suggestions": []}}));
        match alone.run(fix).await {
            Err(AgentError::Unsupported { reason: said }) => assert_eq!(said, reason),
            other => panic!("{other:?}"),
        }
        let with_llm = RoutedAgent::new(
            Arc::new(FakeAgent::new("builtin")),
            Some(Arc::new(FakeAgent::new("llm"))),
        );
        assert_eq!(with_llm.declines(&finding), None);
    }
}
