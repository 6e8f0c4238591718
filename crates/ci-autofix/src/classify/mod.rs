//! Classification of a failed check's log: mechanical (trivial or
//! non-trivial), semantic, unknown, or infrastructure (not the code's
//! fault: a lost or killed runner, a network, registry, rate-limit or disk
//! failure) — with the lines that say so. (`flaky` is never read from a
//! log: it is what the fix loop calls a failure that passed on a re-run.)
//!
//! The log is cleaned first ([`clean`]): terminal escapes and
//! `gh run view --log-failed` prefixes go, and lines that quote code (a
//! formatter's diff, a `|`-gutter snippet) are marked so that only
//! formatting rules may match them — a `panic!` inside a rustfmt diff is not a
//! panic. Then every line is matched against the rule table (the private `rules` module); the
//! first rule that matches decides the line, and **the most severe level found
//! anywhere wins** (infrastructure > semantic > unknown > mechanical
//! non-trivial > mechanical trivial): when the runner died or the network
//! failed, the test failures around it are its consequences, not bugs. The seed checked trivial before non-trivial, which would apply
//! a format fix silently while a lint error remains. A log in which no rule
//! matches is `unknown`.
//!
//! ```
//! use orchestrator_ci_autofix::classify::classify;
//! use orchestrator_core::cadence::{Classification, SubClass};
//!
//! let log = "Diff in /w/src/lib.rs:1:\n-    left+right\n+    left + right\n";
//! let report = classify(log);
//! assert_eq!(report.classification, Classification::Mechanical(SubClass::Trivial));
//! assert_eq!(report.evidence[0].rule, "rustfmt");
//! ```

pub mod clean;
mod rules;

use orchestrator_core::cadence::{Classification, SubClass};
use serde::Serialize;

/// How serious one matched line is. Ordered: the maximum over a log decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Whitespace, formatter output, import order.
    Trivial,
    /// Lints, unused or undefined names, missing imports or packages.
    NonTrivial,
    /// Network, registry or runner trouble: not the code's fault.
    Unknown,
    /// Failed tests, panics, races, deadlocks, type errors.
    Semantic,
    /// The runner lost or killed (exit 137), cancelled or timed out; a
    /// network, registry, rate-limit or disk failure: not the code's fault.
    Infrastructure,
}

impl Level {
    /// The classification a log whose most severe line has this level gets.
    pub fn classification(self) -> Classification {
        match self {
            Level::Trivial => Classification::Mechanical(SubClass::Trivial),
            Level::NonTrivial => Classification::Mechanical(SubClass::NonTrivial),
            Level::Unknown => Classification::Unknown,
            Level::Semantic => Classification::Semantic,
            Level::Infrastructure => Classification::Infrastructure,
        }
    }

    /// `trivial`, `non-trivial`, `unknown` or `semantic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trivial => "trivial",
            Level::NonTrivial => "non-trivial",
            Level::Unknown => "unknown",
            Level::Semantic => "semantic",
            Level::Infrastructure => "infrastructure",
        }
    }
}

/// One line of a log that a rule matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// 1-based line number in the log as given.
    pub line: usize,
    /// The cleaned line (no escapes, no CI prefix), shortened to
    /// [`MAX_EVIDENCE_TEXT`] characters.
    pub text: String,
    /// The rule that matched (`rustfmt`, `clippy`, `flake8:F401`, …).
    pub rule: String,
    /// The level of the match (not serialized: the JSON output has the
    /// seed's three fields).
    #[serde(skip)]
    pub level: Level,
    /// The job the line came from, when the log had `gh` prefixes.
    #[serde(skip)]
    pub job: Option<String>,
}

/// At most this many evidence lines are kept (the decision looks at every line).
pub const MAX_EVIDENCE: usize = 200;

/// Evidence text is cut to this many characters.
pub const MAX_EVIDENCE_TEXT: usize = 240;

/// The classification of a log and the lines that support it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassificationReport {
    /// The decision; serialized as `classification` and `sub_class`.
    #[serde(flatten)]
    pub classification: Classification,
    /// Matched lines in log order (at most [`MAX_EVIDENCE`]).
    pub evidence: Vec<Evidence>,
}

impl ClassificationReport {
    /// The seed's text output: `classification=…` and `sub_class=…` lines.
    pub fn to_text(&self) -> String {
        self.classification.to_output()
    }

