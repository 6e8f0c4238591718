//! CSV state files (`explore.csv`, `tasks.csv`, `results.csv`) as plain tables.
//!
//! Users edit these files by hand between runs ("Modify: edit explore.csv,
//! then --continue"), so reading them must say precisely what is wrong and
//! where. [`read_csv`] gives a [`CsvTable`] — the header plus every record
//! with the 1-based line it starts on — or an error naming the file and line:
//! a row with the wrong number of fields, invalid UTF-8, or an unbalanced
//! quote.
//!
//! The `csv` crate silently accepts a quoted field that is never closed (it
//! runs to the end of the file and swallows every later row), and a closing
//! quote followed by stray text. Both mean a quote inside a cell was not
//! doubled, so [`read_csv`] checks the quoting itself first and reports the
//! line on which the broken quoted field starts.
//!
//! Every cell is at most [`MAX_CSV_CELL_BYTES`] (1 MiB): a larger one is an
//! error naming the file, the line, the column and the sizes. The cells are
//! carried into agents' prompts, and a runaway cell (a 10 MB paste) would be
//! carried into every one of them.
//!
//! [`write_csv_atomic`] writes the way the planex seed does: the header line
//! unquoted, every data cell quoted with `"` doubled inside, `\n` line ends,
//! through [`write_atomic`]. It cuts a data cell over [`MAX_CSV_CELL_BYTES`]
//! to that size (the end replaced by a note of how much was cut), so that
//! every file it writes can be read back: the readers refuse larger cells,
//! and only the engine's own text (an agent's error output) could be larger,
//! since a cell read from a file is already within the limit.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

use csv::{QuoteStyle, Terminator, WriterBuilder};

use super::StateError;
use super::atomic::write_atomic;
use crate::limits::{MAX_CSV_CELL_BYTES, excerpt};

/// A CSV file: its header and its records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsvTable {
    /// Column names, in file order.
    pub headers: Vec<String>,
    /// Data records, in file order; each has exactly `headers.len()` fields.
    pub rows: Vec<CsvRecord>,
}

/// One data record of a [`CsvTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvRecord {
    /// 1-based line on which the record starts (the header is line 1).
    /// Records built in memory, never read from a file, use 0.
    pub line: u64,
    /// The cells, one per header column.
    pub fields: Vec<String>,
}

impl CsvRecord {
    /// A record built in memory (line 0).
    pub fn new(fields: Vec<String>) -> CsvRecord {
        CsvRecord { line: 0, fields }
    }

    /// The cell at column index `index`, or `""` when out of range.
    pub fn get(&self, index: usize) -> &str {
        self.fields.get(index).map_or("", String::as_str)
    }
}

impl CsvTable {
    /// Index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    /// Parses CSV `bytes`; `path` is only used in error messages.
    ///
    /// A leading UTF-8 byte-order mark is ignored and blank lines are skipped.
    /// Fails on an unbalanced quote, a record whose field count differs from
    /// the header's, invalid UTF-8, a duplicate column name, or a cell over
    /// [`MAX_CSV_CELL_BYTES`].
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<CsvTable, StateError> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        check_quotes(path, bytes)?;

        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .from_reader(bytes);
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| csv_error(path, bytes, &e, 1))?
            .iter()
            .map(str::to_owned)
            .collect();
        check_cells(path, 1, &headers, None)?;
        let mut seen = HashSet::new();
        if let Some(dup) = headers.iter().find(|h| !seen.insert(h.as_str())) {
            return Err(StateError::Csv {
                path: path.to_path_buf(),
                line: Some(1),
                message: format!("duplicate column `{dup}` in the header"),
            });
        }

        let mut rows = Vec::new();
        let mut record = csv::StringRecord::new();
        loop {
            match reader.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {
                    let line = record.position().map_or(0, |pos| start_line(bytes, pos));
                    check_cells(path, line, record.iter(), Some(&headers))?;
                    rows.push(CsvRecord {
                        line,
                        fields: record.iter().map(str::to_owned).collect(),
                    });
                }
                Err(e) => return Err(csv_error(path, bytes, &e, 0)),
            }
        }
        Ok(CsvTable { headers, rows })
    }

    /// Serializes the table the way [`write_csv_atomic`] writes it.
    pub fn to_csv_bytes(&self, path: &Path) -> Result<Vec<u8>, StateError> {
        let rows: Vec<&[String]> = self.rows.iter().map(|r| r.fields.as_slice()).collect();
        to_csv_bytes(path, &self.headers, &rows)
    }

    /// Writes the table to `path` atomically; see [`write_csv_atomic`].
    pub fn write_atomic(&self, path: impl AsRef<Path>) -> Result<(), StateError> {
        let path = path.as_ref();
        write_atomic(path, &self.to_csv_bytes(path)?)
    }
}

