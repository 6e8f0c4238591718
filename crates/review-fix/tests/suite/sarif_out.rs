//! `--sarif-out`: the run's results as SARIF 2.1.0, validated against the
//! official schema (`tests/data/sarif/`, see its `SOURCE.md`) with the
//! `jsonschema` crate and read back by our own SARIF reader.

use std::path::Path;
use std::sync::Arc;

use orchestrator_core::fakes::FakeAgent;
use orchestrator_core::gate::AutoYes;
use orchestrator_core::vcs::Vcs;
use orchestrator_review_fix::findings_ledger::key::ledger_key;
use orchestrator_review_fix::findings_ledger::sarif::LEDGER_FINGERPRINT;
use orchestrator_review_fix::findings_ledger::{FindingsLedger, ledger_path};
use orchestrator_review_fix::run;
use serde_json::{Value, json};

use crate::flow::{FILES, Fixture, config, edit, finding};

const SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/sarif/sarif-schema-2.1.0.json"
);

/// The log at `path`, after checking it against the SARIF 2.1.0 schema.
fn valid_log(path: &Path) -> Value {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(SCHEMA).unwrap()).unwrap();
    let validator = jsonschema::draft4::new(&schema).unwrap();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{log:#}");
    // The schema does hold a log to it: a made-up baseline state fails.
    let mut bad = log.clone();
    bad["runs"][0]["results"][0]["baselineState"] = json!("forgotten");
    assert!(!validator.is_valid(&bad));
    log
}

/// `(finding id, baselineState)` of every result, sorted.
fn states(log: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["properties"]["findingId"].as_str().unwrap().to_owned(),
                r["baselineState"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

fn result<'a>(log: &'a Value, id: &str) -> &'a Value {
    log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["properties"]["findingId"] == id)
        .unwrap()
}

fn pair(id: &str, state: &str) -> (String, String) {
    (id.to_owned(), state.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarif_out_validates_round_trips_and_tracks_the_baseline() {
    let fx = Fixture::new(FILES);
    let out = fx.root().join(".review/run1.sarif");
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Break b1"),
    ]));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "BAD\nb2\n")),
    );
    let cfg = config(vec![input]).with_max_iterations(1);
    run(
        cfg.with_sarif_out(Some(out.clone())),
        fx.services(agent, Arc::new(AutoYes)),
    )
    .await
    .unwrap();

    // First run, empty ledger: everything is new; the fix is a SARIF fix.
    let log = valid_log(&out);
    assert_eq!(states(&log), [pair("F1", "new"), pair("F2", "new")]);
    let ledger = FindingsLedger::read(&ledger_path(fx.root())).unwrap();
    let f1_key = ledger.resolve("F1").unwrap();
    let f1 = result(&log, "F1");
    assert_eq!(f1["partialFingerprints"][LEDGER_FINGERPRINT], f1_key);
    let change = &f1["fixes"][0]["artifactChanges"][0];
    assert_eq!(change["artifactLocation"]["uri"], "src/a.rs");
    assert_eq!(
        change["replacements"][0],
        json!({
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 4, "endColumn": 1},
            "insertedContent": {"text": "A1\na2\na3\n"},
        })
    );
    assert!(result(&log, "F2").get("fixes").is_none());

    // Our own reader takes it back, the ledger key as the key.
    let text = std::fs::read_to_string(&out).unwrap();
    let parsed = orchestrator_findings::formats::detect_and_parse(&text, "run1.sarif").unwrap();
    assert_eq!(parsed.findings.len(), 2);
    let back = parsed
        .findings
        .iter()
        .find(|f| f.file.as_deref() == Some("src/a.rs"))
        .unwrap();
    assert_eq!(back.line, Some(1));
    assert_eq!(back.title, "Rename a1");
    assert_eq!(ledger_key(back, None), f1_key);
    assert_eq!(
        parsed.findings[0].suggestions.len() + parsed.findings[1].suggestions.len(),
        1
    );

    // Second run: a line added above F2 (updated), F3 new, F1 gone
    // (absent).
    std::fs::write(fx.root().join("src/b.rs"), "// header\nb1\nb2\n").unwrap();
    fx.vcs
        .commit(&["src/b.rs".to_owned()], "a header")
        .await
        .unwrap();
    let input = fx.export(json!([
        finding("F2", "src/b.rs", 2, "Break b1"),
        finding("F3", "src/c.rs", 1, "Rename c1"),
    ]));
    let out2 = fx.root().join(".review/run2.sarif");
    let agent = Arc::new(FakeAgent::new("fake").on("F3", edit("src/c.rs", "C1\n")));
    run(
        config(vec![input]).with_sarif_out(Some(out2.clone())),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(agent.calls_for("F2"), 0, "F2 failed before: skipped");
    let log = valid_log(&out2);
    assert_eq!(
        states(&log),
        [
            pair("F1", "absent"),
            pair("F2", "updated"),
            pair("F3", "new")
        ]
    );
    assert_eq!(result(&log, "F2")["properties"]["ledgerStatus"], "failed");
    assert!(result(&log, "F3")["fixes"].is_array());
}
