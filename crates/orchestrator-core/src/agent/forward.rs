//! `Arc<A>` and `Box<A>` are agents: every method forwards to `A`.
//!
//! One macro writes both impls, so that a method added to [`Agent`] is
//! forwarded by both pointers or by neither (a missed forward would silently
//! fall back to the trait's default for that pointer).

use async_trait::async_trait;

use super::{Agent, AgentError, AgentRequest, AgentResponse, AgentSpent};
use std::sync::Arc;

/// `impl Agent for $pointer<A>`, forwarding every method to `A`.
macro_rules! forward_agent {
    ($pointer:ident) => {
        #[async_trait]
        impl<A: Agent + ?Sized> Agent for $pointer<A> {
            fn name(&self) -> &str {
                (**self).name()
            }
            async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
                (**self).run(request).await
            }
            fn changes_files(&self) -> bool {
                (**self).changes_files()
            }
            fn reports_exact_changes(&self) -> bool {
                (**self).reports_exact_changes()
            }
            fn spent(&self) -> Option<AgentSpent> {
                (**self).spent()
            }
            fn declines(&self, finding: &crate::finding::Finding) -> Option<String> {
                (**self).declines(finding)
            }
        }
    };
}

forward_agent!(Arc);
forward_agent!(Box);
