//! [`SessionCarry`]: continue the agent's own session from one attempt of a
//! work item to the next.
//!
//! A flow that asks an agent again about the same finding or task (the
//! retry executor's next attempt, after the engine rolled the first one
//! back) wraps the agent in one `SessionCarry` per item. Each successful
//! answer's [`AgentResponse::session`] is remembered, and the next request
//! carries it as [`AgentRequest::resume_session`], so the agent CLI resumes
//! the conversation in which it already read the code and made its first
//! attempt, instead of starting from nothing. A failed call keeps the last
//! session that answered.

use std::sync::Mutex;

use async_trait::async_trait;

use super::{Agent, AgentError, AgentRequest, AgentResponse};

/// An agent wrapper that resumes, in each call, the session the previous
/// successful call ended in, so that a retry continues the agent's own
/// conversation (claude `--resume`, `codex exec resume`, `gemini
/// --resume`). Create one per
/// work item: sessions of different items must not mix.
#[derive(Debug)]
pub struct SessionCarry<A> {
    inner: A,
    last: Mutex<Option<String>>,
}

impl<A> SessionCarry<A> {
    /// Wraps `inner`, with no session to resume yet.
    pub fn new(inner: A) -> Self {
        Self {
            inner,
            last: Mutex::new(None),
        }
    }

    /// Wraps `inner`, resuming `session` in the first call (a session
    /// recorded by an earlier run of the flow).
    pub fn resuming(inner: A, session: Option<String>) -> Self {
        Self {
            inner,
            last: Mutex::new(session),
        }
    }

    /// The session the next call will resume, if any.
    pub fn session(&self) -> Option<String> {
        match self.last.lock() {
            Ok(last) => last.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn remember(&self, session: &str) {
        let mut last = match self.last.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        *last = Some(session.to_owned());
    }
}

#[async_trait]
impl<A: Agent> Agent for SessionCarry<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn reports_exact_changes(&self) -> bool {
        self.inner.reports_exact_changes()
    }
    fn declines(&self, finding: &crate::finding::Finding) -> Option<String> {
        self.inner.declines(finding)
    }
    fn spent(&self) -> Option<crate::agent::AgentSpent> {
        self.inner.spent()
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        if request.resume_session.is_none() {
            request.resume_session = self.session();
        }
        let response = self.inner.run(request).await?;
        if let Some(session) = &response.session {
            self.remember(session);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::agent::Role;

    /// Answers with session `s<n>` for its n-th call, or fails the calls
    /// listed in `fail`, recording what each request asked to resume.
    #[derive(Debug, Default)]
    struct Sessions {
        seen: Mutex<Vec<Option<String>>>,
        fail: Vec<usize>,
    }

    #[async_trait]
    impl Agent for Sessions {
        fn name(&self) -> &str {
            "sessions"
        }
        async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
            let mut seen = self.seen.lock().unwrap();
            seen.push(request.resume_session);
            let n = seen.len();
            if self.fail.contains(&n) {
                return Err(AgentError::Failed {
                    message: format!("call {n} failed"),
                    exit_code: Some(1),
                });
            }
            Ok(AgentResponse {
                session: Some(format!("s{n}")),
                ..AgentResponse::text("ok")
            })
        }
    }

    fn request() -> AgentRequest {
        AgentRequest::new("F1", Role::Fix, "fix it", "/w")
    }

    #[tokio::test]
    async fn each_call_resumes_the_session_of_the_last_answer() {
        let inner = Arc::new(Sessions {
            fail: vec![3],
            ..Sessions::default()
        });
        let carry = SessionCarry::new(Arc::clone(&inner));
        for _ in 0..4 {
            let _ = carry.run(request()).await;
        }
        // Call 3 failed: call 4 resumes the session of call 2.
        assert_eq!(
            *inner.seen.lock().unwrap(),
            vec![
                None,
                Some("s1".into()),
                Some("s2".into()),
                Some("s2".into())
            ]
        );
        assert_eq!(carry.session().as_deref(), Some("s4"));
        assert_eq!(carry.name(), "sessions");
    }

    #[tokio::test]
    async fn a_recorded_session_is_resumed_and_an_explicit_one_wins() {
        let inner = Arc::new(Sessions::default());
        let carry = SessionCarry::resuming(Arc::clone(&inner), Some("old".into()));
        carry.run(request()).await.unwrap();
        carry.run(request().resuming("mine")).await.unwrap();
        assert_eq!(
            *inner.seen.lock().unwrap(),
            vec![Some("old".into()), Some("mine".into())]
        );
    }

    #[test]
    fn the_session_fields_round_trip_and_stay_out_of_plain_json() {
        let plain = serde_json::to_value(request()).unwrap();
        assert!(plain.get("resume_session").is_none(), "{plain}");
        let resumed = request().resuming("abc");
        let back: AgentRequest =
            serde_json::from_value(serde_json::to_value(&resumed).unwrap()).unwrap();
        assert_eq!(back.resume_session.as_deref(), Some("abc"));
        let answer = AgentResponse {
            session: Some("t1".into()),
            ..AgentResponse::text("x")
        };
        let back: AgentResponse =
            serde_json::from_value(serde_json::to_value(&answer).unwrap()).unwrap();
        assert_eq!(back, answer);
        let plain = serde_json::to_value(AgentResponse::text("x")).unwrap();
        assert!(plain.get("session").is_none(), "{plain}");
    }
}
