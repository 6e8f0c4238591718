use proptest::prelude::*;

use super::*;
use crate::edit::apply_edits;

/// An edit of `baseline` over bytes `start..end`, as a reader produces it.
fn edit_at(baseline: &str, start: usize, end: usize, replacement: &str) -> TextEdit {
    let (start_line, start_column) = crate::edit::line_column(baseline, start);
    let (end_line, end_column) = crate::edit::line_column(baseline, end);
    TextEdit {
        file: "src/lib.rs".into(),
        start_line,
        start_column,
        end_line,
        end_column,
        byte_range: Some((start, end)),
        original: baseline[start..end].to_owned(),
        replacement: replacement.into(),
    }
}

/// Applies fixes one at a time through a history, as a session does.
fn one_by_one(baseline: &str, fixes: &[Vec<TextEdit>]) -> Result<String, EditError> {
    let mut text = baseline.to_owned();
    let mut history = EditHistory::new();
    for fix in fixes {
        let refs: Vec<&TextEdit> = fix.iter().collect();
        let out = apply_mapped(&text, &history, &refs)?;
        history.record(&out.applied);
        text = out.text;
        history.check("src/lib.rs", &text)?;
    }
    Ok(text)
}

const DOCS: &str = "\
/// Doubles.
/// ```
/// assert_eq!(f(1), 2);
/// ```
pub fn f(x: u32) -> u32 {
    x * 2
}

/// Triples.
/// ```
/// assert_eq!(g(1), 3);
/// ```
pub fn g(x: u32) -> u32 {
    x * 3
}
";

#[test]
fn insertions_land_where_they_were_recorded_after_earlier_insertions() {
    let f_at = DOCS.find("pub fn f").unwrap();
    let g_at = DOCS.find("pub fn g").unwrap();
    let must_f = edit_at(DOCS, f_at, f_at, "#[must_use]\n");
    let must_g = edit_at(DOCS, g_at, g_at, "#[must_use]\n");
    let want = DOCS
        .replace("pub fn f", "#[must_use]\npub fn f")
        .replace("pub fn g", "#[must_use]\npub fn g");
    for order in [
        vec![vec![must_f.clone()], vec![must_g.clone()]],
        vec![vec![must_g.clone()], vec![must_f.clone()]],
    ] {
        assert_eq!(one_by_one(DOCS, &order).unwrap(), want);
    }
    // What placing by the recorded line gives after the first insertion: the
    // attribute lands inside the doc comment, above its closing fence.
    let after_f = apply_edits(DOCS, &[&must_f]).unwrap();
    let by_line = apply_edits(&after_f, &[&must_g]).unwrap();
    assert!(
        by_line.contains("/// assert_eq!(g(1), 3);\n#[must_use]\n/// ```"),
        "{by_line}"
    );
}

#[test]
fn a_multi_part_fix_applies_all_parts_after_an_earlier_fix() {
    let text = "let v = |(ref a, ref b)| a + b;\nlet w = x.len() == 0;\n";
    let len_at = text.find("x.len() == 0").unwrap();
    let is_empty = edit_at(text, len_at, len_at + "x.len() == 0".len(), "x.is_empty()");
    let a_at = text.find("ref a").unwrap();
    let b_at = text.find("ref b").unwrap();
    let refs = vec![
        edit_at(text, a_at, a_at + 4, ""),
        edit_at(text, b_at, b_at + 4, ""),
    ];
    let out = one_by_one(text, &[vec![is_empty], refs]).unwrap();
    assert_eq!(out, "let v = |(a, b)| a + b;\nlet w = x.is_empty();\n");
}

#[test]
fn identical_edits_collapse_within_a_fix_and_across_fixes() {
    let text = "if a {\n    if b {\n        c();\n    }\n}\n";
    let at = text.find("if b").unwrap();
    let e = edit_at(text, at, at + 4, "if a && b");
    // The same edit twice in one suggestion, as clippy sometimes emits it.
    let out = one_by_one(text, &[vec![e.clone(), e.clone()]]).unwrap();
    assert_eq!(out, text.replacen("if b", "if a && b", 1));
    // And a later fix carrying the same edit again changes nothing more.
    let again = one_by_one(text, &[vec![e.clone()], vec![e.clone()]]).unwrap();
    assert_eq!(again, out);
    let mut history = EditHistory::new();
    let first = apply_mapped(text, &history, &[&e]).unwrap();
    history.record(&first.applied);
    let second = apply_mapped(&first.text, &history, &[&e]).unwrap();
    assert!(second.applied.is_empty());
    assert_eq!(second.text, first.text);
}

