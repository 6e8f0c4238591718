//! The contract-only [`Agent`] conformance suite, for agents that act on a
//! working directory rather than answer free text.
//!
//! The [`agent`](super::agent) suite scripts what an agent says
//! (`answering(text)`, `answering_json`): an LLM backend, a CLI preset or a
//! fake can be made to say anything, but a builtin fixer cannot — a
//! formatter answers with what the formatter did. This suite checks the
//! [`Agent`] contract only, on requests the harness builds for the agent
//! under test and on the files those requests change:
//!
//! | check | rule |
//! |---|---|
//! | [`has_a_name`] | every agent has a non-blank, stable name |
//! | [`success_reports_what_it_did`] | [`ok_request`](ContractHarness::ok_request) succeeds, changes files in its working directory, says so in its text and — when the agent promises it — lists exactly the changed files in `files_changed` |
//! | [`failures_are_typed_errors`] | a request the agent cannot serve is an `Err` (not a panic, not an `Ok` with an apology in the text, not a time-out), explained by [`error_is_explained`]; an agent that declines ([`AgentError::Unsupported`]) leaves the working directory as it found it |
//! | [`time_limit_is_enforced`] | a request that would outlast a short time limit ends in [`AgentError::Timeout`] no earlier than the limit and no later than limit + [`grace`](ContractHarness::grace) — for agents that can be made slow at all |
//! | [`concurrent_calls_do_not_interfere`] | one agent serves [`concurrency`](ContractHarness::concurrency) requests at once on distinct working directories; each succeeds, each reports its own changes, and all directories end identical |
//!
//! Working directories are compared by content: every regular file under
//! them except inside the folders in [`SKIPPED_DIRS`] (VCS metadata and
//! build output), symlinks not followed.
//!
//! ```text
//! #[tokio::test]
//! async fn formatter_agent_conforms() {
//!     orchestrator_core::conformance::agent_contract::run_suite(&FormatterHarness::new()).await;
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::agent::{Agent, AgentError, AgentRequest, AgentResponse};

/// The time limit [`time_limit_is_enforced`] puts on the slow request.
pub const SLOW_LIMIT: Duration = Duration::from_millis(300);

/// Folders never compared when the suite looks at what a request changed:
/// VCS metadata and build output, which tools may touch as a side effect.
pub const SKIPPED_DIRS: &[&str] = &[".git", "target"];

/// An agent and one request for it, with the words an error about it must
/// mention.
#[derive(Debug, Clone)]
pub struct Case {
    /// The agent to call.
    pub agent: Arc<dyn Agent>,
    /// The request; its `workdir` is the directory the suite watches.
    pub request: AgentRequest,
    /// Texts the error's `Display` must contain (the working directory, the
    /// finding id, the classification…): the context a user needs to act on
    /// the error.
    pub mentions: Vec<String>,
}

impl Case {
    /// A case with nothing to mention beyond the error's own detail.
    pub fn new(agent: Arc<dyn Agent>, request: AgentRequest) -> Self {
        Self {
            agent,
            request,
            mentions: Vec::new(),
        }
    }

    /// Builder: the error must mention `text`.
    pub fn mentioning(mut self, text: impl Into<String>) -> Self {
        self.mentions.push(text.into());
        self
    }
}

/// The slow case of a harness, or why the agent has none.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "built once per suite run; boxing would only burden every harness"
)]
pub enum SlowCase {
    /// An agent and a request that would run longer than [`SLOW_LIMIT`]
    /// (the suite replaces the request's time limit with it).
    Slow(Case),
    /// Nothing can make this agent outlast a time limit (it does bounded
    /// in-process work: no process, no network, no waiting); the text says
    /// why, for the test log.
    NotApplicable(&'static str),
}

/// Builds agents that act on a working directory, and requests for them.
#[async_trait]
pub trait ContractHarness: Send + Sync {
    /// The agent under test, configured so that
    /// [`ok_request`](Self::ok_request) succeeds.
    async fn agent(&self) -> Arc<dyn Agent>;

    /// A fresh working directory in which [`ok_request`](Self::ok_request)
    /// can be fulfilled, with the same content on every call. The harness
    /// keeps it alive at least as long as itself.
    async fn workdir(&self) -> PathBuf;

