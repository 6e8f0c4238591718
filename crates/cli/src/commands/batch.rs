//! `orchestrator batch`: group review findings into planning batches.
//!
//! The input is read exactly as `review-fix --fix` reads it
//! ([`orchestrator_review_fix::input::read_findings`]): a findings file in
//! any supported format (review-cycle export, SARIF, rdjson/rdjsonl,
//! cargo/clippy JSON, ruff's or ESLint's JSON), detected from the content, or a review directory (its
//! newest export); `-` reads standard input. A file either cannot read is
//! refused by both with the same message. Entries the reader leaves out are
//! listed on stderr (`rejected: …`, exit 1); the readers' notes too.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use orchestrator_core::batching::{Batch, BatchConfig, batch_findings};
use orchestrator_core::finding::Finding;
use orchestrator_review_fix::input::{ReadInput, parse_findings, read_findings};
use serde_json::json;

use super::{Exit, out, read_input};
use crate::BatchArgs;

/// Reads the input like `review-fix --fix`; `-` is standard input.
fn read(path: &Path) -> Result<ReadInput, Exit> {
    let read = if path.as_os_str() == "-" {
        let (text, name) = read_input(path)?;
        parse_findings(&text, Path::new(&name), None)
    } else {
        read_findings(path)
    };
    read.map_err(|e| {
        eprintln!("error: {e}");
        Exit::BadInput
    })
}

/// Runs the command.
pub fn run(args: &BatchArgs) -> Exit {
    let config = BatchConfig {
        batch_size: args.batch_size as usize,
        ..BatchConfig::default()
    };
    if let Err(e) = config.validate() {
        eprintln!("error: {e}");
        return Exit::BadInput;
    }
    let input = match read(&args.findings) {
        Ok(input) => input,
        Err(exit) => return exit,
    };
    eprintln!(
        "batch: {}: read as {} ({} findings)",
        input.path.display(),
        input.format,
        input.findings.len()
    );
    for note in &input.notes {
        eprintln!("note: {note}");
    }
    for (location, reason) in &input.rejected {
        eprintln!("rejected: {location}: {reason}");
    }
    let batches = batch_findings(&input.findings, &config);
    if args.json {
        out(&format!("{}\n", json!({ "batches": batches })));
    } else {
        out(&render_text(&input.findings, &batches, config.batch_size));
    }
    if input.rejected.is_empty() {
        Exit::Success
    } else {
        Exit::SomeFailed
    }
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