#[test]
fn overlapping_different_edits_are_refused_and_nothing_changes() {
    let text = "let a = b == true;\n";
    let whole = edit_at(text, 8, 17, "b");
    let part = edit_at(text, 13, 17, "false");
    // Within one fix.
    assert!(matches!(
        apply_mapped(text, &EditHistory::new(), &[&whole, &part]),
        Err(EditError::Overlap { .. })
    ));
    // Across fixes: the second conflicts with the first.
    let mut history = EditHistory::new();
    let first = apply_mapped(text, &history, &[&whole]).unwrap();
    history.record(&first.applied);
    let err = apply_mapped(&first.text, &history, &[&part]).unwrap_err();
    assert!(
        matches!(
            err,
            EditError::Conflict {
                start: 8,
                end: 17,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("conflicts with an earlier fix"));
}

#[test]
fn a_file_changed_outside_the_history_is_refused() {
    let text = "fn a() {}\nfn b() { return 1; }\n";
    let at = text.find("return 1;").unwrap();
    let e = edit_at(text, at, at + 9, "1");
    let first = edit_at(text, 0, 0, "// one\n");
    let mut history = EditHistory::new();
    let out = apply_mapped(text, &history, &[&first]).unwrap();
    history.record(&out.applied);
    // Someone else edited the file: the recorded insertion is gone.
    let edited = text.to_owned();
    assert!(matches!(
        apply_mapped(&edited, &history, &[&e]),
        Err(EditError::HistoryMismatch { offset: 0, .. })
    ));
    // The history holds, but the replaced text is not where it maps.
    let changed = out.text.replace("return 1;", "return 2;");
    assert!(matches!(
        apply_mapped(&changed, &history, &[&e]),
        Err(EditError::Moved { .. })
    ));
    let mut blind = e.clone();
    blind.byte_range = None;
    assert!(matches!(
        apply_mapped(&out.text, &history, &[&blind]),
        Err(EditError::NoByteRange { .. })
    ));
}

#[test]
fn insertion_and_replacement_at_one_point_keep_the_insertion_first() {
    let text = "pub fn f() {}\n";
    let ins = edit_at(text, 0, 0, "#[inline]\n");
    let rep = edit_at(text, 0, 3, "pub(crate)");
    let want = "#[inline]\npub(crate) fn f() {}\n";
    assert_eq!(
        one_by_one(text, &[vec![ins.clone()], vec![rep.clone()]]).unwrap(),
        want
    );
    assert_eq!(
        one_by_one(text, &[vec![rep.clone()], vec![ins.clone()]]).unwrap(),
        want
    );
    assert_eq!(one_by_one(text, &[vec![rep, ins]]).unwrap(), want);
}

/// Applies non-overlapping edits all at once to `baseline`, independently
/// of the code under test: walk the text and splice.
fn all_at_once(baseline: &str, edits: &[TextEdit]) -> String {
    let mut sorted: Vec<&TextEdit> = edits.iter().collect();
    sorted.sort_by_key(|e| e.byte_range.unwrap());
    let mut out = String::new();
    let mut at = 0;
    for e in sorted {
        let (s, t) = e.byte_range.unwrap();
        out.push_str(&baseline[at..s]);
        out.push_str(&e.replacement);
        at = t;
    }
    out.push_str(&baseline[at..]);
    out
}

/// A baseline text and non-overlapping edits on it, grouped into fixes.
fn scenario() -> impl Strategy<Value = (String, Vec<Vec<TextEdit>>)> {
    let text = proptest::collection::vec(
        prop::sample::select(vec!['a', 'b', ' ', '\n', 'é', ';']),
        0..40,
    )
    .prop_map(|cs| cs.into_iter().collect::<String>());
    text.prop_flat_map(|text| {
        let chars = text.chars().count();
        // Per char boundary: 0 nothing, 1 insertion, 2 replacement of 1-3
        // chars, 3 insertion then replacement.
        let ops = proptest::collection::vec(
            (0u8..4, 1usize..4, "[xy\n]{0,3}", "[xyz]{0,2}", 0usize..4),
            chars + 1,
        );
        (Just(text), ops)
    })
    .prop_map(|(text, ops)| {
        let bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()))
            .collect();
        let mut fixes: Vec<Vec<TextEdit>> = vec![Vec::new(); 4];
        let mut i = 0;
        while i < bounds.len() {
            let (kind, len, ins, rep, fix) = &ops[i];
            let at = bounds[i];
            if matches!(kind, 1 | 3) {
                fixes[*fix].push(edit_at(&text, at, at, ins));
            }
            if matches!(kind, 2 | 3) && i + len < bounds.len() {
                let end = bounds[i + len];
                fixes[(*fix + 1) % 4].push(edit_at(&text, at, end, rep));
                i += len;
                continue;
            }
            i += 1;
        }
        fixes.retain(|f| !f.is_empty());
        (text, fixes)
    })
}

proptest! {
    /// Fixes applied one by one, in any order, through the history give the
    /// text of applying all their edits at once to the baseline.
    #[test]
    fn one_by_one_in_any_order_equals_all_at_once(
        (baseline, fixes) in scenario(),
        order in proptest::collection::vec(any::<prop::sample::Index>(), 8),
    ) {
        let all: Vec<TextEdit> = fixes.iter().flatten().cloned().collect();
        let want = all_at_once(&baseline, &all);
        let mut shuffled = fixes.clone();
        for (i, pick) in order.iter().enumerate() {
            if shuffled.len() > 1 {
                let n = shuffled.len();
                shuffled.swap(i % n, pick.index(n));
            }
        }
        prop_assert_eq!(one_by_one(&baseline, &shuffled).unwrap(), want.clone());
        // All fixes as one also agrees.
        prop_assert_eq!(one_by_one(&baseline, &[all]).unwrap(), want);
    }
}
