//! `orchestrator batch`: group review findings into planning batches.

use std::collections::HashMap;
use std::fmt::Write as _;

use orchestrator_core::batching::{Batch, BatchConfig, batch_findings};
use orchestrator_core::finding::Finding;
use orchestrator_core::review_cycle::read_review_cycle_export;
use serde_json::json;

use super::{Exit, out, read_input};
use crate::BatchArgs;

/// Runs the command.
pub fn run(args: &BatchArgs) -> Exit {
    let (text, name) = match read_input(&args.findings) {
        Ok(v) => v,
        Err(exit) => return exit,
    };
    let export = match read_review_cycle_export(&text, &name) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let config = BatchConfig {
        batch_size: args.batch_size as usize,
        ..BatchConfig::default()
    };
    if let Err(e) = config.validate() {
        eprintln!("error: {e}");
        return Exit::BadInput;
    }
    let batches = batch_findings(&export.findings, &config);
    if args.json {
        out(&format!("{}\n", json!({ "batches": batches })));
    } else {
        out(&render_text(&export.findings, &batches, config.batch_size));
    }
    Exit::Success
}

/// The human-readable listing: one block per batch, findings with severity.
pub fn render_text(findings: &[Finding], batches: &[Batch], batch_size: usize) -> String {
    let by_id: HashMap<&str, &Finding> = findings.iter().map(|f| (f.id.as_str(), f)).collect();
    let mut out = String::new();
    for b in batches {
        let _ = writeln!(
            out,
            "Batch {}  {} · {}  ({} finding{})",
            b.batch_id,
            b.primary_file,
            b.primary_dimension,
            b.findings.len(),
            if b.findings.len() == 1 { "" } else { "s" }
        );
        for id in &b.findings {
            match by_id.get(id.as_str()) {
                Some(f) => {
                    let line = f.line.map(|l| format!(":{l}")).unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  {:<10} {:<8} {}{}  {}",
                        f.id,
                        f.severity,
                        f.file_or_unknown(),
                        line,
                        f.title
                    );
                }
                None => {
                    let _ = writeln!(out, "  {id}");
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "{} findings in {} batches (batch size {batch_size})",
        findings.len(),
        batches.len()
    );
    out
}