    /// A request for [`workdir`](Self::workdir) that the agent fulfils by
    /// changing at least one file there. It must be deterministic: the same
    /// request in identical directories leaves identical directories.
    fn ok_request(&self, workdir: &Path) -> AgentRequest;

    /// Whether the agent promises `files_changed`: every file whose content
    /// it changed, created or removed, relative to the working directory.
    /// Agents that do not know (a shell command, an opaque CLI) say `false`;
    /// then only the paths they do list are checked.
    fn reports_files_changed(&self) -> bool {
        true
    }

    /// An agent and a request it cannot serve (no project it knows, a
    /// finding without a suggestion, a missing tool…).
    async fn failing(&self) -> Case;

    /// An agent and a request that would take longer than [`SLOW_LIMIT`], or
    /// why the agent cannot be made slow.
    async fn slow(&self) -> SlowCase;

    /// Extra time allowed past a request's time limit (process teardown).
    fn grace(&self) -> Duration {
        Duration::from_secs(5)
    }

    /// How many calls [`concurrent_calls_do_not_interfere`] makes at once
    /// (at least 2).
    fn concurrency(&self) -> usize {
        4
    }
}

/// Runs every check.
pub async fn run_suite(h: &dyn ContractHarness) {
    has_a_name(h).await;
    success_reports_what_it_did(h).await;
    failures_are_typed_errors(h).await;
    time_limit_is_enforced(h).await;
    concurrent_calls_do_not_interfere(h).await;
}

/// Every agent the harness builds has a non-blank name that does not change
/// between calls.
pub async fn has_a_name(h: &dyn ContractHarness) {
    let agent = h.agent().await;
    let name = agent.name().to_owned();
    assert!(
        !name.trim().is_empty(),
        "conformance: an agent has a non-blank name, got {name:?}"
    );
    assert_eq!(agent.name(), name, "conformance: an agent's name is stable");
    let failing = h.failing().await;
    assert!(
        !failing.agent.name().trim().is_empty(),
        "conformance: the failing case's agent has a name"
    );
}

/// [`ContractHarness::ok_request`] succeeds: the response's text says what
/// was done, at least one file changed, and `files_changed` lists paths
/// relative to the working directory — exactly the changed ones when the
/// agent promises them.
pub async fn success_reports_what_it_did(h: &dyn ContractHarness) {
    let agent = h.agent().await;
    let dir = h.workdir().await;
    let request = h.ok_request(&dir);
    assert_eq!(
        request.workdir, dir,
        "conformance: ok_request must work in the directory it is given"
    );
    let before = snapshot(&dir);
    let response = must_succeed(&agent, request, "ok_request").await;
    let changed = changes(&before, &snapshot(&dir));
    check_success(h, &response, &changed, "ok_request");
}

/// A request the agent cannot serve gives `Err`: not a panic, not an `Ok`,
/// not a time-out. The error explains itself ([`error_is_explained`]), and a
/// declining agent ([`AgentError::Unsupported`]) changes nothing.
pub async fn failures_are_typed_errors(h: &dyn ContractHarness) {
    let case = h.failing().await;
    let dir = case.request.workdir.clone();
    let before = snapshot(&dir);
    let error = match call(&case.agent, case.request, "failing request").await {
        Ok(response) => panic!(
            "conformance: a request the agent cannot serve must be Err, not a success: {response:?}"
        ),
        Err(AgentError::Timeout { seconds }) => panic!(
            "conformance: a request the agent cannot serve must be refused, not waited out (timed out after {seconds}s)"
        ),
        Err(error) => error,
    };
    error_is_explained(&error, &case.mentions);
    if matches!(error, AgentError::Unsupported { .. }) {
        let changed = changes(&before, &snapshot(&dir));
        assert!(
            changed.is_empty(),
            "conformance: an agent that declines ({error}) must leave {} as it was, but changed {changed:?}",
            dir.display()
        );
    }
}

/// A request that would outlast [`SLOW_LIMIT`] ends in
/// [`AgentError::Timeout`], no earlier than the limit and within the limit
/// plus [`ContractHarness::grace`]. Harnesses whose agent cannot be slow say
/// why ([`SlowCase::NotApplicable`]) and the check only records it.
pub async fn time_limit_is_enforced(h: &dyn ContractHarness) {
    let case = match h.slow().await {
        SlowCase::Slow(case) => case,
        SlowCase::NotApplicable(reason) => {
            assert!(
                !reason.trim().is_empty(),
                "conformance: a harness without a slow case says why"
            );
            eprintln!("conformance: time limit check not applicable: {reason}");
            return;
        }
    };
    let request = case.request.with_time_limit(SLOW_LIMIT);
    let started = Instant::now();
    let result = call(&case.agent, request, "slow request").await;
    let took = started.elapsed();
    let error = match result {
        Err(error @ AgentError::Timeout { .. }) => error,
        other => panic!(
            "conformance: a request that outlasts its {SLOW_LIMIT:?} time limit must be Err(Timeout), got {other:?}"
        ),
    };
    if let AgentError::Timeout { seconds } = error {
        assert!(
            seconds > 0.0,
            "conformance: a timeout reports the limit it exceeded, got {seconds}s"
        );
    }
    assert!(
        took >= SLOW_LIMIT,
        "conformance: the agent reported a timeout after {took:?}, before the {SLOW_LIMIT:?} limit"
    );
    assert!(
        took <= SLOW_LIMIT + h.grace(),
        "conformance: the timeout took {took:?}, limit {SLOW_LIMIT:?} + grace {:?}",
        h.grace()
    );
    error_is_explained(&error, &case.mentions);
}

/// One agent serves [`ContractHarness::concurrency`] requests at once, each
/// on its own fresh working directory: every call succeeds, reports its own
/// directory's changes, and every directory ends exactly like the others
/// (no call wrote into another's directory or shared state).
pub async fn concurrent_calls_do_not_interfere(h: &dyn ContractHarness) {
    let n = h.concurrency();
    assert!(
        n >= 2,
        "conformance: concurrency must be at least 2, got {n}"
    );
    let agent = h.agent().await;
    let mut dirs = Vec::with_capacity(n);
    for _ in 0..n {
        dirs.push(h.workdir().await);
    }
    let distinct: BTreeSet<&PathBuf> = dirs.iter().collect();
    assert_eq!(
        distinct.len(),
        n,
        "conformance: workdir() must give a fresh directory on every call"
    );
    let befores: Vec<Snapshot> = dirs.iter().map(|d| snapshot(d)).collect();
    assert!(
        befores.windows(2).all(|w| w[0] == w[1]),
        "conformance: workdir() must give directories with the same content"
    );
    let calls: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let agent = Arc::clone(&agent);
            let request = h.ok_request(dir);
            tokio::spawn(async move { agent.run(request).await })
        })
        .collect();
    let mut afters = Vec::with_capacity(n);
    for (i, (handle, (dir, before))) in calls.into_iter().zip(dirs.iter().zip(&befores)).enumerate()
    {
        let what = format!("concurrent call {i} in {}", dir.display());
        let response = match joined(handle.await, &what) {
            Ok(response) => response,
            Err(e) => panic!("conformance: {what} must succeed, got {e:?} ({e})"),
        };
        let after = snapshot(dir);
        check_success(h, &response, &changes(before, &after), &what);
        afters.push(after);
    }
    for (i, after) in afters.iter().enumerate().skip(1) {
        assert!(
            after == &afters[0],
            "conformance: concurrent calls interfered: {} ended unlike {} (differing files: {:?})",
            dirs[i].display(),
            dirs[0].display(),
            changes(&afters[0], after)
        );
    }
}