/// Reads and parses the CSV file at `path`; see [`CsvTable::parse`].
pub fn read_csv(path: impl AsRef<Path>) -> Result<CsvTable, StateError> {
    let path = path.as_ref();
    let bytes = crate::limits::read_input_file(path, crate::limits::MAX_INPUT_FILE_BYTES)
        .map_err(|e| StateError::io("read", path, e))?;
    CsvTable::parse(path, &bytes)
}

/// Writes `headers` and `rows` to `path` atomically: the header line as is
/// (quoted only where needed), every data cell quoted with `""` escaping,
/// `\n` after every line.
///
/// Every row must have exactly `headers.len()` cells.
pub fn write_csv_atomic<H, R, F>(
    path: impl AsRef<Path>,
    headers: &[H],
    rows: &[R],
) -> Result<(), StateError>
where
    H: AsRef<str>,
    R: AsRef<[F]>,
    F: AsRef<str>,
{
    let path = path.as_ref();
    write_atomic(path, &to_csv_bytes(path, headers, rows)?)
}

/// The bytes [`write_csv_atomic`] writes; `path` is only used in errors.
pub fn to_csv_bytes<H, R, F>(path: &Path, headers: &[H], rows: &[R]) -> Result<Vec<u8>, StateError>
where
    H: AsRef<str>,
    R: AsRef<[F]>,
    F: AsRef<str>,
{
    let ser = |e: csv::Error| StateError::Serialize {
        path: path.to_path_buf(),
        what: "CSV",
        message: e.to_string(),
    };
    for (index, row) in rows.iter().enumerate() {
        let found = row.as_ref().len();
        if found != headers.len() {
            return Err(StateError::Csv {
                path: path.to_path_buf(),
                line: None,
                message: format!(
                    "cannot write row {} with {found} cells under a header of {} columns",
                    index + 1,
                    headers.len()
                ),
            });
        }
    }

    // The csv writer quotes a field into its buffer one buffer-full at a
    // time and searches the rest of the field for the next quote at each
    // step: quadratic in a field larger than the buffer (a 10 MB cell took
    // a minute to write). A buffer that holds the largest field quoted
    // (every byte a doubled quote, plus the two around it) writes each
    // field in one step.
    let largest = headers
        .iter()
        .map(|h| h.as_ref().len())
        .chain(rows.iter().flat_map(|r| {
            r.as_ref()
                .iter()
                .map(|f| f.as_ref().len().min(MAX_CSV_CELL_BYTES))
        }))
        .max()
        .unwrap_or(0);
    let capacity = largest.saturating_mul(2).saturating_add(2).max(8 * 1024);
    let mut out = Vec::new();
    {
        let mut header = WriterBuilder::new()
            .buffer_capacity(capacity)
            .quote_style(QuoteStyle::Necessary)
            .terminator(Terminator::Any(b'\n'))
            .from_writer(&mut out);
        header
            .write_record(headers.iter().map(AsRef::as_ref))
            .map_err(ser)?;
        header.flush().map_err(|e| ser(e.into()))?;
    }
    {
        let mut body = WriterBuilder::new()
            .buffer_capacity(capacity)
            .quote_style(QuoteStyle::Always)
            .terminator(Terminator::Any(b'\n'))
            .flexible(true)
            .from_writer(&mut out);
        for row in rows {
            body.write_record(
                row.as_ref()
                    .iter()
                    .map(|f| match within_cell_limit(f.as_ref()) {
                        Cow::Borrowed(cell) => Cow::Borrowed(cell.as_bytes()),
                        Cow::Owned(cell) => Cow::Owned(cell.into_bytes()),
                    }),
            )
            .map_err(ser)?;
        }
        body.flush().map_err(|e| ser(e.into()))?;
    }
    Ok(out)
}

/// Checks every cell of the record on `line` against [`MAX_CSV_CELL_BYTES`];
/// `headers` names the columns of a data record (`None` for the header).
fn check_cells<I, S>(
    path: &Path,
    line: u64,
    cells: I,
    headers: Option<&[String]>,
) -> Result<(), StateError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    for (index, cell) in cells.into_iter().enumerate() {
        let size = cell.as_ref().len();
        if size > MAX_CSV_CELL_BYTES {
            return Err(StateError::CsvCellTooLarge {
                path: path.to_path_buf(),
                line,
                field: index + 1,
                column: headers.and_then(|h| h.get(index)).map(|name| excerpt(name)),
                size,
                limit: MAX_CSV_CELL_BYTES,
            });
        }
    }
    Ok(())
}

