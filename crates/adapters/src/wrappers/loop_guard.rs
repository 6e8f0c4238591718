//! [`LoopGuard`]: stops an agent that keeps failing the same way.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse};

/// The signature of an error message: the text with every path, hex id and
/// number replaced by a placeholder, and whitespace collapsed, so that
/// "exit 1 at /tmp/a/x.rs:12" and "exit 1 at /tmp/b/y.rs:40" match.
///
/// - a token containing `/` or `\` is a path: `<path>`;
/// - `0x…`, or 7+ hex digits (dashes allowed, as in UUIDs) with at least one
///   digit, is `<hex>`;
/// - any other run of ASCII digits is `<n>`.
pub fn error_signature(text: &str) -> String {
    const TRIM: &[char] = &[
        '"', '\'', '`', '(', ')', '[', ']', '{', '}', ',', ';', ':', '.', '<', '>',
    ];
    let mut out = Vec::new();
    for token in text.split_whitespace() {
        let core = token.trim_matches(TRIM);
        let start = token.find(core).unwrap_or(0);
        let (prefix, suffix) = (&token[..start], &token[start + core.len()..]);
        let normalised = if core.len() > 1 && core.contains(['/', '\\']) {
            "<path>".to_owned()
        } else if is_hex_id(core) {
            "<hex>".to_owned()
        } else {
            replace_digit_runs(core)
        };
        out.push(format!("{prefix}{normalised}{suffix}"));
    }
    out.join(" ")
}