/// Errors are `Display`-able with context: the text is not blank, contains
/// the error's own detail (reason, message, signature…), and mentions every
/// text in `mentions`.
pub fn error_is_explained(error: &AgentError, mentions: &[String]) {
    let text = error.to_string();
    assert!(
        !text.trim().is_empty(),
        "conformance: an error displays as text, got {error:?}"
    );
    if let Some(detail) = detail(error) {
        assert!(
            !detail.trim().is_empty(),
            "conformance: an error carries a non-blank detail: {error:?}"
        );
        assert!(
            text.contains(&detail),
            "conformance: the error's text {text:?} shows its detail {detail:?}"
        );
    }
    for mention in mentions {
        assert!(
            text.contains(mention.as_str()),
            "conformance: the error's text {text:?} should mention {mention:?}"
        );
    }
}

/// The free-text part of an error, when its variant has one.
fn detail(error: &AgentError) -> Option<String> {
    match error {
        AgentError::Unavailable { message }
        | AgentError::Failed { message, .. }
        | AgentError::Garbage { message, .. }
        | AgentError::Budget { message }
        | AgentError::CallLimit { message }
        | AgentError::InvalidSchema { message, .. } => Some(message.clone()),
        AgentError::Unsupported { reason } | AgentError::Conflict { reason } => {
            Some(reason.clone())
        }
        AgentError::LoopDetected { signature, .. } => Some(signature.clone()),
        AgentError::SchemaViolation { violations } => Some(violations.join("; ")),
        AgentError::Timeout { .. } | AgentError::Cancelled => None,
    }
}

