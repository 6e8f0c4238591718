//! Clustering workload: synthetic review findings, a naive reference
//! clustering, and the figures `perf-report` prints.
//!
//! # The workload
//!
//! [`generate_findings`] draws findings the way a large review-cycle export
//! looks: files of a repository with a Zipf-skewed number of findings each
//! (a few hot files collect thousands), the seven review dimensions with
//! realistic weights, a category per dimension with its own title,
//! description and recommendation templates filled with identifiers from a
//! fixed vocabulary, and a share of near-duplicates (the same problem
//! reported again in the same file, sometimes in another function). Every
//! parameter is a `const` below; the generator is seeded with a tiny
//! splitmix64 PRNG, so the same `(n, seed)` gives the same findings
//! everywhere.
//!
//! # The references
//!
//! [`naive_cluster_findings`] implements the same greedy leader rule as
//! [`orchestrator_core::batching::cluster_findings`] in the most direct way:
//! each finding (in canonical order) is checked against *every* cluster seed
//! created so far, across the whole input; a seed of another group is
//! skipped, a seed of the same group is compared by cosine similarity. No
//! blocking, no index: `O(findings × clusters)`. It must give identical
//! clusters (tested below). [`blocked_naive_cluster_findings`] is the
//! obvious improvement — loop over one group's seeds only — and shows what
//! the inverted index adds on top of blocking.

use std::collections::HashMap;
use std::time::Instant;

use orchestrator_core::batching::{
    BatchConfig, DEFAULT_SIMILARITY_THRESHOLD, GroupClusters, GroupKey, SparseVector,
    batch_findings, canonical_order, cluster_findings, tfidf_vectors,
};
use orchestrator_core::finding::{Finding, Severity};

pub use crate::rng::SplitMix64;

/// Seed of every generated workload.
pub const SEED: u64 = 0x5eed_ba7c_0001;
/// Average findings per file: the number of files is `n / FINDINGS_PER_FILE`.
pub const FINDINGS_PER_FILE: usize = 50;
/// Exponent of the Zipf law of findings per file (rank `r` gets weight `r^-s`).
pub const FILE_ZIPF_EXPONENT: f64 = 1.0;
/// Share of findings that carry no file (grouped under `unknown`).
pub const NO_FILE_SHARE: f64 = 0.02;
/// Share of findings that re-report an earlier finding of the same file.
pub const NEAR_DUPLICATE_SHARE: f64 = 0.25;
/// Share of near-duplicates that name a different function than the original.
pub const NEAR_DUPLICATE_NEW_FUNCTION_SHARE: f64 = 0.5;
/// Severity weights: critical, high, medium, low.
pub const SEVERITY_WEIGHTS: [u32; 4] = [5, 20, 45, 30];
/// Largest generated line number.
pub const MAX_LINE: u64 = 2_000;

/// Review dimensions with their weights (how often reviewers report them).
pub const DIMENSIONS: [(&str, u32); 7] = [
    ("quality", 25),
    ("maintainability", 20),
    ("security", 15),
    ("best-practices", 15),
    ("performance", 12),
    ("architecture", 8),
    ("action-items", 5),
];

#[rustfmt::skip]
const MODULES: [&str; 16] = [
    "auth", "billing", "orders", "users", "search", "cache", "payments", "inventory",
    "notifications", "reports", "session", "config", "storage", "gateway", "scheduler", "metrics",
];
#[rustfmt::skip]
const STEMS: [&str; 10] = [
    "handler", "service", "repository", "client", "model", "routes", "utils", "validator", "worker",
    "mapper",
];
const EXTENSIONS: [&str; 4] = ["ts", "rs", "py", "go"];
#[rustfmt::skip]
const VERBS: [&str; 20] = [
    "load", "save", "parse", "render", "validate", "fetch", "update", "delete", "create", "find",
    "build", "send", "sync", "resolve", "compute", "apply", "merge", "format", "refresh", "export",
];
#[rustfmt::skip]
const NOUNS: [&str; 30] = [
    "User", "Order", "Invoice", "Session", "Token", "Account", "Payment", "Cart", "Product",
    "Report", "Config", "Profile", "Address", "Coupon", "Refund", "Shipment", "Customer", "Plan",
    "Subscription", "Webhook", "Message", "Job", "Metric", "Role", "Permission", "Tenant", "Ticket",
    "Comment", "Attachment", "Audit",
];

