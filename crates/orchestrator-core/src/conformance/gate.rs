//! The [`Gate`] conformance suite.

use super::must;
use crate::gate::{Answer, Gate, GateOption, Question};

/// Runs every check against `gate`. `automatic` says whether the gate answers
/// without a person (then blocking questions must defer).
pub async fn run_suite(gate: &dyn Gate, automatic: bool) {
    let q = Question::new(
        "conformance.approve",
        "Approve the plan?",
        vec![
            GateOption::new("Approve", "go on"),
            GateOption::new("Modify", "edit, then resume"),
            GateOption::new("Cancel", "stop"),
        ],
    );
    let answer = must(gate.ask(&q).await, "ordinary question");
    if let Some(i) = answer.index() {
        assert!(
            i < q.options.len(),
            "conformance: answer {i} is outside the {} options",
            q.options.len()
        );
    }
    let blocking = q.clone().blocking();
    let answer = must(gate.ask(&blocking).await, "blocking question");
    if automatic {
        assert_eq!(
            answer,
            Answer::Deferred,
            "conformance: an automatic gate never answers a blocking question"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::ScriptedGate;
    use crate::gate::{AlwaysDefer, AutoYes, CallbackGate};

    #[tokio::test]
    async fn builtin_gates_conform() {
        run_suite(&AutoYes, true).await;
        run_suite(&AlwaysDefer, true).await;
        run_suite(&CallbackGate::new(|_| Answer::chose(1)), false).await;
        let scripted = ScriptedGate::new(vec![Answer::chose(2), Answer::chose(0)]);
        run_suite(scripted.as_ref(), false).await;
        assert_eq!(scripted.asked().len(), 2);
    }

    #[tokio::test]
    async fn out_of_range_answers_are_rejected() {
        let gate = CallbackGate::new(|_| Answer::chose(7));
        let q = Question::new("q", "?", vec![GateOption::new("Yes", "")]);
        assert!(gate.ask(&q).await.is_err());
        assert_eq!(AutoYes.ask(&q).await.unwrap(), Answer::chose(0));
    }
}
