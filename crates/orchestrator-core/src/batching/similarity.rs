//! TF-IDF vectors and greedy leader clustering with an inverted index.
//!
//! # Vectors
//!
//! A finding's *similarity text* is its description (its title when the
//! description is blank), each of its recommendations, and its category. The
//! text is tokenised into runs of alphanumeric characters, lowercased; a short
//! list of English stop words ([`STOP_WORDS`]) is dropped. A term's weight in a
//! document is `(1 + ln tf) · idf` with the smoothed
//! `idf = ln((1 + N) / (1 + df)) + 1`, where `N` is the number of findings
//! given to [`tfidf_vectors`] and `df` the number of them containing the term
//! (so a term present everywhere still counts, and two near-identical texts in
//! a two-finding input are still similar). Vectors are sparse, sorted by term
//! id and L2-normalised, so cosine similarity is a plain dot product. A text
//! with no term gives the empty vector, whose similarity to anything is 0.
//!
//! # Clustering rule
//!
//! [`cluster_group`] visits the vectors in the order given. Each one is
//! compared with the *seed* (first member) of every cluster created so far; it
//! joins the cluster whose seed is most similar, provided that similarity is
//! at least the threshold (ties go to the earliest cluster); otherwise it
//! starts a new cluster and becomes its seed. Seeds never change, so the
//! result depends only on the order of the input. A threshold `<= 0` puts
//! everything in one cluster; a NaN threshold matches nothing.
//!
//! Similarities are computed by [`SparseVector::dot`]: a merge over the two
//! term lists in ascending term id, summing `a · b` for each shared term in
//! that order. Any reference implementation that sums in the same order gets
//! bit-identical similarities, hence identical clusters.
//!
//! # Why it is fast
//!
//! Only seeds that can reach the threshold are compared. Seeds are kept in an
//! inverted index (term → clusters whose seed contains it). For a query vector
//! `q`, order its terms by decreasing weight and take the shortest prefix `P`
//! such that the norm of the remaining terms is below the threshold: a seed
//! `s` sharing no term of `P` has `q · s <= ‖q restricted to the rest‖ · ‖s‖ <
//! threshold` (Cauchy–Schwarz, `‖s‖ = 1`), so only seeds found through the
//! postings of `P`'s terms are candidates (a safety margin of
//! [`PREFIX_MARGIN`] absorbs rounding). Frequent, low-weight terms fall outside
//! the prefix, which keeps the candidate lists short. While a group has at
//! most [`DIRECT_COMPARE_SEEDS`] seeds, every seed is a candidate instead
//! (cheaper for the many small groups, and the same answer).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::finding::Finding;

/// Words dropped by the tokeniser: they carry no meaning about a finding's
/// root cause but would make unrelated texts look alike. Sorted, so that
/// membership is a binary search.
pub const STOP_WORDS: [&str; 24] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "in", "is", "it", "its",
    "not", "of", "on", "or", "that", "the", "this", "to", "with",
];

/// A word of at most 4 bytes packed big-endian into a `u32`, zero-padded;
/// the packing preserves the lexicographic order of such words.
const fn pack_short(word: &[u8]) -> u32 {
    let mut code = 0u32;
    let mut i = 0;
    while i < 4 {
        code <<= 8;
        if i < word.len() {
            code |= word[i] as u32;
        }
        i += 1;
    }
    code
}

/// [`STOP_WORDS`] packed with [`pack_short`] (sorted, as the words are).
const STOP_CODES: [u32; STOP_WORDS.len()] = {
    let mut codes = [0u32; STOP_WORDS.len()];
    let mut i = 0;
    while i < STOP_WORDS.len() {
        codes[i] = pack_short(STOP_WORDS[i].as_bytes());
        i += 1;
    }
    codes
};

/// Whether `word` (lowercase) is in [`STOP_WORDS`]. Every stop word is at
/// most 4 bytes long, so longer tokens skip the search, and shorter ones are
/// searched as integers.
pub(crate) fn is_stop_word(word: &str) -> bool {
    word.len() <= 4
        && STOP_CODES
            .binary_search(&pack_short(word.as_bytes()))
            .is_ok()
}

/// Safety margin on the prefix bound of the candidate search: the prefix is
/// extended until the norm of the remaining terms is below
/// `threshold - PREFIX_MARGIN`, far more than any rounding error.
pub const PREFIX_MARGIN: f64 = 1e-9;

/// Up to this many seeds in a group, a finding is compared with every seed
/// directly instead of going through the index (same result, less overhead
/// for the many small groups of a typical export).
pub const DIRECT_COMPARE_SEEDS: usize = 8;

/// A sparse, L2-normalised term-weight vector, sorted by term id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseVector {
    entries: Vec<(u32, f64)>,
}

