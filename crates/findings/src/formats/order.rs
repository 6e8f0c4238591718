//! The order in which a tool applies its own fixes, so that review-fix,
//! applying one finding at a time, lets the same fix win an overlap.
//!
//! Within one pass over a file every tool skips a fix that overlaps one it
//! already applied (the skipped one is reported again by the next lint run,
//! at its new place), so which of two overlapping fixes wins depends only on
//! the order the fixes are taken in. Each reader gives every finding a
//! [`FixKey`]; [`ParseOutcome::fix_order`](super::ParseOutcome::fix_order)
//! sorts by it:
//!
//! | producer | order within a file | source |
//! |---|---|---|
//! | `cargo fix` / `cargo clippy --fix` (rustfix) | the diagnostics' emitted order, **reversed** among fixes whose ranges overlap or touch (such a cluster goes by its first position; clusters apart from each other cannot take each other's place, so their order is free and is by position, which reads top to bottom) | cargo `src/ops/cargo_fix/mod.rs`, `rustfix_and_fix`: `for suggestion in suggestions.iter().rev()` |
//! | `ruff check --fix` | `redefined-while-unused` (F811) first, then the fix's first edit start, then two rule pairs (D400 before D209, SIM401 before SIM108), then the rule's lint source in `check_path` order (tokens, file path, logical lines, AST, imports, physical lines, noqa), then emitted order | ruff `crates/ruff_linter/src/fix/mod.rs` (`apply_fixes`, `cmp_fix`, a stable sort over `check_path`'s order), `Rule::lint_source` |
//! | `eslint --fix` | the fix range's start, then its end, then emitted order | ESLint `lib/linter/source-code-fixer.js` (`compareMessagesByFixRange`, a stable sort) |
//! | anything else | emitted order | — |
//!
//! ruff's true tie-break, `check_path`'s order, is not in its output; the
//! lint source stands for it (within one source the emitted order decides),
//! which reproduced `ruff check --fix` on the four packages of the research
//! differential where emitted or plain position order did not.

use orchestrator_core::finding::Finding;

/// Where a finding's fix goes in its tool's order; findings sort by it
/// (file first, so only the order within a file matters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FixKey {
    file: String,
    rank: [u64; 4],
    seq: i64,
}

impl FixKey {
    /// Emitted order: the `seq`th finding of its input.
    pub(crate) fn emitted(finding: &Finding, seq: usize) -> Self {
        Self {
            file: fix_file(finding),
            rank: [0; 4],
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
        }
    }

    /// rustfix's order: emitted order reversed (see
    /// [`cluster_overlaps`], which then puts clusters apart in position
    /// order).
    pub(crate) fn rustfix(finding: &Finding, seq: usize) -> Self {
        Self {
            file: fix_file(finding),
            rank: [0; 4],
            seq: -i64::try_from(seq).unwrap_or(i64::MAX),
        }
    }

    /// ESLint's order: the fix's range (UTF-16 offsets), then emitted order.
    pub(crate) fn eslint(finding: &Finding, range: Option<(u64, u64)>, seq: usize) -> Self {
        let (start, end) = range.unwrap_or((u64::MAX, u64::MAX));
        Self {
            file: fix_file(finding),
            rank: [start, end, 0, 0],
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
        }
    }

    /// ruff's order (`cmp_fix`, then the lint source): `code` is the rule
    /// code, `start` the fix's first edit start as (line, column).
    pub(crate) fn ruff(
        finding: &Finding,
        code: &str,
        start: Option<(u32, u32)>,
        seq: usize,
    ) -> Self {
        let (line, column) = start.unwrap_or((u32::MAX, u32::MAX));
        let position = (u64::from(line) << 32) | u64::from(column);
        Self {
            file: fix_file(finding),
            rank: [
                u64::from(code != "F811"),
                position,
                ruff_pair_rank(code),
                ruff_lint_source(code),
            ],
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
        }
    }
}

