use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::similarity::STOP_WORDS;
use super::*;
use crate::finding::Severity;

fn finding(id: &str, file: Option<&str>, dim: Option<&str>, sev: Severity, text: &str) -> Finding {
    let mut f = Finding::new(id, format!("title of {id}"), sev).with_description(text);
    f.file = file.map(str::to_owned);
    f.dimension = dim.map(str::to_owned);
    f.refresh_fingerprint();
    f
}

/// Clusters of the given texts (one group), as lists of ids.
fn clusters_of(texts: &[(&str, &str)]) -> Vec<Vec<String>> {
    let findings: Vec<Finding> = texts
        .iter()
        .map(|(id, text)| finding(id, Some("a.rs"), Some("quality"), Severity::Low, text))
        .collect();
    let groups = cluster_findings(&findings, DEFAULT_SIMILARITY_THRESHOLD);
    assert_eq!(groups.len(), 1);
    groups[0]
        .clusters
        .iter()
        .map(|c| c.iter().map(|&i| findings[i].id.0.clone()).collect())
        .collect()
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn stop_words_are_sorted_for_binary_search() {
    assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    assert!(STOP_WORDS.iter().all(|w| w.len() <= 4));
    for w in STOP_WORDS {
        assert!(similarity::is_stop_word(w), "{w}");
    }
    for w in ["", "ab", "thee", "th", "tho", "with1", "i", "ins"] {
        assert!(!similarity::is_stop_word(w), "{w}");
    }
}

#[test]
fn near_duplicates_cluster_and_unrelated_texts_do_not() {
    let clusters = clusters_of(&[
        (
            "A",
            "User input is concatenated into the SQL query in findUser, allowing SQL injection.",
        ),
        (
            "B",
            "User input is concatenated into the SQL query in findOrder, allowing SQL injection.",
        ),
        (
            "C",
            "The cache never evicts entries, so memory grows without bound under load.",
        ),
        (
            "D",
            "user INPUT is concatenated into the sql query in findUser -- allowing SQL injection!",
        ),
        ("E", "Rename the variable tmp2 to something meaningful."),
    ]);
    assert_eq!(
        clusters,
        vec![ids(&["A", "B", "D"]), ids(&["C"]), ids(&["E"])]
    );
}

#[test]
fn recommendations_and_category_count_towards_similarity() {
    let mk = |id: &str, desc: &str, rec: &str, cat: &str| {
        finding(id, Some("a.rs"), None, Severity::Low, desc)
            .with_recommendation(rec)
            .with_category(cat)
    };
    let findings = vec![
        mk(
            "A",
            "Loop allocates",
            "Hoist the vector allocation out of the hot loop",
            "alloc-in-loop",
        ),
        mk(
            "B",
            "Allocation",
            "Hoist the vector allocation out of the hot loop",
            "alloc-in-loop",
        ),
        mk(
            "C",
            "Loop allocates",
            "Add a doc comment to the public function",
            "missing-docs",
        ),
    ];
    let groups = cluster_findings(&findings, DEFAULT_SIMILARITY_THRESHOLD);
    assert_eq!(groups[0].clusters, vec![vec![0, 1], vec![2]]);
}

#[test]
fn title_stands_in_for_a_blank_description() {
    let a = Finding::new("A", "Unused import std::fmt", Severity::Low);
    let b = Finding::new("B", "Unused import std::fmt", Severity::Low);
    let groups = cluster_findings(&[a, b], DEFAULT_SIMILARITY_THRESHOLD);
    assert_eq!(groups[0].clusters, vec![vec![0, 1]]);
}

#[test]
fn empty_texts_never_cluster() {
    let findings = vec![
        finding("A", None, None, Severity::Low, "--"),
        finding("B", None, None, Severity::Low, "the of a"),
    ];
    let vectors = tfidf_vectors(&findings.iter().collect::<Vec<_>>());
    assert!(vectors.iter().all(SparseVector::is_empty));
    let groups = cluster_findings(&findings, DEFAULT_SIMILARITY_THRESHOLD);
    assert_eq!(groups[0].clusters, vec![vec![0], vec![1]]);
}

#[test]
fn vectors_are_normalised_and_identical_texts_have_similarity_one() {
    let findings = [
        finding("A", None, None, Severity::Low, "Ünïcode Straße straße 42"),
        finding("B", None, None, Severity::Low, "Ünïcode Straße straße 42"),
        finding("C", None, None, Severity::Low, "something else"),
    ];
    let vectors = tfidf_vectors(&findings.iter().collect::<Vec<_>>());
    // "ünïcode", "straße" (twice), "42".
    assert_eq!(vectors[0].entries().len(), 3);
    for v in &vectors {
        assert!((v.dot(v) - 1.0).abs() < 1e-12);
    }
    assert!((vectors[0].dot(&vectors[1]) - 1.0).abs() < 1e-12);
    assert_eq!(vectors[0].dot(&vectors[2]), 0.0);
}

#[test]
fn threshold_extremes() {
    let v = tfidf_vectors(&[
        &finding("A", None, None, Severity::Low, "alpha beta"),
        &finding("B", None, None, Severity::Low, "gamma delta"),
    ]);
    let refs: Vec<&SparseVector> = v.iter().collect();
    assert_eq!(cluster_group(&refs, 0.0), vec![vec![0, 1]]);
    assert_eq!(cluster_group(&refs, f64::NAN), vec![vec![0], vec![1]]);
    assert_eq!(cluster_group(&[], 0.7), Vec::<Vec<usize>>::new());
}

#[test]
fn finding_joins_its_most_similar_seed() {
    // C is similar to both seeds A and B but more to B.
    let a = "alpha beta gamma delta epsilon zeta";
    let b = "theta iota kappa lambda alpha beta";
    let c = "theta iota kappa lambda alpha beta gamma";
    let v = tfidf_vectors(&[
        &finding("A", None, None, Severity::Low, a),
        &finding("B", None, None, Severity::Low, b),
        &finding("C", None, None, Severity::Low, c),
    ]);
    let refs: Vec<&SparseVector> = v.iter().collect();
    let (ac, bc) = (v[2].dot(&v[0]), v[2].dot(&v[1]));
    assert!(ac > 0.3 && bc > ac, "{ac} {bc}");
    assert_eq!(cluster_group(&refs, ac - 0.01), vec![vec![0], vec![1, 2]]);
}

#[test]
fn batch_config_validation() {
    assert_eq!(BatchConfig::default().validate(), Ok(()));
    let bad = |batch_size, similarity_threshold| {
        BatchConfig {
            batch_size,
            similarity_threshold,
        }
        .validate()
        .map_err(|e| e.to_string())
    };
    assert_eq!(
        bad(0, 0.7),
        Err("invalid batch size 0: a batch holds at least one finding".to_owned())
    );
    assert_eq!(
        bad(5, 0.0),
        Err(
            "invalid similarity threshold 0: expected a number greater than 0 and at most 1"
                .to_owned()
        )
    );
    assert!(bad(5, f64::NAN).is_err());
    assert!(bad(5, 1.5).is_err());
    assert_eq!(bad(1, 1.0), Ok(()));
}

#[test]
fn packing_keeps_clusters_whole_and_chunks_oversized_ones() {
    // Clusters of sizes 3, 3, 1, 7 with batch size 4.
    let clusters = vec![
        vec![0, 1, 2],
        vec![3, 4, 5],
        vec![6],
        vec![7, 8, 9, 10, 11, 12, 13],
    ];
    let batches = pack::pack_group(&clusters, |_| false, 4);
    assert_eq!(
        batches,
        vec![
            vec![0, 1, 2, 6],
            vec![3, 4, 5],
            vec![7, 8, 9, 10],
            vec![11, 12, 13],
        ]
    );
}

#[test]
fn packing_spreads_high_findings() {
    // Ten singletons, the first four high: two batches of five, two highs each.
    let clusters: Vec<Vec<usize>> = (0..10).map(|i| vec![i]).collect();
    let batches = pack::pack_group(&clusters, |i| i < 4, 5);
    // Highs alternate; the lows then fill the batches best-fit.
    assert_eq!(batches, vec![vec![0, 2, 4, 5, 6], vec![1, 3, 7, 8, 9]]);
}

#[test]
fn packing_opens_a_batch_only_when_clusters_do_not_fit() {
    // 3 + 3 + 3 with batch size 5: nine findings, but no two clusters fit together.
    let clusters = vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
    let batches = pack::pack_group(&clusters, |_| false, 5);
    assert_eq!(batches, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
}

// ---- property tests ----

const WORDS: [&str; 12] = [
    "query",
    "sql",
    "injection",
    "cache",
    "lock",
    "unwrap",
    "panic",
    "alloc",
    "loop",
    "docs",
    "token",
    "session",
];

fn arb_findings() -> impl Strategy<Value = Vec<Finding>> {
    let one = (
        prop::option::of(0..4usize),
        prop::option::of(0..3usize),
        0..4usize,
        prop::collection::vec(0..WORDS.len(), 0..7),
        prop::collection::vec(0..WORDS.len(), 0..4),
    );
    prop::collection::vec(one, 0..60).prop_map(|rows| {
        rows.into_iter()
            .enumerate()
            .map(|(i, (file, dim, sev, desc, rec))| {
                let text: Vec<&str> = desc.iter().map(|&w| WORDS[w]).collect();
                let mut f = finding(
                    &format!("F{i:03}"),
                    file.map(|n| ["a.rs", "b.rs", "c.rs", "d.rs"][n]),
                    dim.map(|n| ["security", "quality", "performance"][n]),
                    Severity::ALL[sev],
                    &text.join(" "),
                );
                if !rec.is_empty() {
                    let rec: Vec<&str> = rec.iter().map(|&w| WORDS[w]).collect();
                    f = f.with_recommendation(rec.join(" "));
                }
                f
            })
            .collect()
    })
}

fn arb_input() -> impl Strategy<Value = (Vec<Finding>, Vec<Finding>, usize)> {
    (arb_findings(), 1..7usize).prop_flat_map(|(findings, batch_size)| {
        let shuffled = Just(findings.clone()).prop_shuffle();
        (Just(findings), shuffled, Just(batch_size))
    })
}

/// Straightforward leader clustering: compare with every seed.
fn reference_clusters(vectors: &[&SparseVector], threshold: f64) -> Vec<Vec<usize>> {
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for (pos, v) in vectors.iter().enumerate() {
        let mut best: Option<(f64, usize)> = None;
        for (c, members) in clusters.iter().enumerate() {
            let sim = v.dot(vectors[members[0]]);
            if sim >= threshold && best.is_none_or(|(b, _)| sim > b) {
                best = Some((sim, c));
            }
        }
        match best {
            Some((_, c)) => clusters[c].push(pos),
            None => clusters.push(vec![pos]),
        }
    }
    clusters
}

proptest! {
    #[test]
    fn batches_partition_the_input_and_respect_limits((findings, _, batch_size) in arb_input()) {
        let config = BatchConfig { batch_size, ..BatchConfig::default() };
        let batches = batch_findings(&findings, &config);
        let by_id: HashMap<&str, &Finding> = findings.iter().map(|f| (f.id.as_str(), f)).collect();

        // Every finding in exactly one batch.
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for b in &batches {
            for id in &b.findings {
                *seen.entry(id.as_str()).or_default() += 1;
            }
        }
        prop_assert_eq!(seen.len(), findings.len());
        prop_assert!(seen.values().all(|&n| n == 1));

        for (i, b) in batches.iter().enumerate() {
            prop_assert_eq!(b.batch_id as usize, i + 1);
            prop_assert!(!b.findings.is_empty() && b.findings.len() <= batch_size);
            // No batch mixes groups.
            for id in &b.findings {
                let f = by_id[id.as_str()];
                prop_assert_eq!(f.file_or_unknown(), b.primary_file.as_str());
                prop_assert_eq!(f.dimension_or_general(), b.primary_dimension.as_str());
            }
        }
    }

    #[test]
    fn batching_is_order_independent((findings, shuffled, batch_size) in arb_input()) {
        let config = BatchConfig { batch_size, ..BatchConfig::default() };
        prop_assert_eq!(batch_findings(&findings, &config), batch_findings(&shuffled, &config));
    }

    #[test]
    fn clusters_stay_together_unless_oversized((findings, _, batch_size) in arb_input()) {
        let config = BatchConfig { batch_size, ..BatchConfig::default() };
        let batches = batch_findings(&findings, &config);
        let batch_of: HashMap<&str, u32> = batches
            .iter()
            .flat_map(|b| b.findings.iter().map(move |id| (id.as_str(), b.batch_id)))
            .collect();
        for group in cluster_findings(&findings, config.similarity_threshold) {
            for cluster in &group.clusters {
                for chunk in cluster.chunks(batch_size) {
                    let first = batch_of[findings[chunk[0]].id.as_str()];
                    prop_assert!(chunk.iter().all(|&i| batch_of[findings[i].id.as_str()] == first));
                }
            }
        }
    }

    #[test]
    fn indexed_clustering_matches_the_all_pairs_reference(
        (findings, _, _) in arb_input(),
        threshold in prop::sample::select(vec![0.3, 0.5, 0.7, 0.9, 1.0]),
    ) {
        let refs: Vec<&Finding> = findings.iter().collect();
        let vectors = tfidf_vectors(&refs);
        let vrefs: Vec<&SparseVector> = vectors.iter().collect();
        let expected = reference_clusters(&vrefs, threshold);
        prop_assert_eq!(&cluster_group(&vrefs, threshold), &expected);
        // Again with the index from the first seed on.
        let mut clusterer = similarity::Clusterer::with_direct_compare_seeds(0);
        let mut out = Vec::new();
        clusterer.cluster(&vrefs, threshold, &mut out);
        prop_assert_eq!(&out, &expected);
    }

    #[test]
    fn singletons_spread_high_findings_evenly(
        highs in prop::collection::vec(any::<bool>(), 1..40),
        batch_size in 1..7usize,
    ) {
        let clusters: Vec<Vec<usize>> = (0..highs.len()).map(|i| vec![i]).collect();
        let batches = pack::pack_group(&clusters, |i| highs[i], batch_size);
        prop_assert_eq!(batches.len(), highs.len().div_ceil(batch_size));
        let counts: Vec<usize> =
            batches.iter().map(|b| b.iter().filter(|&&i| highs[i]).count()).collect();
        let (min, max) = (counts.iter().min().copied(), counts.iter().max().copied());
        prop_assert!(max.unwrap_or(0) - min.unwrap_or(0) <= 1, "{:?}", counts);
    }
}