impl SparseVector {
    /// `(term id, weight)` pairs in ascending term id.
    pub fn entries(&self) -> &[(u32, f64)] {
        &self.entries
    }

    /// Whether the vector has no term (its text had no word).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Dot product (the cosine similarity, as both vectors are normalised):
    /// shared terms' products summed in ascending term id.
    pub fn dot(&self, other: &SparseVector) -> f64 {
        let (a, b) = (&self.entries, &other.entries);
        let (mut i, mut j) = (0, 0);
        let mut sum = 0.0;
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    sum += a[i].1 * b[j].1;
                    i += 1;
                    j += 1;
                }
            }
        }
        sum
    }
}

/// Calls `f` with each piece of a finding's similarity text: the description
/// (or the title when the description is blank), each recommendation, and the
/// category.
pub fn for_each_similarity_text(finding: &Finding, mut f: impl FnMut(&str)) {
    if finding.description.trim().is_empty() {
        f(&finding.title);
    } else {
        f(&finding.description);
    }
    for r in &finding.recommendations {
        f(r);
    }
    if let Some(c) = &finding.category {
        f(c);
    }
}

/// Calls `f` with each token of `text`: maximal runs of alphanumeric
/// characters, lowercased, stop words removed. `buf` is scratch space.
fn for_each_token(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    if text.is_ascii() {
        // Fast path, same result: for ASCII, `char::is_alphanumeric` is
        // `u8::is_ascii_alphanumeric`.
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            if start == i {
                break;
            }
            buf.clear();
            buf.push_str(&text[start..i]);
            buf.make_ascii_lowercase();
            if !is_stop_word(buf) {
                f(buf);
            }
        }
        return;
    }
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        buf.clear();
        if word.is_ascii() {
            buf.push_str(word);
            buf.make_ascii_lowercase();
        } else {
            buf.extend(word.chars().flat_map(char::to_lowercase));
        }
        if !is_stop_word(buf) {
            f(buf);
        }
    }
}

/// A small multiplicative hasher for the vocabulary map (term lookups are
/// the hot loop of vectorisation; DoS resistance is not needed here).
#[derive(Default)]
struct TermHasher(u64);

impl Hasher for TermHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type TermMap = HashMap<Box<str>, u32, BuildHasherDefault<TermHasher>>;

/// Computes the TF-IDF vector of each finding, in the order given. Document
/// frequencies are counted over exactly these findings. Term ids are assigned
/// in order of first appearance, so the same findings in the same order give
/// the same vectors, bit for bit.
pub fn tfidf_vectors(findings: &[&Finding]) -> Vec<SparseVector> {
    let mut vocab = TermMap::default();
    let mut df: Vec<u32> = Vec::new();
    let mut buf = String::new();
    let mut terms: Vec<u32> = Vec::new();
    let mut vectors = Vec::with_capacity(findings.len());

    // Pass 1: term counts per finding, document frequencies.
    for finding in findings {
        terms.clear();
        for_each_similarity_text(finding, |text| {
            for_each_token(text, &mut buf, |token| {
                let id = match vocab.get(token) {
                    Some(&id) => id,
                    None => {
                        let id = u32::try_from(vocab.len()).unwrap_or(u32::MAX);
                        vocab.insert(token.into(), id);
                        df.push(0);
                        id
                    }
                };
                terms.push(id);
            });
        });
        terms.sort_unstable();
        let mut entries: Vec<(u32, f64)> = Vec::new();
        for &t in &terms {
            match entries.last_mut() {
                Some((last, count)) if *last == t => *count += 1.0,
                _ => entries.push((t, 1.0)),
            }
        }
        for &(t, _) in &entries {
            df[t as usize] += 1;
        }
        vectors.push(SparseVector { entries });
    }

    // Pass 2: weights and normalisation.
    let n = findings.len() as f64;
    let idf: Vec<f64> = df
        .iter()
        .map(|&d| ((1.0 + n) / (1.0 + f64::from(d))).ln() + 1.0)
        .collect();
    for v in &mut vectors {
        let mut norm2 = 0.0;
        for (t, w) in &mut v.entries {
            *w = (1.0 + w.ln()) * idf[*t as usize];
            norm2 += *w * *w;
        }
        let norm = norm2.sqrt();
        if norm > 0.0 {
            for (_, w) in &mut v.entries {
                *w /= norm;
            }
        }
    }
    vectors
}

/// Clusters vectors with the greedy leader rule described in the module
/// docs. Returns the clusters in order of creation, each a list of positions
/// into `vectors` in ascending order (its first entry is the seed).
pub fn cluster_group(vectors: &[&SparseVector], threshold: f64) -> Vec<Vec<usize>> {
    let mut clusterer = Clusterer::default();
    let mut out = Vec::new();
    clusterer.cluster(vectors, threshold, &mut out);
    out
}

