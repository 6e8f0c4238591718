//! Reading one hunk of a unified diff: its `@@` header, its body lines
//! counted against the header, and `\\ No newline at end of file` markers.

use super::*;

/// `@@ -a[,b] +c[,d] @@[ section]`.
fn parse_hunk_header(line: &str, at: usize) -> Result<(usize, usize, usize, usize), PatchError> {
    let err = || PatchError::Parse {
        line: at,
        message: format!("malformed hunk header `{line}` (expected `@@ -a,b +c,d @@`)"),
    };
    let rest = line.strip_prefix("@@ -").ok_or_else(err)?;
    let end = rest.find(" @@").ok_or_else(err)?;
    let (old, new) = rest[..end].split_once(" +").ok_or_else(err)?;
    let range = |r: &str| -> Option<(usize, usize)> {
        let (start, len) = match r.split_once(',') {
            Some((s, l)) => (s, l),
            None => (r, "1"),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(start) || !digits(len) {
            return None;
        }
        Some((start.parse().ok()?, len.parse().ok()?))
    };
    let (a, b) = range(old).ok_or_else(err)?;
    let (c, d) = range(new).ok_or_else(err)?;
    if (a == 0 && b != 0) || (c == 0 && d != 0) {
        return Err(PatchError::Parse {
            line: at,
            message: format!("hunk header `{line}` starts a non-empty side at line 0"),
        });
    }
    Ok((a, b, c, d))
}

/// Parses the hunk whose header is `lines[start]`; returns it and the index
/// of the line after it.
pub(super) fn parse_hunk(lines: &[&str], start: usize) -> Result<(Hunk, usize), PatchError> {
    let header_line = start + 1;
    let (old_start, old_len, new_start, new_len) = parse_hunk_header(lines[start], header_line)?;
    let mut body: Vec<HunkLine> = Vec::new();
    let (mut old_seen, mut new_seen) = (0usize, 0usize);
    let mut j = start + 1;
    let counts =
        |o: usize, n: usize| format!("after {o} of {old_len} old and {n} of {new_len} new lines");
    loop {
        if lines.get(j).is_some_and(|l| l.starts_with('\\')) {
            drop_newline(&mut body, j + 1)?;
            j += 1;
            continue;
        }
        if old_seen == old_len && new_seen == new_len {
            break;
        }
        let Some(line) = lines.get(j) else {
            return Err(PatchError::Parse {
                line: j,
                message: format!(
                    "hunk at line {header_line} is cut short: the diff ends {}",
                    counts(old_seen, new_seen)
                ),
            });
        };
        let Some((entry, old_inc, new_inc)) = body_line(line) else {
            return Err(PatchError::Parse {
                line: j + 1,
                message: format!(
                    "hunk at line {header_line} is cut short: `{}` is not a context, removed or added line ({})",
                    truncate(line, 60),
                    counts(old_seen, new_seen)
                ),
            });
        };
        if old_seen + old_inc > old_len || new_seen + new_inc > new_len {
            return Err(PatchError::Parse {
                line: j + 1,
                message: format!(
                    "hunk at line {header_line} has more lines than its header counts ({})",
                    counts(old_seen, new_seen)
                ),
            });
        }
        old_seen += old_inc;
        new_seen += new_inc;
        body.push(entry);
        j += 1;
    }
    let hunk = Hunk {
        old_start,
        old_len,
        new_start,
        new_len,
        lines: body,
        line: header_line,
    };
    check_missing_newlines(&hunk)?;
    Ok((hunk, j))
}

/// A hunk body line, with how many old and new lines it counts for: a
/// context line (an empty line too, since chat front-ends strip the space
/// of a blank one), a removed or an added line; `None` for anything else.
fn body_line(line: &str) -> Option<(HunkLine, usize, usize)> {
    if let Some(t) = line.strip_prefix(' ') {
        Some((HunkLine::Context(format!("{t}\n")), 1, 1))
    } else if line.is_empty() {
        Some((HunkLine::Context("\n".into()), 1, 1))
    } else if let Some(t) = line.strip_prefix('-') {
        Some((HunkLine::Remove(format!("{t}\n")), 1, 0))
    } else {
        let t = line.strip_prefix('+')?;
        Some((HunkLine::Add(format!("{t}\n")), 0, 1))
    }
}

/// A `\ No newline at end of file` marker (diff line `at`): the line
/// before it loses its newline.
fn drop_newline(body: &mut [HunkLine], at: usize) -> Result<(), PatchError> {
    let Some(prev) = body.last_mut() else {
        return Err(PatchError::Parse {
            line: at,
            message: "`\\ No newline at end of file` marker before any hunk line".into(),
        });
    };
    let text = match prev {
        HunkLine::Context(t) | HunkLine::Remove(t) | HunkLine::Add(t) => t,
    };
    if text.pop() != Some('\n') {
        return Err(PatchError::Parse {
            line: at,
            message: "two `\\ No newline at end of file` markers for one line".into(),
        });
    }
    Ok(())
}

/// Only the last line of a side can lack its newline.
fn check_missing_newlines(hunk: &Hunk) -> Result<(), PatchError> {
    for side in [hunk.old_side(), hunk.new_side()] {
        if side.iter().rev().skip(1).any(|l| !l.ends_with('\n')) {
            return Err(PatchError::Parse {
                line: hunk.line,
                message: "a line marked `\\ No newline at end of file` is not the last of its side"
                    .into(),
            });
        }
    }
    Ok(())
}

/// `s` cut to `max` characters, with `…` when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