/// `cell`, or when it is over [`MAX_CSV_CELL_BYTES`] its start (cut on a
/// character boundary) followed by a note of how many bytes were cut, the
/// whole within the limit.
fn within_cell_limit(cell: &str) -> Cow<'_, str> {
    if cell.len() <= MAX_CSV_CELL_BYTES {
        return cell.into();
    }
    // Room for the note, whose number has at most 20 digits.
    let mut cut = MAX_CSV_CELL_BYTES - 64;
    while !cell.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… (cut: {} more bytes)", &cell[..cut], cell.len() - cut).into()
}

/// The 1-based line on which the record at `pos` really starts.
///
/// The `csv` crate positions a record just after the previous record's line
/// end, before the blank lines it skips; skip them here too.
fn start_line(bytes: &[u8], pos: &csv::Position) -> u64 {
    let from = usize::try_from(pos.byte()).map_or(bytes.len(), |b| b.min(bytes.len()));
    let blank = bytes[from..]
        .iter()
        .take_while(|&&b| b == b'\n' || b == b'\r');
    pos.line() + blank.filter(|&&b| b == b'\n').count() as u64
}

/// Maps a `csv` error to a [`StateError`]; `default_line` is used when the
/// error carries no position.
fn csv_error(path: &Path, bytes: &[u8], err: &csv::Error, default_line: u64) -> StateError {
    let line = |pos: Option<&csv::Position>| pos.map_or(default_line, |p| start_line(bytes, p));
    match err.kind() {
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => StateError::CsvRaggedRow {
            path: path.to_path_buf(),
            line: line(pos.as_ref()),
            expected: *expected_len,
            found: *len,
        },
        csv::ErrorKind::Utf8 { pos, err } => StateError::CsvInvalidUtf8 {
            path: path.to_path_buf(),
            line: line(pos.as_ref()),
            field: err.field() + 1,
        },
        _ => StateError::Csv {
            path: path.to_path_buf(),
            line: err.position().map(|p| start_line(bytes, p)),
            message: err.to_string(),
        },
    }
}

/// Where the quote scanner is within the current record.
#[derive(Clone, Copy)]
enum QuoteState {
    /// At the start of a field.
    FieldStart,
    /// Inside an unquoted field (a `"` here is a literal character).
    Unquoted,
    /// Inside a quoted field that opened on `line`.
    Quoted { line: u64 },
    /// Just after a `"` inside a quoted field opened on `line`: either the
    /// closing quote or the first half of `""`.
    QuoteInQuoted { line: u64 },
}

