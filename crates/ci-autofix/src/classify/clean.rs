//! Turning a raw CI log into plain lines: terminal escape sequences and the
//! `gh run view --log-failed` prefixes removed, and each line marked when it
//! is *quoted* text (a formatter's diff, a `|`-gutter source snippet) rather
//! than a tool's own message.

use std::sync::LazyLock;

use regex::Regex;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';

/// Removes every terminal escape sequence from `text`: CSI sequences
/// (colours, cursor moves: `ESC [ … final`), OSC strings (`ESC ] … BEL` or
/// `ESC ] … ESC \`, e.g. hyperlinks and window titles), DCS/SOS/PM/APC
/// strings, charset designations (`ESC ( B` and friends), the 8-bit CSI
/// (`U+009B`) and any other two-character escape. Other control characters
/// except tab and newline are dropped; a carriage return keeps only what a
/// terminal would show (the text after the last `\r` of a line).
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ESC => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Charset designation: one more character names the set.
                Some('(' | ')' | '*' | '+' | '-' | '.' | '/' | '%' | '#') => {
                    chars.next();
                }
                Some(_) | None => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            // gh 2.102 prints a log's control characters in caret notation
            // (`^[[31m` for ESC [31m): read `^[` before a CSI or a charset
            // designation as ESC. Other carets are text (`^[a-z]` stays).
            '^' if caret_escape(&chars) => {
                chars.next();
                match chars.next() {
                    Some('[') => skip_csi(&mut chars),
                    _ => {
                        chars.next();
                    }
                }
            }
            '\n' | '\t' | '\r' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    // Carriage returns: a terminal shows what was written after the last one.
    if out.contains('\r') {
        let mut fixed = String::with_capacity(out.len());
        for (i, line) in out.split('\n').enumerate() {
            if i > 0 {
                fixed.push('\n');
            }
            let line = line.trim_end_matches('\r');
            fixed.push_str(line.rsplit('\r').next().unwrap_or(line));
        }
        return fixed;
    }
    out
}

/// Skips a CSI sequence's parameter and intermediate bytes and its final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    // A newline inside a broken sequence ends it and is kept (line structure).
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            return;
        }
        chars.next();
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
    }
}

/// Whether `^` (already taken) starts a caret-notation escape: `[` then
/// `[` and a CSI's parameters and final letter (`^[[31m`, `^[[0;1m`,
/// `^[[K`), or `[` then a charset designation (`^[(B`).
fn caret_escape(chars: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut ahead = chars.clone();
    if ahead.next() != Some('[') {
        return false;
    }
    match ahead.next() {
        Some('[') => {
            for c in ahead {
                if c.is_ascii_digit() || c == ';' {
                    continue;
                }
                return c.is_ascii_alphabetic();
            }
            false
        }
        Some('(' | ')') => ahead.next().is_some_and(|c| c.is_ascii_alphanumeric()),
        _ => false,
    }
}

/// Skips an OSC/DCS-style string up to BEL or `ESC \` (or the end of line).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            return;
        }
        chars.next();
        match c {
            BEL => return,
            ESC => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// `job<TAB>step<TAB>2024-05-07T10:11:12.1234567Z ` (`gh run view --log-failed`),
/// or a bare timestamp prefix (raw job logs downloaded from the API).
static GH_PREFIX: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[^\t\n]*\t[^\t\n]*\t)?\u{feff}?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z ?\u{feff}?",
    )
    .ok()
});

/// GitHub workflow command markers that wrap a message (`##[error]msg`).
static WORKFLOW_MARKER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^##\[(?:error|warning|notice|debug|group|endgroup|command|section)\]").ok()
});

/// One line of a cleaned log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanLine {
    /// 1-based line number in the original log.
    pub number: usize,
    /// The text, without escapes, CI prefix or trailing whitespace.
    pub text: String,
    /// The job name from a `gh --log-failed` prefix, when there was one.
    pub job: Option<String>,
    /// Whether the line is quoted material: a diff line or a source snippet.
    pub quoted: bool,
    /// Whether the line is a workflow marker (`##[group]Run …`).
    pub marker: bool,
}

/// Strips the CI prefix of one (escape-free) line; returns the job name when
/// the prefix carried one, and whether a workflow marker was removed.
pub fn strip_prefix(line: &str) -> (Option<String>, &str, bool) {
    let mut job = None;
    let mut rest = line.strip_prefix('\u{feff}').unwrap_or(line);
    if let Some(re) = GH_PREFIX.as_ref()
        && let Some(m) = re.find(rest)
    {
        let prefix = m.as_str();
        if let Some((name, _)) = prefix.split_once('\t') {
            job = Some(name.to_owned());
        }
        rest = &rest[m.end()..];
    }
    let rest = rest.strip_prefix('\u{feff}').unwrap_or(rest);
    if let Some(re) = WORKFLOW_MARKER.as_ref()
        && let Some(m) = re.find(rest)
    {
        return (job, &rest[m.end()..], true);
    }
    (job, rest, false)
}

/// Header lines that open a diff body.
static DIFF_HEADER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:Diff in .+:\d+:?\s*$|diff (?:-\S+ )*\S+ \S+|diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|--- \S|\+\+\+ \S)",
    )
    .ok()
});

