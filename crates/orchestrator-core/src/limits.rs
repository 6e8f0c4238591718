//! Size limits on the fields of inputs, shared by every reader.
//!
//! A field read from a findings file, a task CSV or a CI handoff ends up in
//! an agent's prompt, a commit message or a line on the terminal. Without a
//! bound, one 10 MB description would be carried whole into each of them. The
//! readers therefore check each field against one of these limits as they
//! read it, and refuse a field that is over:
//!
//! - a bad finding is rejected on its own (the rest of the file goes on),
//!   with its place, its id, the field, the size and the limit;
//! - a task CSV with an oversized cell is refused whole, naming the file,
//!   the line and the column (a task plan is refused as a whole);
//! - a handoff with an oversized field is refused, naming the field.
//!
//! Sizes are counted in bytes of UTF-8 (`str::len`), so a check costs
//! nothing whatever the field's size: a 10 MB field is refused as fast as the
//! JSON or CSV around it can be parsed.
//!
//! | const | bytes | for |
//! |---|---|---|
//! | [`MAX_NAME_BYTES`] | 4 KiB | one-line names: ids, titles, file paths, categories, dimensions, check names, branch names, URLs |
//! | [`MAX_TEXT_BYTES`] | 64 KiB | free text: descriptions, snippets, recommendations, suggestion messages and edit texts, check details |
//! | [`MAX_CSV_CELL_BYTES`] | 1 MiB | one cell of a planex CSV (`tasks.csv`, `explore.csv`, …) |
//! | [`MAX_INPUT_FILE_BYTES`] | 256 MiB | a whole input file (findings, task CSV, handoff), read with [`read_input_file`] |
//!
//! Messages that quote an input value use [`excerpt`], so that a refused
//! field is never printed whole.

use std::fmt;
use std::io::Read as _;
use std::path::Path;

/// The longest one-line name a reader accepts: 4 KiB.
///
/// Ids, titles, file paths, categories (rule ids), dimensions, check and
/// branch names and URLs are one line each. Linux caps a path at 4 096 bytes
/// (`PATH_MAX`), and the longest real rule ids, titles and URLs are a few
/// hundred bytes; a name over 4 KiB is not a name but a pasted blob, and it
/// would be repeated in every commit subject and terminal line that shows it.
pub const MAX_NAME_BYTES: usize = 4 * 1024;

/// The longest free-text field a reader accepts: 64 KiB.
///
/// Descriptions, snippets, recommendations and the texts of a suggestion
/// (its message, the text an edit replaces and its replacement) go into the
/// prompts of the agents that plan and fix. 64 KiB is about 16 000 tokens —
/// more than a few pages of explanation or a 1 500-line snippet, and still a
/// small part of a model's context when a batch carries several findings. A
/// linter's rendered diagnostic or rule help is a few KiB at most.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// The largest cell of a planex CSV a reader accepts: 1 MiB.
///
/// Task and exploration rows are written by people and by the planning
/// agent, and their cells (a description, acceptance criteria, directives)
/// are carried into every prompt of the task and of the tasks that take it
/// as context; the engine's own cells (findings, errors) are capped far
/// lower. 1 MiB leaves room for a long pasted specification while refusing
/// the runaway cell, and the CSV writer cuts any cell it writes to this size
/// so that every session file it writes can be read back.
pub const MAX_CSV_CELL_BYTES: usize = 1024 * 1024;

/// The largest input file a reader accepts: 256 MiB.
///
/// Inputs are read whole and parsed into memory (a JSON document several
/// times its size), so one file must not be able to exhaust it: a findings
/// export of a very large repository is tens of MiB, a task CSV or a handoff
/// far less. The bound is checked while reading, so a device (`/dev/zero`)
/// or a file that keeps growing is refused too, not read forever.
pub const MAX_INPUT_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads the whole file at `path`, refusing one larger than `limit` bytes
/// with an [`std::io::ErrorKind::InvalidData`] error that says so (the
/// caller adds the path, as for any read error).
pub fn read_input_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let hint = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map_or(0, |m| m.len());
    if hint > limit {
        return Err(too_large(limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "larger than the input size limit of {limit} bytes ({})",
            human(usize::try_from(limit).unwrap_or(usize::MAX))
        ),
    )
}

