//! The [`Gate`] trait: confirmation points where a human may decide.
//!
//! Flows ask before crossing a gate (planex's plan approval, ci-autofix's
//! "apply this patch?", an escalation). A gate either answers with one of the
//! offered options or says it cannot answer now ([`Answer::Deferred`]), in which
//! case the flow persists its state and stops resumably (exit code 3).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One choice offered at a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateOption {
    /// Short label (`Approve`, `Modify`, `Cancel`).
    pub label: String,
    /// What choosing it does.
    pub description: String,
}

impl GateOption {
    /// Creates an option.
    pub fn new(label: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            description: description.into(),
        }
    }
}

/// A question asked at a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Stable identifier (`planex.explore-plan`, `ci-autofix.apply-patch`).
    pub id: String,
    /// The question.
    pub prompt: String,
    /// The options, recommended one first.
    pub options: Vec<GateOption>,
    /// Index of the option an automatic gate picks (normally 0).
    pub default: usize,
    /// A report to show with the question (markdown), e.g. a diagnosis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// Whether the question blocks with no automatic answer (the seed's
    /// "mandatory blocking escalation"): an auto-yes gate defers instead of
    /// answering it.
    #[serde(default)]
    pub blocking: bool,
}

impl Question {
    /// A question with the given options; the first is the default.
    pub fn new(id: impl Into<String>, prompt: impl Into<String>, options: Vec<GateOption>) -> Self {
        Self {
            id: id.into(),
            prompt: prompt.into(),
            options,
            default: 0,
            details: None,
            blocking: false,
        }
    }

    /// Builder: attach a report.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = Some(details.into());
        self
    }

    /// Builder: mark as blocking (never auto-answered).
    pub fn blocking(mut self) -> Self {
        self.blocking = true;
        self
    }

    /// The label of option `index`, if it exists.
    pub fn label(&self, index: usize) -> Option<&str> {
        self.options.get(index).map(|o| o.label.as_str())
    }
}

/// The answer of a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// The option at this index was chosen.
    Chosen {
        /// Index into [`Question::options`].
        index: usize,
        /// Free text the person added, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Nobody can answer now: persist and stop resumably.
    Deferred,
}

impl Answer {
    /// Chose option `index` with no note.
    pub fn chose(index: usize) -> Self {
        Answer::Chosen { index, note: None }
    }

    /// The chosen index, or `None` when deferred.
    pub fn index(&self) -> Option<usize> {
        match self {
            Answer::Chosen { index, .. } => Some(*index),
            Answer::Deferred => None,
        }
    }
}

/// Why a gate could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The answer did not name one of the offered options.
    #[error("gate `{question}` got answer {index}, but only {options} options were offered")]
    InvalidAnswer {
        /// Question id.
        question: String,
        /// The index given.
        index: usize,
        /// How many options there were.
        options: usize,
    },
    /// Reading the answer failed (closed terminal, callback error).
    #[error("failed to ask gate `{question}`: {message}")]
    Io {
        /// Question id.
        question: String,
        /// What went wrong.
        message: String,
    },
}

/// Answers questions. Object-safe: flows hold `Arc<dyn Gate>`.
///
/// Contract (checked by the conformance suite): a `Chosen` answer's index is
/// within the question's options; a blocking question is never answered
/// automatically.
#[async_trait]
pub trait Gate: Send + Sync + fmt::Debug {
    /// Asks the question.
    async fn ask(&self, question: &Question) -> Result<Answer, GateError>;
}

#[async_trait]
impl<G: Gate + ?Sized> Gate for Arc<G> {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        (**self).ask(question).await
    }
}

#[async_trait]
impl<G: Gate + ?Sized> Gate for Box<G> {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        (**self).ask(question).await
    }
}

/// The `-y` gate: picks each question's default option, and defers blocking
/// questions (those are for a human by definition).
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoYes;

#[async_trait]
impl Gate for AutoYes {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        if question.blocking || question.options.is_empty() {
            return Ok(Answer::Deferred);
        }
        Ok(Answer::chose(
            question.default.min(question.options.len() - 1),
        ))
    }
}

/// A gate that never answers: every question defers. For unattended runs that
/// must stop at every gate.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDefer;

#[async_trait]
impl Gate for AlwaysDefer {
    async fn ask(&self, _question: &Question) -> Result<Answer, GateError> {
        Ok(Answer::Deferred)
    }
}

type GateFn = dyn Fn(&Question) -> Answer + Send + Sync;

/// A gate backed by an embedder's closure (a chat bot relaying the question,
/// a GUI dialog). Answers outside the offered options are rejected.
pub struct CallbackGate {
    callback: Box<GateFn>,
}

impl CallbackGate {
    /// Wraps a closure.
    pub fn new(callback: impl Fn(&Question) -> Answer + Send + Sync + 'static) -> Self {
        Self {
            callback: Box::new(callback),
        }
    }
}

impl fmt::Debug for CallbackGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackGate").finish_non_exhaustive()
    }
}

#[async_trait]
impl Gate for CallbackGate {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        let answer = (self.callback)(question);
        check_answer(question, answer)
    }
}

/// Checks that an answer names one of the question's options.
pub fn check_answer(question: &Question, answer: Answer) -> Result<Answer, GateError> {
    match answer.index() {
        Some(index) if index >= question.options.len() => Err(GateError::InvalidAnswer {
            question: question.id.clone(),
            index,
            options: question.options.len(),
        }),
        _ => Ok(answer),
    }
}
