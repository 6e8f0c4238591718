//! Finding ids and commit subjects name repository-relative paths, whatever
//! URI form the tool wrote (`file:///abs/…`, `%SRCROOT%`, relative), and
//! stay the same wherever the repository is: real git, the builtin agent.

use std::path::Path;
use std::sync::Arc;

use crate::support::git;
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_review_fix::{
    Isolation, Outcome, PlannerMode, ReviewFixConfig, Services, SharedRunner, run,
};

/// A SARIF log (as CI tools and ruff write them) with one fixable result per
/// file, each URI in another form: an absolute `file://` URI into `repo`
/// (percent-encoded), an inline `%SRCROOT%`, a `uriBaseId` whose
/// `originalUriBaseIds` entry is the CI machine's checkout, and a plain
/// relative URI.
fn sarif(repo: &Path) -> String {
    let abs = format!(
        "file://{}/src/with%20space.py",
        repo.canonicalize().unwrap().display()
    );
    let result = |rule: &str, location: serde_json::Value| {
        serde_json::json!({
            "ruleId": rule,
            "level": "warning",
            "message": {"text": format!("{rule} found something")},
            "locations": [{"physicalLocation": {"artifactLocation": location,
                "region": {"startLine": 1, "startColumn": 5, "endColumn": 8}}}],
            "fixes": [{"artifactChanges": [{"artifactLocation": location,
                "replacements": [{"deletedRegion": {"startLine": 1, "startColumn": 5, "endColumn": 8},
                                  "insertedContent": {"text": "new"}}]}]}]
        })
    };
    serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "lint"}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": "file:///home/runner/work/app/"}},
        "results": [
            result("R1", serde_json::json!({"uri": abs})),
            result("R2", serde_json::json!({"uri": "%SRCROOT%/src/b.py"})),
            result("R3", serde_json::json!({"uri": "src/c.py", "uriBaseId": "%SRCROOT%"})),
            result("R4", serde_json::json!({"uri": "src/d.py"})),
        ]
    }]})
    .to_string()
}

/// A repository at `parent/name` with the four files, its SARIF beside it.
fn fixture(parent: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = parent.join(name);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    for file in ["with space.py", "b.py", "c.py", "d.py"] {
        std::fs::write(repo.join("src").join(file), "x = old\n").unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    let input = parent.join(format!("{name}.sarif"));
    std::fs::write(&input, sarif(&repo)).unwrap();
    (repo, input)
}

async fn fix(repo: &Path, input: std::path::PathBuf) -> (Vec<String>, Vec<String>) {
    let services = Services {
        agent: Arc::new(SuggestionAgent::new()),
        vcs: Arc::new(GitVcs::open(repo).await.unwrap()),
        tests: Arc::new(SharedRunner(Arc::new(CommandTestRunner::shell("true")))),
        gate: Arc::new(AutoYes),
        sink: Arc::new(NullSink),
        provisioner: None,
    };
    let config = ReviewFixConfig::default()
        .with_inputs(vec![input])
        .with_planner(PlannerMode::Deterministic)
        .with_isolation(Isolation::Serial);
    let report = run(config, services).await.unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed, "{:?}", report.findings);
    let mut ids: Vec<String> = report.findings.iter().map(|f| f.id.clone()).collect();
    ids.sort();
    let mut subjects: Vec<String> = git(repo, &["log", "--format=%s", "--skip=0", "-n", "4"])
        .lines()
        .map(str::to_owned)
        .collect();
    subjects.sort();
    (ids, subjects)
}

#[tokio::test]
async fn ids_and_subjects_name_repository_paths_whatever_the_uri_form() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "one");
    let (ids, subjects) = fix(&repo, input).await;
    assert_eq!(
        ids,
        [
            "R1@src/with space.py:1:5",
            "R2@src/b.py:1:5",
            "R3@src/c.py:1:5",
            "R4@src/d.py:1:5"
        ]
    );
    let root = tmp.path().canonicalize().unwrap().display().to_string();
    for s in &subjects {
        assert!(
            !s.contains(&root) && !s.contains("file:") && !s.contains('%'),
            "{s}"
        );
    }
    assert_eq!(
        subjects[0],
        "fix(quality): R1 found something [R1@src/with space.py:1:5]"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/with space.py")).unwrap(),
        "x = new\n"
    );

    // The same findings of a repository elsewhere get the same ids.
    let (other, input) = fixture(tmp.path(), "elsewhere");
    let (other_ids, other_subjects) = fix(&other, input).await;
    assert_eq!((other_ids, other_subjects), (ids, subjects));
}