/// A finding template: `{f}` is a function name, `{v}` a noun, `{n}` a number.
struct Template {
    category: &'static str,
    title: &'static str,
    descriptions: [&'static str; 2],
    recommendations: [&'static str; 2],
}

const fn t(
    category: &'static str,
    title: &'static str,
    descriptions: [&'static str; 2],
    recommendations: [&'static str; 2],
) -> Template {
    Template {
        category,
        title,
        descriptions,
        recommendations,
    }
}

/// Templates per dimension, in the order of [`DIMENSIONS`].
const TEMPLATES: [&[Template]; 7] = [
    // quality
    &[
        t(
            "duplication",
            "Duplicated logic in {f}",
            [
                "The {v} normalisation block in {f} is copied from another handler with small differences.",
                "{f} repeats the same {v} lookup and error mapping that already exists elsewhere in the module.",
            ],
            [
                "Extract the shared {v} logic into one helper and call it from both places.",
                "Move the duplicated code into a reusable function and add a unit test for it.",
            ],
        ),
        t(
            "error-swallowed",
            "Error swallowed in {f}",
            [
                "{f} catches the {v} error and returns an empty result, hiding failures from callers.",
                "The error returned while processing the {v} in {f} is logged and then ignored.",
            ],
            [
                "Propagate the error to the caller or convert it into a typed domain error.",
                "Return the failure instead of an empty value and handle it at the boundary.",
            ],
        ),
        t(
            "magic-number",
            "Magic number {n} in {f}",
            [
                "{f} uses the bare literal {n} as the {v} limit without explaining it.",
                "The value {n} appears in {f} as an unnamed {v} threshold.",
            ],
            [
                "Replace the literal with a named constant that documents its meaning.",
                "Move the {v} limit into configuration with a descriptive name.",
            ],
        ),
        t(
            "dead-code",
            "Unused branch in {f}",
            [
                "The legacy {v} branch in {f} can no longer be reached since the flag was removed.",
                "{f} keeps an unused {v} fallback path that no caller exercises.",
            ],
            [
                "Delete the unreachable branch and its helper functions.",
                "Remove the dead {v} code path and the tests that only cover it.",
            ],
        ),
    ],
    // maintainability
    &[
        t(
            "long-function",
            "{f} is too long",
            [
                "{f} is {n} lines long and mixes {v} validation, persistence and notification.",
                "{f} handles parsing, checks and storage of the {v} in one {n}-line function.",
            ],
            [
                "Split {f} into smaller functions with one responsibility each.",
                "Extract the {v} validation and persistence steps into separate functions.",
            ],
        ),
        t(
            "deep-nesting",
            "Deep nesting in {f}",
            [
                "{f} nests {n} levels of conditionals around the {v} state checks.",
                "The {v} handling in {f} is buried under deeply nested if statements.",
            ],
            [
                "Use early returns to flatten the conditionals.",
                "Invert the guard conditions and return early to reduce nesting.",
            ],
        ),
        t(
            "unclear-naming",
            "Unclear names in {f}",
            [
                "Variables named tmp, data2 and obj in {f} hide what the {v} values mean.",
                "{f} uses single-letter names for the {v} fields, which makes the logic hard to follow.",
            ],
            [
                "Rename the variables after the domain concepts they hold.",
                "Give the {v} variables descriptive names.",
            ],
        ),
    ],
    // security
    &[
        t(
            "sql-injection",
            "SQL injection in {f}",
            [
                "The {v} id from the request is concatenated into the SQL query string in {f}, allowing SQL injection.",
                "{f} builds the SQL statement for the {v} lookup by string concatenation of user input.",
            ],
            [
                "Use a parameterized query with placeholders instead of string concatenation.",
                "Pass the {v} id as a bound parameter through the query builder.",
            ],
        ),
        t(
            "xss",
            "Unescaped output in {f}",
            [
                "{f} writes the {v} name into the HTML response without escaping, enabling cross-site scripting.",
                "User-controlled {v} text is rendered as raw HTML by {f}.",
            ],
            [
                "Escape the value with the template engine's auto-escaping.",
                "Sanitise the {v} text before rendering and enable a content security policy.",
            ],
        ),
        t(
            "weak-crypto",
            "Weak hashing in {f}",
            [
                "{f} hashes the {v} secret with unsalted MD5, which is fast to brute-force.",
                "The {v} password in {f} is stored as a SHA1 digest without a salt.",
            ],
            [
                "Hash secrets with argon2 or bcrypt and a per-record salt.",
                "Switch to a slow password hash and rehash on the next login.",
            ],
        ),
        t(
            "hardcoded-secret",
            "Hardcoded credential in {f}",
            [
                "{f} contains a hardcoded API key for the {v} service.",
                "A literal password for the {v} database is committed in {f}.",
            ],
            [
                "Load the credential from the secret store or an environment variable and rotate it.",
                "Remove the secret from the code, rotate it and read it from configuration.",
            ],
        ),
        t(
            "missing-authz",
            "Missing authorization check in {f}",
            [
                "{f} returns any {v} by id without checking that it belongs to the caller.",
                "The {v} endpoint served by {f} skips the ownership check.",
            ],
            [
                "Check the caller's permission on the {v} before returning it.",
                "Add an authorization guard that verifies {v} ownership.",
            ],
        ),
    ],
    // best-practices
    &[
        t(
            "loose-equality",
            "Loose equality in {f}",
            [
                "{f} compares the {v} status with == instead of ===, which coerces types.",
                "The {v} check in {f} relies on implicit type coercion.",
            ],
            [
                "Use strict equality.",
                "Compare with === and handle null explicitly.",
            ],
        ),
        t(
            "unchecked-unwrap",
            "Unchecked unwrap in {f}",
            [
                "{f} calls unwrap on the {v} lookup, which panics when the record is missing.",
                "The optional {v} in {f} is unwrapped without handling the empty case.",
            ],
            [
                "Handle the missing {v} case and return an error.",
                "Replace unwrap with a match that reports a not-found error.",
            ],
        ),
        t(
            "mutable-global",
            "Mutable global state in {f}",
            [
                "{f} stores the current {v} in a mutable module-level variable shared across requests.",
                "A global {v} cache is mutated by {f} without synchronisation.",
            ],
            [
                "Pass the {v} explicitly or keep it in request-scoped state.",
                "Wrap the shared {v} state in a synchronised structure owned by the service.",
            ],
        ),
    ],
    // performance
    &[
        t(
            "n-plus-one",
            "N+1 queries in {f}",
            [
                "{f} runs one database query per {v} inside a loop, an N+1 query pattern.",
                "For each {v} in the page, {f} issues a separate query to load related rows.",
            ],
            [
                "Load all rows in one query with an IN clause or a join.",
                "Batch the {v} lookups into a single query.",
            ],
        ),
        t(
            "alloc-in-loop",
            "Allocation in hot loop in {f}",
            [
                "{f} allocates a new {v} buffer on every iteration of its main loop.",
                "The {v} vector in {f} is rebuilt inside the loop for every item.",
            ],
            [
                "Hoist the allocation out of the loop and reuse the buffer.",
                "Preallocate the {v} buffer once with the right capacity.",
            ],
        ),
        t(
            "blocking-io",
            "Blocking I/O in async {f}",
            [
                "{f} reads the {v} file synchronously inside an async handler, blocking the executor.",
                "The async {f} performs a blocking {v} network call.",
            ],
            [
                "Use the async file API or move the call to a blocking thread pool.",
                "Offload the blocking {v} call to a worker thread.",
            ],
        ),
        t(
            "unbounded-cache",
            "Unbounded cache in {f}",
            [
                "{f} adds every {v} to an in-memory map that is never evicted.",
                "The {v} cache filled by {f} grows without limit under load.",
            ],
            [
                "Use an LRU cache with a size limit and a time to live.",
                "Bound the {v} cache and evict old entries.",
            ],
        ),
    ],
    // architecture
    &[
        t(
            "layering",
            "{f} bypasses the service layer",
            [
                "{f} queries the {v} table directly from the route handler instead of using the repository.",
                "The controller function {f} contains {v} persistence logic.",
            ],
            [
                "Move the data access into a {v} repository and call it from a service.",
                "Introduce a service between the handler and the {v} storage.",
            ],
        ),
        t(
            "circular-dependency",
            "Circular dependency involving {f}",
            [
                "The module of {f} imports the {v} module, which imports it back.",
                "{f} depends on the {v} package that depends on this module.",
            ],
            [
                "Extract the shared types into a separate module to break the cycle.",
                "Invert the dependency with an interface owned by the {v} module.",
            ],
        ),
    ],
    // action-items
    &[
        t(
            "missing-tests",
            "Add tests for {f}",
            [
                "No test covers the error paths of {f} for an invalid {v}.",
                "{f} has no unit tests for the {v} edge cases.",
            ],
            [
                "Add tests for a missing, an invalid and a duplicate {v}.",
                "Cover the {v} error handling of {f} with unit tests.",
            ],
        ),
        t(
            "todo-left",
            "TODO left in {f}",
            [
                "{f} still contains a TODO about retrying the {v} update.",
                "A FIXME in {f} notes that the {v} rollback is incomplete.",
            ],
            [
                "Resolve the TODO or open a tracked issue and reference it.",
                "Finish the {v} handling or remove the note.",
            ],
        ),
    ],
];

fn file_name(i: usize) -> String {
    let module = MODULES[i % MODULES.len()];
    let stem = STEMS[(i / MODULES.len()) % STEMS.len()];
    let ext = EXTENSIONS[(i / (MODULES.len() * STEMS.len())) % EXTENSIONS.len()];
    let n = i / (MODULES.len() * STEMS.len() * EXTENSIONS.len());
    if n == 0 {
        format!("src/{module}/{stem}.{ext}")
    } else {
        format!("src/{module}/{stem}_{n}.{ext}")
    }
}

fn function_name(rng: &mut SplitMix64) -> String {
    {
        let verb = rng.pick(&VERBS);
        format!("{verb}{}", rng.pick(&NOUNS))
    }
}

fn fill(template: &str, function: &str, noun: &str, number: u64) -> String {
    template
        .replace("{f}", function)
        .replace("{v}", &noun.to_lowercase())
        .replace("{n}", &number.to_string())
}

/// What a finding was drawn from, so that a near-duplicate can re-draw it.
#[derive(Clone)]
struct Draw {
    file: Option<usize>,
    dimension: usize,
    template: usize,
    variant: usize,
    function: String,
    noun: &'static str,
    number: u64,
}

/// Generates `n` synthetic findings (ids `F000000`, `F000001`, …); see the
/// module docs and the constants for the distribution.
pub fn generate_findings(n: usize, seed: u64) -> Vec<Finding> {
    let mut rng = SplitMix64::new(seed);
    let files = (n / FINDINGS_PER_FILE).max(1);
    // Cumulative Zipf weights over file ranks.
    let mut cumulative = Vec::with_capacity(files);
    let mut acc = 0.0;
    for rank in 1..=files {
        acc += (rank as f64).powf(-FILE_ZIPF_EXPONENT);
        cumulative.push(acc);
    }
    let dimension_weights: Vec<u32> = DIMENSIONS.iter().map(|&(_, w)| w).collect();
    let mut by_file: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    let mut draws: Vec<Draw> = Vec::with_capacity(n);
    let mut findings = Vec::with_capacity(n);

    for i in 0..n {
        let file = if rng.next_f64() < NO_FILE_SHARE {
            None
        } else {
            let x = rng.next_f64() * acc;
            Some(cumulative.partition_point(|&c| c <= x).min(files - 1))
        };
        let earlier = by_file.get(&file).filter(|v| !v.is_empty());
        let draw = match earlier {
            Some(earlier) if rng.next_f64() < NEAR_DUPLICATE_SHARE => {
                let mut d = draws[rng.pick(earlier)].clone();
                if rng.next_f64() < NEAR_DUPLICATE_NEW_FUNCTION_SHARE {
                    d.function = function_name(&mut rng);
                }
                d.variant = rng.below(2) as usize;
                d
            }
            _ => {
                let dimension = rng.weighted(&dimension_weights);
                Draw {
                    file,
                    dimension,
                    template: rng.below(TEMPLATES[dimension].len() as u64) as usize,
                    variant: rng.below(2) as usize,
                    function: function_name(&mut rng),
                    noun: rng.pick(&NOUNS),
                    number: 2 + rng.below(300),
                }
            }
        };
        let template = &TEMPLATES[draw.dimension][draw.template];
        let fill = |s: &str| fill(s, &draw.function, draw.noun, draw.number);
        let severity = Severity::ALL[rng.weighted(&SEVERITY_WEIGHTS)];
        let mut f = Finding::new(format!("F{i:06}"), fill(template.title), severity)
            .with_description(fill(template.descriptions[draw.variant]))
            .with_dimension(DIMENSIONS[draw.dimension].0)
            .with_category(template.category)
            .with_recommendation(fill(template.recommendations[draw.variant]));
        if let Some(file) = draw.file {
            f = f.at(file_name(file), Some(1 + rng.below(MAX_LINE) as u32));
        }
        by_file.entry(file).or_default().push(i);
        draws.push(draw);
        findings.push(f);
    }
    findings
}

/// File of every finding of [`generate_hot_group_findings`].
pub const HOT_GROUP_FILE: &str = "src/legacy/monolith.ts";

/// Like [`generate_findings`], but every finding is in one group
/// ([`HOT_GROUP_FILE`], no dimension): the worst case for blocking, where
/// only the inverted index avoids comparing each finding with every seed.
pub fn generate_hot_group_findings(n: usize, seed: u64) -> Vec<Finding> {
    let mut findings = generate_findings(n, seed);
    for f in &mut findings {
        f.file = Some(HOT_GROUP_FILE.to_owned());
        f.dimension = None;
        f.refresh_fingerprint();
    }
    findings
}

/// The canonical order, vectors and per-position group index every
/// reference starts from (the same preprocessing as the fast path).
struct Prepared {
    order: Vec<usize>,
    vectors: Vec<SparseVector>,
    group_of: Vec<usize>,
    keys: Vec<GroupKey>,
}

fn prepare(findings: &[Finding]) -> Prepared {
    let order = canonical_order(findings);
    let canonical: Vec<&Finding> = order.iter().map(|&i| &findings[i]).collect();
    let vectors = tfidf_vectors(&canonical);
    let mut keys: Vec<GroupKey> = Vec::new();
    let mut group_of = Vec::with_capacity(order.len());
    for f in &canonical {
        let key = GroupKey::of(f);
        if keys.last() != Some(&key) {
            keys.push(key);
        }
        group_of.push(keys.len() - 1);
    }
    Prepared {
        order,
        vectors,
        group_of,
        keys,
    }
}

/// Cosine of two normalised sparse vectors: shared terms' products summed in
/// ascending term id (the order the fast path's contract specifies).
fn naive_dot(a: &SparseVector, b: &SparseVector) -> f64 {
    let mut sum = 0.0;
    let (a, b) = (a.entries(), b.entries());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].0 {
            i += 1;
        } else if a[i].0 > b[j].0 {
            j += 1;
        } else {
            sum += a[i].1 * b[j].1;
            i += 1;
            j += 1;
        }
    }
    sum
}

/// Picks the best seed among `candidates` (cluster index, seed position), in
/// creation order: the most similar at or above the threshold, the earliest
/// on ties.
fn best_seed(
    v: &SparseVector,
    vectors: &[SparseVector],
    threshold: f64,
    candidates: impl Iterator<Item = (usize, usize)>,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (c, seed) in candidates {
        let sim = naive_dot(v, &vectors[seed]);
        if sim >= threshold && best.is_none_or(|(b, _)| sim > b) {
            best = Some((sim, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The naive all-pairs reference: the cosine similarity of every finding
/// with every cluster seed created before it is computed, over the whole
/// input; a seed qualifies when it is in the finding's group and similar
/// enough. No blocking, no index. Same output as [`cluster_findings`].
pub fn naive_cluster_findings(findings: &[Finding], threshold: f64) -> Vec<GroupClusters> {
    let p = prepare(findings);
    // (group, seed position, members as canonical positions)
    let mut clusters: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for pos in 0..p.order.len() {
        let g = p.group_of[pos];
        let mut best: Option<(f64, usize)> = None;
        for (c, (cg, seed, _)) in clusters.iter().enumerate() {
            let sim = naive_dot(&p.vectors[pos], &p.vectors[*seed]);
            if sim >= threshold && *cg == g && best.is_none_or(|(b, _)| sim > b) {
                best = Some((sim, c));
            }
        }
        match best {
            Some((_, c)) => clusters[c].2.push(pos),
            None => clusters.push((g, pos, vec![pos])),
        }
    }
    let mut out: Vec<GroupClusters> = p
        .keys
        .iter()
        .map(|key| GroupClusters {
            key: key.clone(),
            clusters: Vec::new(),
        })
        .collect();
    for (g, _, members) in clusters {
        out[g]
            .clusters
            .push(members.iter().map(|&pos| p.order[pos]).collect());
    }
    out
}

/// The blocked naive reference: groups first, then every finding of a group
/// is compared with every seed of that group. Same output as
/// [`cluster_findings`].
pub fn blocked_naive_cluster_findings(findings: &[Finding], threshold: f64) -> Vec<GroupClusters> {
    let p = prepare(findings);
    let mut out = Vec::with_capacity(p.keys.len());
    let mut start = 0;
    for (g, key) in p.keys.iter().enumerate() {
        let end = start + p.group_of[start..].iter().take_while(|&&x| x == g).count();
        let mut clusters: Vec<(usize, Vec<usize>)> = Vec::new();
        for pos in start..end {
            let candidates = clusters.iter().map(|(seed, _)| *seed).enumerate();
            match best_seed(&p.vectors[pos], &p.vectors, threshold, candidates) {
                Some(c) => clusters[c].1.push(p.order[pos]),
                None => clusters.push((pos, vec![p.order[pos]])),
            }
        }
        out.push(GroupClusters {
            key: key.clone(),
            clusters: clusters.into_iter().map(|(_, m)| m).collect(),
        });
        start = end;
    }
    out
}

/// Best wall time of `runs` calls of `f`, in seconds.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        std::hint::black_box(f());
        best = best.min(start.elapsed().as_secs_f64());
    }
    best
}

/// Sizes at which [`perf_figures_at`] measures.
#[derive(Debug, Clone, Copy)]
pub struct PerfSizes {
    /// Size of the large run (the fast path only).
    pub large: usize,
    /// Size of the comparison with the naive references.
    pub compare: usize,
}

impl PerfSizes {
    /// The sizes the published figures use: 100k and 10k.
    pub const FULL: PerfSizes = PerfSizes {
        large: 100_000,
        compare: 10_000,
    };
}

/// Figures at the published sizes (see [`perf_figures_at`]); takes a few
/// seconds in release mode.
pub fn perf_figures() -> Vec<(String, f64)> {
    perf_figures_at(PerfSizes::FULL)
}

/// Clustering and batching figures (names carry the sizes, `100k`/`10k` at
/// [`PerfSizes::FULL`]):
/// - `clustering_100k_s`: seconds for `batch_findings` (default config) on
///   `large` findings, end to end: canonical order, TF-IDF, clustering, packing;
/// - `clustering_only_100k_s`: seconds for `cluster_findings` alone;
/// - `clustering_speedup_vs_naive_10k`: time of [`naive_cluster_findings`]
///   over time of `cluster_findings` on `compare` findings;
/// - `clustering_speedup_vs_blocked_naive_10k`: the same against
///   [`blocked_naive_cluster_findings`] (what the inverted index adds to
///   blocking on a realistic spread of files);
/// - `clustering_hot_group_speedup_vs_blocked_naive_10k`: the same on
///   [`generate_hot_group_findings`] (one group: the index alone).
///
/// All times include the shared preprocessing (canonical order and TF-IDF).
/// Times are wall-clock seconds, the best of a few runs on one thread.
pub fn perf_figures_at(sizes: PerfSizes) -> Vec<(String, f64)> {
    let label = |n: usize| {
        if n.is_multiple_of(1000) {
            format!("{}k", n / 1000)
        } else {
            n.to_string()
        }
    };
    let t = DEFAULT_SIMILARITY_THRESHOLD;
    let large = generate_findings(sizes.large, SEED);
    let config = BatchConfig::default();
    let batch_large = best_of(3, || batch_findings(&large, &config));
    let cluster_large = best_of(3, || cluster_findings(&large, t));

    let small = generate_findings(sizes.compare, SEED);
    let fast = best_of(5, || cluster_findings(&small, t));
    let naive = best_of(2, || naive_cluster_findings(&small, t));
    let blocked = best_of(5, || blocked_naive_cluster_findings(&small, t));

    let hot = generate_hot_group_findings(sizes.compare, SEED);
    let hot_fast = best_of(5, || cluster_findings(&hot, t));
    let hot_blocked = best_of(2, || blocked_naive_cluster_findings(&hot, t));

    let (l, c) = (label(sizes.large), label(sizes.compare));
    vec![
        (format!("clustering_{l}_s"), batch_large),
        (format!("clustering_only_{l}_s"), cluster_large),
        (format!("clustering_speedup_vs_naive_{c}"), naive / fast),
        (
            format!("clustering_speedup_vs_blocked_naive_{c}"),
            blocked / fast,
        ),
        (
            format!("clustering_hot_group_speedup_vs_blocked_naive_{c}"),
            hot_blocked / hot_fast,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic_and_realistic() {
        let a = generate_findings(2_000, SEED);
        assert_eq!(a, generate_findings(2_000, SEED));
        assert_ne!(a, generate_findings(2_000, SEED + 1));
        let groups = cluster_findings(&a, DEFAULT_SIMILARITY_THRESHOLD);
        let sizes: Vec<usize> = groups
            .iter()
            .map(|g| g.clusters.iter().map(Vec::len).sum())
            .collect();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let clustered: usize = groups
            .iter()
            .flat_map(|g| &g.clusters)
            .filter(|c| c.len() > 1)
            .map(Vec::len)
            .sum();
        // Skewed groups: a hot group, many small ones.
        assert!(largest >= 50, "largest group {largest}");
        assert!(groups.len() >= 100, "{} groups", groups.len());
        // Near-duplicates and same-cause findings cluster, but not everything.
        assert!((200..1_800).contains(&clustered), "{clustered} clustered");
        assert!(a.iter().any(|f| f.file.is_none()));
    }

    #[test]
    fn naive_references_give_identical_clusters() {
        let findings = generate_findings(2_000, SEED);
        for t in [0.5, DEFAULT_SIMILARITY_THRESHOLD, 0.9] {
            let fast = cluster_findings(&findings, t);
            assert_eq!(naive_cluster_findings(&findings, t), fast, "threshold {t}");
            assert_eq!(
                blocked_naive_cluster_findings(&findings, t),
                fast,
                "threshold {t}"
            );
        }
        let hot = generate_hot_group_findings(2_000, SEED);
        let fast = cluster_findings(&hot, DEFAULT_SIMILARITY_THRESHOLD);
        assert_eq!(fast.len(), 1);
        assert_eq!(
            naive_cluster_findings(&hot, DEFAULT_SIMILARITY_THRESHOLD),
            fast
        );
        assert_eq!(
            blocked_naive_cluster_findings(&hot, DEFAULT_SIMILARITY_THRESHOLD),
            fast
        );
    }

    /// Prints the figures. At full size (100k / 10k) only when
    /// `ORCHESTRATOR_PERF_FULL=1` is set — run it with
    /// `ORCHESTRATOR_PERF_FULL=1 cargo test --release -p orchestrator-benches
    /// -- --nocapture perf_figures`; otherwise at a small size so the test
    /// suite stays fast.
    #[test]
    fn perf_figures_are_finite() {
        let full = std::env::var_os("ORCHESTRATOR_PERF_FULL").is_some();
        let figures = if full {
            perf_figures()
        } else {
            perf_figures_at(PerfSizes {
                large: 3_000,
                compare: 1_000,
            })
        };
        for (name, value) in &figures {
            println!("{name} = {value:.4}");
            assert!(value.is_finite() && *value > 0.0, "{name} = {value}");
        }
        assert_eq!(figures.len(), 5);
        if full {
            assert_eq!(figures[0].0, "clustering_100k_s");
            assert_eq!(figures[2].0, "clustering_speedup_vs_naive_10k");
        }
    }
}
