//! In-memory fakes of every core trait, for tests and for embedders' tests.
//!
//! - [`FakeAgent`]: answers scripted per request id, optionally editing files
//!   in the request's working directory first; records every request.
//! - [`ScriptedTestRunner`]: returns queued reports, or computes them from the
//!   working tree with a closure.
//! - [`ScriptedGate`]: answers queued answers; records every question.
//! - [`ScriptedCommands`]: a command runner answering by command line.
//! - [`FakeForge`]: a forge holding requests, pipelines, logs and threads.
//! - [`FakeVcs`]: a version-control system over a real directory whose commits
//!   live in memory — enough to exercise checkpoint/restore, commits,
//!   worktrees, cherry-picks and pushes without `git`.
//!
//! All of them pass the conformance suites in [`crate::conformance`].

mod agent;
mod command;
mod forge;
mod vcs;

pub use agent::{FakeAgent, Reply};
pub use command::ScriptedCommands;
pub use forge::FakeForge;
pub use vcs::FakeVcs;

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::gate::{Answer, Gate, GateError, Question, check_answer};
use crate::test_runner::{TestReport, TestRequest, TestRunner, TestRunnerError};

/// Locks a mutex, recovering the data if a panicking thread poisoned it
/// (fakes must keep working in tests that assert on panics).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

type ReportFn = dyn Fn(&TestRequest) -> TestReport + Send + Sync;

/// A [`TestRunner`] that returns scripted reports.
///
/// With a queue, each run pops the next report and the last one repeats
/// forever. With a closure, each report is computed from the request (for
/// example by reading a file in the working tree, so that a test "fails" while
/// a bad fix is applied).
pub struct ScriptedTestRunner {
    queue: Mutex<VecDeque<TestReport>>,
    last: Mutex<Option<TestReport>>,
    func: Option<Box<ReportFn>>,
    requests: Mutex<Vec<TestRequest>>,
}

impl ScriptedTestRunner {
    /// Returns `reports` in order, then repeats the last one.
    pub fn new(reports: Vec<TestReport>) -> Self {
        Self {
            queue: Mutex::new(reports.into()),
            last: Mutex::new(None),
            func: None,
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Always passes.
    pub fn always_passing() -> Self {
        Self::new(vec![TestReport::passing(1)])
    }

    /// Computes each report with `f`.
    pub fn from_fn(f: impl Fn(&TestRequest) -> TestReport + Send + Sync + 'static) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            last: Mutex::new(None),
            func: Some(Box::new(f)),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// How many runs were requested.
    pub fn runs(&self) -> usize {
        lock(&self.requests).len()
    }

    /// The requests received, in order.
    pub fn requests(&self) -> Vec<TestRequest> {
        lock(&self.requests).clone()
    }
}

impl fmt::Debug for ScriptedTestRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedTestRunner")
            .field("queued", &lock(&self.queue).len())
            .field("runs", &self.runs())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TestRunner for ScriptedTestRunner {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        lock(&self.requests).push(request.clone());
        if let Some(f) = &self.func {
            return Ok(f(&request));
        }
        let next = lock(&self.queue).pop_front();
        let mut last = lock(&self.last);
        match next {
            Some(report) => {
                *last = Some(report.clone());
                Ok(report)
            }
            None => last.clone().ok_or_else(|| {
                TestRunnerError::Config("scripted test runner has no reports".into())
            }),
        }
    }
}

/// A [`Gate`] that answers from a queue and records the questions.
/// When the queue is empty it defers (as an unattended gate would).
#[derive(Debug, Default)]
pub struct ScriptedGate {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<Question>>,
}

impl ScriptedGate {
    /// Answers `answers` in order, then defers.
    pub fn new(answers: Vec<Answer>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            asked: Mutex::new(Vec::new()),
        })
    }

    /// The questions asked so far.
    pub fn asked(&self) -> Vec<Question> {
        lock(&self.asked).clone()
    }
}

#[async_trait]
impl Gate for ScriptedGate {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        lock(&self.asked).push(question.clone());
        let answer = lock(&self.answers).pop_front().unwrap_or(Answer::Deferred);
        check_answer(question, answer)
    }
}
