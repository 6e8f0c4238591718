//! A request's open review threads as findings: one rdjson diagnostic per
//! unresolved thread on a line of the request's diff (reviewdog's format,
//! which carries whole-line suggestions), and the table that maps each
//! finding back to its thread.
//!
//! - A thread whose first comment holds a ```` ```suggestion ```` block is
//!   machine-applicable: the block's lines (`-A+B` around the commented
//!   line) are the diagnostic's suggestion, applied exactly by the builtin
//!   agent.
//! - Any other thread is prose: the comment and the diff around it are the
//!   finding's description, for an LLM agent.
//!
//! Left out, each with its reason: resolved or unresolvable threads,
//! comments on no line or only on a removed line, and threads whose last
//! comment is one of our replies (a fix or a refusal already given, so a
//! second run neither fixes again nor repeats itself).

use orchestrator_core::forge::{ReviewComment, ReviewThread};
use serde_json::{Value, json};

use super::hunks::{FileHunks, context};

/// The start of a reply naming the commit that fixed a thread.
pub const FIXED_PREFIX: &str = "Fixed in ";
/// The start of a reply saying why a thread was not fixed.
pub const NOT_FIXED_PREFIX: &str = "Not fixed by orchestrator review-fix: ";

/// The rdjson `source.name` of the findings read from threads.
pub const SOURCE: &str = "review-thread";

/// One thread turned into a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadFinding {
    /// The forge's id of the thread.
    pub thread: String,
    /// The finding's id as the findings reader makes it
    /// (`thread:<id>@<path>:<line>:1`).
    pub finding_id: String,
    /// The file commented on.
    pub path: String,
    /// The commented line (new side).
    pub line: u64,
    /// Whether a suggestion block makes it machine-applicable.
    pub suggestion: bool,
}

/// The findings of a request's threads; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadFindings {
    /// The rdjson document (`DiagnosticResult`).
    pub rdjson: Value,
    /// One entry per diagnostic, in order.
    pub threads: Vec<ThreadFinding>,
    /// Threads left out: (thread id, why).
    pub skipped: Vec<(String, String)>,
}

/// Reads `threads` of request `label` (`MR !7`) against its `diff`.
pub fn from_threads(label: &str, threads: &[ReviewThread], diff: &FileHunks) -> ThreadFindings {
    let mut out = ThreadFindings {
        rdjson: Value::Null,
        threads: Vec::new(),
        skipped: Vec::new(),
    };
    let mut diagnostics = Vec::new();
    for t in threads {
        match diagnostic(label, t, diff) {
            Ok((d, found)) => {
                diagnostics.push(d);
                out.threads.push(found);
            }
            Err(Some(why)) => out.skipped.push((t.id.clone(), why)),
            Err(None) => {}
        }
    }
    out.rdjson = json!({
        "source": {"name": SOURCE},
        "severity": "WARNING",
        "diagnostics": diagnostics,
    });
    out
}

/// The diagnostic of one thread; `Err(Some(why))` for a thread left out
/// that is worth naming, `Err(None)` for one that is not a review thread
/// (a plain comment on the request).
fn diagnostic(
    label: &str,
    t: &ReviewThread,
    diff: &FileHunks,
) -> Result<(Value, ThreadFinding), Option<String>> {
    let first = t.comments.first().ok_or(None)?;
    let position = first.position.as_ref().ok_or(None)?;
    if !t.resolvable || t.resolved {
        return Err(Some("resolved".to_owned()));
    }
    let ours = |c: &ReviewComment| {
        c.body.starts_with(FIXED_PREFIX) || c.body.starts_with(NOT_FIXED_PREFIX)
    };
    if t.comments.len() > 1 && t.comments.last().is_some_and(ours) {
        return Err(Some("already answered by an earlier run".to_owned()));
    }
    let Some(line) = position.new_line else {
        return Err(Some(format!(
            "on a removed line of {} (nothing left there to fix)",
            position.path
        )));
    };
    let code = format!("thread:{}", t.id);
    let mut d = json!({
        "message": title(first),
        "location": {"path": position.path, "range": {"start": {"line": line}}},
        "severity": "WARNING",
        "code": {"value": code},
        "source": {"name": SOURCE},
        "original_output": description(label, first, &position.path, line, diff),
    });
    let block = first.suggestions.first();
    if let Some(b) = block {
        let start = line.saturating_sub(u64::from(b.lines_above)).max(1);
        let end = line + u64::from(b.lines_below);
        d["suggestions"] = json!([{
            "range": {"start": {"line": start}, "end": {"line": end}},
            "text": b.replacement,
        }]);
    }
    let found = ThreadFinding {
        thread: t.id.clone(),
        finding_id: format!("{code}@{}:{line}:1", position.path),
        path: position.path.clone(),
        line,
        suggestion: block.is_some(),
    };
    Ok((d, found))
}

