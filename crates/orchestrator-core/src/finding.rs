//! Review findings: the unit of work of the review-fix flow.
//!
//! Every input format (review-cycle export, SARIF, rdjson, cargo JSON) is
//! normalised into [`Finding`] by its reader. A finding carries a stable
//! [`Fingerprint`] so that the same problem reported twice is recognised and
//! de-duplicated (by identical fingerprint only), and optional machine-applicable
//! [`Suggestion`]s that builtin agents can apply without an LLM.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Identifier of a finding, unique within one fix session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FindingId(pub String);

impl FindingId {
    /// Borrow the id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl From<&str> for FindingId {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for FindingId {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// How bad a finding is. Ordered from most to least severe, so that
/// `Severity::Critical < Severity::Low` and sorting puts critical first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Must be fixed before anything else.
    Critical,
    /// Serious problem.
    High,
    /// Worth fixing.
    Medium,
    /// Cosmetic or minor.
    Low,
}

impl Severity {
    /// All severities, most severe first.
    pub const ALL: [Severity; 4] = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
    ];

    /// The lowercase name used in files (`critical`, `high`, `medium`, `low`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }

    /// Parses a severity leniently: case-insensitive, and maps the common
    /// synonyms of other tools (`error`, `warning`, `note`, `info`, …).
    /// Returns `None` for anything else.
    pub fn parse_lenient(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "critical" | "blocker" | "fatal" => Some(Severity::Critical),
            "high" | "error" | "major" => Some(Severity::High),
            "medium" | "warning" | "warn" | "moderate" => Some(Severity::Medium),
            "low" | "note" | "info" | "minor" | "hint" | "help" | "none" => Some(Severity::Low),
            _ => None,
        }
    }

    /// Whether this severity is critical or high: these are spread across
    /// batches so that no single planner gets all the hard findings.
    pub fn is_high_or_worse(self) -> bool {
        matches!(self, Severity::Critical | Severity::High)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A stable fingerprint of a finding: the same problem at the same place gives
/// the same fingerprint on every machine and every run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(pub String);

impl Fingerprint {
    /// Computes a fingerprint from the identifying parts of a finding.
    ///
    /// The parts are joined with a separator that cannot appear in them
    /// ambiguously (each part is length-prefixed) and hashed with 64-bit
    /// FNV-1a, printed as 16 hex digits. FNV is not cryptographic; a fingerprint
    /// only has to be stable and well spread, never secret.
    pub fn from_parts(parts: &[&str]) -> Fingerprint {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        Fingerprint(digest_hex(&bytes))
    }

    /// Borrow the fingerprint text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// Length-prefixed 64-bit FNV-1a over `chunks`, as 16 hex digits. Stable
/// across platforms and releases; used for fingerprints and content digests.
pub fn digest_hex(chunks: &[&[u8]]) -> String {
    let mut hash = Fnv1a64::new();
    for chunk in chunks {
        hash.write(&(chunk.len() as u64).to_le_bytes());
        hash.write(chunk);
    }
    format!("{:016x}", hash.finish())
}

/// 64-bit FNV-1a: tiny, dependency-free and identical on every platform.
struct Fnv1a64(u64);

impl Fnv1a64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// One textual replacement in one file, as proposed by a linter or reviewer.
///
/// Positions are 1-based lines. `original` is the exact text the edit
/// replaces: because fixes are applied and committed one at a time, earlier
/// fixes shift later offsets, so an applier re-anchors the edit by searching
/// for `original` near `start_line` instead of trusting byte offsets blindly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextEdit {
    /// File the edit applies to, relative to the repository root.
    pub file: String,
    /// 1-based line on which the replaced text starts.
    pub start_line: u32,
    /// 1-based column (in characters) on which the replaced text starts.
    pub start_column: u32,
    /// 1-based line on which the replaced text ends.
    pub end_line: u32,
    /// 1-based column (in characters) just past the replaced text.
    pub end_column: u32,
    /// Byte offsets `[start, end)` in the file as it was when the finding was
    /// produced, when the producer reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_range: Option<(usize, usize)>,
    /// The text being replaced (empty for a pure insertion).
    pub original: String,
    /// The replacement text.
    pub replacement: String,
}

/// A machine-applicable fix: a set of edits that together resolve a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// Human-readable description of the fix, when the producer gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The edits; they must not overlap.
    pub edits: Vec<TextEdit>,
}

/// A normalised review finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Identifier, unique within the session.
    pub id: FindingId,
    /// One-line title.
    pub title: String,
    /// Longer description of the problem.
    #[serde(default)]
    pub description: String,
    /// Severity.
    pub severity: Severity,
    /// Review dimension (`security`, `quality`, …); `None` means general.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<String>,
    /// Category or rule id (`clippy::needless_return`, `sql-injection`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// File the finding points at, relative to the repository root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line in `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// What the reviewer recommends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<String>,
    /// The code the finding quotes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// Stable fingerprint (see [`Fingerprint`]).
    pub fingerprint: Fingerprint,
    /// Machine-applicable fixes, if the producer had any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<Suggestion>,
    /// The producer's own stable keys for the finding (SARIF
    /// `partialFingerprints`), when it gave any: the findings ledger keys a
    /// finding by them before anything else.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partial_fingerprints: BTreeMap<String, String>,
}