/// Ranks each finding by the cluster of overlapping or touching fixes it
/// belongs to in its file (the cluster's first position), so that sorting
/// by key keeps the reversed emitted order only where it decides which fix
/// wins (see the module table). `keys` are aligned with `findings`.
pub(crate) fn cluster_overlaps(findings: &[Finding], keys: &mut [FixKey]) {
    type Span = (u64, u64);
    let span = |f: &Finding| -> Option<Span> {
        let at = |line: u32, column: u32| (u64::from(line) << 32) | u64::from(column);
        let edits = f.suggestions.first()?.edits.iter();
        edits.fold(None, |acc: Option<Span>, e| {
            let (s, end) = (
                at(e.start_line, e.start_column),
                at(e.end_line, e.end_column),
            );
            Some(acc.map_or((s, end), |(a, b)| (a.min(s), b.max(end))))
        })
    };
    let mut by_file: std::collections::BTreeMap<&str, Vec<(Span, usize)>> = Default::default();
    for (i, f) in findings.iter().enumerate() {
        if let (Some(s), Some(key)) = (span(f), keys.get(i)) {
            by_file.entry(key.file.as_str()).or_default().push((s, i));
        }
    }
    let mut ranks = Vec::new();
    for (_, mut spans) in by_file {
        spans.sort_unstable();
        let mut cluster: Option<Span> = None;
        for ((start, end), i) in spans {
            cluster = match cluster {
                Some((first, reach)) if start <= reach => Some((first, reach.max(end))),
                _ => Some((start, end)),
            };
            ranks.push((i, cluster.map_or(start, |c| c.0)));
        }
    }
    for (i, rank) in ranks {
        keys[i].rank[0] = rank;
    }
}

/// The file a finding's fix edits first (its own file when it has no fix).
fn fix_file(finding: &Finding) -> String {
    finding
        .suggestions
        .first()
        .and_then(|s| s.edits.first())
        .map(|e| e.file.clone())
        .or_else(|| finding.file.clone())
        .unwrap_or_default()
}

/// `cmp_fix`'s two explicit pairs: the first of each pair sorts before the
/// second when their fixes start at the same place.
fn ruff_pair_rank(code: &str) -> u64 {
    match code {
        "D400" | "SIM401" => 0,
        "D209" | "SIM108" => 2,
        _ => 1,
    }
}

