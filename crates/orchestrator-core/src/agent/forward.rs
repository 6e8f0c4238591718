//! `Arc<A>` and `Box<A>` are agents: every method forwards to `A`.

use async_trait::async_trait;

use super::{Agent, AgentError, AgentRequest, AgentResponse, AgentSpent};
use std::sync::Arc;

#[async_trait]
impl<A: Agent + ?Sized> Agent for Arc<A> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        (**self).run(request).await
    }
    fn changes_files(&self) -> bool {
        (**self).changes_files()
    }
    fn spent(&self) -> Option<AgentSpent> {
        (**self).spent()
    }
    fn declines(&self, finding: &crate::finding::Finding) -> Option<String> {
        (**self).declines(finding)
    }
}

#[async_trait]
impl<A: Agent + ?Sized> Agent for Box<A> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        (**self).run(request).await
    }
    fn changes_files(&self) -> bool {
        (**self).changes_files()
    }
    fn spent(&self) -> Option<AgentSpent> {
        (**self).spent()
    }
    fn declines(&self, finding: &crate::finding::Finding) -> Option<String> {
        (**self).declines(finding)
    }
}