/// A field over its size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTooLarge {
    /// The field, as its reader names it (`description`,
    /// `recommendations[2]`, `failedChecks[0].name`).
    pub field: String,
    /// Its size in bytes.
    pub size: usize,
    /// The limit it is over, in bytes.
    pub limit: usize,
}

impl FieldTooLarge {
    /// The problem without the field name: `is 10485760 bytes, over the
    /// limit of 65536 bytes (64 KiB)`.
    pub fn problem(&self) -> String {
        over_limit(self.size, self.limit)
    }
}

impl fmt::Display for FieldTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field `{}` {}", self.field, self.problem())
    }
}

impl std::error::Error for FieldTooLarge {}

/// Checks that `text` is at most `limit` bytes; the error names `field`.
pub fn check_size(field: impl Into<String>, text: &str, limit: usize) -> Result<(), FieldTooLarge> {
    if text.len() <= limit {
        Ok(())
    } else {
        Err(FieldTooLarge {
            field: field.into(),
            size: text.len(),
            limit,
        })
    }
}

/// `is 10485760 bytes, over the limit of 65536 bytes (64 KiB)`: the words
/// every size error uses.
pub fn over_limit(size: usize, limit: usize) -> String {
    format!(
        "is {size} bytes, over the limit of {limit} bytes ({})",
        human(limit)
    )
}

/// The most characters of an input value that [`excerpt`] shows.
pub const EXCERPT_CHARS: usize = 60;

/// `text` as it may be quoted in a message: whole when it has at most
/// [`EXCERPT_CHARS`] characters, else its first characters followed by
/// `…(N bytes)`. Linear in the characters shown, not in `text`.
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…({} bytes)", &text[..cut], text.len()),
    }
}

/// `n` bytes in KiB or MiB when it is a whole number of them.
fn human(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn input_files_are_read_up_to_the_limit_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("at.json");
        std::fs::write(&at, vec![b'x'; 1000]).unwrap();
        assert_eq!(super::read_input_file(&at, 1000).unwrap().len(), 1000);
        let err = super::read_input_file(&at, 999).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            err.to_string(),
            "larger than the input size limit of 999 bytes (999 bytes)"
        );
        // A device reports no size: the bound is kept while reading.
        let zero = std::path::Path::new("/dev/zero");
        if zero.exists() {
            let err = super::read_input_file(zero, 1 << 20).unwrap_err();
            assert!(err.to_string().contains("1 MiB"), "{err}");
        }
        assert_eq!(
            super::read_input_file(&dir.path().join("missing"), 10)
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::NotFound
        );
    }

    use super::*;

    #[test]
    fn a_field_at_the_limit_passes_and_one_byte_more_is_refused() {
        for limit in [MAX_NAME_BYTES, MAX_TEXT_BYTES, MAX_CSV_CELL_BYTES] {
            assert_eq!(check_size("f", &"x".repeat(limit), limit), Ok(()));
            let err = check_size("f", &"x".repeat(limit + 1), limit).unwrap_err();
            assert_eq!((err.size, err.limit), (limit + 1, limit));
        }
        // Bytes, not characters: 2 048 two-byte characters fill 4 KiB.
        assert_eq!(check_size("f", &"é".repeat(2048), MAX_NAME_BYTES), Ok(()));
        assert!(check_size("f", &"é".repeat(2049), MAX_NAME_BYTES).is_err());
    }

    #[test]
    fn the_message_names_field_size_and_limit() {
        let err = check_size("description", &"x".repeat(65_537), MAX_TEXT_BYTES).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `description` is 65537 bytes, over the limit of 65536 bytes (64 KiB)"
        );
        let err = check_size(
            "cell",
            &"x".repeat(MAX_CSV_CELL_BYTES + 1),
            MAX_CSV_CELL_BYTES,
        )
        .unwrap_err();
        assert!(err.problem().ends_with("limit of 1048576 bytes (1 MiB)"));
        assert_eq!(human(100), "100 bytes");
    }

    #[test]
    fn excerpts_are_short_and_cut_on_a_character_boundary() {
        assert_eq!(excerpt("short"), "short");
        let exact = "a".repeat(EXCERPT_CHARS);
        assert_eq!(excerpt(&exact), exact);
        let long = "é".repeat(10_000);
        let shown = excerpt(&long);
        assert_eq!(
            shown,
            format!("{}…(20000 bytes)", "é".repeat(EXCERPT_CHARS))
        );
    }
}
