//! [`FakeForge`]: a forge held in memory.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::forge::{
    ChangeRequest, CiStatus, Forge, ForgeError, ForgeKind, Job, NewReview, Pipeline, Position,
    ReviewComment, ReviewThread, parse_suggestions,
};

/// A forge in memory: requests, their pipelines, job logs and threads, set
/// by the test; retries, replies, resolutions and reviews change it as a
/// forge would. Passes `conformance::forge`.
#[derive(Debug, Default)]
pub struct FakeForge {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    requests: BTreeMap<u64, ChangeRequest>,
    pipelines: BTreeMap<u64, Pipeline>,
    logs: BTreeMap<String, String>,
    diffs: BTreeMap<u64, String>,
    threads: BTreeMap<u64, Vec<ReviewThread>>,
    reviews: Vec<(u64, NewReview)>,
    next_id: u64,
}

impl State {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("fake-{}", self.next_id)
    }

    fn thread(&mut self, number: u64, thread: &str) -> Result<&mut ReviewThread, ForgeError> {
        self.threads
            .get_mut(&number)
            .and_then(|ts| ts.iter_mut().find(|t| t.id == thread))
            .ok_or_else(|| ForgeError::NotFound {
                what: format!("thread {thread} of request {number}"),
            })
    }
}

impl FakeForge {
    /// An empty forge.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a request.
    pub fn with_request(self, request: ChangeRequest) -> Self {
        lock(&self.state).requests.insert(request.number, request);
        self
    }

    /// Sets request `number`'s newest pipeline.
    pub fn set_pipeline(&self, number: u64, pipeline: Pipeline) {
        lock(&self.state).pipelines.insert(number, pipeline);
    }

    /// Sets request `number`'s diff.
    pub fn set_diff(&self, number: u64, diff: &str) {
        lock(&self.state).diffs.insert(number, diff.to_owned());
    }

    /// Sets the log of job `job_id`.
    pub fn set_log(&self, job_id: &str, log: &str) {
        lock(&self.state)
            .logs
            .insert(job_id.to_owned(), log.to_owned());
    }

    /// Adds a thread to request `number`.
    pub fn add_thread(&self, number: u64, thread: ReviewThread) {
        lock(&self.state)
            .threads
            .entry(number)
            .or_default()
            .push(thread);
    }

    /// Sets request `number`'s head commit (as a push would).
    pub fn set_head(&self, number: u64, sha: &str) {
        if let Some(r) = lock(&self.state).requests.get_mut(&number) {
            sha.clone_into(&mut r.head_sha);
        }
    }

    /// The reviews posted so far, oldest first.
    pub fn reviews(&self) -> Vec<(u64, NewReview)> {
        lock(&self.state).reviews.clone()
    }
}

fn missing_request(number: u64) -> ForgeError {
    ForgeError::NotFound {
        what: format!("request {number}"),
    }
}

#[async_trait]
impl Forge for FakeForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Fake
    }

    async fn change_request(&self, number: u64) -> Result<ChangeRequest, ForgeError> {
        let state = lock(&self.state);
        state
            .requests
            .get(&number)
            .cloned()
            .ok_or_else(|| missing_request(number))
    }

    async fn diff(&self, number: u64) -> Result<String, ForgeError> {
        let state = lock(&self.state);
        if !state.requests.contains_key(&number) {
            return Err(missing_request(number));
        }
        Ok(state.diffs.get(&number).cloned().unwrap_or_default())
    }

    async fn pipeline(&self, number: u64) -> Result<Option<Pipeline>, ForgeError> {
        let state = lock(&self.state);
        if !state.requests.contains_key(&number) {
            return Err(missing_request(number));
        }
        Ok(state.pipelines.get(&number).cloned())
    }

    async fn job_log(&self, job: &Job) -> Result<String, ForgeError> {
        lock(&self.state)
            .logs
            .get(&job.id)
            .cloned()
            .ok_or_else(|| ForgeError::NotFound {
                what: format!("the log of job {}", job.id),
            })
    }

    async fn retry_job(&self, job: &Job) -> Result<Job, ForgeError> {
        let mut state = lock(&self.state);
        let id = state.id();
        let pipeline = state
            .pipelines
            .values_mut()
            .find(|p| p.jobs.iter().any(|j| j.id == job.id))
            .ok_or_else(|| ForgeError::NotFound {
                what: format!("job {}", job.id),
            })?;
        let retried = Job {
            id,
            status: CiStatus::Pending,
            failure_reason: None,
            ..job.clone()
        };
        pipeline.jobs.retain(|j| j.id != job.id);
        pipeline.jobs.push(retried.clone());
        pipeline.status = CiStatus::Pending;
        Ok(retried)
    }

    async fn threads(&self, number: u64) -> Result<Vec<ReviewThread>, ForgeError> {
        let state = lock(&self.state);
        if !state.requests.contains_key(&number) {
            return Err(missing_request(number));
        }
        Ok(state.threads.get(&number).cloned().unwrap_or_default())
    }

    async fn post_review(&self, number: u64, review: &NewReview) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        if !state.requests.contains_key(&number) {
            return Err(missing_request(number));
        }
        for c in &review.comments {
            let (thread_id, comment_id) = (state.id(), state.id());
            state.threads.entry(number).or_default().push(ReviewThread {
                id: thread_id,
                resolvable: true,
                resolved: false,
                comments: vec![ReviewComment {
                    id: comment_id,
                    author: "fake".into(),
                    body: c.body.clone(),
                    position: Some(Position {
                        path: c.path.clone(),
                        new_line: Some(c.line),
                        old_line: None,
                    }),
                    suggestions: parse_suggestions(&c.body),
                }],
            });
        }
        state.reviews.push((number, review.clone()));
        Ok(())
    }

    async fn reply(&self, number: u64, thread: &str, body: &str) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        let id = state.id();
        state.thread(number, thread)?.comments.push(ReviewComment {
            id,
            author: "fake".into(),
            body: body.to_owned(),
            position: None,
            suggestions: parse_suggestions(body),
        });
        Ok(())
    }

    async fn resolve(&self, number: u64, thread: &str) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        let t = state.thread(number, thread)?;
        if !t.resolvable {
            return Err(ForgeError::Unsupported {
                forge: ForgeKind::Fake,
                what: format!("resolve thread {thread}: it is not resolvable"),
            });
        }
        t.resolved = true;
        Ok(())
    }
}
