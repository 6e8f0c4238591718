//! [`RoutedAgent`]: a finding with a machine-applicable suggestion goes to
//! the builtin agent, which applies it exactly; anything else (planning,
//! prose findings) to the configured LLM agent.

use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, AgentSpent, Role};

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
                reason: "a review comment without a suggestion block needs an LLM agent \
                         (--agent claude, codex, gemini, openai or command:…); the builtin \
                         agent applies only suggestions"
                    .to_owned(),
            }),
            None => self.builtin.run(request).await,
        }
    }

    fn spent(&self) -> Option<AgentSpent> {
        self.llm.as_ref().and_then(|l| l.spent())
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
}
