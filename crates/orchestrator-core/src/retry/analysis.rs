//! Failure analysis after a failed round, the decision that follows (hints or
//! a human), and hint generation. All pure.
//!
//! The analysis follows the seed's `analyzeFailures`, with one correction
//! where its code contradicts its own worked example: the *pattern* compares
//! whole attempts (the set of failures each attempt produced), not single
//! messages. In the seed's code two identical attempts that each fail two
//! criteria count as "different errors" (two unique messages for two failed
//! attempts), while its example report gives hints in exactly that case. The
//! unique messages still drive complexity, hints and the report.
//!
//! The decision follows the seed's `mainClaudeIntervention`, reordered so that
//! every rule can fire and every loop ends:
//! 1. round cap reached → ask a human ("round limit reached");
//! 2. two or more rounds of guidance and no progress → ask a human (in the
//!    seed this rule sits behind returns that always fire first);
//! 3. different errors or complex failures → ask a human;
//! 4. otherwise → hints for the next round.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{AttemptRecord, HistoryEntry, attempts};

/// Reason given when the round cap is reached.
pub const REASON_ROUND_LIMIT: &str = "round limit reached";
/// Reason given when guidance did not help.
pub const REASON_NO_PROGRESS: &str = "no progress after 2 rounds of guidance";
/// Reason given for different, intermittent-looking or complex failures.
pub const REASON_COMPLEX: &str = "complex or intermittent failures detected";

/// Rounds of hints after which a round without progress goes to a human.
pub const GUIDANCE_ROUNDS_LIMIT: u32 = 2;

/// How the failed attempts relate to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorPattern {
    /// Every failed attempt failed the same way.
    SameError,
    /// Every failed attempt failed differently.
    DifferentErrors,
    /// Some failures repeat, some differ.
    Intermittent,
}

impl ErrorPattern {
    /// The seed's name (`same_error`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorPattern::SameError => "same_error",
            ErrorPattern::DifferentErrors => "different_errors",
            ErrorPattern::Intermittent => "intermittent",
        }
    }
}

/// Whether the failures look simple to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// Nothing points at timing or non-determinism.
    Simple,
    /// A failure mentions a timeout, intermittent, non-deterministic or flaky behaviour.
    Complex,
}

/// Confidence in the root cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Same error, simple: the cause is probably clear.
    High,
    /// Anything else.
    Low,
}

/// The analysis of the failed attempts of a window of history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    /// How the failures relate.
    pub pattern: ErrorPattern,
    /// Simple or complex.
    pub complexity: Complexity,
    /// Confidence in the root cause.
    pub confidence: Confidence,
    /// The distinct `criterion: explanation` messages, in first-seen order.
    pub unique_errors: Vec<String>,
    /// How many failed attempts were analysed.
    pub failed_attempts: u32,
}

/// Words in a failure message that make it complex (matched ignoring case).
const COMPLEX_MARKERS: [&str; 6] = [
    "timeout",
    "timed out",
    "intermittent",
    "non-deterministic",
    "nondeterministic",
    "flaky",
];

/// Analyses the failed attempts among `attempts` (passed ones are ignored).
pub fn analyze_failures<'a>(attempts: impl IntoIterator<Item = &'a AttemptRecord>) -> Analysis {
    let failed: Vec<&AttemptRecord> = attempts.into_iter().filter(|a| !a.passed()).collect();
    let mut unique_errors: Vec<String> = Vec::new();
    let mut signatures: BTreeSet<Vec<String>> = BTreeSet::new();
    for attempt in &failed {
        let mut messages = attempt.failure_messages();
        for m in &messages {
            if !unique_errors.contains(m) {
                unique_errors.push(m.clone());
            }
        }
        messages.sort();
        signatures.insert(messages);
    }
    let pattern = if signatures.len() == 1 {
        ErrorPattern::SameError
    } else if signatures.len() == failed.len() {
        ErrorPattern::DifferentErrors
    } else {
        ErrorPattern::Intermittent
    };
    let complexity = if unique_errors.iter().any(|e| {
        let e = e.to_lowercase();
        COMPLEX_MARKERS.iter().any(|m| e.contains(m))
    }) {
        Complexity::Complex
    } else {
        Complexity::Simple
    };
    let confidence = if pattern == ErrorPattern::SameError && complexity == Complexity::Simple {
        Confidence::High
    } else {
        Confidence::Low
    };
    Analysis {
        pattern,
        complexity,
        confidence,
        unique_errors,
        failed_attempts: failed.len() as u32,
    }
}

