//! The batching of a real review-cycle export (`tests/data/batching/`):
//! the reader here feeds `orchestrator_core::batching`, and the batches the
//! `orchestrator batch` inspector prints are pinned as snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use orchestrator_core::Finding;
use orchestrator_core::batching::{
    Batch, BatchConfig, DEFAULT_SIMILARITY_THRESHOLD, batch_findings, cluster_findings,
};
use orchestrator_findings::review_cycle::parse_review_cycle_export;

const FIXTURE: &str = include_str!("data/batching/fix-export-1706184622000.json");

/// The shape the CLI prints: `{"batches": [...]}`, fields in struct order.
#[derive(serde::Serialize)]
struct Printed {
    batches: Vec<Batch>,
}

fn fixture_findings() -> Vec<Finding> {
    parse_review_cycle_export(FIXTURE, "fix-export-1706184622000.json").unwrap()
}

#[test]
fn fixture_batches_default_config() {
    let batches = batch_findings(&fixture_findings(), &BatchConfig::default());
    insta::assert_json_snapshot!(Printed { batches });
}

#[test]
fn fixture_batches_of_three() {
    let config = BatchConfig {
        batch_size: 3,
        ..BatchConfig::default()
    };
    let batches = batch_findings(&fixture_findings(), &config);
    insta::assert_json_snapshot!(Printed { batches });
}

#[test]
fn fixture_sql_injection_findings_form_one_cluster() {
    let findings = fixture_findings();
    let groups = cluster_findings(&findings, DEFAULT_SIMILARITY_THRESHOLD);
    let security = groups
        .iter()
        .find(|g| g.key.file == "src/auth/login.ts" && g.key.dimension == "security")
        .unwrap();
    let named: Vec<Vec<&str>> = security
        .clusters
        .iter()
        .map(|c| c.iter().map(|&i| findings[i].id.as_str()).collect())
        .collect();
    assert_eq!(
        named,
        vec![
            vec!["SEC-001", "SEC-002", "SEC-005"],
            vec!["SEC-003"],
            vec!["SEC-004"],
            vec!["SEC-006"],
            vec!["SEC-007"],
        ]
    );
}
