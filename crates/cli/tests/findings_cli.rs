//! The findings ledger as a user meets it: the real binary, real git and a
//! real `cargo test` on a temporary copy of `examples/quickstart/`, with the
//! builtin agent. A first run fixes six findings and fails one; `orchestrator
//! findings` lists, shows, declines and reopens; a second run over the same
//! clippy output calls no agent at all; a corrupt ledger is exit 2 naming
//! the file and is left as it was. Each run writes `--sarif-out`, which
//! validates against the SARIF 2.1.0 schema, reads back through our own
//! reader, and carries the fix commits' diffs as SARIF fixes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quickstart_support;

use std::path::PathBuf;
use std::process::{Command, Output};

use orchestrator_adapters::test_support::git;
use quickstart_support::{Dated, quickstart_repo};
use serde_json::Value;

const BREAKING: &str = "clippy::len_zero@src/ring.rs:42:12";

/// The official schema, vendored in the review-fix crate (see its
/// `SOURCE.md`).
const SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../review-fix/tests/data/sarif/sarif-schema-2.1.0.json"
);

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = quickstart_repo(tmp.path(), Dated::Now);
    Fixture { tmp, repo }
}

impl Fixture {
    fn orchestrator(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .args(args)
            .current_dir(&self.repo)
            .env("CARGO_TARGET_DIR", self.tmp.path().join("target"))
            .env("ORCHESTRATOR_CACHE_DIR", self.tmp.path().join("cache"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .output()
            .unwrap()
    }

    /// A review-fix run over the quickstart's clippy output, `--json`,
    /// `--sarif-out <tmp>/out.sarif`: its event lines.
    fn review_fix(&self, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
        let clippy = self.tmp.path().join("clippy.json");
        let sarif = self.sarif_path();
        let mut args = vec![
            "review-fix",
            "--fix",
            clippy.to_str().unwrap(),
            "-y",
            "--json",
            "--sarif-out",
            sarif.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = self.orchestrator(&args);
        let lines = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (o.status.code(), lines)
    }

    fn sarif_path(&self) -> PathBuf {
        self.tmp.path().join("out.sarif")
    }

    /// The last run's SARIF log, checked against the schema and read back
    /// by our own reader (as many findings as results).
    fn sarif(&self) -> Value {
        let schema: Value = serde_json::from_slice(&std::fs::read(SCHEMA).unwrap()).unwrap();
        let validator = jsonschema::draft4::new(&schema).unwrap();
        let text = std::fs::read_to_string(self.sarif_path()).unwrap();
        let log: Value = serde_json::from_str(&text).unwrap();
        let errors: Vec<String> = validator.iter_errors(&log).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let parsed = orchestrator_findings::formats::detect_and_parse(&text, "out.sarif").unwrap();
        assert_eq!(
            parsed.findings.len(),
            log["runs"][0]["results"].as_array().unwrap().len()
        );
        log
    }

    /// `findings list` with the commit ids replaced by `<cN>`.
    fn list(&self) -> String {
        let o = self.orchestrator(&["findings", "list"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let mut out = stdout(&o);
        let ids = git(&self.repo, &["log", "--reverse", "--format=%H"]);
        for (i, id) in ids.lines().enumerate() {
            out = out.replace(&id[..12], &format!("<c{i}>"));
        }
        out
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn agent_calls(lines: &[Value]) -> usize {
    lines.iter().filter(|v| v["event"] == "agent_call").count()
}

/// The key `findings list` shows for the finding last seen as `id`.
fn key_of(fx: &Fixture, title_place: &str) -> String {
    let list = fx.list();
    let line = list
        .lines()
        .find(|l| l.contains(title_place))
        .unwrap_or_else(|| panic!("no {title_place} in\n{list}"));
    line.split_whitespace().next().unwrap().to_owned()
}

#[test]
fn a_second_run_calls_no_agent_for_fixed_or_declined_findings() {
    let fx = fixture();
    let (code, first) = fx.review_fix(&[]);
    assert_eq!(code, Some(1), "{first:?}");
    assert!(agent_calls(&first) >= 7, "{first:?}");
    let log = fx.sarif();
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    assert!(results.iter().all(|r| r["baselineState"] == "new"));
    let fixed: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("fixes").is_some())
        .collect();
    assert_eq!(fixed.len(), 6);
    for r in fixed {
        let change = &r["fixes"][0]["artifactChanges"][0];
        assert_eq!(change["artifactLocation"]["uri"], "src/lib.rs", "{r:#}");
    }
    insta::assert_snapshot!("findings_list_after_a_run", fx.list());

    // The failed finding is declined (by its finding id), then shown.
    let o = fx.orchestrator(&[
        "findings",
        "decline",
        BREAKING,
        "--reason",
        "the test pins it",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = key_of(&fx, "src/ring.rs:42");
    let o = fx.orchestrator(&["findings", "show", &key[..8]]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(
        shown.contains(&format!("  id:       {BREAKING}")),
        "{shown}"
    );
    assert!(
        shown.contains("status:   declined: the test pins it"),
        "{shown}"
    );
    assert!(shown.contains("failed: "), "{shown}");

    // The second run: every finding skipped, no agent call, no commit.
    let head = git(&fx.repo, &["rev-parse", "HEAD"]);
    let (code, second) = fx.review_fix(&[]);
    assert_eq!(agent_calls(&second), 0, "{second:?}");
    assert_eq!(git(&fx.repo, &["rev-parse", "HEAD"]), head);
    let summary = second.last().unwrap();
    assert_eq!(summary["counts"]["skipped"], 7, "{summary:#}");
    assert_eq!(summary["counts"]["fixed"], 0, "{summary:#}");
    assert_eq!(code, summary["exit_code"].as_i64().map(|c| c as i32));
    let declined = summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == BREAKING)
        .unwrap();
    assert_eq!(declined["error"], "declined: the test pins it");
    let log = fx.sarif();
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    assert!(
        results.iter().all(|r| r["baselineState"] == "unchanged"),
        "{log:#}"
    );
    let declined = results
        .iter()
        .find(|r| r["properties"]["findingId"] == BREAKING)
        .unwrap();
    assert_eq!(
        declined["suppressions"][0]["justification"],
        "the test pins it"
    );

    // Reopened, the next run tries it again (and fails it again).
    let o = fx.orchestrator(&["findings", "reopen", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (code, third) = fx.review_fix(&[]);
    assert_eq!(code, Some(1));
    assert!(agent_calls(&third) >= 1, "{third:?}");
    let calls: Vec<&Value> = third
        .iter()
        .filter(|v| v["event"] == "agent_call")
        .collect();
    assert!(calls.iter().all(|v| v["id"] == BREAKING), "{calls:?}");
}

#[test]
fn a_bad_id_or_a_corrupt_ledger_is_exit_2_naming_it() {
    let fx = fixture();
    let o = fx.orchestrator(&["findings", "list"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("no findings in "), "{}", stdout(&o));

    let review = fx.repo.join(".review");
    std::fs::create_dir_all(&review).unwrap();
    let ledger = r#"{"version": 1, "entries": {
  "00aa11bb22cc33dd": {"finding_id": "F1", "title": "t", "history": []},
  "00aa11bb22cc44ee": {"finding_id": "F2", "title": "u", "history": []}}}"#;
    std::fs::write(review.join("ledger.json"), ledger).unwrap();
    let o = fx.orchestrator(&["findings", "decline", "00aa11bb22cc33de", "--reason", "x"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("no finding `00aa11bb22cc33de` in "), "{err}");
    assert!(
        err.contains("closest: 00aa11bb22cc33dd, 00aa11bb22cc44ee"),
        "{err}"
    );
    let o = fx.orchestrator(&["findings", "show", "00aa11bb22cc"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("names 2 findings"), "{}", stderr(&o));

    let corrupt = "{\"version\": 1,\n  \"entries\": {\n    \"k\": [\n";
    std::fs::write(review.join("ledger.json"), corrupt).unwrap();
    for args in [vec!["findings", "list"], vec!["findings", "reopen", "k"]] {
        let o = fx.orchestrator(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("ledger.json line 4"), "{err}");
    }
    let (code, _) = fx.review_fix(&[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        std::fs::read_to_string(review.join("ledger.json")).unwrap(),
        corrupt
    );
    let newer = "{\"version\": 2, \"entries\": {}}";
    std::fs::write(review.join("ledger.json"), newer).unwrap();
    let o = fx.orchestrator(&["findings", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("ledger.json has format version 2, this build reads version 1"),
        "{}",
        stderr(&o)
    );
}
