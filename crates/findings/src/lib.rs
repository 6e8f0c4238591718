//! # orchestrator-findings
//!
//! The findings readers of **orchestrator**: a findings file in any
//! supported format becomes [`orchestrator_core::Finding`]s, the formats told
//! apart by their content, never by the file name.
//!
//! ## Public API
//!
//! - [`formats`]: [`formats::detect_and_parse`] (and
//!   [`formats::detect_and_parse_with`], which fills the replaced text of
//!   SARIF and rdjson edits through a [`formats::SourceReader`]) returns a
//!   [`formats::ParseOutcome`]: the findings kept, the entries rejected with
//!   their place, duplicates and notes, and
//!   [`formats::ParseOutcome::fix_order`], the order the producing tool
//!   applies their fixes in (rustfix, ruff and ESLint each have their own).
//!   One reader per format in [`formats::cargo`], [`formats::sarif`],
//!   [`formats::rdjson`], [`formats::ruff`] (ruff's JSON, whose fixes carry
//!   their applicability) and [`formats::eslint`] (ESLint's JSON formatter,
//!   whose fix ranges count UTF-16 units).
//! - [`review_cycle`]: the review-cycle export (a JSON array of findings, or
//!   `{session_id, findings}`), also readable on its own.
//!
//! ## Invariants
//! - Pure: text in, findings out. No file is read here (the caller reads the
//!   input and, optionally, the sources through [`formats::SourceReader`]),
//!   nothing is written, no process is spawned.
//! - A file that cannot be read as its format is an error naming the source
//!   and the line; a bad entry inside a readable file is rejected on its own,
//!   with its place, and the other entries are kept.
//! - Every kept finding is within the field-size limits of
//!   [`orchestrator_core::limits`].
//!
//! ## Why a crate of its own
//!
//! The readers serve more than one flow: review-fix reads its `--fix` inputs
//! and the `orchestrator batch` inspector its file through them, and the
//! builtin suggestion agent's tests in `orchestrator-adapters` parse cargo
//! JSON with them. Adapters must not depend on a flow crate, and an embedder
//! who wants batching or waves should not compile SARIF readers, so they live
//! neither in `orchestrator-core` nor in `orchestrator-review-fix`.
//!
//! ```
//! use orchestrator_findings::formats::{InputFormat, detect_and_parse};
//!
//! let line = r#"{"source": {"name": "lint"}, "diagnostics": []}"#;
//! let outcome = detect_and_parse(line, "empty.rdjson").unwrap();
//! assert_eq!(outcome.format, InputFormat::Rdjson);
//! assert!(outcome.findings.is_empty());
//! ```

pub mod formats;
pub mod review_cycle;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
