//! Batching: findings → batches for parallel planning (review-fix phase 1.5).
//!
//! [`batch_findings`] is a pure function. Its rules:
//!
//! 1. **Groups.** Findings are grouped by `(file or "unknown", dimension or
//!    "general")` ([`GroupKey`]). A batch never mixes groups.
//! 2. **Clusters.** Inside a group, findings are clustered by TF-IDF cosine
//!    similarity of description + recommendations + category, with IDF over
//!    the whole input, greedily: each finding joins the cluster whose seed it
//!    matches best with similarity ≥ the threshold (default 0.7), else seeds a
//!    new cluster. The exact rule and how it avoids an all-pairs loop are in
//!    [`similarity`]'s docs; [`cluster_findings`] exposes this step.
//! 3. **Batches.** A group of at most `batch_size` findings is one batch.
//!    A larger group is packed into batches of at most `batch_size`; a
//!    cluster is never split unless it alone is larger than `batch_size`, in
//!    which case it is cut into consecutive chunks. Critical and high findings
//!    are spread across the group's batches as far as the clusters allow. The
//!    packing is described in `pack.rs`; a group usually takes
//!    `ceil(size / batch_size)` batches, more only when cluster sizes do not
//!    fit together.
//! 4. **Ids.** Batches are numbered from 1 in group-key order, then in the
//!    order of their first cluster.
//!
//! Guarantees: every input finding appears in exactly one batch (batching
//! never merges or drops findings: de-duplication is the input layer's job);
//! no batch exceeds `batch_size`; the result does not depend on the input
//! order. Order independence comes from a *canonical order* ([`canonical_order`]):
//! by group key, then id, then the remaining fields that batching reads, so
//! that only findings identical in every respect batching looks at can tie.
//!
//! Scale: grouping is a sort, vectorisation is linear in the text, clustering
//! compares a finding only with seeds found through an inverted index, and
//! packing is near-linear. 100k synthetic findings batch in about half a
//! second on one core; the workload, a naive reference that must agree
//! exactly, and the figures are in the `orchestrator-benches` crate
//! (`benches/src/clustering.rs`).

mod pack;
pub mod similarity;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::finding::{Finding, FindingId};

pub use similarity::{SparseVector, cluster_group, tfidf_vectors};

/// Default number of findings per batch (upstream's `--batch-size` default).
pub const DEFAULT_BATCH_SIZE: usize = 5;

/// Default cosine similarity at or above which two findings share a cluster.
pub const DEFAULT_SIMILARITY_THRESHOLD: f64 = 0.7;

/// How to batch findings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchConfig {
    /// Maximum number of findings per batch (0 is treated as 1).
    pub batch_size: usize,
    /// Cosine similarity at or above which a finding joins a cluster; see
    /// [`BatchConfig::validate`] for the accepted range.
    pub similarity_threshold: f64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            batch_size: DEFAULT_BATCH_SIZE,
            similarity_threshold: DEFAULT_SIMILARITY_THRESHOLD,
        }
    }
}

/// A [`BatchConfig`] value that makes no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchConfigError {
    /// The batch size is zero.
    #[error("invalid batch size 0: a batch holds at least one finding")]
    ZeroBatchSize,
    /// The threshold is outside `(0, 1]` or not a number.
    #[error("invalid similarity threshold {0}: expected a number greater than 0 and at most 1")]
    Threshold(f64),
}

impl BatchConfig {
    /// Checks that `batch_size >= 1` and `0 < similarity_threshold <= 1`.
    ///
    /// [`batch_findings`] accepts any value (a batch size of 0 acts as 1, a
    /// threshold `<= 0` clusters each group into one cluster, one above 1
    /// clusters nothing); call this on user input to reject such values.
    pub fn validate(&self) -> Result<(), BatchConfigError> {
        if self.batch_size == 0 {
            return Err(BatchConfigError::ZeroBatchSize);
        }
        let t = self.similarity_threshold;
        if !(t > 0.0 && t <= 1.0) {
            return Err(BatchConfigError::Threshold(t));
        }
        Ok(())
    }
}

/// The key findings are grouped by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKey {
    /// The finding's file, or `unknown`.
    pub file: String,
    /// The finding's dimension, or `general`.
    pub dimension: String,
}

impl GroupKey {
    /// The group key of a finding.
    pub fn of(finding: &Finding) -> Self {
        Self {
            file: finding.file_or_unknown().to_owned(),
            dimension: finding.dimension_or_general().to_owned(),
        }
    }
}