/// Checks that every quoted field is closed, and closed properly (followed by
/// a comma, a line end or the end of the file); reports the line on which a
/// broken quoted field starts.
fn check_quotes(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let unbalanced = |line, detail: String| StateError::CsvUnbalancedQuote {
        path: path.to_path_buf(),
        line,
        detail,
    };
    let mut line = 1u64;
    let mut state = QuoteState::FieldStart;
    for &b in bytes {
        state = match (state, b) {
            (QuoteState::FieldStart, b'"') => QuoteState::Quoted { line },
            (QuoteState::FieldStart | QuoteState::Unquoted, b',' | b'\n' | b'\r') => {
                QuoteState::FieldStart
            }
            (QuoteState::FieldStart | QuoteState::Unquoted, _) => QuoteState::Unquoted,
            (QuoteState::Quoted { line: start }, b'"') => QuoteState::QuoteInQuoted { line: start },
            (QuoteState::Quoted { .. }, _) => state,
            (QuoteState::QuoteInQuoted { line: start }, b'"') => QuoteState::Quoted { line: start },
            (QuoteState::QuoteInQuoted { .. }, b',' | b'\n' | b'\r') => QuoteState::FieldStart,
            (QuoteState::QuoteInQuoted { line: start }, other) => {
                let closed_on = if line == start {
                    String::new()
                } else {
                    format!(" on line {line}")
                };
                return Err(unbalanced(
                    start,
                    format!(
                        "the quoted field starting on this line is closed{closed_on} and then \
                         followed by {:?} instead of a comma or a line end \
                         (a quote inside a cell must be written as \"\")",
                        char::from(other)
                    ),
                ));
            }
        };
        if b == b'\n' {
            line += 1;
        }
    }
    if let QuoteState::Quoted { line: start } = state {
        return Err(unbalanced(
            start,
            "the quoted field starting on this line is never closed".to_owned(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse(text: &str) -> Result<CsvTable, StateError> {
        CsvTable::parse(Path::new("plan/tasks.csv"), text.as_bytes())
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn reads_header_and_records_with_start_lines() {
        let table = parse(concat!(
            "id,angle,findings\n",
            "\"E1\",\"architecture\",\"two\nlines, with \"\"quotes\"\"\"\n",
            "\n",
            "\"E2\",\"testing\",\"\"\n",
        ))
        .unwrap();
        assert_eq!(table.headers, ["id", "angle", "findings"]);
        assert_eq!(
            table.rows,
            [
                CsvRecord {
                    line: 2,
                    fields: strings(&["E1", "architecture", "two\nlines, with \"quotes\""])
                },
                CsvRecord {
                    line: 5,
                    fields: strings(&["E2", "testing", ""])
                },
            ]
        );
        assert_eq!(table.column("angle"), Some(1));
        assert_eq!(table.column("nope"), None);
        assert_eq!(table.rows[1].get(2), "");
        assert_eq!(table.rows[1].get(9), "");
    }

    #[test]
    fn byte_order_mark_and_empty_file_are_accepted() {
        let table = CsvTable::parse(Path::new("x.csv"), b"\xEF\xBB\xBFid,wave\nE1,1\n").unwrap();
        assert_eq!(table.headers, ["id", "wave"]);
        assert_eq!(parse("").unwrap(), CsvTable::default());
    }

    #[test]
    fn csv_with_unbalanced_quote_error_names_file_and_line() {
        let err =
            parse("id,title\n\"T1\",\"ok\"\n\"T2\",\"never closed\nT3,x\nT4,y\n").unwrap_err();
        let StateError::CsvUnbalancedQuote { line, .. } = err else {
            panic!("expected an unbalanced quote, got {err:?}");
        };
        assert_eq!(line, 3);
        assert_eq!(
            err.to_string(),
            "CSV file plan/tasks.csv line 3: unbalanced quote: \
             the quoted field starting on this line is never closed"
        );
    }

    #[test]
    fn csv_quote_closed_early_error_names_the_opening_line() {
        // The unescaped quote in `say "hi"` closes the field early.
        let err = parse("id,title\n\"T1\",\"say \"hi\" now\"\n").unwrap_err();
        assert!(
            matches!(err, StateError::CsvUnbalancedQuote { line: 2, .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("followed by 'h' instead of a comma"),
            "{err}"
        );

        let err = parse("id,title\n\"T2\",\"open\nstill open\" oops\n").unwrap_err();
        assert!(
            matches!(err, StateError::CsvUnbalancedQuote { line: 2, .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("closed on line 3 and then followed by ' '"),
            "{err}"
        );
    }

    #[test]
    fn quote_inside_unquoted_field_is_literal() {
        let table = parse("id,title\nT1,say \"hi\"\n").unwrap();
        assert_eq!(table.rows[0].fields, ["T1", "say \"hi\""]);
    }

    #[test]
    fn ragged_row_error_names_file_line_and_counts() {
        let err = parse("id,title,wave\n\"T1\",\"a\",\"1\"\n\"T2\",\"b\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "CSV file plan/tasks.csv line 3: expected 3 fields (as in the header), found 2"
        );
    }

    #[test]
    fn lines_count_blank_lines_and_crlf() {
        let table = parse("id,x\r\n\r\n\r\n\"T1\",\"a\r\nb\"\r\n\n\"T2\",\"c\"").unwrap();
        assert_eq!(
            table.rows.iter().map(|r| r.line).collect::<Vec<_>>(),
            [4, 7]
        );
        let err = parse("id,x\n\"T1\",\"a\"\n\n\n\"T2\"\n").unwrap_err();
        assert!(
            matches!(err, StateError::CsvRaggedRow { line: 5, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn invalid_utf8_error_names_file_line_and_field() {
        let err =
            CsvTable::parse(Path::new("e.csv"), b"id,angle\nE1,ok\nE2,bad\xff\xfe\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "CSV file e.csv line 3: invalid UTF-8 in field 2"
        );
    }

    #[test]
    fn duplicate_column_is_an_error() {
        let err = parse("id,wave,id\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "CSV file plan/tasks.csv line 1: duplicate column `id` in the header"
        );
    }

    #[test]
    fn writes_like_the_seed_every_cell_quoted() {
        let bytes = to_csv_bytes(
            Path::new("x.csv"),
            &["id", "title", "deps"],
            &[
                vec!["T1", "Say \"hi\", then\nleave", ""],
                vec!["T2", "ünïcödé", "T1"],
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "id,title,deps\n\"T1\",\"Say \"\"hi\"\", then\nleave\",\"\"\n\"T2\",\"ünïcödé\",\"T1\"\n"
        );
    }

    #[test]
    fn writing_a_row_of_the_wrong_width_is_an_error() {
        let err = to_csv_bytes(
            Path::new("x.csv"),
            &["a", "b"],
            &[vec!["1", "2"], vec!["3"]],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "CSV file x.csv: cannot write row 2 with 1 cells under a header of 2 columns"
        );
    }

    #[test]
    fn write_then_read_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        let rows = vec![strings(&["T1", "a,b"]), strings(&["T2", "\"q\"\r\n"])];
        write_csv_atomic(&path, &["id", "x"], &rows).unwrap();
        let table = read_csv(&path).unwrap();
        assert_eq!(table.headers, ["id", "x"]);
        assert_eq!(
            table
                .rows
                .iter()
                .map(|r| r.fields.clone())
                .collect::<Vec<_>>(),
            rows
        );
        table.write_atomic(&path).unwrap();
        assert_eq!(read_csv(&path).unwrap(), table);
        let missing = read_csv(dir.path().join("nope.csv")).unwrap_err();
        assert!(missing.is_not_found());
    }

    /// A cell of exactly the limit is read; one byte more is an error
    /// naming the file, the line, the column and both sizes.
    #[test]
    fn a_cell_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let cell = |n: usize| "é".repeat(n / 2) + &"x".repeat(n % 2);
        let at = format!(
            "id,description\nT0,short\n\"T1\",\"{}\"\n",
            cell(MAX_CSV_CELL_BYTES)
        );
        let table = parse(&at).unwrap();
        assert_eq!(table.rows[1].fields[1].len(), MAX_CSV_CELL_BYTES);

        let over = format!(
            "id,description\nT0,short\n\"T1\",\"{}\"\n",
            cell(MAX_CSV_CELL_BYTES + 1)
        );
        let err = parse(&over).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::CsvCellTooLarge { line: 3, field: 2, size, .. } if size == MAX_CSV_CELL_BYTES + 1
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "CSV file plan/tasks.csv line 3 column `description`: the cell is 1048577 bytes, \
             over the limit of 1048576 bytes (1 MiB)"
        );

        // A header cell over the limit is named by its position.
        let header = format!("id,{}\n", "h".repeat(MAX_CSV_CELL_BYTES + 1));
        assert_eq!(
            parse(&header).unwrap_err().to_string(),
            "CSV file plan/tasks.csv line 1 field 2: the cell is 1048577 bytes, \
             over the limit of 1048576 bytes (1 MiB)"
        );
    }

    /// The writer cuts a cell over the limit so that what it writes reads
    /// back; a cell at the limit is written whole.
    #[test]
    fn the_writer_cuts_a_cell_over_the_limit_so_the_file_reads_back() {
        let at = "é".repeat(MAX_CSV_CELL_BYTES / 2);
        let over = format!("{at}x");
        let bytes = to_csv_bytes(
            Path::new("x.csv"),
            &["id", "error"],
            &[vec!["T1", at.as_str()], vec!["T2", over.as_str()]],
        )
        .unwrap();
        let table = CsvTable::parse(Path::new("x.csv"), &bytes).unwrap();
        assert_eq!(table.rows[0].fields[1], at);
        let cut = &table.rows[1].fields[1];
        assert!(cut.len() <= MAX_CSV_CELL_BYTES, "{}", cut.len());
        assert!(over.starts_with(cut.split('…').next().unwrap()));
        assert!(cut.ends_with("more bytes)"), "{}", &cut[cut.len() - 40..]);
    }

    proptest! {
        #[test]
        fn any_table_round_trips(
            width in 1usize..5,
            cells in proptest::collection::vec(any::<String>(), 0..40),
        ) {
            let headers: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
            let rows: Vec<Vec<String>> = cells.chunks(width)
                .filter(|c| c.len() == width)
                .map(<[String]>::to_vec)
                .collect();
            let bytes = to_csv_bytes(Path::new("p.csv"), &headers, &rows).unwrap();
            let table = CsvTable::parse(Path::new("p.csv"), &bytes).unwrap();
            prop_assert_eq!(table.headers, headers);
            let back: Vec<Vec<String>> = table.rows.into_iter().map(|r| r.fields).collect();
            prop_assert_eq!(back, rows);
        }
    }
}