impl Finding {
    /// Creates a finding with the given id, title and severity and every other
    /// field empty; the fingerprint is computed from the fields.
    pub fn new(id: impl Into<FindingId>, title: impl Into<String>, severity: Severity) -> Self {
        let mut f = Finding {
            id: id.into(),
            title: title.into(),
            description: String::new(),
            severity,
            dimension: None,
            category: None,
            file: None,
            line: None,
            recommendations: Vec::new(),
            snippet: None,
            fingerprint: Fingerprint(String::new()),
            suggestions: Vec::new(),
            partial_fingerprints: BTreeMap::new(),
        };
        f.refresh_fingerprint();
        f
    }

    /// The fingerprint this finding's fields imply: file, line, dimension,
    /// category, title and description. The id is deliberately left out, so
    /// that two exports of the same problem under different ids match.
    pub fn computed_fingerprint(&self) -> Fingerprint {
        let line = self.line.map(|l| l.to_string()).unwrap_or_default();
        Fingerprint::from_parts(&[
            self.file.as_deref().unwrap_or(""),
            &line,
            self.dimension.as_deref().unwrap_or(""),
            self.category.as_deref().unwrap_or(""),
            self.title.trim(),
            self.description.trim(),
        ])
    }

    /// Recomputes [`Finding::fingerprint`] from the fields (after a builder
    /// changed them).
    pub fn refresh_fingerprint(&mut self) {
        self.fingerprint = self.computed_fingerprint();
    }

    /// The dimension used for grouping: the dimension, or `general`.
    pub fn dimension_or_general(&self) -> &str {
        self.dimension.as_deref().unwrap_or("general")
    }

    /// The file used for grouping: the file, or `unknown`.
    pub fn file_or_unknown(&self) -> &str {
        self.file.as_deref().unwrap_or("unknown")
    }

    /// Builder: set the description.
    pub fn with_description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self.refresh_fingerprint();
        self
    }

    /// Builder: set the dimension.
    pub fn with_dimension(mut self, d: impl Into<String>) -> Self {
        self.dimension = Some(d.into());
        self.refresh_fingerprint();
        self
    }

    /// Builder: set the category.
    pub fn with_category(mut self, c: impl Into<String>) -> Self {
        self.category = Some(c.into());
        self.refresh_fingerprint();
        self
    }

    /// Builder: set file and line.
    pub fn at(mut self, file: impl Into<String>, line: Option<u32>) -> Self {
        self.file = Some(file.into());
        self.line = line;
        self.refresh_fingerprint();
        self
    }

    /// Builder: add a recommendation.
    pub fn with_recommendation(mut self, r: impl Into<String>) -> Self {
        self.recommendations.push(r.into());
        self
    }

    /// Checks every text field against its size limit
    /// ([`crate::limits`]): the title, dimension, category, file, each
    /// edit's file and the id against [`MAX_NAME_BYTES`], the description,
    /// snippet, each recommendation and each suggestion's message, replaced
    /// text and replacement against [`MAX_TEXT_BYTES`]. The error names the
    /// first field over its limit (`recommendations[1]`,
    /// `suggestions[0].edits[2].replacement`). Constant time per field.
    ///
    /// The id comes last: readers that derive it from the category and the
    /// file (`<rule>@<file>:<line>:<column>`) then report the field the input
    /// really spelled too long. (Such an id can pass 4 KiB when the rule and
    /// the path together do, and is then refused as `id`.)
    ///
    /// [`MAX_NAME_BYTES`]: crate::limits::MAX_NAME_BYTES
    /// [`MAX_TEXT_BYTES`]: crate::limits::MAX_TEXT_BYTES
    pub fn check_field_sizes(&self) -> Result<(), crate::limits::FieldTooLarge> {
        use crate::limits::{MAX_NAME_BYTES as NAME, MAX_TEXT_BYTES as TEXT, check_size};
        check_size("title", &self.title, NAME)?;
        check_size("description", &self.description, TEXT)?;
        for (field, value) in [
            ("dimension", &self.dimension),
            ("category", &self.category),
            ("file", &self.file),
        ] {
            check_size(field, value.as_deref().unwrap_or(""), NAME)?;
        }
        for (i, r) in self.recommendations.iter().enumerate() {
            check_size(format!("recommendations[{i}]"), r, TEXT)?;
        }
        check_size("snippet", self.snippet.as_deref().unwrap_or(""), TEXT)?;
        for (i, s) in self.suggestions.iter().enumerate() {
            check_size(
                format!("suggestions[{i}].message"),
                s.message.as_deref().unwrap_or(""),
                TEXT,
            )?;
            for (j, e) in s.edits.iter().enumerate() {
                let at = |part: &str| format!("suggestions[{i}].edits[{j}].{part}");
                check_size(at("file"), &e.file, NAME)?;
                check_size(at("original"), &e.original, TEXT)?;
                check_size(at("replacement"), &e.replacement, TEXT)?;
            }
        }
        check_size("id", self.id.as_str(), NAME)?;
        Ok(())
    }
}