/// The comment's first line of prose (a suggestion-only comment: "apply
/// the suggestion"), at most 100 characters.
fn title(c: &ReviewComment) -> String {
    let mut fenced = false;
    let prose = c.body.lines().map(str::trim).find(|l| {
        if l.starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced && !l.is_empty()
    });
    let text = match (prose, c.suggestions.is_empty()) {
        (Some(p), _) => p.to_owned(),
        (None, false) => format!("apply the suggestion of {}", c.author),
        (None, true) => "review comment".to_owned(),
    };
    match text.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// What the agent reads: who asked what where, and the diff around it.
fn description(label: &str, c: &ReviewComment, path: &str, line: u64, diff: &FileHunks) -> String {
    let mut text = format!(
        "{} commented on {path} line {line} of {label}:\n\n{}\n",
        if c.author.is_empty() {
            "A reviewer"
        } else {
            &c.author
        },
        c.body.trim_end()
    );
    if let Some(around) = context(diff, path, line, 3) {
        text.push_str(&format!(
            "\nThe request's diff around that line:\n```diff\n{around}```\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::forge::{Position, parse_suggestions};

    fn thread(id: &str, body: &str, line: Option<u64>, replies: &[&str]) -> ReviewThread {
        let comment = |id: usize, body: &str, position| ReviewComment {
            id: id.to_string(),
            author: "ana".into(),
            body: body.into(),
            position,
            suggestions: parse_suggestions(body),
        };
        let mut comments = vec![comment(
            1,
            body,
            Some(Position {
                path: "notes.txt".into(),
                new_line: line,
                old_line: None,
            }),
        )];
        for (i, r) in replies.iter().enumerate() {
            comments.push(comment(i + 2, r, None));
        }
        ReviewThread {
            id: id.into(),
            resolvable: true,
            resolved: false,
            comments,
        }
    }

    #[test]
    fn suggestions_become_whole_line_edits_and_prose_carries_its_diff() {
        let diff = super::super::hunks::parse(
            "diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n\
             @@ -1,1 +1,3 @@\n alpha\n+betta\n+gamma\n",
        );
        let threads = [
            thread("d1", "Typo.\n```suggestion:-0+1\nbeta\n```\n", Some(2), &[]),
            thread("d2", "Say more here.", Some(3), &[]),
            thread("d3", "Gone", None, &[]),
            thread("d4", "Fix it", Some(2), &["Fixed in abc1234."]),
        ];
        let found = from_threads("MR !7", &threads, &diff);
        let d = &found.rdjson["diagnostics"];
        assert_eq!(d.as_array().map(Vec::len), Some(2));
        assert_eq!(d[0]["message"], "Typo.");
        assert_eq!(
            d[0]["suggestions"],
            json!([{"range": {"start": {"line": 2}, "end": {"line": 3}}, "text": "beta\n"}])
        );
        assert_eq!(
            d[1]["original_output"],
            "ana commented on notes.txt line 3 of MR !7:\n\nSay more here.\n\n\
             The request's diff around that line:\n```diff\n alpha\n+betta\n+gamma\n```\n"
        );
        assert!(d[1].get("suggestions").is_none());
        assert_eq!(
            found
                .threads
                .iter()
                .map(|t| (t.finding_id.as_str(), t.suggestion))
                .collect::<Vec<_>>(),
            [
                ("thread:d1@notes.txt:2:1", true),
                ("thread:d2@notes.txt:3:1", false)
            ]
        );
        assert_eq!(
            found.skipped,
            [
                (
                    "d3".to_owned(),
                    "on a removed line of notes.txt (nothing left there to fix)".to_owned()
                ),
                (
                    "d4".to_owned(),
                    "already answered by an earlier run".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn the_findings_reader_gives_the_ids_the_table_names() {
        let diff = FileHunks::new();
        let threads = [thread("d1", "```suggestion\nbeta\n```", Some(2), &[])];
        let found = from_threads("MR !7", &threads, &diff);
        let text = found.rdjson.to_string();
        let parsed =
            orchestrator_findings::formats::detect_and_parse(&text, "threads.rdjson").unwrap();
        assert_eq!(parsed.findings[0].id.as_str(), found.threads[0].finding_id);
        assert_eq!(parsed.findings[0].title, "apply the suggestion of ana");
        assert_eq!(parsed.findings[0].suggestions.len(), 1);
    }
}