/// Where the milestone stands when a round has failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundContext {
    /// Rounds completed since the start or the last human action (including
    /// the one that just failed).
    pub rounds_completed: u32,
    /// The policy's round cap.
    pub max_rounds: u32,
    /// Rounds that ran with hints since the start or the last human action.
    pub guidance_rounds: u32,
    /// Whether the round that just failed passed more criteria (in its best
    /// attempt) than any earlier round in the window.
    pub progressed: bool,
}

impl RoundContext {
    /// Computes the context from the part of the history since the last
    /// human action (see [`super::since_last_human`]).
    pub fn from_window(window: &[HistoryEntry], max_rounds: u32) -> Self {
        let mut rounds: Vec<(u32, usize)> = Vec::new(); // (round, best passed count)
        for a in attempts(window) {
            match rounds.iter_mut().find(|(r, _)| *r == a.round) {
                Some((_, best)) => *best = (*best).max(a.passed_count()),
                None => rounds.push((a.round, a.passed_count())),
            }
        }
        let progressed = match rounds.split_last() {
            Some((&(_, last), earlier)) if !earlier.is_empty() => {
                earlier.iter().all(|&(_, best)| last > best)
            }
            _ => false,
        };
        let last_round = rounds.last().map(|&(r, _)| r);
        let guidance_rounds = window
            .iter()
            .filter(
                |e| matches!(e, HistoryEntry::Hints { round, .. } if Some(*round) <= last_round),
            )
            .count() as u32;
        Self {
            rounds_completed: rounds.len() as u32,
            max_rounds,
            guidance_rounds,
            progressed,
        }
    }
}

/// What happens after a failed round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Intervention {
    /// Run another round with these hints.
    GiveHints {
        /// The hints.
        hints: Vec<String>,
    },
    /// Stop and ask a human.
    AskHuman {
        /// Why.
        reason: String,
    },
}

/// Decides what follows a failed round. The round cap is checked first.
pub fn intervene(analysis: &Analysis, ctx: &RoundContext) -> Intervention {
    let ask = |reason: &str| Intervention::AskHuman {
        reason: reason.to_owned(),
    };
    if ctx.rounds_completed >= ctx.max_rounds.max(1) {
        return ask(REASON_ROUND_LIMIT);
    }
    if ctx.guidance_rounds >= GUIDANCE_ROUNDS_LIMIT && !ctx.progressed {
        return ask(REASON_NO_PROGRESS);
    }
    if analysis.pattern == ErrorPattern::DifferentErrors
        || analysis.complexity == Complexity::Complex
    {
        return ask(REASON_COMPLEX);
    }
    Intervention::GiveHints {
        hints: generate_hints(analysis),
    }
}