/// Reusable scratch space for [`cluster_group`], so that clustering many
/// small groups does not allocate an index per group.
#[derive(Debug)]
pub(crate) struct Clusterer {
    /// Up to this many seeds, compare with all of them (see
    /// [`DIRECT_COMPARE_SEEDS`]).
    direct_compare_seeds: usize,
    /// term id → clusters whose seed contains the term (ascending).
    postings: Vec<Vec<u32>>,
    /// Terms with a non-empty postings list, to clear between groups.
    touched: Vec<u32>,
    /// Per cluster, the last query (1-based) that listed it as a candidate.
    stamp: Vec<u32>,
    candidates: Vec<u32>,
    by_weight: Vec<(u32, f64)>,
}

impl Default for Clusterer {
    fn default() -> Self {
        Self {
            direct_compare_seeds: DIRECT_COMPARE_SEEDS,
            postings: Vec::new(),
            touched: Vec::new(),
            stamp: Vec::new(),
            candidates: Vec::new(),
            by_weight: Vec::new(),
        }
    }
}

impl Clusterer {
    /// A clusterer that uses the index once a group has more than
    /// `direct_compare_seeds` seeds (tests pass 0 to exercise the index).
    #[cfg(test)]
    pub(crate) fn with_direct_compare_seeds(direct_compare_seeds: usize) -> Self {
        Self {
            direct_compare_seeds,
            ..Self::default()
        }
    }

    /// Clusters `vectors` into `out` (cleared first).
    pub(crate) fn cluster(
        &mut self,
        vectors: &[&SparseVector],
        threshold: f64,
        out: &mut Vec<Vec<usize>>,
    ) {
        out.clear();
        if vectors.is_empty() {
            return;
        }
        if threshold <= 0.0 {
            out.push((0..vectors.len()).collect());
            return;
        }
        // Position of each cluster's seed.
        let mut seeds: Vec<usize> = Vec::new();
        self.stamp.clear();
        for (pos, v) in vectors.iter().enumerate() {
            let best = if v.is_empty() {
                None
            } else {
                self.find_candidates(v, seeds.len(), pos, threshold);
                self.best_candidate(v, vectors, &seeds, threshold)
            };
            match best {
                Some(c) => out[c].push(pos),
                None => {
                    self.index_seed(v, seeds.len());
                    seeds.push(pos);
                    out.push(vec![pos]);
                }
            }
        }
        for &t in &self.touched {
            self.postings[t as usize].clear();
        }
        self.touched.clear();
    }

    /// Fills `candidates` with the clusters whose seed may reach the
    /// threshold with `v` (query number `pos`).
    fn find_candidates(&mut self, v: &SparseVector, seeds: usize, pos: usize, threshold: f64) {
        self.candidates.clear();
        if seeds <= self.direct_compare_seeds {
            self.candidates
                .extend(0..u32::try_from(seeds).unwrap_or(u32::MAX));
            return;
        }
        let query = u32::try_from(pos + 1).unwrap_or(u32::MAX);
        let cutoff = threshold - PREFIX_MARGIN;
        self.by_weight.clear();
        self.by_weight.extend_from_slice(v.entries());
        self.by_weight
            .sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut rest: f64 = self.by_weight.iter().map(|(_, w)| w * w).sum();
        for &(term, w) in &self.by_weight {
            // The remaining terms alone cannot reach the threshold.
            if rest.sqrt() < cutoff {
                break;
            }
            if let Some(list) = self.postings.get(term as usize) {
                for &c in list {
                    let seen = &mut self.stamp[c as usize];
                    if *seen != query {
                        *seen = query;
                        self.candidates.push(c);
                    }
                }
            }
            rest -= w * w;
        }
    }

    /// The candidate whose seed is most similar to `v`, at least `threshold`;
    /// the earliest cluster on ties.
    fn best_candidate(
        &self,
        v: &SparseVector,
        vectors: &[&SparseVector],
        seeds: &[usize],
        threshold: f64,
    ) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        for &c in &self.candidates {
            let c = c as usize;
            let sim = v.dot(vectors[seeds[c]]);
            let better = match best {
                None => true,
                Some((b, bc)) => sim > b || (sim == b && c < bc),
            };
            if sim >= threshold && better {
                best = Some((sim, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// Adds the seed of cluster `c` to the index.
    fn index_seed(&mut self, v: &SparseVector, c: usize) {
        let c = u32::try_from(c).unwrap_or(u32::MAX);
        self.stamp.push(0);
        for &(term, _) in v.entries() {
            let t = term as usize;
            if t >= self.postings.len() {
                self.postings.resize_with(t + 1, Vec::new);
            }
            if self.postings[t].is_empty() {
                self.touched.push(term);
            }
            self.postings[t].push(c);
        }
    }
}