/// Removes findings whose fingerprint was already seen, keeping the first.
/// Returns the kept findings and the ids of the dropped duplicates (each with
/// the id of the finding it duplicates).
pub fn dedup_by_fingerprint(findings: Vec<Finding>) -> (Vec<Finding>, Vec<(FindingId, FindingId)>) {
    let mut seen: std::collections::HashMap<Fingerprint, FindingId> =
        std::collections::HashMap::new();
    let mut kept = Vec::with_capacity(findings.len());
    let mut dropped = Vec::new();
    for f in findings {
        match seen.get(&f.fingerprint) {
            Some(first) => dropped.push((f.id.clone(), first.clone())),
            None => {
                seen.insert(f.fingerprint.clone(), f.id.clone());
                kept.push(f);
            }
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_and_ignores_id() {
        let a = Finding::new("F1", "Unused import", Severity::Low).at("src/lib.rs", Some(3));
        let b = Finding::new("other", "Unused import", Severity::High).at("src/lib.rs", Some(3));
        assert_eq!(a.fingerprint, b.fingerprint);
        // Pinned value: a change here breaks users' de-duplication across runs.
        assert_eq!(a.fingerprint.as_str(), "90d74acd6fa3759e");
    }

    #[test]
    fn fingerprint_parts_are_unambiguous() {
        assert_ne!(
            Fingerprint::from_parts(&["ab", "c"]),
            Fingerprint::from_parts(&["a", "bc"])
        );
    }

    #[test]
    fn dedup_keeps_first_and_reports_the_rest() {
        let a = Finding::new("A", "x", Severity::Low).at("f.rs", Some(1));
        let b = Finding::new("B", "x", Severity::Low).at("f.rs", Some(1));
        let c = Finding::new("C", "y", Severity::Low).at("f.rs", Some(1));
        let (kept, dropped) = dedup_by_fingerprint(vec![a, b, c]);
        let ids: Vec<_> = kept.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["A", "C"]);
        assert_eq!(dropped, vec![(FindingId::from("B"), FindingId::from("A"))]);
    }

    #[test]
    fn severity_ordering_and_lenient_parse() {
        assert!(Severity::Critical < Severity::Low);
        assert_eq!(Severity::parse_lenient(" Warning "), Some(Severity::Medium));
        assert_eq!(Severity::parse_lenient("bogus"), None);
    }

    /// Every field at exactly its limit passes; one byte more is refused,
    /// naming that field.
    #[test]
    fn every_field_is_checked_at_its_limit() {
        use crate::limits::{MAX_NAME_BYTES, MAX_TEXT_BYTES};
        fn edit(file: &str, original: &str, replacement: &str) -> Vec<Suggestion> {
            vec![Suggestion {
                message: None,
                edits: vec![TextEdit {
                    file: file.into(),
                    start_line: 1,
                    start_column: 1,
                    end_line: 1,
                    end_column: 1,
                    byte_range: None,
                    original: original.into(),
                    replacement: replacement.into(),
                }],
            }]
        }
        type Set = fn(&mut Finding, String);
        let cases: Vec<(&str, usize, Set)> = vec![
            ("id", MAX_NAME_BYTES, |f, v| f.id = FindingId(v)),
            ("title", MAX_NAME_BYTES, |f, v| f.title = v),
            ("description", MAX_TEXT_BYTES, |f, v| f.description = v),
            ("dimension", MAX_NAME_BYTES, |f, v| f.dimension = Some(v)),
            ("category", MAX_NAME_BYTES, |f, v| f.category = Some(v)),
            ("file", MAX_NAME_BYTES, |f, v| f.file = Some(v)),
            ("recommendations[1]", MAX_TEXT_BYTES, |f, v| {
                f.recommendations = vec!["ok".into(), v];
            }),
            ("snippet", MAX_TEXT_BYTES, |f, v| f.snippet = Some(v)),
            ("suggestions[0].message", MAX_TEXT_BYTES, |f, v| {
                f.suggestions = vec![Suggestion {
                    message: Some(v),
                    edits: Vec::new(),
                }];
            }),
            ("suggestions[0].edits[0].file", MAX_NAME_BYTES, |f, v| {
                f.suggestions = edit(&v, "", "");
            }),
            (
                "suggestions[0].edits[0].original",
                MAX_TEXT_BYTES,
                |f, v| {
                    f.suggestions = edit("a.rs", &v, "");
                },
            ),
            (
                "suggestions[0].edits[0].replacement",
                MAX_TEXT_BYTES,
                |f, v| {
                    f.suggestions = edit("a.rs", "", &v);
                },
            ),
        ];
        for (field, limit, set) in cases {
            let mut f = Finding::new("F", "t", Severity::Low);
            set(&mut f, "x".repeat(limit));
            assert_eq!(f.check_field_sizes(), Ok(()), "{field} at its limit");
            set(&mut f, "x".repeat(limit + 1));
            let err = f.check_field_sizes().unwrap_err();
            assert_eq!(
                (err.field.as_str(), err.size, err.limit),
                (field, limit + 1, limit)
            );
        }
    }
}