/// The rank of a ruff rule's lint source in `check_path`'s order (ruff
/// 0.17's `Rule::lint_source`, by code); unlisted rules are AST rules.
fn ruff_lint_source(code: &str) -> u64 {
    const TOKENS: &[&str] = &[
        "COM812", "COM818", "COM819", "E301", "E302", "E303", "E304", "E305", "E306", "E701",
        "E702", "E703", "ERA001", "EXE001", "EXE002", "EXE003", "EXE004", "EXE005", "FIX001",
        "FIX002", "FIX003", "FIX004", "ISC001", "ISC002", "PGH003", "PLE2510", "PLE2512",
        "PLE2513", "PLE2514", "PLE2515", "PLR2044", "PYI033", "RUF003", "TD001", "TD002", "TD003",
        "TD004", "TD005", "TD006", "TD007", "UP009", "UP034", "W191", "W391",
    ];
    const FILE_PATH: &[&str] = &["A005", "INP001", "N999"];
    const LOGICAL_LINES: &[&str] = &[
        "E111", "E112", "E113", "E114", "E115", "E116", "E117", "E201", "E202", "E203", "E211",
        "E221", "E222", "E223", "E224", "E225", "E226", "E227", "E228", "E231", "E241", "E242",
        "E251", "E252", "E261", "E262", "E265", "E266", "E271", "E272", "E273", "E274", "E275",
        "E502",
    ];
    const IMPORTS: &[&str] = &["I001", "I002"];
    const PHYSICAL_LINES: &[&str] = &[
        "CPY001", "E101", "E501", "PLE2502", "RUF054", "W291", "W292", "W293", "W505",
    ];
    const NOQA: &[&str] = &["PGH004", "RUF100", "RUF101", "RUF105", "RUF106"];
    const AST: u64 = 3;
    [
        (TOKENS, 0),
        (FILE_PATH, 1),
        (LOGICAL_LINES, 2),
        (IMPORTS, 4),
        (PHYSICAL_LINES, 5),
        (NOQA, 6),
    ]
    .iter()
    .find(|(codes, _)| codes.contains(&code))
    .map_or(AST, |&(_, rank)| rank)
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::finding::Severity;

    fn at(file: &str) -> Finding {
        Finding::new("x", "t", Severity::Low).at(file, Some(1))
    }

    #[test]
    fn ruff_puts_redefinitions_first_then_position_then_lint_source() {
        let f = at("a.py");
        let mut keys = [
            ("I001", FixKey::ruff(&f, "I001", Some((3, 1)), 0)),
            ("F401", FixKey::ruff(&f, "F401", Some((3, 1)), 1)),
            ("W291", FixKey::ruff(&f, "W291", Some((2, 9)), 2)),
            ("F811", FixKey::ruff(&f, "F811", Some((9, 1)), 3)),
            ("SIM108", FixKey::ruff(&f, "SIM108", Some((5, 1)), 4)),
            ("SIM401", FixKey::ruff(&f, "SIM401", Some((5, 1)), 5)),
        ];
        keys.sort_by(|a, b| a.1.cmp(&b.1));
        let order: Vec<&str> = keys.iter().map(|(c, _)| *c).collect();
        // F401 (an AST rule) before I001 (imports) at the same start, as
        // `check_path` collects them.
        assert_eq!(order, ["F811", "W291", "F401", "I001", "SIM401", "SIM108"]);
    }

    fn fixing(line: u32, from: u32, to: u32) -> Finding {
        let mut f = at("a.rs");
        f.suggestions.push(orchestrator_core::finding::Suggestion {
            message: None,
            edits: vec![orchestrator_core::finding::TextEdit {
                file: "a.rs".into(),
                start_line: line,
                start_column: from,
                end_line: line,
                end_column: to,
                byte_range: None,
                original: "x".into(),
                replacement: "y".into(),
            }],
        });
        f
    }

    #[test]
    fn rustfix_reverses_within_a_cluster_of_overlapping_fixes_only() {
        // Emitted: line 9, then line 2, then two overlapping fixes on line 5
        // (the outer one first, as clippy reports nested lifetimes).
        let findings = [
            fixing(9, 1, 4),
            fixing(2, 1, 4),
            fixing(5, 1, 20),
            fixing(5, 8, 12),
        ];
        let mut keys: Vec<FixKey> = findings
            .iter()
            .enumerate()
            .map(|(i, f)| FixKey::rustfix(f, i))
            .collect();
        cluster_overlaps(&findings, &mut keys);
        let mut order: Vec<usize> = (0..4).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        assert_eq!(
            order,
            [1, 3, 2, 0],
            "line 2, the inner fix, the outer, line 9"
        );
    }

    proptest::proptest! {
        /// rustfix's order, as `cluster_overlaps` keeps it: of two fixes
        /// whose ranges overlap, the one emitted later comes first (so it
        /// wins, as in `cargo fix`); of two apart, the one further up does.
        #[test]
        fn rustfix_order_keeps_cargo_fixs_winner(
            spans in proptest::collection::vec((1u32..60, 0u32..6), 1..12)
        ) {
            let findings: Vec<Finding> =
                spans.iter().map(|&(from, len)| fixing(1, from, from + len)).collect();
            let mut keys: Vec<FixKey> = findings
                .iter()
                .enumerate()
                .map(|(i, f)| FixKey::rustfix(f, i))
                .collect();
            cluster_overlaps(&findings, &mut keys);
            let mut order: Vec<usize> = (0..findings.len()).collect();
            order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
            let place = |i: usize| order.iter().position(|&o| o == i).unwrap_or(usize::MAX);
            for i in 0..spans.len() {
                for j in i + 1..spans.len() {
                    let ((a, la), (b, lb)) = (spans[i], spans[j]);
                    let (a_end, b_end) = (a + la, b + lb);
                    if a < b_end && b < a_end {
                        proptest::prop_assert!(place(j) < place(i), "{spans:?}: {order:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn rustfix_reverses_and_eslint_sorts_by_range() {
        let f = at("a.rs");
        assert!(FixKey::rustfix(&f, 5) < FixKey::rustfix(&f, 2));
        let g = at("b.js");
        assert!(FixKey::eslint(&g, Some((4, 9)), 7) < FixKey::eslint(&g, Some((5, 6)), 1));
        assert!(FixKey::eslint(&g, Some((4, 6)), 7) < FixKey::eslint(&g, Some((4, 9)), 1));
        assert!(FixKey::emitted(&g, 1) < FixKey::emitted(&g, 2));
    }
}
