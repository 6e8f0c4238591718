//! Findings the builtin suggestion agent cannot attempt (no
//! machine-applicable suggestion) are settled before any group runs: not
//! fixable, with the agent's own words, and never sent to the agent.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_review_fix::{
    Isolation, Outcome, PlannerMode, ReviewFixConfig, Services, SharedRunner, run,
};

use crate::support::git;

/// The builtin agent, counting the requests it is given.
#[derive(Debug)]
struct Counted {
    inner: SuggestionAgent,
    calls: AtomicUsize,
}

#[async_trait]
impl Agent for Counted {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.run(request).await
    }

    fn declines(&self, finding: &orchestrator_core::finding::Finding) -> Option<String> {
        self.inner.declines(finding)
    }
}

/// A SARIF log with one fixable result (`R1`) and three without a fix.
fn sarif() -> String {
    let result = |rule: &str, file: &str, fix: bool| {
        let location = serde_json::json!({"uri": file});
        let mut r = serde_json::json!({
            "ruleId": rule,
            "level": "warning",
            "message": {"text": format!("{rule} found something")},
            "locations": [{"physicalLocation": {"artifactLocation": location,
                "region": {"startLine": 1, "startColumn": 5, "endColumn": 8}}}],
        });
        if fix {
            r["fixes"] = serde_json::json!([{"artifactChanges": [{"artifactLocation": location,
                "replacements": [{"deletedRegion": {"startLine": 1, "startColumn": 5, "endColumn": 8},
                                  "insertedContent": {"text": "new"}}]}]}]);
        }
        r
    };
    serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "lint"}},
        "results": [
            result("R1", "a.py", true),
            result("R2", "a.py", false),
            result("R3", "b.py", false),
            result("R4", "c.py", false),
        ]
    }]})
    .to_string()
}

fn repo(dir: &Path) {
    for file in ["a.py", "b.py", "c.py"] {
        std::fs::write(dir.join(file), "x = old\n").unwrap();
    }
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    git(dir, &["config", "user.name", "Test"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "start"]);
}

#[tokio::test]
async fn findings_without_a_suggestion_never_reach_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    repo(&dir);
    let input = tmp.path().join("lint.sarif");
    std::fs::write(&input, sarif()).unwrap();
    let agent = Arc::new(Counted {
        inner: SuggestionAgent::new(),
        calls: AtomicUsize::new(0),
    });
    let services = Services {
        agent: agent.clone(),
        vcs: Arc::new(GitVcs::open(&dir).await.unwrap()),
        tests: Arc::new(SharedRunner(Arc::new(CommandTestRunner::shell("true")))),
        gate: Arc::new(AutoYes),
        sink: Arc::new(NullSink),
        provisioner: None,
    };
    let config = ReviewFixConfig::default()
        .with_inputs(vec![input])
        .with_planner(PlannerMode::Deterministic)
        .with_isolation(Isolation::Worktree);
    let report = run(config, services).await.unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed, "{:?}", report.findings);

    assert_eq!(
        agent.calls.load(Ordering::SeqCst),
        1,
        "only R1 was attempted"
    );
    let mut results: Vec<(String, String)> = report
        .findings
        .iter()
        .map(|f| (f.id.clone(), f.result.clone()))
        .collect();
    results.sort();
    assert_eq!(
        results,
        [
            ("R1@a.py:1:5".to_owned(), "fixed".to_owned()),
            ("R2@a.py:1:5".to_owned(), "not_fixable".to_owned()),
            ("R3@b.py:1:5".to_owned(), "not_fixable".to_owned()),
            ("R4@c.py:1:5".to_owned(), "not_fixable".to_owned()),
        ]
    );
    let r3 = report
        .findings
        .iter()
        .find(|f| f.id == "R3@b.py:1:5")
        .unwrap();
    assert_eq!(
        r3.error.as_deref(),
        Some(
            "finding R3@b.py:1:5 carries no machine-applicable suggestion: not fixable by this agent"
        )
    );
    assert_eq!(r3.attempts, 0);
    assert_eq!(
        git(&dir, &["log", "--format=%s", "-1"]).trim(),
        "fix(quality): R1 found something [R1@a.py:1:5]"
    );
}