    /// The JSON output: `{"classification", "sub_class", "evidence": [{"line", "text", "rule"}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "classification": self.classification.as_str(),
            "sub_class": self.classification.sub_class_str(),
            "evidence": self.evidence.iter().map(|e| serde_json::json!({
                "line": e.line,
                "text": e.text,
                "rule": e.rule,
            })).collect::<Vec<_>>(),
        })
    }

    /// The evidence lines of the deciding level (the ones that explain the
    /// classification), in log order.
    pub fn deciding_evidence(&self) -> Vec<&Evidence> {
        let top = self.evidence.iter().map(|e| e.level).max();
        self.evidence
            .iter()
            .filter(|e| Some(e.level) == top)
            .collect()
    }
}

/// Classifies a whole CI log (see the module docs).
pub fn classify(log: &str) -> ClassificationReport {
    let mut top: Option<Level> = None;
    let mut evidence = Vec::new();
    for line in clean::clean_log(log) {
        if line.text.trim().is_empty() {
            continue;
        }
        let Some((rule, level)) = match_line(&line.text, line.quoted) else {
            continue;
        };
        top = top.max(Some(level));
        if evidence.len() < MAX_EVIDENCE {
            evidence.push(Evidence {
                line: line.number,
                text: shorten(line.text.trim()),
                rule,
                level,
                job: line.job,
            });
        }
    }
    ClassificationReport {
        classification: top.map_or(Classification::Unknown, Level::classification),
        evidence,
    }
}

/// Classifies several logs (one per failed check) as one: the most severe
/// class of any of them wins, and the evidence of all is kept, each log's
/// lines numbered within that log.
pub fn classify_many<'a>(logs: impl IntoIterator<Item = &'a str>) -> ClassificationReport {
    let mut top: Option<Level> = None;
    let mut evidence = Vec::new();
    let mut any_unmatched = false;
    for log in logs {
        let report = classify(log);
        let level = report.evidence.iter().map(|e| e.level).max();
        if level.is_none() {
            any_unmatched = true;
        }
        top = top.max(level);
        for e in report.evidence {
            if evidence.len() < MAX_EVIDENCE {
                evidence.push(e);
            }
        }
    }
    // A log nobody could read is at least unknown: never silently trivial.
    if any_unmatched {
        top = top.max(Some(Level::Unknown));
    }
    ClassificationReport {
        classification: top.map_or(Classification::Unknown, Level::classification),
        evidence,
    }
}

/// The first rule matching a cleaned line, with its name and level.
fn match_line(text: &str, quoted: bool) -> Option<(String, Level)> {
    // One pass over the line for all rules; then captures of the first
    // matching one only.
    let candidates = rules::RULE_SET.as_ref().map(|set| set.matches(text));
    if candidates.as_ref().is_some_and(|m| !m.matched_any()) {
        return None;
    }
    for (index, rule) in rules::RULES.iter().enumerate() {
        if quoted && !rule.on_quoted {
            continue;
        }
        if candidates.as_ref().is_some_and(|m| !m.matched(index)) {
            continue;
        }
        let Some(caps) = rule.pattern.captures(text) else {
            continue;
        };
        return Some(match rule.grade {
            rules::Grade::Fixed(level) => (rule.name.to_owned(), level),
            rules::Grade::ByCode(f) => {
                let code = caps.name("code").map_or("", |m| m.as_str());
                (format!("{}:{code}", rule.name), f(code))
            }
        });
    }
    None
}

/// The tests a failed log names as failing, in log order, each once: Rust
/// (`test a::b ... FAILED`), pytest (`FAILED tests/t.py::test_x`), Go
/// (`--- FAIL: TestX`) and TAP/node (`not ok 3 - name`).
pub fn failing_tests(log: &str) -> Vec<String> {
    static PATTERNS: std::sync::LazyLock<Vec<regex::Regex>> = std::sync::LazyLock::new(|| {
        [
            r"^test (\S+) \.\.\. FAILED$",
            r"^FAILED (\S+?)(?: - .*)?$",
            r"^--- FAIL: (\S+)",
            r"^not ok \d+ - (.+)$",
        ]
        .iter()
        .filter_map(|p| regex::Regex::new(p).ok())
        .collect()
    });
    let mut out: Vec<String> = Vec::new();
    for line in clean::clean_log(log) {
        let text = line.text.trim();
        for p in PATTERNS.iter() {
            if let Some(name) = p.captures(text).and_then(|c| c.get(1)) {
                let name = name.as_str().to_owned();
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_EVIDENCE_TEXT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
