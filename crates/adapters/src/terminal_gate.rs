//! [`TerminalGate`]: asks gate questions on a terminal.
//!
//! The question, its report and the numbered options go to standard error;
//! the answer is read from standard input (a number, or an option's label,
//! case-insensitive; an empty line picks the default). End of input defers
//! the question, so a flow pauses resumably instead of guessing. Use it only
//! when standard input is a terminal; unattended runs use `-y`
//! ([`orchestrator_core::gate::AutoYes`]) or defer every question.

use std::io::{BufRead, Write};

use async_trait::async_trait;
use orchestrator_core::gate::{Answer, Gate, GateError, Question};

/// An interactive gate on standard input / standard error.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalGate;

/// Renders a question as shown to the person.
pub fn render_question(q: &Question) -> String {
    let mut s = String::new();
    if let Some(details) = &q.details {
        s.push_str(details.trim_end());
        s.push_str("\n\n");
    }
    s.push_str(&format!("? {}\n", q.prompt));
    for (i, o) in q.options.iter().enumerate() {
        let default = if i == q.default { " (default)" } else { "" };
        s.push_str(&format!(
            "  {}. {}{default} — {}\n",
            i + 1,
            o.label,
            o.description
        ));
    }
    s.push_str(&format!(
        "Answer 1-{} or a label{}: ",
        q.options.len(),
        if q.blocking {
            ""
        } else {
            ", Enter for the default"
        }
    ));
    s
}

/// Interprets one line of input; `None` when it names no option.
pub fn parse_answer(q: &Question, line: &str) -> Option<usize> {
    let t = line.trim();
    if t.is_empty() {
        return (!q.blocking).then_some(q.default);
    }
    if let Ok(n) = t.parse::<usize>() {
        return (1..=q.options.len()).contains(&n).then(|| n - 1);
    }
    q.options
        .iter()
        .position(|o| o.label.eq_ignore_ascii_case(t))
}

#[async_trait]
impl Gate for TerminalGate {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        let q = question.clone();
        let io_err = |message: String| GateError::Io {
            question: question.id.clone(),
            message,
        };
        tokio::task::spawn_blocking(move || -> Result<Answer, String> {
            let stdin = std::io::stdin();
            let mut stderr = std::io::stderr();
            loop {
                write!(stderr, "{}", render_question(&q)).map_err(|e| e.to_string())?;
                stderr.flush().map_err(|e| e.to_string())?;
                let mut line = String::new();
                if stdin
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| e.to_string())?
                    == 0
                {
                    return Ok(Answer::Deferred);
                }
                match parse_answer(&q, &line) {
                    Some(index) => return Ok(Answer::chose(index)),
                    None => writeln!(stderr, "'{}' is not one of the options.", line.trim())
                        .map_err(|e| e.to_string())?,
                }
            }
        })
        .await
        .map_err(|e| io_err(e.to_string()))?
        .map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::gate::GateOption;

    fn q() -> Question {
        Question::new(
            "planex.explore-plan",
            "Approve exploration angles?",
            vec![
                GateOption::new("Approve", "Proceed with wave exploration"),
                GateOption::new("Modify", "Edit explore.csv, then --continue"),
                GateOption::new("Cancel", "Abort"),
            ],
        )
    }

    #[test]
    fn answers_by_number_label_or_default() {
        let q = q();
        assert_eq!(parse_answer(&q, "2\n"), Some(1));
        assert_eq!(parse_answer(&q, " cancel "), Some(2));
        assert_eq!(parse_answer(&q, "\n"), Some(0));
        assert_eq!(parse_answer(&q, "4"), None);
        assert_eq!(parse_answer(&q, "maybe"), None);
        assert_eq!(
            parse_answer(&q.clone().blocking(), ""),
            None,
            "blocking has no default"
        );
    }

    #[test]
    fn renders_options_numbered() {
        insta::assert_snapshot!(render_question(
            &q().with_details("## Plan\n- E1 architecture")
        ));
    }
}