/// One batch: findings of one group, handed to one planning agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// 1-based batch number, unique within one batching.
    pub batch_id: u32,
    /// The findings, clusters kept together.
    pub findings: Vec<FindingId>,
    /// The group's file (`unknown` when the findings have none).
    pub primary_file: String,
    /// The group's dimension (`general` when the findings have none).
    pub primary_dimension: String,
}

/// The clusters of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupClusters {
    /// The group.
    pub key: GroupKey,
    /// Clusters in order of creation; each lists indices into the input
    /// slice, in canonical order (the first one is the cluster's seed).
    pub clusters: Vec<Vec<usize>>,
}

/// Total order used to canonicalise the input: group key, id, then every
/// other field batching reads.
fn canonical_cmp(a: &Finding, b: &Finding) -> Ordering {
    a.file_or_unknown()
        .cmp(b.file_or_unknown())
        .then_with(|| a.dimension_or_general().cmp(b.dimension_or_general()))
        .then_with(|| a.id.cmp(&b.id))
        .then_with(|| a.severity.cmp(&b.severity))
        .then_with(|| a.description.cmp(&b.description))
        .then_with(|| a.title.cmp(&b.title))
        .then_with(|| a.recommendations.cmp(&b.recommendations))
        .then_with(|| a.category.cmp(&b.category))
}

/// Indices of `findings` in canonical order: by group key (file, dimension),
/// then id, then the other fields batching reads. Groups are contiguous runs
/// of this order.
pub fn canonical_order(findings: &[Finding]) -> Vec<usize> {
    // Bucket by group first (hashing is cheaper than comparing long shared
    // path prefixes n·log n times), then sort the few keys and each bucket.
    let mut buckets: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, f) in findings.iter().enumerate() {
        buckets
            .entry((f.file_or_unknown(), f.dimension_or_general()))
            .or_default()
            .push(i);
    }
    let mut buckets: Vec<((&str, &str), Vec<usize>)> = buckets.into_iter().collect();
    buckets.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut order = Vec::with_capacity(findings.len());
    for (_, mut members) in buckets {
        members.sort_by(|&a, &b| canonical_cmp(&findings[a], &findings[b]));
        order.extend(members);
    }
    order
}

/// Groups and clusters findings (steps 1 and 2 of the module docs). Groups
/// come in key order. Permuting `findings` permutes the indices but not the
/// findings they designate.
pub fn cluster_findings(findings: &[Finding], threshold: f64) -> Vec<GroupClusters> {
    let order = canonical_order(findings);
    let canonical: Vec<&Finding> = order.iter().map(|&i| &findings[i]).collect();
    let vectors = tfidf_vectors(&canonical);

    let mut clusterer = similarity::Clusterer::default();
    let mut local = Vec::new();
    let mut groups = Vec::new();
    let mut start = 0;
    while start < canonical.len() {
        let first = canonical[start];
        let end = start
            + canonical[start..]
                .iter()
                .position(|f| {
                    f.file_or_unknown() != first.file_or_unknown()
                        || f.dimension_or_general() != first.dimension_or_general()
                })
                .unwrap_or(canonical.len() - start);
        let group_vectors: Vec<&SparseVector> = vectors[start..end].iter().collect();
        clusterer.cluster(&group_vectors, threshold, &mut local);
        groups.push(GroupClusters {
            key: GroupKey::of(first),
            clusters: local
                .iter()
                .map(|c| c.iter().map(|&p| order[start + p]).collect())
                .collect(),
        });
        start = end;
    }
    groups
}

/// Splits findings into batches for parallel planning; see the module docs
/// for the rules and guarantees.
///
/// Ids are expected to be unique (the input readers reject duplicates); a
/// repeated id is not an error here, each occurrence is batched as its own
/// finding.
pub fn batch_findings(findings: &[Finding], config: &BatchConfig) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for group in cluster_findings(findings, config.similarity_threshold) {
        let packed = pack::pack_group(
            &group.clusters,
            |i| findings[i].severity.is_high_or_worse(),
            config.batch_size,
        );
        for members in packed {
            batches.push(Batch {
                batch_id: u32::try_from(batches.len() + 1).unwrap_or(u32::MAX),
                findings: members.iter().map(|&i| findings[i].id.clone()).collect(),
                primary_file: group.key.file.clone(),
                primary_dimension: group.key.dimension.clone(),
            });
        }
    }
    batches
}