fn is_hex_id(token: &str) -> bool {
    if let Some(rest) = token
        .strip_prefix("0x")
        .or_else(|| token.strip_prefix("0X"))
    {
        return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits: Vec<char> = token.chars().filter(|&c| c != '-').collect();
    digits.len() >= 7
        && digits.iter().all(char::is_ascii_hexdigit)
        && digits.iter().any(char::is_ascii_digit)
}

fn replace_digit_runs(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut in_digits = false;
    for c in token.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push_str("<n>");
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

#[derive(Debug, Default)]
struct LoopState {
    last: Option<String>,
    count: u32,
    tripped: Option<(String, u32)>,
}

/// Stops when the same error signature ([`error_signature`] of the error's
/// message) repeats `threshold` times in a row: that call returns
/// [`AgentError::LoopDetected`], and so does every later call, without
/// calling the inner agent, until [`LoopGuard::reset`]. A success resets the
/// count. "In a row" counts every call through this wrapper, so give each
/// task or session its own guard.
#[derive(Debug)]
pub struct LoopGuard<A> {
    inner: A,
    threshold: u32,
    state: Mutex<LoopState>,
}

impl<A> LoopGuard<A> {
    /// Wraps `inner`; `threshold` repetitions trip the guard (at least 1).
    pub fn new(inner: A, threshold: u32) -> Self {
        Self {
            inner,
            threshold: threshold.max(1),
            state: Mutex::new(LoopState::default()),
        }
    }

    /// The wrapped agent.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Whether the guard has stopped the agent.
    pub fn is_tripped(&self) -> bool {
        self.lock().tripped.is_some()
    }

    /// Clears the count and re-enables a tripped guard.
    pub fn reset(&self) {
        *self.lock() = LoopState::default();
    }

    fn lock(&self) -> MutexGuard<'_, LoopState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl<A: Agent> Agent for LoopGuard<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn reports_exact_changes(&self) -> bool {
        self.inner.reports_exact_changes()
    }
    fn declines(&self, finding: &orchestrator_core::finding::Finding) -> Option<String> {
        self.inner.declines(finding)
    }
    fn spent(&self) -> Option<orchestrator_core::agent::AgentSpent> {
        self.inner.spent()
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        if let Some((signature, count)) = self.lock().tripped.clone() {
            return Err(AgentError::LoopDetected { signature, count });
        }
        let result = self.inner.run(request).await;
        let mut state = self.lock();
        match result {
            Ok(response) => {
                state.last = None;
                state.count = 0;
                Ok(response)
            }
            Err(error) => {
                let signature = error_signature(&error.to_string());
                if state.last.as_deref() == Some(signature.as_str()) {
                    state.count += 1;
                } else {
                    state.last = Some(signature.clone());
                    state.count = 1;
                }
                if state.count >= self.threshold {
                    let count = state.count;
                    tracing::warn!(agent = self.inner.name(), %signature, count, "agent loop detected");
                    state.tripped = Some((signature.clone(), count));
                    return Err(AgentError::LoopDetected { signature, count });
                }
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::scripted::{Scripted, Step, request, transient};
    use proptest::prelude::*;

    #[test]
    fn signatures_normalise_numbers_paths_and_hex() {
        let cases = [
            (
                "error[E0308]: mismatched types at src/main.rs:12:5",
                "error[E<n>]: mismatched types at <path>",
            ),
            (
                "command `cargo test` exited with 101 after 3.52s",
                "command `cargo test` exited with <n> after <n>.<n>s",
            ),
            ("commit 4f2a9c1d not found", "commit <hex> not found"),
            (
                "pointer 0xdeadbeef freed twice",
                "pointer <hex> freed twice",
            ),
            (
                "request 123e4567-e89b-12d3-a456-426614174000 failed",
                "request <hex> failed",
            ),
            ("cannot open 'C:\\work\\x.txt'", "cannot open '<path>'"),
            ("  spaced\n\tout  ", "spaced out"),
            ("added deadbeef", "added deadbeef"),
        ];
        for (input, expected) in cases {
            assert_eq!(error_signature(input), expected, "{input}");
        }
        assert_eq!(
            error_signature("test failed at /tmp/a/x.rs:12 (pid 4242)"),
            error_signature("test failed at /var/b/y.rs:40 (pid 17)")
        );
    }

    #[tokio::test]
    async fn the_same_error_repeated_trips_the_guard() {
        let inner = Scripted::new([
            Step::err(transient("test failed at /tmp/a.rs:1")),
            Step::err(transient("test failed at /tmp/b.rs:2")),
            Step::err(transient("test failed at /tmp/c.rs:3")),
            Step::ok("never called"),
        ]);
        let guard = LoopGuard::new(inner, 3);
        assert!(matches!(
            guard.run(request("1")).await,
            Err(AgentError::Failed { .. })
        ));
        assert!(matches!(
            guard.run(request("2")).await,
            Err(AgentError::Failed { .. })
        ));
        let expected = AgentError::LoopDetected {
            signature: "agent failed: test failed at <path>".into(),
            count: 3,
        };
        assert_eq!(guard.run(request("3")).await, Err(expected.clone()));
        assert!(guard.is_tripped());
        // Stopped: the inner agent is not called again.
        assert_eq!(guard.run(request("4")).await, Err(expected));
        assert_eq!(guard.inner().call_count(), 3);
        guard.reset();
        assert_eq!(
            guard.run(request("5")).await,
            Ok(AgentResponse::text("never called"))
        );
    }

    #[tokio::test]
    async fn different_errors_or_a_success_reset_the_count() {
        let inner = Scripted::new([
            Step::err(transient("A")),
            Step::err(transient("A")),
            Step::err(transient("B")),
            Step::err(transient("A")),
            Step::ok("fine"),
            Step::err(transient("A")),
            Step::err(transient("A")),
        ]);
        let guard = LoopGuard::new(inner, 3);
        for i in 0..7 {
            let result = guard.run(request(&i.to_string())).await;
            assert!(
                !matches!(result, Err(AgentError::LoopDetected { .. })),
                "call {i}: {result:?}"
            );
        }
        assert!(!guard.is_tripped());
    }

    proptest! {
        /// Normalising twice changes nothing, and numbers never survive.
        #[test]
        fn signature_is_idempotent_and_numberless(text in "[ a-zA-Z0-9/._:()-]{0,60}") {
            let once = error_signature(&text);
            prop_assert_eq!(error_signature(&once), once.clone());
            let without_placeholders = once.replace("<n>", "").replace("<hex>", "").replace("<path>", "");
            prop_assert!(!without_placeholders.chars().any(|c| c.is_ascii_digit()), "{}", once);
        }
    }
}