/// The checks on one successful response: text, a change, and paths.
fn check_success(
    h: &dyn ContractHarness,
    response: &AgentResponse,
    changed: &[String],
    what: &str,
) {
    assert!(
        !response.text.trim().is_empty(),
        "conformance: {what}: a success says what it did in its text, got {response:?}"
    );
    assert!(
        !changed.is_empty(),
        "conformance: {what}: ok_request must change a file in its working directory; none changed (response: {response:?})"
    );
    let mut listed = Vec::with_capacity(response.files_changed.len());
    for path in &response.files_changed {
        match relative(path) {
            Some(clean) => listed.push(clean),
            None => panic!(
                "conformance: {what}: files_changed entry {path:?} is not a path relative to the working directory"
            ),
        }
    }
    listed.sort();
    listed.dedup();
    if h.reports_files_changed() {
        assert_eq!(
            listed, changed,
            "conformance: {what}: files_changed must list exactly the files whose content changed"
        );
    } else {
        let stray: Vec<&String> = listed.iter().filter(|p| !changed.contains(p)).collect();
        assert!(
            stray.is_empty(),
            "conformance: {what}: files_changed lists files that did not change: {stray:?}"
        );
    }
}

/// `path` as `/`-separated normal components, or `None` when it is empty,
/// absolute or climbs out with `..`.
fn relative(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Calls the agent on its own task, so that a panic is reported as a broken
/// rule rather than taking the suite down with an unrelated message.
async fn call(
    agent: &Arc<dyn Agent>,
    request: AgentRequest,
    what: &str,
) -> Result<AgentResponse, AgentError> {
    let agent = Arc::clone(agent);
    joined(
        tokio::spawn(async move { agent.run(request).await }).await,
        what,
    )
}

/// [`call`], which must succeed.
async fn must_succeed(agent: &Arc<dyn Agent>, request: AgentRequest, what: &str) -> AgentResponse {
    match call(agent, request, what).await {
        Ok(response) => response,
        Err(e) => panic!("conformance: {what} must succeed, got {e:?} ({e})"),
    }
}

/// The result of a spawned agent call; a panic in the agent is a failure of
/// the suite naming `what`.
fn joined(
    outcome: Result<Result<AgentResponse, AgentError>, tokio::task::JoinError>,
    what: &str,
) -> Result<AgentResponse, AgentError> {
    match outcome {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".to_owned());
            panic!(
                "conformance: {what}: the agent panicked instead of returning an error: {message}"
            )
        }
        Err(e) => panic!("conformance: {what}: the agent's task was cancelled: {e}"),
    }
}

/// Content of every regular file under a directory, by `/`-separated
/// relative path.
type Snapshot = BTreeMap<String, Vec<u8>>;

/// Reads every regular file under `root`, skipping [`SKIPPED_DIRS`] and
/// symlinks. A directory that cannot be read fails the suite: the harness
/// must hand out readable directories.
fn snapshot(root: &Path) -> Snapshot {
    let mut files = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = super::must(std::fs::read_dir(&dir), &format!("read {}", dir.display()));
        for entry in entries {
            let entry = super::must(entry, &format!("read an entry of {}", dir.display()));
            let path = entry.path();
            let kind = super::must(entry.file_type(), &format!("stat {}", path.display()));
            if kind.is_dir() {
                if !SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s) {
                    stack.push(path);
                }
            } else if kind.is_file() {
                let bytes = super::must(std::fs::read(&path), &format!("read {}", path.display()));
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let key = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                files.insert(key, bytes);
            }
        }
    }
    files
}