/// Lines that end a diff body even though they start with `-`/`+`/space.
static DIFF_BREAK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?:--- (?:FAIL|PASS|SKIP):|=== (?:RUN|PAUSE|CONT)|---- \S+ stdout ----$)").ok()
});

/// Quoted source outside diffs: rustc/ruff `|` gutters (`  |`, `5 |  code`,
/// `1 | / import os`), their suggestion lines (`5 -  old`, `5 +  new`,
/// `  - old`), pytest's `>` source lines and caret underlines.
static SNIPPET: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?:\s*\d*\s*\|(?:\s|$|[/|_\\])|\s*\d+\s+[-+~]\s|\s{2,}[-+]\s|>\s|\s*\^+\s*$)")
        .ok()
});

/// Cleans a whole log into lines (see the module docs).
pub fn clean_log(log: &str) -> Vec<CleanLine> {
    let plain = strip_escapes(log);
    let mut lines = Vec::new();
    let mut in_diff = false;
    for (i, raw) in plain.split('\n').enumerate() {
        let (job, untrimmed, marker) = strip_prefix(raw);
        let text = untrimmed.trim_end();
        let is_break = DIFF_BREAK.as_ref().is_some_and(|re| re.is_match(text));
        let is_header = !is_break && DIFF_HEADER.as_ref().is_some_and(|re| re.is_match(text));
        let quoted = if is_break || marker {
            in_diff = false;
            false
        } else if is_header {
            in_diff = true;
            true
        } else if in_diff
            && (untrimmed.starts_with(' ') || text.starts_with('+') || text.starts_with('-'))
        {
            true
        } else {
            in_diff = false;
            SNIPPET.as_ref().is_some_and(|re| re.is_match(text))
        };
        lines.push(CleanLine {
            number: i + 1,
            text: text.to_owned(),
            job,
            quoted,
            marker,
        });
    }
    // A trailing newline yields one empty last line; drop it.
    if lines.last().is_some_and(|l| l.text.is_empty()) {
        lines.pop();
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_notation_escapes_of_newer_gh_are_stripped() {
        // What gh 2.102 prints for a coloured rustfmt diff line.
        assert_eq!(
            strip_escapes("^[(B^[[m^[[32m+    left + right"),
            "+    left + right"
        );
        assert_eq!(strip_escapes("^[[31m-    x^[[0m"), "-    x");
        // Carets that are text stay.
        for text in ["grep '^[a-z]'", "x ^[[:space:]]", "a^b", "^["] {
            assert_eq!(strip_escapes(text), text);
        }
    }

    #[test]
    fn strips_csi_osc_and_charset_switches() {
        let raw = "\u{1b}[1m\u{1b}[91merror\u{1b}[0m: x\u{1b}(B\u{1b}[m \u{1b}]8;;https://e.x\u{7}link\u{1b}]8;;\u{1b}\\ end\u{9b}31mred";
        assert_eq!(strip_escapes(raw), "error: x link endred");
    }

    #[test]
    fn carriage_returns_keep_the_last_overwrite() {
        assert_eq!(
            strip_escapes("10%\r50%\r100% done\r\nnext"),
            "100% done\nnext"
        );
    }

    #[test]
    fn unterminated_sequences_do_not_eat_the_next_line() {
        assert_eq!(strip_escapes("a\u{1b}[31\nb\u{1b}]title\nc"), "a\nb\nc");
    }

    #[test]
    fn gh_prefix_and_markers_are_removed() {
        let (job, text, marker) =
            strip_prefix("build\tRun tests\t2026-05-07T10:11:12.1234567Z \u{feff}##[error]boom");
        assert_eq!(job.as_deref(), Some("build"));
        assert_eq!(text, "boom");
        assert!(marker);
        let (job, text, _) = strip_prefix("2026-05-07T10:11:12Z hello");
        assert_eq!((job, text), (None, "hello"));
        let (_, text, marker) = strip_prefix("plain line");
        assert_eq!((text, marker), ("plain line", false));
    }

    #[test]
    fn diff_bodies_and_snippets_are_quoted() {
        let log = "Diff in /a/src/lib.rs:6:\n-    panic!(\"x\")\n+    panic!(\"x\");\n     assert!(y)\n\nthread 'main' panicked at src/lib.rs:1:1:\n  |\n5 |     assert!(x)\n  |     ^^^^\n--- FAIL: TestX (0.00s)\n";
        let quoted: Vec<(String, bool)> = clean_log(log)
            .into_iter()
            .map(|l| (l.text, l.quoted))
            .collect();
        let expected = [
            ("Diff in /a/src/lib.rs:6:", true),
            ("-    panic!(\"x\")", true),
            ("+    panic!(\"x\");", true),
            ("     assert!(y)", true),
            ("", false),
            ("thread 'main' panicked at src/lib.rs:1:1:", false),
            ("  |", true),
            ("5 |     assert!(x)", true),
            ("  |     ^^^^", true),
            ("--- FAIL: TestX (0.00s)", false),
        ];
        let expected: Vec<(String, bool)> =
            expected.iter().map(|(t, q)| (t.to_string(), *q)).collect();
        assert_eq!(quoted, expected);
    }
}
