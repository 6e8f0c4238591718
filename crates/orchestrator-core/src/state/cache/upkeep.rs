//! What a flow does with the cache when it starts: claim its repository's
//! folders, then prune the others ([`claim_and_prune`]).

use std::path::Path;
use std::time::Instant;

use super::prune::{Owner, PrunePolicy, RemovalReason, prune};
use super::{CacheLease, cache_dir};
use crate::text::{counted, human_size};

/// The default cap on the cache's target folders: 20 GiB.
pub const DEFAULT_MAX_SIZE: u64 = 20 << 30;

/// A run's claim on the cache and what its prune has to say.
#[derive(Debug, Default)]
pub struct Upkeep {
    /// The claim, held until dropped; `None` when it failed (see
    /// `warnings`): the run goes on, only unprotected from a concurrent
    /// prune's eviction.
    pub lease: Option<CacheLease>,
    /// What was removed, one line, when something was.
    pub notice: Option<String>,
    /// Problems that did not stop the run.
    pub warnings: Vec<String>,
    /// The folders without a marker left alone because they were used
    /// within a day, when there were any: not a problem, and nothing a user
    /// can act on (`cache clean` leaves them too), so not a warning.
    pub left_alone: Option<String>,
    /// How long the claim and the prune took.
    pub took: std::time::Duration,
}

/// Claims `repo`'s folders in the cache folder ([`cache_dir`]), then prunes
/// the cache under the cap `max_size` (see `prune`). Never fails: problems
/// are reported in [`Upkeep::warnings`].
pub fn claim_and_prune(repo: &Path, max_size: u64) -> Upkeep {
    let started = Instant::now();
    let mut upkeep = Upkeep::default();
    match CacheLease::claim(repo) {
        Ok(lease) => upkeep.lease = Some(lease),
        Err(e) => upkeep.warnings.push(format!("cache: {e}")),
    }
    match prune(&cache_dir(), &PrunePolicy::for_run(repo, max_size)) {
        Ok(report) => {
            if !report.removed.is_empty() {
                let gone = report
                    .removed
                    .iter()
                    .filter(|r| r.reason == RemovalReason::Stale)
                    .count();
                upkeep.notice = Some(format!(
                    "cache: removed {}, {}: {gone} of repositories that are gone, {} least recently used over the {} cap ([cache] max_size)",
                    counted(report.removed.len() as u64, "folder", "folders"),
                    human_size(report.freed()),
                    report.removed.len() - gone,
                    human_size(max_size),
                ));
            }
            if let Some((first, _)) = report.skipped.first() {
                upkeep.left_alone = Some(format!(
                    "cache: left {} without a marker alone (used within a day; an older version may be using them), first {}",
                    counted(report.skipped.len() as u64, "folder", "folders"),
                    first.path.display()
                ));
            }
        }
        Err(e) => upkeep.warnings.push(format!("cache: pruning stopped: {e}")),
    }
    upkeep.took = started.elapsed();
    upkeep
}

/// Why a folder was removed, for people.
pub fn describe_removal(reason: RemovalReason, owner: &Owner) -> String {
    match (reason, owner) {
        (RemovalReason::Stale, Owner::Repo { path, .. }) => {
            format!("repository {} is gone", path.display())
        }
        (RemovalReason::Stale, Owner::Unknown) => "no marker, unused for over a day".to_owned(),
        (RemovalReason::OverCap, _) => "least recently used, over the cap".to_owned(),
        (RemovalReason::Asked, _) => "asked".to_owned(),
    }
}