/// Files whose content differs between two snapshots (changed, created or
/// removed), sorted.
fn changes(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::agent::Role;
    use crate::fakes::{FakeAgent, Reply};

    /// A harness over swappable agents: each test breaks one rule.
    struct Harness {
        ok: Arc<dyn Agent>,
        failing: Arc<dyn Agent>,
        slow: Option<Arc<dyn Agent>>,
        grace: Duration,
        dirs: Mutex<Vec<tempfile::TempDir>>,
    }

    impl Harness {
        /// Well-behaved fakes.
        fn good() -> Self {
            Self {
                ok: Arc::new(FakeAgent::new("fixer").on(
                    "fix",
                    Reply::Edit {
                        files: vec![("src/lib.rs".into(), Some("fixed\n".into()))],
                        response: AgentResponse::text("rewrote src/lib.rs"),
                    },
                )),
                failing: Arc::new(FakeAgent::new("fixer")),
                slow: Some(Arc::new(FakeAgent::new("fixer").otherwise(Reply::Hang))),
                grace: Duration::from_secs(2),
                dirs: Mutex::new(Vec::new()),
            }
        }

        fn fresh(&self) -> PathBuf {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("src")).unwrap();
            std::fs::write(dir.path().join("src/lib.rs"), "broken\n").unwrap();
            std::fs::create_dir_all(dir.path().join("target")).unwrap();
            let path = dir.path().to_path_buf();
            self.dirs.lock().unwrap().push(dir);
            path
        }
    }

    #[async_trait]
    impl ContractHarness for Harness {
        async fn agent(&self) -> Arc<dyn Agent> {
            Arc::clone(&self.ok)
        }
        async fn workdir(&self) -> PathBuf {
            self.fresh()
        }
        fn ok_request(&self, workdir: &Path) -> AgentRequest {
            AgentRequest::new("fix", Role::Fix, "fix src/lib.rs", workdir)
        }
        async fn failing(&self) -> Case {
            let request = AgentRequest::new("nope", Role::Fix, "fix", self.fresh());
            Case::new(Arc::clone(&self.failing), request).mentioning("nope")
        }
        async fn slow(&self) -> SlowCase {
            match &self.slow {
                Some(agent) => SlowCase::Slow(Case::new(
                    Arc::clone(agent),
                    AgentRequest::new("slow", Role::Fix, "fix", self.fresh()),
                )),
                None => SlowCase::NotApplicable("in-memory edits only"),
            }
        }
        fn grace(&self) -> Duration {
            self.grace
        }
    }

    /// An agent whose `run` is a closure over the request.
    struct FnAgent<F>(F);

    impl<F> std::fmt::Debug for FnAgent<F> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("FnAgent")
        }
    }

    #[async_trait]
    impl<F> Agent for FnAgent<F>
    where
        F: Fn(&AgentRequest) -> Result<AgentResponse, AgentError> + Send + Sync,
    {
        fn name(&self) -> &str {
            "fn-agent"
        }
        async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
            (self.0)(&request)
        }
    }

    fn agent<F>(f: F) -> Arc<dyn Agent>
    where
        F: Fn(&AgentRequest) -> Result<AgentResponse, AgentError> + Send + Sync + 'static,
    {
        Arc::new(FnAgent(f))
    }

    #[tokio::test]
    async fn well_behaved_fakes_pass_and_the_slow_case_is_optional() {
        run_suite(&Harness::good()).await;
        let mut h = Harness::good();
        h.slow = None;
        run_suite(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "files_changed must list exactly the files whose content changed")]
    async fn claiming_a_file_that_did_not_change_is_caught() {
        let mut h = Harness::good();
        h.ok = agent(|req| {
            std::fs::write(req.workdir.join("notes.txt"), "x").unwrap();
            Ok(AgentResponse::text("fixed").with_files_changed(vec!["src/lib.rs".into()]))
        });
        success_reports_what_it_did(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "must change a file in its working directory")]
    async fn a_success_that_changed_nothing_is_caught() {
        let mut h = Harness::good();
        h.ok = Arc::new(FakeAgent::new("idle").otherwise(Reply::text("all good")));
        success_reports_what_it_did(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "is not a path relative to the working directory")]
    async fn an_absolute_changed_path_is_caught() {
        let mut h = Harness::good();
        h.ok = agent(|req| {
            let path = req.workdir.join("src/lib.rs");
            std::fs::write(&path, "fixed\n").unwrap();
            Ok(AgentResponse::text("fixed").with_files_changed(vec![path.display().to_string()]))
        });
        success_reports_what_it_did(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "must be Err, not a success")]
    async fn an_apology_in_an_ok_answer_is_caught() {
        let mut h = Harness::good();
        h.failing = Arc::new(FakeAgent::new("sorry").otherwise(Reply::text("error: cannot")));
        failures_are_typed_errors(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "the agent panicked instead of returning an error: no project")]
    async fn a_panicking_agent_is_caught() {
        let mut h = Harness::good();
        h.failing = agent(|_| panic!("no project"));
        failures_are_typed_errors(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "an agent that declines")]
    async fn declining_after_editing_is_caught() {
        let mut h = Harness::good();
        h.failing = agent(|req| {
            std::fs::write(req.workdir.join("src/lib.rs"), "half done\n").unwrap();
            Err(AgentError::Unsupported {
                reason: format!("cannot fix {}", req.id),
            })
        });
        failures_are_typed_errors(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "should mention \"nope\"")]
    async fn an_error_without_context_is_caught() {
        let mut h = Harness::good();
        h.failing = agent(|_| {
            Err(AgentError::Failed {
                message: "it broke".into(),
                exit_code: Some(1),
            })
        });
        failures_are_typed_errors(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "carries a non-blank detail")]
    async fn an_error_with_a_blank_detail_is_caught() {
        error_is_explained(
            &AgentError::Unavailable {
                message: "  ".into(),
            },
            &[],
        );
    }

    #[tokio::test]
    #[should_panic(expected = "before the 300ms limit")]
    async fn a_premature_timeout_is_caught() {
        let mut h = Harness::good();
        h.slow = Some(agent(|_| Err(AgentError::Timeout { seconds: 0.3 })));
        time_limit_is_enforced(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "the timeout took")]
    async fn an_ignored_time_limit_is_caught() {
        #[derive(Debug)]
        struct Dawdler;
        #[async_trait]
        impl Agent for Dawdler {
            fn name(&self) -> &str {
                "dawdler"
            }
            async fn run(&self, _: AgentRequest) -> Result<AgentResponse, AgentError> {
                tokio::time::sleep(Duration::from_millis(900)).await;
                Err(AgentError::Timeout { seconds: 0.3 })
            }
        }
        let mut h = Harness::good();
        h.slow = Some(Arc::new(Dawdler));
        h.grace = Duration::from_millis(100);
        time_limit_is_enforced(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "must be Err(Timeout)")]
    async fn a_slow_request_that_succeeds_is_caught() {
        let mut h = Harness::good();
        h.slow = Some(Arc::new(
            FakeAgent::new("quick").otherwise(Reply::text("done")),
        ));
        time_limit_is_enforced(&h).await;
    }

    #[tokio::test]
    #[should_panic(expected = "concurrent calls interfered")]
    async fn shared_state_leaking_between_calls_is_caught() {
        let calls = AtomicUsize::new(0);
        let mut h = Harness::good();
        h.ok = agent(move |req| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            std::fs::write(
                req.workdir.join("src/lib.rs"),
                format!("fixed by call {n}\n"),
            )
            .unwrap();
            Ok(AgentResponse::text("fixed").with_files_changed(vec!["src/lib.rs".into()]))
        });
        concurrent_calls_do_not_interfere(&h).await;
    }

    #[test]
    fn changes_cover_edits_creations_and_removals_but_not_skipped_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/target")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("keep.txt"), "same").unwrap();
        std::fs::write(root.join("edit.txt"), "old").unwrap();
        std::fs::write(root.join("gone.txt"), "bye").unwrap();
        let before = snapshot(root);
        std::fs::write(root.join("edit.txt"), "new").unwrap();
        std::fs::remove_file(root.join("gone.txt")).unwrap();
        std::fs::write(root.join("a/new.txt"), "hi").unwrap();
        std::fs::write(root.join("target/out.o"), "bin").unwrap();
        std::fs::write(root.join("a/target/out.o"), "bin").unwrap();
        std::fs::write(root.join(".git/index"), "idx").unwrap();
        assert_eq!(
            changes(&before, &snapshot(root)),
            ["a/new.txt", "edit.txt", "gone.txt"]
        );
        assert_eq!(relative("./src/lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(relative("../x"), None);
        assert_eq!(relative("/etc/passwd"), None);
        assert_eq!(relative(""), None);
    }
}
