//! The findings ledger's key: a fingerprint that survives a finding moving.
//!
//! In order of preference:
//! 1. the producer's SARIF `partialFingerprints` (with the rule): the
//!    producer knows best what makes its result the same result (our own
//!    `--sarif-out` log carries the key itself, which is taken as it is);
//! 2. dimension, category (the tool's rule), path and the finding's
//!    *context*: its own line and the [`CONTEXT_LINES`]` - 1` lines after it,
//!    each with its whitespace collapsed, plus how many earlier places in the
//!    file have the same context (so two identical spots keep apart). Lines
//!    inserted or removed above the finding change neither its context nor
//!    (unless they repeat it exactly) the count, so the key stays; a
//!    re-indented line keeps it too;
//! 3. without a readable line: dimension, category, path and the title.
//!
//! A findings file fed to a later run after a fix changed the lines it
//! points at gets other keys from the changed file; its findings are found
//! by their [`report_identity`] (the same input bytes, the same id)
//! instead, which the ledger keeps per entry.
//!
//! The lines *after* the finding, not those around it: an insertion just
//! above the finding is the commonest move (an import, a doc comment) and
//! must not change the key. GitHub's code scanning hashes the same way
//! (`primaryLocationLineHash`: the line and what follows).

use orchestrator_core::finding::{Finding, digest_hex};

/// How many lines, starting at the finding's, make its context.
pub const CONTEXT_LINES: usize = 3;

/// A line with its whitespace collapsed to single spaces and trimmed.
pub fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The ledger key of `finding`; `source` is the content of its file as the
/// finding saw it, when readable.
pub fn ledger_key(finding: &Finding, source: Option<&str>) -> String {
    let dimension = finding.dimension.as_deref().unwrap_or("");
    let category = finding.category.as_deref().unwrap_or("");
    let file = finding.file.as_deref().unwrap_or("");
    if let Some(key) = finding
        .partial_fingerprints
        .get(super::sarif::LEDGER_FINGERPRINT)
    {
        return key.clone();
    }
    if !finding.partial_fingerprints.is_empty() {
        let pairs: Vec<String> = finding
            .partial_fingerprints
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut parts: Vec<&[u8]> = vec![b"sarif", category.as_bytes()];
        parts.extend(pairs.iter().map(String::as_bytes));
        return digest_hex(&parts);
    }
    if let (Some(line), Some(text)) = (finding.line, source)
        && let Some((context, occurrence)) = context_at(text, line)
    {
        return digest_hex(&[
            b"context",
            dimension.as_bytes(),
            category.as_bytes(),
            file.as_bytes(),
            context.as_bytes(),
            occurrence.to_string().as_bytes(),
        ]);
    }
    digest_hex(&[
        b"title",
        dimension.as_bytes(),
        category.as_bytes(),
        file.as_bytes(),
        normalise(&finding.title).as_bytes(),
    ])
}

/// The key of the `n`th (from 0) finding of one run with the same
/// [`ledger_key`] (two results of one rule on one line, at different
/// columns): the first keeps the key, the others get their own, in the
/// order the findings come (the tool's fix order: by position).
pub fn nth(key: &str, n: usize) -> String {
    if n == 0 {
        key.to_owned()
    } else {
        digest_hex(&[b"again", key.as_bytes(), n.to_string().as_bytes()])
    }
}

/// The normalised context of 1-based `line` in `text` and how many earlier
/// lines start the same context; `None` past the end of the file.
pub fn context_at(text: &str, line: u32) -> Option<(String, usize)> {
    let lines: Vec<String> = text.lines().map(normalise).collect();
    let at = usize::try_from(line).ok()?.checked_sub(1)?;
    if at >= lines.len() {
        return None;
    }
    let window = |i: usize| &lines[i..(i + CONTEXT_LINES).min(lines.len())];
    let context = window(at);
    let occurrence = (0..at).filter(|&i| window(i) == context).count();
    Some((context.join("\n"), occurrence))
}

/// A digest of the findings inputs of a run: each file's bytes (a folder
/// by its path), in the order given.
pub fn inputs_digest(inputs: &[std::path::PathBuf]) -> String {
    let contents: Vec<Vec<u8>> = inputs
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|_| p.to_string_lossy().as_bytes().to_vec()))
        .collect();
    let chunks: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    digest_hex(&chunks)
}

/// The identity of one report of a finding: the run's inputs (their
/// bytes, [`inputs_digest`]) and the finding's id in them. The same
/// findings file fed to a later run gives the same identity, even after a
/// fix changed the lines it points at (and so the finding's key); a
/// linter's fresh output differs, and is keyed by what the lines hold.
pub fn report_identity(inputs_digest: &str, finding_id: &str) -> String {
    digest_hex(&[b"report", inputs_digest.as_bytes(), finding_id.as_bytes()])
}