/// Hints for the next round: pattern-based ones for auth, timeout and
/// structure/schema failures, then two generic ones (as in the seed).
pub fn generate_hints(analysis: &Analysis) -> Vec<String> {
    let lower: Vec<String> = analysis
        .unique_errors
        .iter()
        .map(|e| e.to_lowercase())
        .collect();
    let any = |needles: &[&str]| lower.iter().any(|e| needles.iter().any(|n| e.contains(n)));
    let mut hints: Vec<&str> = Vec::new();
    if any(&["401", "auth"]) {
        hints.extend([
            "Check if API_KEY environment variable is set correctly",
            "Verify API key is valid (not expired/revoked)",
            "Ensure API key has permissions for this endpoint",
        ]);
    }
    if any(&["timeout", "timed out"]) {
        hints.extend([
            "Increase timeout threshold (may be too aggressive)",
            "Check network connectivity to API endpoint",
            "Verify API endpoint URL is correct",
        ]);
    }
    if any(&["structure", "schema"]) {
        hints.extend([
            "Compare actual response structure with expected schema",
            "Check if API version changed (response format may differ)",
            "Log the actual response to inspect it",
        ]);
    }
    hints.extend([
        "Review exit criteria - ensure they match current implementation",
        "Add detailed logging to identify exact failure point",
    ]);
    hints.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::super::criteria::{CriterionResult, Validation};
    use super::super::{AttemptResult, HistoryEntry};
    use super::*;

    /// An attempt failing the given `(criterion, explanation)` pairs; an
    /// empty list is a pass. `ok` criteria pass.
    fn attempt(round: u32, attempt: u32, fails: &[(&str, &str)], ok: &[&str]) -> AttemptRecord {
        let mut results: Vec<CriterionResult> = ok
            .iter()
            .map(|c| CriterionResult {
                criterion: (*c).into(),
                passed: true,
                reported: true,
                explanation: "ok".into(),
            })
            .collect();
        results.extend(fails.iter().map(|(c, e)| CriterionResult {
            criterion: (*c).into(),
            passed: false,
            reported: true,
            explanation: (*e).into(),
        }));
        AttemptRecord {
            round,
            attempt,
            result: AttemptResult::Validated {
                validation: Validation {
                    all_passed: fails.is_empty(),
                    results,
                },
            },
            permission_reasks: 0,
        }
    }

    fn error(round: u32, attempt: u32, message: &str) -> AttemptRecord {
        AttemptRecord {
            round,
            attempt,
            result: AttemptResult::AgentError {
                message: message.into(),
            },
            permission_reasks: 0,
        }
    }

    fn check(
        attempts: &[AttemptRecord],
        pattern: ErrorPattern,
        complexity: Complexity,
        confidence: Confidence,
    ) {
        let a = analyze_failures(attempts);
        assert_eq!(
            (a.pattern, a.complexity, a.confidence),
            (pattern, complexity, confidence),
            "{a:#?}"
        );
    }

    #[test]
    fn patterns() {
        use Complexity::*;
        use Confidence::*;
        use ErrorPattern::*;
        let a = |e: &str| attempt(1, 1, &[("status", e)], &[]);
        check(&[a("401"), a("401")], SameError, Simple, High);
        check(&[a("401"), a("500")], DifferentErrors, Simple, Low);
        check(&[a("401"), a("500"), a("401")], Intermittent, Simple, Low);
        // Passed attempts are not failures.
        check(
            &[a("401"), attempt(1, 2, &[], &["status"])],
            SameError,
            Simple,
            High,
        );
        // Two identical attempts failing two criteria each: the same error
        // (the seed's code would call this different_errors).
        let two = attempt(1, 1, &[("status", "401"), ("auth", "invalid key")], &[]);
        check(&[two.clone(), two], SameError, Simple, High);
        // Agent errors are failures too.
        check(
            &[
                error(1, 1, "agent failed: boom"),
                error(1, 2, "agent failed: boom"),
            ],
            SameError,
            Simple,
            High,
        );
    }

    #[test]
    fn complexity_markers() {
        for e in [
            "request Timeout",
            "agent timed out after 5.0s",
            "intermittent 503",
            "non-deterministic order",
            "FLAKY test",
        ] {
            let a = analyze_failures(&[attempt(1, 1, &[("c", e)], &[])]);
            assert_eq!(a.complexity, Complexity::Complex, "{e}");
            assert_eq!(a.confidence, Confidence::Low, "{e}");
        }
    }

    fn ctx(
        rounds_completed: u32,
        max_rounds: u32,
        guidance_rounds: u32,
        progressed: bool,
    ) -> RoundContext {
        RoundContext {
            rounds_completed,
            max_rounds,
            guidance_rounds,
            progressed,
        }
    }

    fn reason(i: Intervention) -> String {
        match i {
            Intervention::AskHuman { reason } => reason,
            Intervention::GiveHints { .. } => "hints".into(),
        }
    }

    #[test]
    fn decision_order() {
        let same = analyze_failures(&[
            attempt(1, 1, &[("c", "x")], &[]),
            attempt(1, 2, &[("c", "x")], &[]),
        ]);
        let different = analyze_failures(&[
            attempt(1, 1, &[("c", "x")], &[]),
            attempt(1, 2, &[("c", "y")], &[]),
        ]);
        let intermittent_simple = analyze_failures(&[
            attempt(1, 1, &[("c", "x")], &[]),
            attempt(1, 2, &[("c", "y")], &[]),
            attempt(2, 1, &[("c", "x")], &[]),
        ]);
        assert_eq!(intermittent_simple.pattern, ErrorPattern::Intermittent);
        let cases = [
            // The cap comes first, whatever the analysis says.
            (&same, ctx(3, 3, 0, false), REASON_ROUND_LIMIT),
            (&different, ctx(3, 3, 2, false), REASON_ROUND_LIMIT),
            (&same, ctx(1, 1, 0, false), REASON_ROUND_LIMIT),
            // The guidance rule fires for a same, simple error (unreachable in the seed).
            (&same, ctx(3, 5, 2, false), REASON_NO_PROGRESS),
            (&different, ctx(3, 5, 2, false), REASON_NO_PROGRESS),
            // Progress after guidance keeps hinting.
            (&same, ctx(3, 5, 2, true), "hints"),
            (&same, ctx(2, 5, 1, false), "hints"),
            (&different, ctx(1, 3, 0, false), REASON_COMPLEX),
            (&intermittent_simple, ctx(2, 3, 1, false), "hints"),
        ];
        for (analysis, c, expected) in cases {
            assert_eq!(
                reason(intervene(analysis, &c)),
                expected,
                "{c:?} {:?}",
                analysis.pattern
            );
        }
        let complex = analyze_failures(&[
            attempt(1, 1, &[("c", "timeout")], &[]),
            attempt(1, 2, &[("c", "timeout")], &[]),
        ]);
        assert_eq!(
            reason(intervene(&complex, &ctx(1, 3, 0, false))),
            REASON_COMPLEX
        );
    }

    #[test]
    fn round_context_from_history() {
        let window = vec![
            HistoryEntry::Attempt(attempt(1, 1, &[("a", "x"), ("b", "x")], &[])),
            HistoryEntry::Attempt(attempt(1, 2, &[("a", "x")], &["b"])),
            HistoryEntry::Hints {
                round: 2,
                hints: vec![],
            },
            HistoryEntry::Attempt(attempt(2, 1, &[("a", "x")], &["b"])),
            HistoryEntry::Attempt(attempt(2, 2, &[("a", "x")], &["b"])),
        ];
        assert_eq!(RoundContext::from_window(&window, 3), ctx(2, 3, 1, false));
        let mut better = window.clone();
        better.push(HistoryEntry::Hints {
            round: 3,
            hints: vec![],
        });
        better.push(HistoryEntry::Attempt(attempt(3, 1, &[], &["a", "b"])));
        assert_eq!(RoundContext::from_window(&better, 3), ctx(3, 3, 2, true));
        // Hints for a round that has not run yet are not guidance rounds.
        let mut pending = window;
        pending.push(HistoryEntry::Hints {
            round: 3,
            hints: vec![],
        });
        assert_eq!(RoundContext::from_window(&pending, 3).guidance_rounds, 1);
    }

    #[test]
    fn hints_by_pattern() {
        let hints = |e: &str| generate_hints(&analyze_failures(&[attempt(1, 1, &[("c", e)], &[])]));
        let generic = [
            "Review exit criteria - ensure they match current implementation",
            "Add detailed logging to identify exact failure point",
        ];
        assert_eq!(hints("wrong value"), generic);
        let auth = hints("Got 401 (Unauthorized)");
        assert_eq!(auth.len(), 5);
        assert_eq!(
            auth[0],
            "Check if API_KEY environment variable is set correctly"
        );
        let mixed = hints("timeout while validating schema");
        assert_eq!(mixed.len(), 8);
        assert_eq!(
            mixed[0],
            "Increase timeout threshold (may be too aggressive)"
        );
        assert_eq!(
            mixed[3],
            "Compare actual response structure with expected schema"
        );
        assert_eq!(&mixed[6..], generic);
    }
}
